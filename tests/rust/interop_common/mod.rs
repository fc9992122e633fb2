//! Shared helpers for the interop tests against the upstream Mooncake 0.3.13 peer
//! (`scripts/upstream-peer.sh`): locating the peer, child-process guards that kill by PID on drop
//! (panics included), the `tests/interop/peer_engine.py` driver, the upstream HTTP
//! metadata server, `transfer_engine_bench`, and our own engines.
#![allow(dead_code)]

use mooncake::config::Config;
use mooncake::metadata::http_server::HttpMetadataServer;
use mooncake::te::{TaskStatus, TransferEngine, TransferRequest};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a peer process may take to start (python import + engine init).
pub const START_DEADLINE: Duration = Duration::from_secs(60);
/// How long one driver command may take (Python's sync transfers retry internally).
pub const CMD_DEADLINE: Duration = Duration::from_secs(90);
/// How long our own tasks may take to reach a terminal state; above our 30 s status timeout.
pub const TASK_DEADLINE: Duration = Duration::from_secs(60);
/// Poll interval for anything that has to be waited for.
pub const POLL: Duration = Duration::from_millis(20);

/// The installed upstream peer.
#[derive(Debug, Clone)]
pub struct Peer {
    /// `<venv>/bin/python`.
    pub python: PathBuf,
    /// The installed `mooncake` package directory.
    pub mooncake_dir: PathBuf,
}

impl Peer {
    /// `<mooncake>/transfer_engine_bench`.
    pub fn bench(&self) -> PathBuf {
        self.mooncake_dir.join("transfer_engine_bench")
    }

    /// `<mooncake>/http_metadata_server.py`.
    pub fn http_metadata_server(&self) -> PathBuf {
        self.mooncake_dir.join("http_metadata_server.py")
    }
}

/// Finds the upstream peer (`MOONCAKE_PEER_VENV`, else `~/.cache/mooncake-peer/venv`).
/// Returns `None` (after printing a skip line) only when `MOONCAKE_SKIP_INTEROP=1`;
/// a missing peer otherwise fails the test.
pub fn peer(test: &str) -> Option<Peer> {
    static PEER: OnceLock<Result<Peer, String>> = OnceLock::new();
    match PEER.get_or_init(locate_peer) {
        Ok(p) => Some(p.clone()),
        Err(why) => {
            if std::env::var("MOONCAKE_SKIP_INTEROP").is_ok_and(|v| v.trim() == "1") {
                eprintln!(
                    "SKIPPED {test}: upstream peer not available ({why}); MOONCAKE_SKIP_INTEROP=1"
                );
                return None;
            }
            panic!(
                "upstream Mooncake peer not available: {why}.\n\
                 Install it with `bash scripts/upstream-peer.sh` (from the crate root; \
                 set MOONCAKE_PEER_VENV if it lives elsewhere), or set MOONCAKE_SKIP_INTEROP=1 \
                 to skip the interop tests."
            );
        }
    }
}

fn locate_peer() -> Result<Peer, String> {
    let venv = match std::env::var_os("MOONCAKE_PEER_VENV").filter(|v| !v.is_empty()) {
        Some(v) => PathBuf::from(v),
        None => {
            let home = std::env::var_os("HOME").ok_or("HOME is not set")?;
            PathBuf::from(home).join(".cache/mooncake-peer/venv")
        }
    };
    let python = venv.join("bin/python");
    if !python.is_file() {
        return Err(format!("{} does not exist", python.display()));
    }
    let out = Command::new(&python)
        .args([
            "-c",
            "import mooncake.engine, mooncake, os; print(os.path.dirname(mooncake.__file__))",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} cannot import mooncake.engine: {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mooncake_dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_string());
    let peer = Peer {
        python,
        mooncake_dir,
    };
    for f in [peer.bench(), peer.http_metadata_server()] {
        if !f.is_file() {
            return Err(format!("{} is missing", f.display()));
        }
    }
    Ok(peer)
}

/// The RDMA device the interop runs over (`MOONCAKE_INTEROP_RDMA`, e.g. `rxe0` in
/// `scripts/rxe-vm.sh`); `None`: TCP, the default.
pub fn rdma_device() -> Option<String> {
    std::env::var("MOONCAKE_INTEROP_RDMA")
        .ok()
        .filter(|d| !d.trim().is_empty())
}

/// The transport both sides use: `rdma` with [`rdma_device`], else `tcp`.
pub fn protocol() -> &'static str {
    if rdma_device().is_some() {
        "rdma"
    } else {
        "tcp"
    }
}

/// The environment every upstream process gets: TCP forced unless the run is over RDMA
/// (upstream's python engine then discovers the device itself).
pub fn peer_env() -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("MC_TCP_BIND_ADDRESS", "127.0.0.1".to_string()),
        ("MC_TRANSFER_TIMEOUT", "5".to_string()),
        ("GLOG_logtostderr", "1".to_string()),
    ];
    match rdma_device() {
        Some(dev) => env.push(("PEER_RDMA_DEVICE", dev)),
        None => env.push(("MC_FORCE_TCP", "1".to_string())),
    }
    env
}

/// A per-process scratch directory for child logs; logs of passing runs are deleted.
pub fn log_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("mooncake-interop-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("creating the interop log directory");
    d
}

/// A fresh log file path with a readable prefix.
pub fn log_path(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    log_dir().join(format!("{:03}-{tag}.log", N.fetch_add(1, Ordering::SeqCst)))
}

/// The last `max` bytes of a file, for failure messages.
pub fn tail(path: &Path, max: usize) -> String {
    let data = std::fs::read(path).unwrap_or_default();
    let start = data.len().saturating_sub(max);
    String::from_utf8_lossy(&data[start..]).into_owned()
}

/// A child process that is killed (by PID) and reaped when dropped, panics included.
pub struct ChildGuard {
    pub child: Child,
    pub what: String,
    pub log: PathBuf,
}

impl ChildGuard {
    /// Spawns `cmd` with stderr (and stdout unless piped already) going to a log file.
    pub fn spawn(mut cmd: Command, what: &str, pipe_stdout: bool) -> ChildGuard {
        let log = log_path(what);
        // Another guard may remove the (empty) directory concurrently: recreate and retry.
        let file = (0..5)
            .find_map(|_| {
                let _ = std::fs::create_dir_all(log.parent().unwrap());
                std::fs::File::create(&log).ok()
            })
            .unwrap_or_else(|| panic!("creating the child log {}", log.display()));
        cmd.stderr(file.try_clone().expect("cloning the log handle"));
        if pipe_stdout {
            cmd.stdout(Stdio::piped());
        } else {
            cmd.stdout(file);
        }
        // Hermetic: no inherited MC_* tuning, only ours.
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("MC_") {
                cmd.env_remove(k);
            }
        }
        for (k, v) in peer_env() {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {what} ({cmd:?}): {e}"));
        ChildGuard {
            child,
            what: what.to_string(),
            log,
        }
    }

    /// The child's PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last few KiB of the child's log.
    pub fn log_tail(&self) -> String {
        format!(
            "--- {} (pid {}) log {} ---\n{}",
            self.what,
            self.pid(),
            self.log.display(),
            tail(&self.log, 6000)
        )
    }

    /// Waits for the child to exit, polling; `None` when the deadline passed.
    pub fn wait_until(&mut self, deadline: Instant) -> Option<std::process::ExitStatus> {
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Exit status if it already exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // Child::kill sends SIGKILL to this PID only.
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "{} (pid {}) log kept at {}",
                self.what,
                self.pid(),
                self.log.display()
            );
        } else {
            let _ = std::fs::remove_file(&self.log);
            if let Some(dir) = self.log.parent() {
                let _ = std::fs::remove_dir(dir); // only succeeds once empty
            }
        }
    }
}

/// What `peer_engine.py` printed once ready.
#[derive(Debug, Clone)]
pub struct PyInfo {
    pub segment: String,
    pub addr: u64,
    pub size: u64,
    pub rpc_port: u16,
}

/// An upstream `mooncake.engine.TransferEngine` in a python child, driven over stdin.
pub struct PyEngine {
    pub info: PyInfo,
    stdin: ChildStdin,
    lines: Receiver<String>,
    guard: ChildGuard,
}

/// `tests/interop/peer_engine.py`.
pub fn driver_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/peer_engine.py")
}

impl PyEngine {
    /// Starts `peer_engine.py <metadata> <hostname> <size> <seed>` and waits for its ready line.
    pub fn start(peer: &Peer, metadata: &str, hostname: &str, size: u64, seed: u8) -> PyEngine {
        let mut cmd = Command::new(&peer.python);
        cmd.arg("-u")
            .arg(driver_script())
            .args([metadata, hostname, &size.to_string(), &seed.to_string()])
            .stdin(Stdio::piped());
        let mut guard = ChildGuard::spawn(cmd, "py-engine", true);
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
        let mut py = PyEngine {
            info: PyInfo {
                segment: String::new(),
                addr: 0,
                size: 0,
                rpc_port: 0,
            },
            stdin,
            lines,
            guard,
        };
        let v = py.next_reply(START_DEADLINE, "startup");
        if v["ready"] != Value::Bool(true) {
            panic!(
                "peer_engine.py failed to start: {v}\n{}",
                py.guard.log_tail()
            );
        }
        py.info = PyInfo {
            segment: v["segment"].as_str().expect("segment").to_string(),
            addr: v["addr"].as_u64().expect("addr"),
            size: v["size"].as_u64().expect("size"),
            rpc_port: v["rpc_port"].as_u64().expect("rpc_port") as u16,
        };
        py
    }

    fn next_reply(&mut self, timeout: Duration, what: &str) -> Value {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!(
                    "bad reply to {what}: {e}: {line:?}\n{}",
                    self.guard.log_tail()
                )
            }),
            Err(RecvTimeoutError::Timeout) => {
                panic!(
                    "no reply to {what} within {timeout:?}\n{}",
                    self.guard.log_tail()
                )
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = self
                    .guard
                    .wait_until(Instant::now() + Duration::from_secs(5));
                panic!(
                    "peer_engine.py exited ({status:?}) during {what}\n{}",
                    self.guard.log_tail()
                )
            }
        }
    }

    /// Sends one command line and returns its reply; panics unless `"ok": true`.
    pub fn cmd(&mut self, line: &str) -> Value {
        let shown: String = line.chars().take(120).collect();
        if let Err(e) = writeln!(self.stdin, "{line}").and_then(|_| self.stdin.flush()) {
            panic!(
                "writing {shown:?} to peer_engine.py: {e}\n{}",
                self.guard.log_tail()
            );
        }
        let v = self.next_reply(CMD_DEADLINE, &shown);
        if v["ok"] != Value::Bool(true) {
            panic!("command {shown:?} failed: {v}\n{}", self.guard.log_tail());
        }
        v
    }

    /// The `rc` field of a command's reply.
    pub fn rc(&mut self, line: &str) -> i64 {
        let v = self.cmd(line);
        v["rc"]
            .as_i64()
            .unwrap_or_else(|| panic!("no rc in reply to {line:?}: {v}"))
    }

    /// Bytes `[off, off+len)` of the python engine's buffer.
    pub fn dump(&mut self, off: u64, len: u64) -> Vec<u8> {
        let v = self.cmd(&format!("dump {off} {len}"));
        unhex(v["hex"].as_str().expect("hex"))
    }

    /// Overwrites `[off, off+data.len())` of the python engine's buffer.
    pub fn fill(&mut self, off: u64, data: &[u8]) {
        self.cmd(&format!("fill {off} {}", hex(data)));
    }

    /// Drains the python engine's received notifies as (name, msg).
    pub fn notifies(&mut self) -> Vec<(String, String)> {
        let v = self.cmd("notifies");
        v["notifies"]
            .as_array()
            .expect("notifies")
            .iter()
            .map(|p| {
                (
                    p[0].as_str().unwrap().to_string(),
                    p[1].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// The child's log tail, for assertion messages.
    pub fn log_tail(&self) -> String {
        self.guard.log_tail()
    }

    /// Asks the script to exit; the guard kills it anyway if it does not.
    pub fn quit(mut self) {
        let _ = writeln!(self.stdin, "quit").and_then(|_| self.stdin.flush());
        let _ = self.lines.recv_timeout(Duration::from_secs(10));
        let _ = self
            .guard
            .wait_until(Instant::now() + Duration::from_secs(10));
    }
}

/// Upstream's `http_metadata_server.py` on 127.0.0.1.
pub struct UpstreamMetadataServer {
    pub url: String,
    pub port: u16,
    guard: ChildGuard,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether an HTTP metadata server answers a GET of a missing key on `port` (404).
fn metadata_server_answers(port: u16) -> bool {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req =
        "GET /metadata?key=interop-probe HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut buf = Vec::new();
    let _ = s.take(64).read_to_end(&mut buf);
    buf.starts_with(b"HTTP/1.1 404") || buf.starts_with(b"HTTP/1.0 404")
}

impl UpstreamMetadataServer {
    /// Starts the server on a free port and waits until it answers.
    pub fn start(peer: &Peer) -> UpstreamMetadataServer {
        let mut last = String::new();
        for _attempt in 0..3 {
            let port = free_port();
            let mut cmd = Command::new(&peer.python);
            cmd.arg(peer.http_metadata_server())
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .stdin(Stdio::null());
            let mut guard = ChildGuard::spawn(cmd, "py-metadata-server", false);
            let deadline = Instant::now() + START_DEADLINE;
            loop {
                if metadata_server_answers(port) {
                    return UpstreamMetadataServer {
                        url: format!("http://127.0.0.1:{port}/metadata"),
                        port,
                        guard,
                    };
                }
                if guard.exited().is_some() || Instant::now() >= deadline {
                    last = guard.log_tail();
                    break;
                }
                std::thread::sleep(POLL);
            }
        }
        panic!("upstream http_metadata_server.py did not come up\n{last}");
    }

    pub fn log_tail(&self) -> String {
        self.guard.log_tail()
    }
}

/// Our in-process HTTP metadata server on 127.0.0.1 and its connection string.
pub fn our_metadata_server() -> (HttpMetadataServer, String) {
    let server =
        HttpMetadataServer::start("127.0.0.1:0".parse().unwrap()).expect("metadata server");
    let url = format!("http://127.0.0.1:{}/metadata", server.local_addr().port());
    (server, url)
}

/// Runs `transfer_engine_bench --mode=initiator` (over [`protocol`]) against `segment`
/// and returns (exit status, combined output); the child is killed if it overruns.
pub fn run_bench_initiator(
    peer: &Peer,
    metadata: &str,
    local_name: &str,
    segment: &str,
    operation: &str,
) -> (Option<std::process::ExitStatus>, String) {
    let mut cmd = Command::new(peer.bench());
    cmd.args([
        "--mode=initiator",
        &format!("--protocol={}", protocol()),
        &format!("--device_name={}", rdma_device().unwrap_or_default()),
        &format!("--metadata_server={metadata}"),
        &format!("--local_server_name={local_name}"),
        &format!("--segment_id={segment}"),
        &format!("--operation={operation}"),
        "--duration=2",
        "--threads=2",
        "--batch_size=8",
        "--block_size=65536",
        "--buffer_size=1048576",
    ])
    .stdin(Stdio::null());
    let mut guard = ChildGuard::spawn(cmd, &format!("bench-{operation}"), false);
    let status = guard.wait_until(Instant::now() + Duration::from_secs(120));
    let out = guard.log_tail();
    (status, out)
}

/// Minimum size our bench target must register: block * batch * threads.
pub const BENCH_TARGET_BYTES: u64 = 65536 * 8 * 2;

/// Our engine in P2PHANDSHAKE mode with TCP installed (RDMA in an RDMA run).
pub fn our_p2p_engine() -> TransferEngine {
    TransferEngine::with_config(our_config(), "P2PHANDSHAKE", "127.0.0.1:0", true)
        .expect("P2P engine")
}

/// Our engine on an HTTP metadata server, advertising 127.0.0.1.
pub fn our_http_engine(metadata: &str, name: &str) -> TransferEngine {
    TransferEngine::with_config(our_config(), metadata, name, true).expect("HTTP engine")
}

fn our_config() -> Config {
    Config {
        advertised_ip: Some("127.0.0.1".into()),
        force_tcp: rdma_device().is_none(),
        ..Config::default()
    }
}

/// A unique name for engines registered in a metadata server.
pub fn unique(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Memory that a remote peer reads and writes behind Rust's back: only ever touched
/// through raw pointers, never through references that could alias a remote write.
pub struct Region {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the region is a heap allocation owned by this value, touched only through
// raw-pointer copies, so moving it to another thread is sound.
unsafe impl Send for Region {}
// SAFETY: `&Region` allows only raw-pointer copies in and out (no references into the
// memory), and the bytes are meant to be written concurrently by remote peers anyway.
unsafe impl Sync for Region {}

impl Region {
    pub fn new(len: usize) -> Region {
        let boxed: Box<[u8]> = vec![0u8; len].into_boxed_slice();
        Region {
            ptr: Box::into_raw(boxed) as *mut u8,
            len,
        }
    }

    pub fn with_pattern(len: usize, seed: u8) -> Region {
        let r = Region::new(len);
        r.write(0, &pattern(len, seed));
        r
    }

    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    pub fn len(&self) -> u64 {
        self.len as u64
    }

    /// A copy of `[off, off+len)`.
    pub fn read(&self, off: u64, len: u64) -> Vec<u8> {
        assert!(off + len <= self.len as u64, "read outside the region");
        let mut out = vec![0u8; len as usize];
        // SAFETY: the assert keeps `[off, off+len)` inside the allocation, and `out` is a
        // fresh Vec of `len` bytes, so the regions are valid and disjoint.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.add(off as usize),
                out.as_mut_ptr(),
                len as usize,
            )
        };
        out
    }

    /// Overwrites `[off, off+data.len())`.
    pub fn write(&self, off: u64, data: &[u8]) {
        assert!(
            off as usize + data.len() <= self.len,
            "write outside the region"
        );
        // SAFETY: the assert keeps `[off, off+data.len())` inside the allocation; `data`
        // is a borrowed slice, not part of the region.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off as usize), data.len())
        };
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from `Box::into_raw` of a `Box<[u8]>` of `len` bytes in
        // `Region::new`, and drop runs once.
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.ptr, self.len,
            )))
        };
    }
}

/// pattern(n, seed)[i] = (i * 7 + (i >> 8) + seed) & 0xff; same as peer_engine.py.
pub fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| {
            (i.wrapping_mul(7)
                .wrapping_add(i >> 8)
                .wrapping_add(seed as usize)) as u8
        })
        .collect()
}

pub fn hex(data: &[u8]) -> String {
    let mut s = String::with_capacity(data.len() * 2);
    for b in data {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

pub fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// Asserts two byte strings are equal, reporting the first difference instead of
/// dumping megabytes.
#[track_caller]
pub fn assert_bytes_eq(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length differs");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        let end = (i + 16).min(got.len());
        panic!(
            "{what}: first difference at byte {i} of {}: got {:02x?}, want {:02x?}",
            got.len(),
            &got[i..end],
            &want[i..end]
        );
    }
}

/// Submits `reqs` as one batch on `e`, polls every task to a terminal state (or the
/// deadline), frees the batch when it can, and returns the statuses.
pub fn run_batch(e: &TransferEngine, reqs: &[TransferRequest]) -> Vec<TaskStatus> {
    run_batch_inner(e, reqs, None)
}

/// [`run_batch`] through `submit_with_notify(name, msg)`: the notify goes to the first
/// request's target once the whole batch completed.
pub fn run_batch_notify(
    e: &TransferEngine,
    reqs: &[TransferRequest],
    name: &str,
    msg: &str,
) -> Vec<TaskStatus> {
    run_batch_inner(e, reqs, Some((name, msg)))
}

fn run_batch_inner(
    e: &TransferEngine,
    reqs: &[TransferRequest],
    notify: Option<(&str, &str)>,
) -> Vec<TaskStatus> {
    let batch = e.allocate_batch(reqs.len());
    match notify {
        None => e.submit(batch, reqs).expect("submit"),
        Some((name, msg)) => e
            .submit_with_notify(batch, reqs, name, msg)
            .expect("submit_with_notify"),
    }
    let deadline = Instant::now() + TASK_DEADLINE;
    let statuses: Vec<TaskStatus> = (0..reqs.len())
        .map(|t| loop {
            let (s, _) = e.transfer_status(batch, t).expect("transfer_status");
            if s.is_terminal() || Instant::now() >= deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(1));
        })
        .collect();
    if statuses.iter().all(|s| s.is_terminal()) {
        e.free_batch(batch).expect("free_batch");
    }
    statuses
}

/// Polls `f` until it returns `Some`, or panics after `timeout` with `what`.
pub fn poll_until<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(POLL);
    }
}

pub mod scenarios;
/// The Transfer Engine test helpers (a crate that mounts this module reaches them here).
#[path = "../te_support/mod.rs"]
pub mod te_support;

pub use te_support::req;
