//! `transfer_engine_bench`: a drop-in for upstream's `transfer_engine_bench`
//! (spec §9), driving the safe [`TransferEngine`] API.
//!
//! Modes:
//! * `--mode=target`: registers one buffer and serves it until SIGINT/SIGTERM.
//! * `--mode=initiator` (default): opens `--segment_id`, then `--threads` threads
//!   each submit batches of `--batch_size` requests of `--block_size` bytes for
//!   `--duration` seconds and report the throughput.
//! * `--mode=loopback` (this crate only): a target engine and an initiator engine
//!   in one process, talking over real TCP sockets in P2PHANDSHAKE mode.
//!
//! Flags are gflags-style: `--flag=value`, `--flag value`, `-flag=value`; booleans
//! also as `--flag`, `--noflag` and `--flag=true|false`. Unknown flags are warned
//! about and ignored. The last line on stderr of an initiator run is
//! `Test completed: duration D, batch count N, throughput X <unit>/s`.
//!
//! `--protocol=tcp` or `rdma` (upstream's default): for RDMA the NICs come from
//! `--nic_priority_matrix` (a topology file) or else `--device_name`, as upstream.

use std::alloc::Layout;
use std::collections::HashSet;
use std::process::ExitCode;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mooncake::config::Config;
use mooncake::host::logger;
use mooncake::runtime::signals;
use mooncake::te::{Op, TaskStatus, TransferEngine, TransferRequest};

/// Rate units accepted by `--report_unit` and their size in bytes (upstream's table).
const UNITS: &[(&str, f64)] = &[
    ("GB", 1e9),
    ("GiB", (1u64 << 30) as f64),
    ("Gb", 1e9 / 8.0),
    ("MB", 1e6),
    ("MiB", (1u64 << 20) as f64),
    ("Mb", 1e6 / 8.0),
    ("KB", 1e3),
    ("KiB", 1024.0),
    ("Kb", 1e3 / 8.0),
];

/// Largest `--report_precision` accepted.
const MAX_PRECISION: u32 = 20;

const USAGE: &str = "\
Usage: transfer_engine_bench [--flag=value ...]

Transfer Engine benchmark (drop-in for upstream's transfer_engine_bench).

Flags (gflags-style: --flag=value, --flag value, -flag=value; booleans --flag/--noflag):
  --mode                initiator | target | loopback (default initiator)
  --backend             classic (default classic)
  --metadata_server     P2PHANDSHAKE or http://host:port/metadata (default 192.168.3.77:2379)
  --local_server_name   segment name; in P2P mode only its host part is used (default hostname)
  --segment_id          the target's segment name, e.g. 127.0.0.1:15123 (default 192.168.3.76)
  --protocol            tcp | rdma (default rdma)
  --device_name         RDMA NICs, comma-separated (default mlx5_2)
  --nic_priority_matrix RDMA topology file (overrides --device_name)
  --auto_discovery      let the engine install its transports (default false)
  --operation           read | write (default read)
  --buffer_size         bytes per buffer, raised to block_size*batch_size*threads (default 1073741824)
  --batch_size          requests per batch (default 128)
  --block_size          bytes per request (default 65536)
  --threads             initiator submit threads (default 12)
  --duration            seconds (default 10)
  --report_unit         GB GiB Gb MB MiB Mb KB KiB Kb (default GB)
  --report_precision    decimals of the throughput (default 2)
  --help                print this help

--mode=loopback runs a target and an initiator engine in this process over 127.0.0.1;
there it defaults to --metadata_server=P2PHANDSHAKE --protocol=tcp
--local_server_name=127.0.0.1 --threads=2 --duration=5.
Log level: MC_LOG_LEVEL=trace|debug|info|warn|error|off (default info).";

/// What a flag's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    Bool,
    Int,
}

/// Every flag the bench knows, with its kind.
const FLAG_SPECS: &[(&str, Kind)] = &[
    ("mode", Kind::Str),
    ("backend", Kind::Str),
    ("metadata_server", Kind::Str),
    ("local_server_name", Kind::Str),
    ("segment_id", Kind::Str),
    ("protocol", Kind::Str),
    ("device_name", Kind::Str),
    ("nic_priority_matrix", Kind::Str),
    ("auto_discovery", Kind::Bool),
    ("operation", Kind::Str),
    ("buffer_size", Kind::Int),
    ("batch_size", Kind::Int),
    ("block_size", Kind::Int),
    ("threads", Kind::Int),
    ("duration", Kind::Int),
    ("report_unit", Kind::Str),
    ("report_precision", Kind::Int),
];

fn flag_kind(name: &str) -> Option<(&'static str, Kind)> {
    FLAG_SPECS.iter().copied().find(|(n, _)| *n == name)
}

/// What the bench runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Initiator,
    Target,
    Loopback,
}

/// The validated settings of one run.
#[derive(Debug, Clone, PartialEq)]
struct Settings {
    mode: Mode,
    metadata_server: String,
    local_server_name: String,
    segment_id: String,
    protocol: String,
    /// `--protocol` was given: no fallback from RDMA to TCP, and `--protocol=tcp`
    /// means sockets even between processes on one host.
    protocol_explicit: bool,
    device_name: String,
    nic_priority_matrix: String,
    auto_discovery: bool,
    op: Op,
    buffer_size: u64,
    batch_size: usize,
    block_size: u64,
    threads: usize,
    duration: u64,
    report_unit: &'static str,
    report_precision: usize,
}

/// Raw flag values as given (upstream defaults filled in).
#[derive(Debug, Clone, PartialEq)]
struct RawFlags {
    mode: String,
    backend: String,
    metadata_server: String,
    local_server_name: String,
    segment_id: String,
    protocol: String,
    device_name: String,
    nic_priority_matrix: String,
    auto_discovery: bool,
    operation: String,
    buffer_size: u64,
    batch_size: i64,
    block_size: u64,
    threads: i64,
    duration: i64,
    report_unit: String,
    report_precision: i64,
    /// Flags given explicitly on the command line.
    explicit: HashSet<&'static str>,
}

impl Default for RawFlags {
    fn default() -> Self {
        RawFlags {
            mode: "initiator".into(),
            backend: "classic".into(),
            metadata_server: "192.168.3.77:2379".into(),
            local_server_name: hostname(),
            segment_id: "192.168.3.76".into(),
            protocol: "rdma".into(),
            device_name: "mlx5_2".into(),
            nic_priority_matrix: String::new(),
            auto_discovery: false,
            operation: "read".into(),
            buffer_size: 1 << 30,
            batch_size: 128,
            block_size: 65536,
            threads: 12,
            duration: 10,
            report_unit: "GB".into(),
            report_precision: 2,
            explicit: HashSet::new(),
        }
    }
}

/// The outcome of parsing the command line.
#[derive(Debug)]
enum Parsed {
    /// Run with these flags; the strings are warnings to print first.
    Run(Box<RawFlags>, Vec<String>),
    /// `--help` was given.
    Help,
}

/// A gflags boolean literal.
fn parse_bool(name: &str, v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "t" | "yes" | "y" | "1" => Ok(true),
        "false" | "f" | "no" | "n" | "0" => Ok(false),
        _ => Err(format!(
            "illegal value '{v}' for boolean flag --{name} (use true or false)"
        )),
    }
}

/// A gflags integer literal: decimal, or hexadecimal with `0x`; optional sign.
fn parse_int(name: &str, v: &str) -> Result<i128, String> {
    let err = || format!("illegal value '{v}' for integer flag --{name}");
    let t = v.trim();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let magnitude = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => digits.parse::<u64>(),
    }
    .map_err(|_| err())?;
    Ok(if neg {
        -i128::from(magnitude)
    } else {
        i128::from(magnitude)
    })
}

fn int_in<T: TryFrom<i128>>(name: &str, v: &str, lo: i128, hi: i128) -> Result<T, String> {
    let n = parse_int(name, v)?;
    if n < lo || n > hi {
        return Err(format!(
            "value {n} for --{name} is out of range [{lo}, {hi}]"
        ));
    }
    T::try_from(n).map_err(|_| format!("value {n} for --{name} is out of range"))
}

impl RawFlags {
    fn set(&mut self, name: &'static str, v: &str) -> Result<(), String> {
        const I32: (i128, i128) = (i32::MIN as i128, i32::MAX as i128);
        match name {
            "mode" => self.mode = v.into(),
            "backend" => self.backend = v.into(),
            "metadata_server" => self.metadata_server = v.into(),
            "local_server_name" => self.local_server_name = v.into(),
            "segment_id" => self.segment_id = v.into(),
            "protocol" => self.protocol = v.into(),
            "device_name" => self.device_name = v.into(),
            "nic_priority_matrix" => self.nic_priority_matrix = v.into(),
            "auto_discovery" => self.auto_discovery = parse_bool(name, v)?,
            "operation" => self.operation = v.into(),
            "buffer_size" => self.buffer_size = int_in(name, v, 0, u64::MAX as i128)?,
            "block_size" => self.block_size = int_in(name, v, 0, u64::MAX as i128)?,
            "batch_size" => self.batch_size = int_in(name, v, I32.0, I32.1)?,
            "threads" => self.threads = int_in(name, v, I32.0, I32.1)?,
            "duration" => self.duration = int_in(name, v, I32.0, I32.1)?,
            "report_unit" => self.report_unit = v.into(),
            "report_precision" => self.report_precision = int_in(name, v, 0, u32::MAX as i128)?,
            _ => return Err(format!("internal: unhandled flag --{name}")),
        }
        self.explicit.insert(name);
        Ok(())
    }
}

/// Parses the arguments after the program name, gflags-style.
fn parse_flags(args: impl IntoIterator<Item = String>) -> Result<Parsed, String> {
    let mut flags = RawFlags::default();
    let mut warnings = Vec::new();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        if arg == "--" {
            for rest in it.by_ref() {
                warnings.push(format!("ignoring positional argument '{rest}'"));
            }
            break;
        }
        let body = match arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) {
            Some(b) if !b.is_empty() => b,
            _ => {
                warnings.push(format!("ignoring positional argument '{arg}'"));
                continue;
            }
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (body, None),
        };
        if matches!(name, "help" | "h" | "helpshort" | "helpfull" | "?") {
            return Ok(Parsed::Help);
        }
        if let Some((name, kind)) = flag_kind(name) {
            let value = match (kind, inline) {
                (_, Some(v)) => v.to_string(),
                (Kind::Bool, None) => "true".to_string(),
                (_, None) => it
                    .next()
                    .ok_or_else(|| format!("flag '{arg}' is missing its value"))?,
            };
            flags.set(name, &value)?;
            continue;
        }
        let negated = name.strip_prefix("no").and_then(flag_kind);
        match (negated, inline) {
            (Some((name, Kind::Bool)), None) => flags.set(name, "false")?,
            (Some((name, Kind::Bool)), Some(_)) => {
                return Err(format!("'{arg}': --no{name} takes no value"))
            }
            _ => warnings.push(format!("unknown command line flag '{arg}' (ignored)")),
        }
    }
    Ok(Parsed::Run(Box::new(flags), warnings))
}

/// A run that cannot start: the message and the process exit code.
#[derive(Debug, PartialEq, Eq)]
struct Fatal(String, u8);

impl RawFlags {
    /// Checks the flags and applies loopback defaults and upstream's buffer raise.
    /// Warnings go to `warnings`; a bad value is a [`Fatal`] with exit code 2.
    fn validate(mut self, warnings: &mut Vec<String>) -> Result<Settings, Fatal> {
        let usage = |m: String| Fatal(m, 2);
        let mode = match self.mode.as_str() {
            "initiator" => Mode::Initiator,
            "target" => Mode::Target,
            "loopback" => Mode::Loopback,
            m => {
                return Err(usage(format!(
                    "unsupported --mode '{m}': must be 'initiator', 'target' or 'loopback'"
                )))
            }
        };
        match self.backend.as_str() {
            "classic" => {}
            "tent" => {
                return Err(Fatal(
                    "TENT backend is not available in this build; use --backend=classic".into(),
                    1,
                ))
            }
            b => {
                return Err(usage(format!(
                    "unsupported --backend '{b}': must be 'classic' (or 'tent', not built)"
                )))
            }
        }
        if mode == Mode::Loopback {
            let defaults: [(&'static str, &str); 5] = [
                ("metadata_server", "P2PHANDSHAKE"),
                ("protocol", "tcp"),
                ("local_server_name", "127.0.0.1"),
                ("threads", "2"),
                ("duration", "5"),
            ];
            for (name, value) in defaults {
                if !self.explicit.contains(name) {
                    self.set(name, value).map_err(usage)?;
                }
            }
        }
        let op = match self.operation.as_str() {
            "read" => Op::Read,
            "write" => Op::Write,
            o => {
                return Err(usage(format!(
                    "unsupported --operation '{o}': must be 'read' or 'write'"
                )))
            }
        };
        let positive = |name: &str, v: i64| -> Result<usize, Fatal> {
            usize::try_from(v)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| usage(format!("--{name} must be at least 1, got {v}")))
        };
        let batch_size = positive("batch_size", self.batch_size)?;
        let threads = positive("threads", self.threads)?;
        if self.block_size == 0 {
            return Err(usage("--block_size must be at least 1".into()));
        }
        let duration = u64::try_from(self.duration).map_err(|_| {
            usage(format!(
                "--duration must not be negative, got {}",
                self.duration
            ))
        })?;
        let report_precision = u32::try_from(self.report_precision)
            .ok()
            .filter(|&p| p <= MAX_PRECISION)
            .ok_or_else(|| {
                usage(format!(
                    "--report_precision must be 0..={MAX_PRECISION}, got {}",
                    self.report_precision
                ))
            })? as usize;
        let report_unit = match UNITS.iter().find(|(u, _)| *u == self.report_unit) {
            Some((u, _)) => *u,
            None => {
                warnings.push(format!(
                    "invalid flag: report_unit only supports GB|GiB|Gb|MB|MiB|Mb|KB|KiB|Kb, \
                     not {}; using GB",
                    self.report_unit
                ));
                "GB"
            }
        };
        let required = self
            .block_size
            .checked_mul(batch_size as u64)
            .and_then(|n| n.checked_mul(threads as u64))
            .ok_or_else(|| usage("block_size * batch_size * threads overflows".into()))?;
        let mut buffer_size = self.buffer_size;
        if buffer_size < required {
            warnings.push(format!(
                "invalid flag: buffer size is smaller than required size, adjusting to {required}"
            ));
            buffer_size = required;
        }
        Ok(Settings {
            mode,
            metadata_server: self.metadata_server,
            local_server_name: self.local_server_name,
            segment_id: self.segment_id,
            protocol_explicit: self.explicit.contains("protocol"),
            protocol: self.protocol,
            device_name: self.device_name,
            nic_priority_matrix: self.nic_priority_matrix,
            auto_discovery: self.auto_discovery,
            op,
            buffer_size,
            batch_size,
            block_size: self.block_size,
            threads,
            duration,
            report_unit,
            report_precision,
        })
    }
}

/// `Test completed: ...`'s throughput part, e.g. `0.68 GB/s` (upstream's math).
fn format_rate(bytes: u128, seconds: f64, unit: &str, precision: usize) -> String {
    if seconds.abs() < 1e-10 {
        log::error!("invalid args: duration shouldn't be 0");
        return String::new();
    }
    let size = UNITS
        .iter()
        .find(|(u, _)| *u == unit)
        .map_or(1e9, |(_, s)| *s);
    format!("{:.*} {unit}/s", precision, bytes as f64 / seconds / size)
}

/// The final report line.
fn completion_line(seconds: f64, batches: u64, s: &Settings) -> String {
    let bytes = u128::from(batches) * s.batch_size as u128 * u128::from(s.block_size);
    format!(
        "Test completed: duration {seconds:.2}, batch count {batches}, throughput {}",
        format_rate(bytes, seconds, s.report_unit, s.report_precision)
    )
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// A zeroed, page-aligned heap buffer; freed on drop.
struct Buffer {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Buffer {
    fn new(len: u64) -> Result<Buffer, String> {
        let size = usize::try_from(len).map_err(|_| format!("buffer size {len} is too large"))?;
        let layout = Layout::from_size_align(size.max(1), 4096)
            .map_err(|e| format!("buffer size {len}: {e}"))?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| format!("cannot allocate {len} bytes"))?;
        Ok(Buffer { ptr, layout })
    }

    fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout and freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Prints `msg` and exits 1 (upstream's `exit(EXIT_FAILURE)` in workers).
fn die(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1)
}

/// An engine with its transport installed and one registered buffer.
/// Field order matters: the engine drops (and stops serving) before the buffer is freed.
struct Node {
    engine: TransferEngine,
    buffer: Buffer,
}

impl Node {
    fn start(s: &Settings, name: &str) -> Result<Node, String> {
        let config = Config {
            disable_same_host: Config::global().disable_same_host
                || (s.protocol_explicit && s.protocol == "tcp"),
            ..Config::global().clone()
        };
        let engine =
            TransferEngine::with_config(config, &s.metadata_server, name, s.auto_discovery)
                .map_err(|e| format!("cannot start transfer engine '{name}': {e}"))?;
        if !s.auto_discovery {
            let topology = s.topology()?;
            let installed = engine.install(&s.protocol, topology.as_deref());
            match installed {
                // Upstream's default protocol on a host without RDMA: TCP (and the
                // same-host path) instead of giving up.
                Err(e) if s.protocol == "rdma" && !s.protocol_explicit => {
                    log::warn!("no RDMA here ({e}); using tcp (pass --protocol to insist)");
                    engine
                        .install("tcp", None)
                        .map_err(|e| format!("installing transport 'tcp': {e}"))?;
                }
                other => {
                    other.map_err(|e| format!("installing transport '{}': {e}", s.protocol))?
                }
            }
        }
        let buffer = Buffer::new(s.buffer_size)?;
        engine
            .register_memory(buffer.addr(), s.buffer_size, "cpu:0", true)
            .map_err(|e| format!("registering {} bytes: {e}", s.buffer_size))?;
        Ok(Node { engine, buffer })
    }

    fn announce(&self, s: &Settings) {
        let name = self.engine.segment_name();
        if s.metadata_server.trim() == "P2PHANDSHAKE" {
            eprintln!("Transfer Engine RPC using P2P handshake, listening on {name}");
        } else {
            eprintln!("Transfer Engine segment name: {name}");
        }
    }

    fn stop(self) {
        if let Err(e) = self.engine.unregister_memory(self.buffer.addr()) {
            log::warn!("unregistering the buffer: {e}");
        }
    }
}

/// One initiator thread: batches until `running` clears; returns the batch count.
fn worker(
    engine: &TransferEngine,
    s: &Settings,
    segment: i32,
    thread: usize,
    local_base: u64,
    remote_base: u64,
    running: &AtomicBool,
) -> u64 {
    let mut batches = 0u64;
    let mut requests = Vec::with_capacity(s.batch_size);
    while running.load(Ordering::Relaxed) {
        let batch = engine.allocate_batch(s.batch_size);
        requests.clear();
        for i in 0..s.batch_size {
            let offset = s.block_size * (i * s.threads + thread) as u64;
            requests.push(TransferRequest {
                op: s.op,
                source: local_base + offset,
                target_id: segment,
                target_offset: remote_base + offset,
                length: s.block_size,
            });
        }
        if let Err(e) = engine.submit(batch, &requests) {
            die(&format!("thread {thread}: submitting a batch failed: {e}"));
        }
        // Sleep until the batch is done instead of spinning: on a small machine a
        // spinning poller steals the cores the transfer threads need.
        while !engine
            .wait_batch(batch, Duration::from_secs(1))
            .unwrap_or_else(|e| die(&format!("thread {thread}: waiting for a batch failed: {e}")))
        {
        }
        for task in 0..s.batch_size {
            loop {
                match engine.transfer_status(batch, task) {
                    Ok((TaskStatus::Completed, _)) => break,
                    Ok((TaskStatus::Failed, _)) => die(&format!(
                        "thread {thread}: transfer FAILED (batch task {task})"
                    )),
                    Ok(_) => std::thread::yield_now(),
                    Err(e) => die(&format!("thread {thread}: reading task status failed: {e}")),
                }
            }
        }
        if let Err(e) = engine.free_batch(batch) {
            die(&format!("thread {thread}: freeing a batch failed: {e}"));
        }
        batches += 1;
    }
    log::debug!("worker {thread} stopped after {batches} batches");
    batches
}

/// Opens `segment_name` and runs the timed loop; returns the report line.
fn drive(node: &Node, s: &Settings, segment_name: &str) -> Result<String, String> {
    let engine = &node.engine;
    let segment = engine
        .open_segment(segment_name)
        .map_err(|e| format!("cannot open segment '{segment_name}': {e}"))?;
    let desc = engine
        .segment_descriptor(segment)
        .ok_or_else(|| format!("unable to get the descriptor of segment '{segment_name}'"))?;
    if desc.buffers.is_empty() {
        return Err(format!(
            "segment '{segment_name}' has no registered buffers"
        ));
    }
    let span = s.block_size * (s.batch_size * s.threads) as u64;
    for (t, b) in desc.buffers.iter().enumerate().take(s.threads) {
        if b.length < span {
            log::warn!(
                "remote buffer {t} of '{segment_name}' holds {} bytes, the test touches {span}",
                b.length
            );
        }
    }
    let bases: Vec<u64> = (0..s.threads)
        .map(|t| desc.buffers[t % desc.buffers.len()].addr)
        .collect();
    let running = AtomicBool::new(true);
    let local = node.buffer.addr();
    let start = Instant::now();
    let batches: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = bases
            .iter()
            .enumerate()
            .map(|(t, &remote)| {
                let running = &running;
                scope.spawn(move || worker(engine, s, segment, t, local, remote, running))
            })
            .collect();
        std::thread::sleep(Duration::from_secs(s.duration));
        running.store(false, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| die("a worker thread panicked")))
            .sum()
    });
    Ok(completion_line(start.elapsed().as_secs_f64(), batches, s))
}

impl Settings {
    /// The RDMA topology to install: the `--nic_priority_matrix` file, else the
    /// matrix upstream's bench builds from `--device_name` (every location prefers
    /// the named NICs). `None` for other protocols.
    fn topology(&self) -> Result<Option<String>, String> {
        if self.protocol != "rdma" {
            return Ok(None);
        }
        if !self.nic_priority_matrix.is_empty() {
            return std::fs::read_to_string(&self.nic_priority_matrix)
                .map(Some)
                .map_err(|e| format!("reading {}: {e}", self.nic_priority_matrix));
        }
        let names: Vec<&str> = self
            .device_name
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        let entry = serde_json::json!([names, []]);
        let matrix: serde_json::Map<String, serde_json::Value> =
            ["cpu:0", "cpu:1", "cuda:0", "musa:0", "maca:0"]
                .iter()
                .map(|k| (k.to_string(), entry.clone()))
                .collect();
        Ok(Some(serde_json::Value::Object(matrix).to_string()))
    }
}

fn check_protocol(s: &Settings) -> Result<(), Fatal> {
    if s.auto_discovery || s.protocol == "tcp" || s.protocol == "rdma" {
        return Ok(());
    }
    Err(Fatal(
        format!(
            "protocol '{}' is not available in this build of the Transfer Engine \
             (tcp, rdma)",
            s.protocol
        ),
        1,
    ))
}

fn run_target(s: &Settings) -> Result<(), String> {
    let node = Node::start(s, &s.local_server_name)?;
    node.announce(s);
    while !signals::stop_requested() {
        std::thread::sleep(Duration::from_millis(100));
    }
    log::info!("target stopping");
    node.stop();
    Ok(())
}

fn run_initiator(s: &Settings) -> Result<(), String> {
    let node = Node::start(s, &s.local_server_name)?;
    let line = drive(&node, s, &s.segment_id)?;
    eprintln!("{line}");
    node.stop();
    Ok(())
}

fn run_loopback(s: &Settings) -> Result<(), String> {
    let p2p = s.metadata_server.trim() == "P2PHANDSHAKE";
    let target = Node::start(s, &s.local_server_name)?;
    target.announce(s);
    // Outside P2P mode both engines need distinct names in the metadata store.
    let initiator_name = if p2p {
        s.local_server_name.clone()
    } else {
        format!("{}-initiator", s.local_server_name)
    };
    let initiator = Node::start(s, &initiator_name)?;
    let line = drive(&initiator, s, target.engine.segment_name())?;
    initiator.stop();
    target.stop();
    eprintln!("{line}");
    Ok(())
}

fn main() -> ExitCode {
    logger::install();
    let (raw, mut warnings) = match parse_flags(std::env::args().skip(1)) {
        Ok(Parsed::Run(raw, warnings)) => (raw, warnings),
        Ok(Parsed::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\nRun with --help for the list of flags.");
            return ExitCode::from(2);
        }
    };
    let settings = raw
        .validate(&mut warnings)
        .and_then(|s| check_protocol(&s).map(|()| s));
    for w in &warnings {
        log::warn!("{w}");
    }
    let settings = match settings {
        Ok(s) => s,
        Err(Fatal(msg, code)) => {
            eprintln!("error: {msg}");
            return ExitCode::from(code);
        }
    };
    signals::install_stop_handlers();
    let result = match settings.mode {
        Mode::Target => run_target(&settings),
        Mode::Initiator => run_initiator(&settings),
        Mode::Loopback => run_loopback(&settings),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Parsed, String> {
        parse_flags(v.iter().map(|s| s.to_string()))
    }

    fn raw(v: &[&str]) -> (RawFlags, Vec<String>) {
        match parse(v).expect("parses") {
            Parsed::Run(r, w) => (*r, w),
            Parsed::Help => panic!("unexpected help"),
        }
    }

    fn settings(v: &[&str]) -> Result<Settings, Fatal> {
        let (r, mut w) = raw(v);
        r.validate(&mut w)
    }

    #[test]
    fn upstream_defaults() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.mode, Mode::Initiator);
        assert_eq!(s.metadata_server, "192.168.3.77:2379");
        assert_eq!(s.segment_id, "192.168.3.76");
        assert_eq!(s.protocol, "rdma");
        assert_eq!(s.op, Op::Read);
        assert_eq!(s.buffer_size, 1 << 30);
        assert_eq!(
            (s.batch_size, s.block_size, s.threads, s.duration),
            (128, 65536, 12, 10)
        );
        assert_eq!((s.report_unit, s.report_precision), ("GB", 2));
        assert!(!s.auto_discovery);
        assert_eq!(s.local_server_name, hostname());
        assert!(check_protocol(&s).is_ok());
        let matrix: serde_json::Value =
            serde_json::from_str(&s.topology().unwrap().unwrap()).unwrap();
        assert_eq!(matrix["cpu:0"], serde_json::json!([["mlx5_2"], []]));
        assert_eq!(matrix["cuda:0"], matrix["cpu:1"]);
    }

    #[test]
    fn value_syntaxes() {
        let s = settings(&[
            "--mode=target",
            "--operation",
            "write",
            "-block_size=1048576",
            "-batch_size",
            "8",
            "--threads=0x4",
            "--protocol=tcp",
            "--metadata_server=P2PHANDSHAKE",
        ])
        .unwrap();
        assert_eq!(s.mode, Mode::Target);
        assert_eq!(s.op, Op::Write);
        assert_eq!((s.block_size, s.batch_size, s.threads), (1 << 20, 8, 4));
        assert_eq!(s.metadata_server, "P2PHANDSHAKE");
        assert!(check_protocol(&s).is_ok());
    }

    #[test]
    fn booleans() {
        assert!(raw(&["--auto_discovery"]).0.auto_discovery);
        assert!(
            !raw(&["--auto_discovery", "--noauto_discovery"])
                .0
                .auto_discovery
        );
        assert!(raw(&["--auto_discovery=true"]).0.auto_discovery);
        assert!(!raw(&["--auto_discovery=false"]).0.auto_discovery);
        assert!(raw(&["-auto_discovery=1"]).0.auto_discovery);
        // A bare boolean does not swallow the next argument.
        let (r, _) = raw(&["--auto_discovery", "--threads=3"]);
        assert!(r.auto_discovery && r.threads == 3);
        assert!(parse(&["--auto_discovery=maybe"]).is_err());
        assert!(parse(&["--noauto_discovery=true"]).is_err());
        // auto_discovery skips the protocol check, as upstream skips installTransport.
        let s = settings(&["--auto_discovery"]).unwrap();
        assert!(check_protocol(&s).is_ok());
    }

    #[test]
    fn unknown_flags_warn_and_continue() {
        let (r, w) = raw(&["--use_vram=false", "--threads=3", "--nobogus", "stray"]);
        assert_eq!(r.threads, 3);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].contains("--use_vram=false"));
    }

    #[test]
    fn help() {
        for h in ["--help", "-help", "-h", "--helpshort"] {
            assert!(
                matches!(parse(&["--threads=2", h]), Ok(Parsed::Help)),
                "{h}"
            );
        }
    }

    #[test]
    fn bad_values_are_errors_not_panics() {
        assert!(parse(&["--threads=abc"]).is_err());
        assert!(parse(&["--threads"]).is_err());
        assert!(parse(&["--buffer_size=-1"]).is_err());
        assert!(parse(&["--duration=99999999999"]).is_err());
        assert!(parse(&["--block_size=0x"]).is_err());
        for bad in [
            &["--threads=0"][..],
            &["--batch_size=-3"],
            &["--block_size=0"],
            &["--duration=-1"],
            &["--mode=server"],
            &["--operation=copy"],
            &["--backend=other"],
            &["--report_precision=99"],
            &["--block_size=0xffffffffffffffff", "--batch_size=2"],
        ] {
            let e = settings(bad).expect_err(&format!("{bad:?}"));
            assert_eq!(e.1, 2, "{bad:?}: {}", e.0);
        }
        assert_eq!(settings(&["--backend=tent"]).unwrap_err().1, 1);
    }

    #[test]
    fn buffer_size_is_raised() {
        let (r, mut w) = raw(&[
            "--buffer_size=1",
            "--block_size=4096",
            "--batch_size=4",
            "--threads=3",
        ]);
        let s = r.validate(&mut w).unwrap();
        assert_eq!(s.buffer_size, 4096 * 4 * 3);
        assert_eq!(w.len(), 1);
        assert_eq!(
            settings(&["--buffer_size=0x10000000"]).unwrap().buffer_size,
            1 << 28
        );
    }

    #[test]
    fn loopback_defaults_only_fill_absent_flags() {
        let s = settings(&["--mode=loopback"]).unwrap();
        assert_eq!(s.metadata_server, "P2PHANDSHAKE");
        assert_eq!(s.protocol, "tcp");
        assert_eq!(s.local_server_name, "127.0.0.1");
        assert_eq!((s.threads, s.duration), (2, 5));
        let s = settings(&["--mode=loopback", "--threads=4", "--duration", "1"]).unwrap();
        assert_eq!((s.threads, s.duration), (4, 1));
        // Non-loopback modes keep upstream's defaults.
        assert_eq!(settings(&["--mode=target"]).unwrap().protocol, "rdma");
    }

    #[test]
    fn report_units_and_format() {
        assert_eq!(format_rate(2_000_000_000, 2.0, "GB", 2), "1.00 GB/s");
        assert_eq!(format_rate(1 << 30, 1.0, "GiB", 3), "1.000 GiB/s");
        assert_eq!(format_rate(1_000_000_000, 1.0, "Gb", 1), "8.0 Gb/s");
        assert_eq!(format_rate(1_000, 1.0, "Kb", 0), "8 Kb/s");
        assert_eq!(format_rate(3 << 20, 1.0, "MiB", 2), "3.00 MiB/s");
        assert_eq!(format_rate(5, 0.0, "GB", 2), "");
        let (r, mut w) = raw(&["--report_unit=TB"]);
        assert_eq!(r.validate(&mut w).unwrap().report_unit, "GB");
        assert_eq!(w.len(), 1);
        let s = settings(&["--batch_size=32", "--block_size=65536"]).unwrap();
        assert_eq!(
            completion_line(5.012, 1631, &s),
            "Test completed: duration 5.01, batch count 1631, throughput 0.68 GB/s"
        );
    }
}
