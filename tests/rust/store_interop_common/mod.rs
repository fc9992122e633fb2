//! Helpers for the Store interop tests against the upstream Mooncake 0.3.13 peer
//! (`scripts/upstream-peer.sh`): our `mooncake_master` binary and upstream's as child processes
//! on free 127.0.0.1 ports (killed by PID on drop, via `interop_common::ChildGuard`),
//! the admin HTTP, the `tests/interop/store_peer.py` driver of upstream's
//! `MooncakeDistributedStore`, and our `mooncake::store::Client` set up like upstream's.
//!
//! Needs `mod interop_common;` next to `mod store_interop_common;` in the test crate.
#![allow(dead_code)]

use crate::interop_common::{ChildGuard, Peer, CMD_DEADLINE, POLL, START_DEADLINE};
use mooncake::config::Config;
use mooncake::store::{Client, SetupConfig};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;

/// Makes the child get SIGKILL when the thread that spawned it dies (the test thread,
/// or the whole test process when it is killed before `ChildGuard`'s drop could run).
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A port that was free a moment ago, below the kernel's ephemeral range (32768 and
/// up on Linux), so no outgoing connection or port-0 bind of another process takes it
/// before the server that is given it binds it (an HA master binds its RPC port
/// only once it leads, seconds later).
pub fn free_port() -> u16 {
    loop {
        let port = fastrand::u16(20_000..32_000);
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// `target/<profile>/mooncake_master`: cargo's `CARGO_BIN_EXE_mooncake_master` when
/// it exists, else the one next to this test executable's `deps/` directory, built
/// with `$CARGO build --bin mooncake_master` when missing.
pub fn our_master_binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = option_env!("CARGO_BIN_EXE_mooncake_master") {
            if Path::new(p).is_file() {
                return PathBuf::from(p);
            }
        }
        let exe = std::env::current_exe().expect("current_exe");
        // target/<profile>/deps/<test>-<hash>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test executable has no target/<profile> directory")
            .to_path_buf();
        let bin = profile_dir.join("mooncake_master");
        if !bin.is_file() {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "--bin", "mooncake_master"])
                .current_dir(env!("CARGO_MANIFEST_DIR"));
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let status = cmd
                .status()
                .expect("running cargo build --bin mooncake_master");
            assert!(status.success(), "cargo build --bin mooncake_master failed");
        }
        assert!(bin.is_file(), "{} is missing", bin.display());
        bin
    })
    .clone()
}

/// Which implementation a [`MasterProc`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MasterKind {
    Ours,
    Upstream,
}

/// A `mooncake_master` child (ours or upstream's) with the embedded HTTP metadata
/// server, everything on 127.0.0.1.
pub struct MasterProc {
    pub kind: MasterKind,
    bin: PathBuf,
    args: Vec<String>,
    pub rpc_port: u16,
    pub metrics_port: u16,
    pub metadata_port: u16,
    pub guard: ChildGuard,
}

fn tcp_connects(port: u16) -> bool {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok()
}

impl MasterProc {
    /// Our `target/<profile>/mooncake_master` with `extra` flags.
    pub fn ours(extra: &[&str]) -> MasterProc {
        Self::start(MasterKind::Ours, &our_master_binary(), extra)
    }

    /// Upstream's `mooncake_master` with `extra` flags.
    pub fn upstream(peer: &Peer, extra: &[&str]) -> MasterProc {
        Self::start(
            MasterKind::Upstream,
            &peer.mooncake_dir.join("mooncake_master"),
            extra,
        )
    }

    fn start(kind: MasterKind, bin: &Path, extra: &[&str]) -> MasterProc {
        let mut last = String::new();
        for _attempt in 0..4 {
            let (rpc_port, metrics_port, metadata_port) = (free_port(), free_port(), free_port());
            if rpc_port == metrics_port
                || rpc_port == metadata_port
                || metrics_port == metadata_port
            {
                continue;
            }
            let mut args = vec![
                format!("--port={rpc_port}"),
                "--rpc_address=127.0.0.1".into(),
                format!("--metrics_port={metrics_port}"),
                "--metrics_host=127.0.0.1".into(),
                "--enable_http_metadata_server=true".into(),
                format!("--http_metadata_server_port={metadata_port}"),
                "--http_metadata_server_host=127.0.0.1".into(),
            ];
            args.extend(extra.iter().map(|s| s.to_string()));
            let mut m = MasterProc {
                kind,
                bin: bin.to_path_buf(),
                guard: Self::spawn(kind, bin, &args),
                args,
                rpc_port,
                metrics_port,
                metadata_port,
            };
            match m.wait_ready() {
                Ok(()) => return m,
                // Most likely a port got taken: retry on fresh ports.
                Err(log) => last = log,
            }
        }
        panic!("{kind:?} mooncake_master did not start\n{last}");
    }

    fn spawn(kind: MasterKind, bin: &Path, args: &[String]) -> ChildGuard {
        let mut cmd = Command::new(bin);
        cmd.args(args).stdin(Stdio::null());
        die_with_parent(&mut cmd);
        let tag = match kind {
            MasterKind::Ours => "our-master",
            MasterKind::Upstream => "upstream-master",
        };
        ChildGuard::spawn(cmd, tag, false)
    }

    /// Waits until every listener answers; `Err(log)` when the process exited.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if self.guard.exited().is_some() {
                return Err(self.guard.log_tail());
            }
            if self.ready() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                panic!(
                    "{:?} master did not come up\n{}",
                    self.kind,
                    self.guard.log_tail()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// Kills the master (SIGKILL: no state survives) and starts a fresh one with the
    /// same flags on the same ports.
    pub fn restart(&mut self) {
        let _ = self.guard.child.kill();
        let _ = self.guard.child.wait();
        let mut last = String::new();
        for _attempt in 0..20 {
            // Replacing the guard drops (and so reaps) the dead process.
            self.guard = Self::spawn(self.kind, &self.bin, &self.args);
            match self.wait_ready() {
                Ok(()) => return,
                Err(log) => last = log,
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "{:?} master did not restart on its ports\n{last}",
            self.kind
        );
    }

    fn ready(&self) -> bool {
        tcp_connects(self.rpc_port)
            && matches!(self.admin_get("/health"), Some((200, _)))
            && matches!(
                http_get(&format!("{}?key=store-interop-probe", self.metadata_url())),
                Some((404, _))
            )
    }

    /// `127.0.0.1:<rpc port>`, what clients get as `master_server_addr`.
    pub fn rpc_addr(&self) -> String {
        format!("127.0.0.1:{}", self.rpc_port)
    }

    /// `http://127.0.0.1:<port>/metadata` of the embedded metadata server.
    pub fn metadata_url(&self) -> String {
        format!("http://127.0.0.1:{}/metadata", self.metadata_port)
    }

    /// Whether the embedded metadata server holds `mooncake/<kind>/<segment>` (`kind`
    /// = `ram` for the TE segment descriptor, `rpc_meta` for the RPC location).
    pub fn metadata_has(&self, kind: &str, segment: &str) -> bool {
        let key = curl_escape(&format!("mooncake/{kind}/{segment}"));
        matches!(
            http_get(&format!("{}?key={key}", self.metadata_url())),
            Some((200, _))
        )
    }

    /// GET on the admin HTTP service: (status, body), `None` when it does not answer.
    pub fn admin_get(&self, path_and_query: &str) -> Option<(u16, String)> {
        http_get(&format!(
            "http://127.0.0.1:{}{path_and_query}",
            self.metrics_port
        ))
    }

    /// GET on the admin HTTP service that must answer.
    pub fn admin(&self, path_and_query: &str) -> (u16, String) {
        self.admin_get(path_and_query).unwrap_or_else(|| {
            panic!(
                "admin GET {path_and_query} got no answer\n{}",
                self.guard.log_tail()
            )
        })
    }

    /// The lines of `/get_all_segments` (or `/get_all_keys`).
    pub fn admin_lines(&self, path: &str) -> Vec<String> {
        let (status, body) = self.admin(path);
        assert_eq!(status, 200, "GET {path}: {body}");
        body.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect()
    }

    /// The value of an unlabelled Prometheus sample in `/metrics`.
    pub fn metric(&self, name: &str) -> Option<f64> {
        let (status, body) = self.admin("/metrics");
        assert_eq!(status, 200, "GET /metrics");
        body.lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    }

    /// The TE endpoints of `key`'s memory replicas per `/query_key` (our JSON shape
    /// `{"replicas": [{"transport_endpoint"}]}` or upstream's
    /// `{"data": [{"transport_endpoint_"}]}`), `None` on a 404.
    pub fn query_key_endpoints(&self, key: &str) -> Option<Vec<String>> {
        let (status, body) = self.admin(&format!("/query_key?key={key}"));
        if status == 404 {
            return None;
        }
        assert_eq!(status, 200, "GET /query_key?key={key}: {body}");
        let v: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("/query_key?key={key} is not JSON ({e}): {body}"));
        let list = v
            .get("data")
            .or_else(|| v.get("replicas"))
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("/query_key?key={key}: no replica list in {body}"));
        Some(
            list.iter()
                .filter_map(|r| {
                    r.get("transport_endpoint_")
                        .or_else(|| r.get("transport_endpoint"))
                        .and_then(Value::as_str)
                        .map(String::from)
                })
                .collect(),
        )
    }

    pub fn log_tail(&self) -> String {
        self.guard.log_tail()
    }
}

/// `curl_easy_escape`: every byte but ALPHA / DIGIT / `-._~` percent-encoded. Both
/// upstream's and our TE clients escape metadata keys like this, and upstream's
/// embedded metadata server stores the key as received (it does not decode).
pub fn curl_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A plain HTTP GET: (status, body), `None` when nothing answers.
pub fn http_get(url: &str) -> Option<(u16, String)> {
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(5))
        .build();
    match agent.get(url).call() {
        Ok(r) => {
            let status = r.status();
            Some((status, r.into_string().unwrap_or_default()))
        }
        Err(ureq::Error::Status(status, r)) => Some((status, r.into_string().unwrap_or_default())),
        Err(_) => None,
    }
}

/// `tests/interop/store_peer.py`.
pub fn store_driver_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/store_peer.py")
}

/// An upstream `MooncakeDistributedStore` in a python child, driven with JSON lines
/// over stdin (`tests/interop/store_peer.py`).
pub struct PyStore {
    /// `get_hostname()`: also its segment's name, usable in `preferred_segments`.
    pub hostname: String,
    pub tag: String,
    stdin: ChildStdin,
    lines: Receiver<String>,
    guard: ChildGuard,
}

impl PyStore {
    /// Sets up a store client (`global_segment_size` = `segment`, `local_buffer_size` =
    /// `local`, a registered `zc`-byte buffer for the zero-copy APIs) on `master` with
    /// HTTP metadata `metadata`.
    pub fn start(
        peer: &Peer,
        tag: &str,
        metadata: &str,
        master: &str,
        segment: u64,
        local: u64,
        zc: u64,
    ) -> PyStore {
        PyStore::start_with_env(peer, tag, metadata, master, segment, local, zc, &[])
    }

    /// Kills the client with SIGKILL: it gets no chance to unmount or unpublish.
    pub fn kill(&self) {
        // SAFETY: a plain kill(2) of our own child, which is not yet reaped.
        unsafe {
            libc::kill(self.guard.pid() as libc::pid_t, libc::SIGKILL);
        }
    }

    /// [`PyStore::start`] with `env` added to the driver's environment.
    #[allow(clippy::too_many_arguments)]
    pub fn start_with_env(
        peer: &Peer,
        tag: &str,
        metadata: &str,
        master: &str,
        segment: u64,
        local: u64,
        zc: u64,
        env: &[(&str, &str)],
    ) -> PyStore {
        let mut cmd = Command::new(&peer.python);
        cmd.envs(env.iter().copied());
        cmd.arg("-u")
            .arg(store_driver_script())
            .args([
                metadata,
                master,
                &segment.to_string(),
                &local.to_string(),
                &zc.to_string(),
            ])
            .stdin(Stdio::piped());
        die_with_parent(&mut cmd);
        let mut guard = ChildGuard::spawn(cmd, tag, true);
        let stdin = guard.child.stdin.take().expect("child stdin");
        let stdout = guard.child.stdout.take().expect("child stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut py = PyStore {
            hostname: String::new(),
            tag: tag.to_string(),
            stdin,
            lines,
            guard,
        };
        let v = py.next_reply(START_DEADLINE, "startup");
        if v["ready"] != Value::Bool(true) {
            panic!(
                "{tag}: store_peer.py failed to set up: {v}\n{}",
                py.log_tail()
            );
        }
        assert_eq!(
            v["register_rc"],
            json!(0),
            "{tag}: register_buffer of the zero-copy buffer: {v}"
        );
        py.hostname = v["hostname"].as_str().expect("hostname").to_string();
        py
    }

    fn next_reply(&mut self, timeout: Duration, what: &str) -> Value {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!(
                    "{}: bad reply to {what}: {e}: {line:?}\n{}",
                    self.tag,
                    self.log_tail()
                )
            }),
            Err(RecvTimeoutError::Timeout) => panic!(
                "{}: no reply to {what} within {timeout:?}\n{}",
                self.tag,
                self.log_tail()
            ),
            Err(RecvTimeoutError::Disconnected) => {
                let status = self
                    .guard
                    .wait_until(Instant::now() + Duration::from_secs(5));
                panic!(
                    "{}: store_peer.py exited ({status:?}) during {what}\n{}",
                    self.tag,
                    self.log_tail()
                )
            }
        }
    }

    /// Sends one command; panics unless the reply says `"ok": true`.
    pub fn cmd(&mut self, c: Value) -> Value {
        let line = c.to_string();
        let shown: String = line.chars().take(160).collect();
        if let Err(e) = writeln!(self.stdin, "{line}").and_then(|_| self.stdin.flush()) {
            panic!("{}: writing {shown}: {e}\n{}", self.tag, self.log_tail());
        }
        let v = self.next_reply(CMD_DEADLINE, &shown);
        if v["ok"] != Value::Bool(true) {
            panic!("{}: {shown} failed: {v}\n{}", self.tag, self.log_tail());
        }
        v
    }

    /// The `rc` of a command's reply.
    pub fn rc(&mut self, c: Value) -> i64 {
        let shown = c.to_string();
        let v = self.cmd(c);
        v["rc"]
            .as_i64()
            .unwrap_or_else(|| panic!("{}: no rc in the reply to {shown}: {v}", self.tag))
    }

    /// The `rcs` list of a batch command's reply.
    pub fn rcs(&mut self, c: Value) -> (Vec<i64>, Value) {
        let v = self.cmd(c);
        let rcs = v["rcs"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: no rcs in {v}", self.tag))
            .iter()
            .map(|x| x.as_i64().expect("rc"))
            .collect();
        (rcs, v)
    }

    pub fn put(&mut self, key: &str, value: Value, cfg: Value) -> i64 {
        self.rc(json!({"op": "put", "key": key, "value": value, "cfg": cfg}))
    }

    pub fn put_from(&mut self, key: &str, off: u64, value: Value, cfg: Value) -> i64 {
        self.rc(json!({"op": "put_from", "key": key, "off": off, "value": value, "cfg": cfg}))
    }

    /// `get(key)`: (length read, whether it equals `expect`).
    pub fn get(&mut self, key: &str, expect: Value) -> (u64, bool) {
        let v = self.cmd(json!({"op": "get", "key": key, "expect": expect}));
        (v["len"].as_u64().expect("len"), v["match"] == json!(true))
    }

    /// `get_into(key, buf+off, cap)`: (rc, whether the bytes equal `expect`).
    pub fn get_into(&mut self, key: &str, off: u64, cap: u64, expect: Value) -> (i64, bool) {
        let v = self
            .cmd(json!({"op": "get_into", "key": key, "off": off, "cap": cap, "expect": expect}));
        (v["rc"].as_i64().expect("rc"), v["match"] == json!(true))
    }

    pub fn is_exist(&mut self, key: &str) -> i64 {
        self.rc(json!({"op": "is_exist", "key": key}))
    }

    pub fn get_size(&mut self, key: &str) -> i64 {
        self.rc(json!({"op": "get_size", "key": key}))
    }

    pub fn remove(&mut self, key: &str, force: bool) -> i64 {
        self.rc(json!({"op": "remove", "key": key, "force": force}))
    }

    /// The TE endpoints of `key`'s memory replicas per `get_replica_desc` (grants a
    /// read lease, like every GetReplicaList).
    pub fn replica_endpoints(&mut self, key: &str) -> Vec<String> {
        let v = self.cmd(json!({"op": "replica_desc", "key": key}));
        v["replicas"]
            .as_array()
            .expect("replicas")
            .iter()
            .map(|r| {
                assert_eq!(r["memory"], json!(true), "non-memory replica {r}");
                assert_eq!(
                    r["status"],
                    json!("ReplicaStatus.COMPLETE"),
                    "replica of {key}"
                );
                r["endpoint"].as_str().expect("endpoint").to_string()
            })
            .collect()
    }

    /// `close()` (unmounts the segment); the process keeps answering.
    pub fn close(&mut self) -> i64 {
        self.rc(json!({"op": "close"}))
    }

    pub fn log_tail(&self) -> String {
        self.guard.log_tail()
    }

    /// Asks the script to exit; the guard kills it anyway if it does not.
    pub fn quit(mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"op": "quit"})).and_then(|_| self.stdin.flush());
        let _ = self.lines.recv_timeout(Duration::from_secs(10));
        let _ = self
            .guard
            .wait_until(Instant::now() + Duration::from_secs(10));
    }
}

/// A value for `store_peer.py`: `pattern(len, seed)`.
pub fn val(len: u64, seed: u8) -> Value {
    json!({"len": len, "seed": seed})
}

/// A value for `store_peer.py`: UTF-8 text.
pub fn text(s: &str) -> Value {
    json!({ "text": s })
}

/// No ReplicateConfig fields (upstream's defaults: one replica, random placement).
pub fn default_cfg() -> Value {
    json!({})
}

/// One replica, placed on `segment` first.
pub fn on_cfg(segment: &str) -> Value {
    json!({"replica_num": 1, "preferred_segments": [segment]})
}

/// Makes every store client this process sets up advertise 127.0.0.1 (upstream's
/// `MC_TCP_BIND_ADDRESS`): sets the variable before anything reads
/// `Config::global()` (read once per process) and checks it took.
pub fn init_our_client_env() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        std::env::set_var("MC_TCP_BIND_ADDRESS", "127.0.0.1");
    });
    assert_eq!(
        Config::global().advertised_ip.as_deref(),
        Some("127.0.0.1"),
        "Config::global() was read before MC_TCP_BIND_ADDRESS was set"
    );
}

/// Our store client (`Client::setup`, coro_rpc to `master`), HTTP metadata, over TCP or
/// (with `MOONCAKE_INTEROP_RDMA`) RDMA.
pub fn our_client(master: &MasterProc, segment: u64, local: u64) -> Client {
    init_our_client_env();
    let cfg = SetupConfig {
        local_hostname: "127.0.0.1".into(),
        metadata_server: master.metadata_url(),
        global_segment_size: segment,
        local_buffer_size: local,
        protocol: crate::interop_common::protocol().into(),
        device_name: crate::interop_common::rdma_device().unwrap_or_default(),
        master_server_addr: master.rpc_addr(),
        ..SetupConfig::default()
    };
    Client::setup(&cfg).unwrap_or_else(|e| {
        panic!(
            "Client::setup against the {:?} master: {e:?}\n{}",
            master.kind,
            master.log_tail()
        )
    })
}

/// Polls `f` until it returns true; panics with `what` after `timeout`.
pub fn eventually(timeout: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        std::thread::sleep(POLL * 5);
    }
}
