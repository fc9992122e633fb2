//! Command-line flags (gflags-style, via [`Flags`]) and their validated form.

use crate::phase::Phase;
use mooncake::config::flags::{
    kind_in, parse_bool, parse_byte_size, FlagError, FlagKind, Flags, Parsed,
};
use mooncake::host::net::random_u64;
use std::time::Duration;

/// `--help` text.
pub const USAGE: &str = "\
Usage: store_bench --mode=serve|client|pressure|master_load|master_fill|round_trip|null_master [--flag=value ...]

Mooncake Store benchmarks (flags are gflags-style: --flag=value, --flag value).

Store client (serve, client, pressure):
  --master_server_addr   master host:port (default 127.0.0.1:50051)
  --metadata_server      P2PHANDSHAKE or http://host:port/metadata (default P2PHANDSHAKE)
  --local_hostname       this client's host, optionally host:port (default 127.0.0.1)
  --protocol             transport (default tcp)
  --global_segment_size  bytes of segment to mount (serve: 1GiB, pressure: 96MiB,
                         client: 0)
  --local_buffer_size    bytes of put staging buffer (serve: 16MiB, client: 64MiB)
client:
  --value_sizes          comma-separated value sizes (default 4096,1048576)
  --ops                  operations (items) per op, size and round
                         (default 200 for values >= 512 KiB, 2000 below)
  --batch                items per batch_put_from/batch_get_into call (default 16)
  --rounds               rounds; ops/s is the median round (default 3)
  --operations           subset of put,get,put_from,get_into,batch_put_from,
                         batch_get_into (default all)
  --key_prefix           key prefix (default a random one per run)
pressure (a cache workload over an oversubscribed pool; prints the failed-put rate):
  --keys                 this process's keys (default 3000)
  --value_min            smallest value (default 64KiB)
  --value_max            largest value (default 1MiB)
  --mix                  percent put,get,remove (default 45,45,10)
  --put_op               put, put_from or batch_put_from (default put)
  --batch                keys per batch_put_from (default 16)
  --threads              threads looping over the keys (default 1)
  --duration             seconds (default 5)
  --report_every         print an INTERVAL line every N seconds (default: off)
  --call_deadline_ms     count calls slower than this as late (default 60000)
master_load, master_fill:
  --master_server_addr   master host:port (default 127.0.0.1:50051)
  --threads              client threads, one connection each (default 4)
  --duration             seconds per load phase (default 5)
  --pipeline             master_load: calls in flight per connection, sent back to
                         back and answered in order (default 1: one call at a time)
  --prefill              keys put before the load phases (default 1000)
  --filled               master_load: the first N keys of an earlier master_fill with
                         the same --key_prefix exist too; reads pick among them and
                         the run's own keys (default 0)
  --phases               master_load: subset of put_start_end,get_replica_list,
                         exist_key,mixed, run in the order given (default all)
  --object_size          bytes per object (master_load 1024, master_fill 64)
  --objects              master_fill: objects to put (default 1000000)
  --fill_batch           master_fill: keys per BatchPutStart/BatchPutEnd; 1 = PutStart/
                         PutEnd per key (default 256)
  --hold                 master_fill: stay alive (pinging) until SIGINT/SIGTERM
                         after filling (default true)
  --fake_segment_size    bytes per fake segment (default 64GiB)
  --fake_segments        fake segments mounted by the fake client (default 1)
  --key_prefix           key prefix (default a random one per run)
  --rpc_timeout_ms       per-RPC deadline (default 30000)
round_trip (64-byte ping-pongs over loopback TCP between two threads blocking in read):
  --ops                  round trips (default 20000)
null_master (answers master_load's calls without work, the rest through the master
  at --master_server_addr; the ceiling of master_load):
  --listen               address to serve on (default 127.0.0.1:0); prints
                         NULL_MASTER listening on <addr>
Sizes accept K/M/G (powers of 1024) suffixes, e.g. 1GiB, 64M, 4096.
Log level: MC_LOG_LEVEL=trace|debug|info|warn|error|off (default info).";

/// Every flag, and whether it is a boolean.
const FLAGS: &[(&str, bool)] = &[
    ("mode", false),
    ("master_server_addr", false),
    ("metadata_server", false),
    ("local_hostname", false),
    ("protocol", false),
    ("global_segment_size", false),
    ("local_buffer_size", false),
    ("value_sizes", false),
    ("ops", false),
    ("batch", false),
    ("rounds", false),
    ("operations", false),
    ("key_prefix", false),
    ("threads", false),
    ("duration", false),
    ("pipeline", false),
    ("prefill", false),
    ("filled", false),
    ("phases", false),
    ("object_size", false),
    ("objects", false),
    ("fill_batch", false),
    ("hold", true),
    ("fake_segment_size", false),
    ("fake_segments", false),
    ("rpc_timeout_ms", false),
    ("keys", false),
    ("value_min", false),
    ("value_max", false),
    ("mix", false),
    ("put_op", false),
    ("report_every", false),
    ("call_deadline_ms", false),
    ("listen", false),
    ("help", true),
];

/// What the process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Own a segment until signalled.
    Serve,
    /// Client-operations benchmark.
    Client,
    /// Cache workload over an oversubscribed pool.
    Pressure,
    /// Master metadata load.
    MasterLoad,
    /// Fill the master with small objects.
    MasterFill,
    /// Loopback round trips without busy-polling (the small-call ceiling).
    RoundTrip,
    /// A master that does no work (the metadata-load ceiling).
    NullMaster,
}

/// One benchmarked client operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientOp {
    /// `put` of a byte slice (staged through the local buffer).
    Put,
    /// `get` returning an owned value (`get_size` + `get_into`).
    Get,
    /// Zero-copy `put_from` of a registered buffer.
    PutFrom,
    /// `get_into` a registered buffer.
    GetInto,
    /// `batch_put_from` of `--batch` items per call.
    BatchPutFrom,
    /// `batch_get_into` of `--batch` items per call.
    BatchGetInto,
}

impl ClientOp {
    /// Every operation, in benchmark order.
    pub const ALL: [ClientOp; 6] = [
        ClientOp::Put,
        ClientOp::Get,
        ClientOp::PutFrom,
        ClientOp::GetInto,
        ClientOp::BatchPutFrom,
        ClientOp::BatchGetInto,
    ];

    /// The name used in tables and `ROW` lines.
    pub fn name(self) -> &'static str {
        match self {
            ClientOp::Put => "put",
            ClientOp::Get => "get",
            ClientOp::PutFrom => "put_from",
            ClientOp::GetInto => "get_into",
            ClientOp::BatchPutFrom => "batch_put_from",
            ClientOp::BatchGetInto => "batch_get_into",
        }
    }

    fn parse(s: &str) -> Option<ClientOp> {
        ClientOp::ALL.into_iter().find(|op| op.name() == s)
    }
}

/// How `--mode=pressure` puts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOp {
    /// `put` (the value is reserved in the local buffer).
    Put,
    /// Zero-copy `put_from`.
    PutFrom,
    /// `batch_put_from` of `--batch` keys.
    BatchPutFrom,
}

impl PutOp {
    /// The flag value naming it.
    pub fn name(self) -> &'static str {
        match self {
            PutOp::Put => "put",
            PutOp::PutFrom => "put_from",
            PutOp::BatchPutFrom => "batch_put_from",
        }
    }

    fn parse(s: &str) -> Option<PutOp> {
        [PutOp::Put, PutOp::PutFrom, PutOp::BatchPutFrom]
            .into_iter()
            .find(|op| op.name() == s)
    }
}

/// The validated settings of one run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// What to run.
    pub mode: Mode,
    /// Master `host:port`.
    pub master_server_addr: String,
    /// TE metadata (`P2PHANDSHAKE` or an HTTP URL).
    pub metadata_server: String,
    /// This client's host name.
    pub local_hostname: String,
    /// Transport protocol.
    pub protocol: String,
    /// Segment bytes to mount.
    pub global_segment_size: u64,
    /// Staging buffer bytes.
    pub local_buffer_size: u64,
    /// Value sizes (client mode).
    pub value_sizes: Vec<u64>,
    /// Items per op, size and round (`None`: by size).
    pub ops: Option<usize>,
    /// Items per batch call.
    pub batch: usize,
    /// Rounds per op and size.
    pub rounds: usize,
    /// Operations to report.
    pub operations: Vec<ClientOp>,
    /// Key prefix, unique per run unless given.
    pub key_prefix: String,
    /// Load threads.
    pub threads: usize,
    /// Seconds per load phase.
    pub duration: Duration,
    /// Calls in flight per load connection.
    pub pipeline: usize,
    /// Keys put before the load phases.
    pub prefill: usize,
    /// Keys of an earlier fill (same prefix) the load phases read too.
    pub filled: u64,
    /// Load phases, in order.
    pub phases: Vec<Phase>,
    /// Object size of the load modes.
    pub object_size: u64,
    /// Objects to fill.
    pub objects: u64,
    /// Keys per fill batch.
    pub fill_batch: usize,
    /// Keep the fill client alive until signalled.
    pub hold: bool,
    /// Size of each fake segment of the load modes.
    pub fake_segment_size: u64,
    /// Fake segments mounted by the load modes.
    pub fake_segments: usize,
    /// Per-RPC deadline of the load modes.
    pub rpc_timeout: Duration,
    /// Pressure: keys of this process.
    pub keys: usize,
    /// Pressure: smallest value.
    pub value_min: u64,
    /// Pressure: largest value.
    pub value_max: u64,
    /// Pressure: percent put, get, remove.
    pub mix: [u64; 3],
    /// Pressure: how puts are made.
    pub put_op: PutOp,
    /// Pressure: interval of the `INTERVAL` lines.
    pub report_every: Option<Duration>,
    /// Pressure: a call taking longer than this counts as late.
    pub call_deadline: Duration,
    /// Null master: the address to serve on.
    pub listen: String,
}

/// Parses an unsigned integer within `lo..=hi`.
fn parse_num(name: &str, v: &str, lo: u64, hi: u64) -> Result<u64, String> {
    let n: u64 = v
        .trim()
        .parse()
        .map_err(|_| format!("--{name}: '{v}' is not a number"))?;
    if !(lo..=hi).contains(&n) {
        return Err(format!("--{name}: {n} is not in {lo}..={hi}"));
    }
    Ok(n)
}

fn kind_of(name: &str) -> Option<FlagKind> {
    kind_in(FLAGS, name)
}

impl Settings {
    /// Parses the command line (without the program name).
    pub fn from_args(args: impl IntoIterator<Item = String>) -> Result<Parsed<Settings>, String> {
        let flags = Flags::parse(args, kind_of)?;
        if flags.get("help") == Some("true") {
            return Ok(Parsed::Help);
        }
        if let Some(name) = flags.unknown.first() {
            return Err(format!("unknown flag --{name}"));
        }
        if let Some(arg) = flags.positional.first() {
            return Err(format!("unexpected argument '{arg}'"));
        }
        Self::from_flags(&flags).map(Parsed::Run)
    }

    fn from_flags(f: &Flags) -> Result<Settings, String> {
        let mode = match f.get("mode") {
            Some("serve") => Mode::Serve,
            Some("client") => Mode::Client,
            Some("pressure") => Mode::Pressure,
            Some("master_load") => Mode::MasterLoad,
            Some("master_fill") => Mode::MasterFill,
            Some("round_trip") => Mode::RoundTrip,
            Some("null_master") => Mode::NullMaster,
            Some(m) => {
                return Err(format!(
                    "--mode: '{m}' is not serve|client|pressure|master_load|master_fill|round_trip|null_master"
                ))
            }
            None => return Err("--mode is required".into()),
        };
        let string = |name: &str, default: &str| f.get(name).unwrap_or(default).to_string();
        let size = |name: &str, default: u64| match f.get(name) {
            Some(v) => parse_byte_size(name, v),
            None => Ok(default),
        };
        let num = |name: &str, default: u64, lo: u64, hi: u64| match f.get(name) {
            Some(v) => parse_num(name, v, lo, hi),
            None => Ok(default),
        };
        let serve = mode == Mode::Serve;
        let pressure = mode == Mode::Pressure;
        let mix = match f.get("mix") {
            None => [45, 45, 10],
            Some(v) => {
                let parts = v
                    .split(',')
                    .map(|p| parse_num("mix", p, 0, 100))
                    .collect::<Result<Vec<u64>, String>>()?;
                match parts.as_slice() {
                    [p, g, r] if p + g + r == 100 => [*p, *g, *r],
                    _ => {
                        return Err(format!(
                            "--mix: '{v}' is not three percentages summing to 100"
                        ))
                    }
                }
            }
        };
        let put_op = match f.get("put_op") {
            None => PutOp::Put,
            Some(v) => PutOp::parse(v)
                .ok_or_else(|| format!("--put_op: '{v}' is not put|put_from|batch_put_from"))?,
        };
        let default_segment = if serve {
            1 << 30
        } else if pressure {
            96 << 20
        } else {
            0
        };
        let value_sizes = f
            .get("value_sizes")
            .unwrap_or("4096,1048576")
            .split(',')
            .map(|s| parse_byte_size("value_sizes", s))
            .collect::<Result<Vec<u64>, FlagError>>()?;
        if value_sizes.iter().any(|&s| s == 0 || s > 1 << 30) {
            return Err("--value_sizes: every size must be in 1..=1GiB".into());
        }
        let operations = match f.get("operations") {
            None | Some("") | Some("all") => ClientOp::ALL.to_vec(),
            Some(list) => list
                .split(',')
                .map(|s| ClientOp::parse(s.trim()).ok_or(format!("--operations: unknown '{s}'")))
                .collect::<Result<Vec<_>, String>>()?,
        };
        let phases = match f.get("phases") {
            None | Some("") | Some("all") => Phase::ALL.to_vec(),
            Some(list) => list
                .split(',')
                .map(|s| Phase::parse(s.trim()).ok_or(format!("--phases: unknown '{s}'")))
                .collect::<Result<Vec<_>, String>>()?,
        };
        let key_prefix = match f.get("key_prefix") {
            Some(p) if !p.is_empty() => p.to_string(),
            _ => format!("sb{:08x}", random_u64() as u32),
        };
        let default_object = if mode == Mode::MasterFill { 64 } else { 1024 };
        let settings = Settings {
            mode,
            master_server_addr: string("master_server_addr", "127.0.0.1:50051"),
            metadata_server: string("metadata_server", "P2PHANDSHAKE"),
            local_hostname: string("local_hostname", "127.0.0.1"),
            protocol: string("protocol", "tcp"),
            global_segment_size: size("global_segment_size", default_segment)?,
            local_buffer_size: size("local_buffer_size", if serve { 16 << 20 } else { 64 << 20 })?,
            value_sizes,
            ops: match f.get("ops") {
                Some(v) => Some(parse_num("ops", v, 1, 100_000_000)? as usize),
                None => None,
            },
            batch: num("batch", 16, 1, 4096)? as usize,
            rounds: num("rounds", 3, 1, 1000)? as usize,
            operations,
            key_prefix,
            threads: num("threads", if pressure { 1 } else { 4 }, 1, 1024)? as usize,
            duration: Duration::from_secs(num("duration", 5, 1, 86_400)?),
            pipeline: num("pipeline", 1, 1, 1024)? as usize,
            prefill: num("prefill", 1000, 0, 100_000_000)? as usize,
            filled: num("filled", 0, 0, 1_000_000_000)?,
            phases,
            object_size: size("object_size", default_object)?,
            objects: num("objects", 1_000_000, 0, 1_000_000_000)?,
            fill_batch: num("fill_batch", 256, 1, 65_536)? as usize,
            hold: match f.get("hold") {
                Some(v) => parse_bool("hold", v)?,
                None => true,
            },
            fake_segment_size: size("fake_segment_size", 64 << 30)?,
            fake_segments: num("fake_segments", 1, 1, 1024)? as usize,
            rpc_timeout: Duration::from_millis(num("rpc_timeout_ms", 30_000, 1, 3_600_000)?),
            keys: num("keys", 3000, 1, 100_000_000)? as usize,
            value_min: size("value_min", 64 << 10)?,
            value_max: size("value_max", 1 << 20)?,
            mix,
            put_op,
            report_every: match f.get("report_every") {
                Some(v) => Some(Duration::from_secs(parse_num(
                    "report_every",
                    v,
                    1,
                    86_400,
                )?)),
                None => None,
            },
            call_deadline: Duration::from_millis(num("call_deadline_ms", 60_000, 1, 86_400_000)?),
            listen: string("listen", "127.0.0.1:0"),
        };
        settings.validate()?;
        Ok(settings)
    }

    fn validate(&self) -> Result<(), String> {
        if self.mode == Mode::Client {
            let max = self.value_sizes.iter().copied().max().unwrap_or(0);
            let wants_put = self.operations.contains(&ClientOp::Put)
                || self.operations.contains(&ClientOp::Get);
            if wants_put && self.local_buffer_size < max {
                return Err(format!(
                    "--local_buffer_size {} is smaller than the largest value ({max}); \
                     put needs to stage a whole value",
                    self.local_buffer_size
                ));
            }
        }
        if self.mode == Mode::Pressure {
            if self.value_min < 16 || self.value_min > self.value_max || self.value_max > 1 << 30 {
                return Err("--value_min/--value_max: need 16 <= min <= max <= 1GiB".into());
            }
            if self.put_op == PutOp::Put && self.local_buffer_size < self.value_max {
                return Err(format!(
                    "--local_buffer_size {} is smaller than --value_max {}; put stages a \
                     whole value",
                    self.local_buffer_size, self.value_max
                ));
            }
        }
        if self.mode == Mode::Serve && self.global_segment_size == 0 {
            return Err("--mode=serve needs --global_segment_size > 0".into());
        }
        if self.object_size == 0 {
            return Err("--object_size must be positive".into());
        }
        if matches!(self.mode, Mode::MasterLoad | Mode::MasterFill) {
            let span = self
                .fake_segment_size
                .checked_mul(self.fake_segments as u64);
            if self.fake_segment_size < 1 << 20 || span.map_or(true, |s| s > 1 << 46) {
                return Err(
                    "--fake_segment_size must be at least 1MiB, and all fake segments \
                     together at most 64TiB"
                        .into(),
                );
            }
        }
        Ok(())
    }

    /// Items per op, size and round for values of `size` bytes.
    pub fn ops_for(&self, size: u64) -> usize {
        self.ops
            .unwrap_or(if size >= 512 << 10 { 200 } else { 2000 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings `args` ask for, `None` for `--help`.
    fn parse(args: &[&str]) -> Result<Option<Settings>, String> {
        Ok(
            match Settings::from_args(args.iter().map(|s| s.to_string()))? {
                Parsed::Run(s) => Some(s),
                Parsed::Help => None,
            },
        )
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_byte_size("x", "4096"), Ok(4096));
        assert_eq!(parse_byte_size("x", "1GiB"), Ok(1 << 30));
        assert_eq!(parse_byte_size("x", "64M"), Ok(64 << 20));
        assert!(parse_byte_size("x", "12Q").is_err());
        assert!(parse_byte_size("x", "").is_err());
        assert!(parse_byte_size("x", "99999999999T").is_err());
    }

    #[test]
    fn modes_and_defaults() {
        let s = parse(&["--mode=serve"]).unwrap().unwrap();
        assert_eq!(s.global_segment_size, 1 << 30);
        let s = parse(&["--mode", "client", "--value_sizes=4K,1M"])
            .unwrap()
            .unwrap();
        assert_eq!(s.global_segment_size, 0);
        assert_eq!(s.value_sizes, vec![4096, 1 << 20]);
        assert_eq!((s.ops_for(4096), s.ops_for(1 << 20)), (2000, 200));
        assert_eq!(s.operations.len(), 6);
        let s = parse(&["--mode=master_fill"]).unwrap().unwrap();
        assert_eq!((s.object_size, s.objects, s.hold), (64, 1_000_000, true));
        assert!(parse(&["--help"]).unwrap().is_none());
        let s = parse(&["--mode=pressure"]).unwrap().unwrap();
        assert_eq!(s.global_segment_size, 96 << 20);
        assert_eq!(
            (s.keys, s.value_min, s.value_max),
            (3000, 64 << 10, 1 << 20)
        );
        assert_eq!((s.mix, s.put_op, s.threads), ([45, 45, 10], PutOp::Put, 1));
        let s = parse(&[
            "--mode=pressure",
            "--mix=50,50,0",
            "--put_op=batch_put_from",
        ])
        .unwrap()
        .unwrap();
        assert_eq!((s.mix, s.put_op), ([50, 50, 0], PutOp::BatchPutFrom));
        let s = parse(&["--mode=master_load"]).unwrap().unwrap();
        assert_eq!((s.filled, s.phases), (0, Phase::ALL.to_vec()));
        let s = parse(&[
            "--mode=master_load",
            "--filled=5000",
            "--phases=exist_key,put_start_end",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (s.filled, s.phases),
            (5000, vec![Phase::ExistKey, Phase::Put])
        );
    }

    #[test]
    fn bad_flags_are_errors() {
        for bad in [
            &["--mode=nope"][..],
            &[][..],
            &["--mode=client", "--ops=0"],
            &["--mode=client", "--ops=x"],
            &["--mode=client", "--value_sizes=0"],
            &["--mode=client", "--operations=put,nope"],
            &["--mode=client", "--bogus=1"],
            &["--mode=client", "stray"],
            &["--mode=client", "--local_buffer_size=1K"],
            &["--mode=master_fill", "--hold=maybe"],
            &["--mode=master_load", "--threads=0"],
            &["--mode=master_load", "--phases=exist_key,nope"],
            &["--mode=pressure", "--mix=50,50"],
            &["--mode=pressure", "--mix=50,50,1"],
            &["--mode=pressure", "--put_op=get"],
            &["--mode=pressure", "--value_min=2M"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
