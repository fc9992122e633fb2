//! Real etcd and Redis servers for tests: each started by the test on free 127.0.0.1
//! ports with a fresh data directory, and killed (by PID) with its directory removed on
//! drop. The binaries (`etcd` from Debian's `etcd-server`, `redis-server`) must be on
//! `PATH`; `scripts/test-tools.sh` installs them, or sets `MOONCAKE_SKIP_KV_SERVERS=1`,
//! which makes [`Etcd::start`] and [`Redis::start`] return `None` after a skip line.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Only reached when a server does not come up; nothing asserts on timing.
const START_DEADLINE: Duration = Duration::from_secs(30);

fn skip(test: &str, what: &str) -> bool {
    let set = std::env::var("MOONCAKE_SKIP_KV_SERVERS").is_ok_and(|v| v.trim() == "1");
    if set {
        eprintln!("SKIPPED {test}: {what} not available (MOONCAKE_SKIP_KV_SERVERS=1)");
    }
    set
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn scratch_dir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("mooncake-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// A running server process and its data directory.
struct Server {
    child: Child,
    dir: PathBuf,
}

impl Server {
    fn spawn(cmd: Command, dir: PathBuf, what: &str) -> Server {
        let child = Server::launch(cmd, &dir, what);
        Server { child, dir }
    }

    fn launch(mut cmd: Command, dir: &std::path::Path, what: &str) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("server.log"))
            .expect("server log");
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log);
        cmd.spawn()
            .unwrap_or_else(|e| panic!("starting {what} ({cmd:?}): {e}; is it installed?"))
    }

    /// Kills the process and starts `cmd` in its place, keeping the directory.
    fn respawn(&mut self, cmd: Command, what: &str) {
        self.stop();
        self.child = Server::launch(cmd, &self.dir, what);
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Polls `ready` until it holds; panics with the server's log otherwise.
    fn wait_ready(&mut self, what: &str, mut ready: impl FnMut() -> bool) {
        let deadline = Instant::now() + START_DEADLINE;
        while !ready() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "{what} exited ({status}) while starting:\n{}",
                    self.log_tail()
                );
            }
            if Instant::now() > deadline {
                panic!("{what} did not come up:\n{}", self.log_tail());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One etcd member.
pub struct Etcd {
    server: Server,
    /// Its client port.
    pub port: u16,
    peer_port: u16,
}

impl Etcd {
    /// Starts a single-member cluster; `None` (after a skip line) when etcd is
    /// unavailable and `MOONCAKE_SKIP_KV_SERVERS=1`.
    pub fn start(test: &str) -> Option<Etcd> {
        if skip(test, "etcd") {
            return None;
        }
        let (port, peer_port) = (free_port(), free_port());
        let dir = scratch_dir("etcd");
        let mut etcd = Etcd {
            server: Server::spawn(Etcd::command(port, peer_port, &dir), dir, "etcd"),
            port,
            peer_port,
        };
        etcd.wait_ready();
        Some(etcd)
    }

    fn command(port: u16, peer_port: u16, dir: &std::path::Path) -> Command {
        let client = format!("http://127.0.0.1:{port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let mut cmd = Command::new("etcd");
        cmd.args([
            "--name=test",
            &format!("--data-dir={}", dir.join("data").display()),
            &format!("--listen-client-urls={client}"),
            &format!("--advertise-client-urls={client}"),
            &format!("--listen-peer-urls={peer}"),
            &format!("--initial-advertise-peer-urls={peer}"),
            &format!("--initial-cluster=test={peer}"),
            "--log-level=error",
        ]);
        cmd
    }

    fn wait_ready(&mut self) {
        let port = self.port;
        self.server.wait_ready("etcd", || {
            http_post(port, "/v3/kv/range", r#"{"key":"AA=="}"#)
                .is_some_and(|r| r.contains("header"))
        });
    }

    /// `etcd://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("etcd://127.0.0.1:{}", self.port)
    }

    /// Freezes the member (SIGSTOP) for `pause`, then lets it run again (SIGCONT):
    /// leases that expired meanwhile are revoked when it resumes.
    pub fn pause_for(&self, pause: std::time::Duration) {
        let pid = self.server.child.id().to_string();
        let signal = |sig: &str| {
            let ok = Command::new("kill")
                .args([sig, &pid])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "kill {sig} {pid}");
        };
        signal("-STOP");
        std::thread::sleep(pause);
        signal("-CONT");
    }

    /// Kills the member and starts it again on the same ports and data.
    pub fn restart(&mut self) {
        let cmd = Etcd::command(self.port, self.peer_port, &self.server.dir);
        self.server.respawn(cmd, "etcd");
        self.wait_ready();
    }
}

/// One redis-server.
pub struct Redis {
    server: Server,
    /// Its port.
    pub port: u16,
}

impl Redis {
    /// Starts a server, with `requirepass` when `password` is given; `None` (after a
    /// skip line) when redis is unavailable and `MOONCAKE_SKIP_KV_SERVERS=1`.
    pub fn start(test: &str, password: Option<&str>) -> Option<Redis> {
        if skip(test, "redis-server") {
            return None;
        }
        let port = free_port();
        let dir = scratch_dir("redis");
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &dir.display().to_string(),
        ]);
        if let Some(p) = password {
            cmd.args(["--requirepass", p]);
        }
        let mut redis = Redis {
            server: Server::spawn(cmd, dir, "redis-server"),
            port,
        };
        redis.server.wait_ready("redis-server", || {
            TcpStream::connect(("127.0.0.1", port)).is_ok_and(|mut s| {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 64];
                s.write_all(b"PING\r\n").is_ok() && s.read(&mut buf).is_ok_and(|n| n > 0)
            })
        });
        Some(redis)
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

/// A minimal HTTP/1.0 POST; the response text, or `None` when nothing answers.
fn http_post(port: u16, path: &str, body: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let req = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}
