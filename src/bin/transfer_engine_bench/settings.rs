//! The bench's flags: upstream's names and defaults, parsed gflags-style, checked into
//! [`Settings`], and the RDMA topology they name.

use std::collections::HashSet;

use mooncake::config::flags;
use mooncake::te::Op;

/// Rate units accepted by `--report_unit` and their size in bytes (upstream's table).
pub(crate) const UNITS: &[(&str, f64)] = &[
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
pub(crate) const MAX_PRECISION: u32 = 20;

pub(crate) const USAGE: &str = "\
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
pub(crate) enum Kind {
    Str,
    Bool,
    Int,
}

/// Every flag the bench knows, with its kind.
pub(crate) const FLAG_SPECS: &[(&str, Kind)] = &[
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

pub(crate) fn flag_kind(name: &str) -> Option<(&'static str, Kind)> {
    FLAG_SPECS.iter().copied().find(|(n, _)| *n == name)
}

/// What the bench runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Initiator,
    Target,
    Loopback,
}

/// The validated settings of one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    pub(crate) mode: Mode,
    pub(crate) metadata_server: String,
    pub(crate) local_server_name: String,
    pub(crate) segment_id: String,
    pub(crate) protocol: String,
    /// `--protocol` was given: no fallback from RDMA to TCP, and `--protocol=tcp`
    /// means sockets even between processes on one host.
    pub(crate) protocol_explicit: bool,
    pub(crate) device_name: String,
    pub(crate) nic_priority_matrix: String,
    pub(crate) auto_discovery: bool,
    pub(crate) op: Op,
    pub(crate) buffer_size: u64,
    pub(crate) batch_size: usize,
    pub(crate) block_size: u64,
    pub(crate) threads: usize,
    pub(crate) duration: u64,
    pub(crate) report_unit: &'static str,
    pub(crate) report_precision: usize,
}

/// Raw flag values as given (upstream defaults filled in).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawFlags {
    pub(crate) mode: String,
    pub(crate) backend: String,
    pub(crate) metadata_server: String,
    pub(crate) local_server_name: String,
    pub(crate) segment_id: String,
    pub(crate) protocol: String,
    pub(crate) device_name: String,
    pub(crate) nic_priority_matrix: String,
    pub(crate) auto_discovery: bool,
    pub(crate) operation: String,
    pub(crate) buffer_size: u64,
    pub(crate) batch_size: i64,
    pub(crate) block_size: u64,
    pub(crate) threads: i64,
    pub(crate) duration: i64,
    pub(crate) report_unit: String,
    pub(crate) report_precision: i64,
    /// Flags given explicitly on the command line.
    pub(crate) explicit: HashSet<&'static str>,
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

/// The outcome of parsing the command line: a run with these flags and the warnings to
/// print first, or `--help`.
pub(crate) type Parsed = flags::Parsed<(Box<RawFlags>, Vec<String>)>;

/// A gflags boolean literal.
pub(crate) fn parse_bool(name: &str, v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "t" | "yes" | "y" | "1" => Ok(true),
        "false" | "f" | "no" | "n" | "0" => Ok(false),
        _ => Err(format!(
            "illegal value '{v}' for boolean flag --{name} (use true or false)"
        )),
    }
}

/// A gflags integer literal: decimal, or hexadecimal with `0x`; optional sign.
pub(crate) fn parse_int(name: &str, v: &str) -> Result<i128, String> {
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

pub(crate) fn int_in<T: TryFrom<i128>>(
    name: &str,
    v: &str,
    lo: i128,
    hi: i128,
) -> Result<T, String> {
    let n = parse_int(name, v)?;
    if n < lo || n > hi {
        return Err(format!(
            "value {n} for --{name} is out of range [{lo}, {hi}]"
        ));
    }
    T::try_from(n).map_err(|_| format!("value {n} for --{name} is out of range"))
}

impl RawFlags {
    pub(crate) fn set(&mut self, name: &'static str, v: &str) -> Result<(), String> {
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
pub(crate) fn parse_flags(args: impl IntoIterator<Item = String>) -> Result<Parsed, String> {
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
    Ok(Parsed::Run((Box::new(flags), warnings)))
}

/// A run that cannot start: the message and the process exit code.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Fatal(pub(crate) String, pub(crate) u8);

impl RawFlags {
    /// Checks the flags and applies loopback defaults and upstream's buffer raise.
    /// Warnings go to `warnings`; a bad value is a [`Fatal`] with exit code 2.
    pub(crate) fn validate(mut self, warnings: &mut Vec<String>) -> Result<Settings, Fatal> {
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

pub(crate) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

impl Settings {
    /// The RDMA topology to install: the `--nic_priority_matrix` file, else the
    /// matrix upstream's bench builds from `--device_name` (every location prefers
    /// the named NICs). `None` for other protocols.
    pub(crate) fn topology(&self) -> Result<Option<String>, String> {
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

pub(crate) fn check_protocol(s: &Settings) -> Result<(), Fatal> {
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
