//! Child processes for the store tests: a process guard that kills by PID on drop
//! (and keeps its log when the test fails), a `mooncake_master` on free loopback ports,
//! and polling with deadlines.
#![allow(dead_code)]

use mooncake::wire::rpc_client::MasterRpcClient;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Deadline for anything that is polled (process start, TTL expiry, remount).
pub const DEADLINE: Duration = Duration::from_secs(40);
/// Pause between polls.
pub const POLL: Duration = Duration::from_millis(50);

/// `target/<profile>`, from this test executable (`target/<profile>/deps/store_faults-*`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("profile dir")
        .to_path_buf()
}

pub fn master_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mooncake_master"))
}

pub fn log_path(what: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!("mooncake-store-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating the log directory");
    dir.join(format!(
        "{:03}-{what}.log",
        N.fetch_add(1, Ordering::SeqCst)
    ))
}

/// A child process killed (SIGKILL, by PID) and reaped on drop, panics included; its
/// stderr goes to a log file that is kept (and its tail printed) when the test fails.
pub struct Proc {
    pub child: Child,
    pub what: String,
    pub log: PathBuf,
    pub stdin: Option<ChildStdin>,
    pub lines: Option<Receiver<String>>,
}

impl Proc {
    /// Spawns `cmd` without inherited `MC_*` variables (but `MC_DISABLE_SAME_HOST`,
    /// which picks the path the whole suite runs over), with `env` set. With
    /// `interactive`, stdin and stdout are pipes (stdout read line by line).
    pub fn spawn(mut cmd: Command, what: &str, env: &[(&str, &str)], interactive: bool) -> Proc {
        let log = log_path(what);
        let file = std::fs::File::create(&log).expect("creating a child log");
        cmd.stderr(file.try_clone().expect("cloning the log handle"));
        for (k, _) in std::env::vars_os() {
            let name = k.to_string_lossy();
            if name.starts_with("MC_") && name != "MC_DISABLE_SAME_HOST" {
                cmd.env_remove(k);
            }
        }
        cmd.envs(env.iter().copied());
        if interactive {
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        } else {
            cmd.stdin(Stdio::null()).stdout(file);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {what}: {e}"));
        let mut p = Proc {
            stdin: child.stdin.take(),
            lines: None,
            child,
            what: what.to_string(),
            log,
        };
        if let Some(out) = p.child.stdout.take() {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { return };
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            });
            p.lines = Some(rx);
        }
        p
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: plain kill(2) on our own child's PID (not yet reaped: we hold it).
        let rc = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(rc, 0, "kill({}, {sig}) failed", self.pid());
    }

    /// SIGSTOP, and waits until every thread of the child is stopped (kill(2) only
    /// queues the signal; a running thread could otherwise still answer a request).
    pub fn freeze(&self) {
        self.signal(libc::SIGSTOP);
        let tasks = format!("/proc/{}/task", self.pid());
        let all_stopped = || {
            let Ok(dir) = std::fs::read_dir(&tasks) else {
                return false;
            };
            dir.flatten().all(|t| {
                let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
                // "tid (comm) S ...": the state follows the last ')'.
                let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
                matches!(state.and_then(|r| r.chars().next()), Some('T') | Some('t'))
            })
        };
        eventually(
            &format!("{} is stopped", self.what),
            all_stopped,
            String::new,
        );
    }

    /// SIGCONT.
    pub fn thaw(&self) {
        self.signal(libc::SIGCONT);
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if self.alive() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }

    pub fn log_tail(&self) -> String {
        let data = std::fs::read(&self.log).unwrap_or_default();
        let start = data.len().saturating_sub(6000);
        format!(
            "--- {} (pid {}) log {} ---\n{}",
            self.what,
            self.pid(),
            self.log.display(),
            String::from_utf8_lossy(&data[start..])
        )
    }

    /// Waits for the child to exit by itself, within `limit`.
    pub fn wait_exit(&mut self, limit: Duration, what: &str) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                panic!("{what}: still running after {limit:?}\n{}", self.log_tail());
            }
            std::thread::sleep(POLL);
        }
    }

    /// The next stdout line, within `limit`.
    pub fn line(&mut self, limit: Duration, what: &str) -> String {
        let rx = self.lines.as_ref().expect("interactive child");
        match rx.recv_timeout(limit) {
            Ok(l) => l,
            Err(RecvTimeoutError::Timeout) => {
                panic!("{what}: no answer within {limit:?}\n{}", self.log_tail())
            }
            Err(RecvTimeoutError::Disconnected) => {
                let _ = self.child.try_wait();
                panic!("{what}: {} exited\n{}", self.what, self.log_tail())
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stdin.take();
        self.kill();
        if std::thread::panicking() {
            eprintln!("{}", self.log_tail());
            eprintln!("{} log kept at {}", self.what, self.log.display());
        } else {
            let _ = std::fs::remove_file(&self.log);
            if let Some(dir) = self.log.parent() {
                let _ = std::fs::remove_dir(dir); // only once empty
            }
        }
    }
}

/// `n` distinct free loopback ports (all held until all are chosen).
pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// The ports a `mooncake_master` child serves on.
pub struct Ports {
    pub rpc: u16,
    pub metrics: u16,
    /// The embedded HTTP metadata server's, when enabled.
    pub metadata: Option<u16>,
}

/// A `mooncake_master` child on 127.0.0.1.
pub struct Master {
    pub proc: Proc,
    pub rpc_port: u16,
    pub metrics_port: u16,
    /// The embedded HTTP metadata server's port, when enabled.
    pub metadata_port: Option<u16>,
    pub client_ttl: u64,
    /// Further flags, kept for restarts.
    pub flags: Vec<String>,
    /// Further environment variables, kept for restarts.
    pub env: Vec<(String, String)>,
}

impl Master {
    /// Starts a master with `--client_ttl=<client_ttl>` on free ports, retrying on new
    /// ports if it cannot bind.
    pub fn start(client_ttl: u64) -> Master {
        Master::start_with(client_ttl, false)
    }

    /// [`Master::start`], with the embedded HTTP metadata server when `metadata`.
    pub fn start_with(client_ttl: u64, metadata: bool) -> Master {
        Master::start_on_free_ports(client_ttl, metadata, &[], &[])
    }

    /// [`Master::start`] with further `flags` (kept for restarts).
    pub fn start_with_flags(client_ttl: u64, flags: &[&str]) -> Master {
        Master::start_on_free_ports(client_ttl, false, flags, &[])
    }

    /// [`Master::start_with`] with further `flags` and environment variables `env`
    /// (both kept for restarts).
    pub fn start_with_all(
        client_ttl: u64,
        metadata: bool,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> Master {
        Master::start_on_free_ports(client_ttl, metadata, flags, env)
    }

    fn start_on_free_ports(
        client_ttl: u64,
        metadata: bool,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> Master {
        let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut last = String::new();
        for _ in 0..5 {
            let ports = free_ports(3);
            let (rpc_port, metrics_port) = (ports[0], ports[1]);
            let metadata_port = metadata.then_some(ports[2]);
            let ports = Ports {
                rpc: rpc_port,
                metrics: metrics_port,
                metadata: metadata_port,
            };
            match Master::spawn_on(&ports, client_ttl, &flags, &env) {
                Ok(proc) => {
                    return Master {
                        proc,
                        rpc_port,
                        metrics_port,
                        metadata_port,
                        client_ttl,
                        flags,
                        env,
                    }
                }
                Err(e) => last = e,
            }
        }
        panic!("mooncake_master did not start: {last}");
    }

    /// Spawns a master on these ports with further `flags` and environment variables
    /// and waits until it answers.
    pub fn spawn_on(
        ports: &Ports,
        client_ttl: u64,
        flags: &[String],
        env: &[(String, String)],
    ) -> Result<Proc, String> {
        let (rpc_port, metrics_port, metadata_port) = (ports.rpc, ports.metrics, ports.metadata);
        let mut cmd = Command::new(master_exe());
        cmd.args([
            format!("--port={rpc_port}"),
            "--rpc_address=127.0.0.1".into(),
            format!("--metrics_port={metrics_port}"),
            "--metrics_host=127.0.0.1".into(),
            format!("--client_ttl={client_ttl}"),
        ]);
        cmd.args(flags);
        if let Some(port) = metadata_port {
            cmd.args([
                "--enable_http_metadata_server=true".into(),
                format!("--http_metadata_server_port={port}"),
                "--http_metadata_server_host=127.0.0.1".into(),
            ]);
        }
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut proc = Proc::spawn(cmd, "master", &env, false);
        let addr = format!("127.0.0.1:{rpc_port}");
        let deadline = Instant::now() + DEADLINE;
        loop {
            if !proc.alive() {
                return Err(proc.log_tail());
            }
            let t = Duration::from_secs(1);
            if MasterRpcClient::connect(&addr, t, t).is_ok() {
                return Ok(proc);
            }
            if Instant::now() > deadline {
                return Err(format!("not ready in time\n{}", proc.log_tail()));
            }
            std::thread::sleep(POLL);
        }
    }

    /// The embedded metadata server's URL (`P2PHANDSHAKE` when it is off).
    pub fn metadata(&self) -> String {
        match self.metadata_port {
            Some(p) => format!("http://127.0.0.1:{p}/metadata"),
            None => "P2PHANDSHAKE".into(),
        }
    }

    /// SIGKILLs this master and starts a new one on the same ports.
    pub fn restart(&mut self) {
        self.proc.kill();
        let deadline = Instant::now() + DEADLINE;
        loop {
            let ports = Ports {
                rpc: self.rpc_port,
                metrics: self.metrics_port,
                metadata: self.metadata_port,
            };
            match Master::spawn_on(&ports, self.client_ttl, &self.flags, &self.env) {
                Ok(p) => {
                    self.proc = p;
                    return;
                }
                Err(e) if Instant::now() > deadline => {
                    panic!("master did not restart on port {}: {e}", self.rpc_port)
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.rpc_port)
    }

    /// A new RPC client to this master.
    pub fn rpc(&self) -> MasterRpcClient {
        let t = Duration::from_secs(5);
        MasterRpcClient::connect(&self.addr(), t, t)
            .unwrap_or_else(|e| panic!("connecting to the master: {e}\n{}", self.proc.log_tail()))
    }

    /// GET on the admin HTTP service: status and body.
    pub fn http(&self, path: &str) -> (u16, String) {
        let url = format!("http://127.0.0.1:{}{path}", self.metrics_port);
        match ureq::get(&url).timeout(Duration::from_secs(10)).call() {
            Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
            Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap_or_default()),
            Err(e) => panic!("GET {url}: {e}\n{}", self.proc.log_tail()),
        }
    }

    /// `/get_all_segments`.
    pub fn segments(&self) -> Vec<String> {
        let (status, body) = self.http("/get_all_segments");
        assert_eq!(status, 200, "{body}");
        body.lines().map(str::to_string).collect()
    }

    /// `/query_key`: the transport endpoints of `key`'s memory replicas (`None`: 404).
    /// Reads upstream's shape (`{"success":true,"data":[{"transport_endpoint_":..}]}`)
    /// and the earlier `{"replicas":[{"transport_endpoint":..}]}`.
    pub fn placement(&self, key: &str) -> Option<Vec<String>> {
        let (status, body) = self.http(&format!("/query_key?key={key}"));
        if status == 404 {
            return None;
        }
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("query_key JSON");
        let list = v["data"]
            .as_array()
            .or_else(|| v["replicas"].as_array())
            .unwrap_or_else(|| panic!("no replica list in /query_key: {body}"));
        Some(
            list.iter()
                .map(|r| {
                    r["transport_endpoint_"]
                        .as_str()
                        .or_else(|| r["transport_endpoint"].as_str())
                        .unwrap_or_else(|| panic!("no transport endpoint in {r}"))
                        .to_string()
                })
                .collect(),
        )
    }
}

/// Polls `f` until it is true; fails with `what` (and `detail()`) after [`DEADLINE`].
pub fn eventually(what: &str, f: impl FnMut() -> bool, detail: impl Fn() -> String) {
    eventually_within(DEADLINE, what, f, detail)
}

/// [`eventually`] with another deadline.
pub fn eventually_within(
    limit: Duration,
    what: &str,
    mut f: impl FnMut() -> bool,
    detail: impl Fn() -> String,
) {
    let deadline = Instant::now() + limit;
    while !f() {
        if Instant::now() > deadline {
            panic!("timed out waiting until {what}\n{}", detail());
        }
        std::thread::sleep(POLL);
    }
}
