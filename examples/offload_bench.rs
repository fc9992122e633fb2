//! `offload_bench`: the SSD tier's cost and what it keeps, measured in one process on
//! our master (served over coro_rpc on loopback) with one owner client writing
//! `--count` objects of `--value_kib` KiB through its `--segment_mib` MiB segment,
//! several times what the segment holds, then reading every one back.
//!
//! Runs the workload twice: offload off (the master evicts: a cache, objects go) and
//! eager offload on (objects leave memory only with a durable disk copy). Prints, for
//! each: the put rate (puts that find the pool full of objects still being offloaded
//! are retried, the time counted), objects lost (acknowledged and unreadable), the
//! get rate, and the latency of gets served from the owner's disk (p50/p99).
//!
//! Usage: `cargo run --release --example offload_bench -- [--segment_mib=64]
//! [--value_kib=1024] [--count=320] [--dir=/tmp]`

use mooncake::master::rpc_server::{RpcLimits, RpcServer};
use mooncake::master::{MasterConfig, MasterService};
use mooncake::store::{Client, DiskTierConfig, ErrorCode, ReplicateConfig, SetupConfig};
use mooncake::wire::master_api::{ReplicaLocation, ReplicaStatus};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How long one put may keep retrying a full pool.
const PUT_PATIENCE: Duration = Duration::from_secs(120);

struct Args {
    segment_mib: u64,
    value_kib: u64,
    count: u64,
    dir: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        segment_mib: 64,
        value_kib: 1024,
        count: 320,
        dir: std::env::temp_dir(),
    };
    for arg in std::env::args().skip(1) {
        let (k, v) = arg
            .trim_start_matches("--")
            .split_once('=')
            .ok_or_else(|| format!("expected --name=value, got {arg}"))?;
        let num = || v.parse::<u64>().map_err(|_| format!("--{k}: not a number"));
        match k {
            "segment_mib" => a.segment_mib = num()?,
            "value_kib" => a.value_kib = num()?,
            "count" => a.count = num()?,
            "dir" => a.dir = PathBuf::from(v),
            _ => return Err(format!("unknown flag --{k}")),
        }
    }
    Ok(a)
}

fn value(i: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| ((j as u64).wrapping_mul(2_654_435_761) ^ i.wrapping_mul(97)) as u8)
        .collect()
}

/// What one run measured.
struct Run {
    put_mib_s: f64,
    failed_puts: u64,
    lost: u64,
    get_mib_s: f64,
    disk_gets: Vec<Duration>,
}

fn run(a: &Args, offload: bool) -> Result<Run, String> {
    let master = MasterService::new(MasterConfig {
        enable_offload: offload,
        default_kv_lease_ttl: Duration::from_millis(200),
        ..MasterConfig::default()
    });
    let server = RpcServer::start(([127, 0, 0, 1], 0).into(), master, RpcLimits::default())
        .map_err(|e| format!("master: {e}"))?;
    let dir = a
        .dir
        .join(format!("mc-offload-bench-{}-{offload}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let cfg = SetupConfig {
        local_hostname: "127.0.0.1".into(),
        metadata_server: "P2PHANDSHAKE".into(),
        global_segment_size: a.segment_mib << 20,
        local_buffer_size: 64 << 20,
        master_server_addr: server.local_addr().to_string(),
        ..SetupConfig::default()
    };
    let disk = offload.then(|| DiskTierConfig {
        path: dir.clone(),
        staging_bytes: 256 << 20,
        heartbeat_interval: Duration::from_secs(1),
        ..DiskTierConfig::default()
    });
    let owner = Client::setup_with_disk(&cfg, disk).map_err(|e| format!("owner: {e}"))?;
    let reader_cfg = SetupConfig {
        global_segment_size: 0,
        ..cfg.clone()
    };
    let reader = Client::setup_with_disk(&reader_cfg, None).map_err(|e| format!("reader: {e}"))?;
    let len = (a.value_kib << 10) as usize;
    let values: Vec<Vec<u8>> = (0..a.count.min(64)).map(|i| value(i, len)).collect();
    let of = |i: u64| &values[(i % values.len() as u64) as usize];
    let mut acked = Vec::new();
    let mut failed_puts = 0;
    let start = Instant::now();
    for i in 0..a.count {
        let key = format!("bench-{i}");
        let deadline = Instant::now() + PUT_PATIENCE;
        loop {
            match owner.put(&key, of(i), &ReplicateConfig::default()) {
                Ok(()) => {
                    acked.push(i);
                    break;
                }
                Err(e) if e == ErrorCode::NO_AVAILABLE_HANDLE && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => {
                    failed_puts += 1;
                    break;
                }
            }
        }
    }
    let put_secs = start.elapsed().as_secs_f64();
    let mut lost = 0;
    let mut disk_gets = Vec::new();
    let mut read_bytes = 0u64;
    let start = Instant::now();
    for &i in &acked {
        let key = format!("bench-{i}");
        let disk_only = reader.get_replica_desc(&key).is_ok_and(|l| {
            l.iter().all(|r| {
                r.status == ReplicaStatus::Complete
                    && matches!(r.location, ReplicaLocation::LocalDisk { .. })
            })
        });
        let t = Instant::now();
        match reader.get(&key) {
            Ok(v) if v == *of(i) => {
                read_bytes += v.len() as u64;
                if disk_only {
                    disk_gets.push(t.elapsed());
                }
            }
            Ok(_) => return Err(format!("{key}: bytes differ")),
            Err(_) => lost += 1,
        }
    }
    let get_secs = start.elapsed().as_secs_f64();
    drop(reader);
    drop(owner);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    disk_gets.sort();
    Ok(Run {
        put_mib_s: (acked.len() as f64 * len as f64 / (1 << 20) as f64) / put_secs,
        failed_puts,
        lost,
        get_mib_s: read_bytes as f64 / (1 << 20) as f64 / get_secs,
        disk_gets,
    })
}

fn percentile(sorted: &[Duration], p: f64) -> String {
    if sorted.is_empty() {
        return "-".into();
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    format!("{:.2} ms", sorted[i].as_secs_f64() * 1000.0)
}

fn main() -> ExitCode {
    mooncake::host::logger::install();
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("offload_bench: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "offload_bench: {} x {} KiB through a {} MiB segment ({:.1}x), 1 s offload heartbeat",
        a.count,
        a.value_kib,
        a.segment_mib,
        (a.count * a.value_kib) as f64 / (a.segment_mib * 1024) as f64
    );
    println!("| offload | put MiB/s | failed puts | objects lost | get MiB/s | disk-only gets | disk get p50 | disk get p99 |");
    println!("|---|---|---|---|---|---|---|---|");
    for offload in [false, true] {
        match run(&a, offload) {
            Ok(r) => println!(
                "| {} | {:.0} | {} | {} | {:.0} | {} | {} | {} |",
                if offload { "on (eager)" } else { "off" },
                r.put_mib_s,
                r.failed_puts,
                r.lost,
                r.get_mib_s,
                r.disk_gets.len(),
                percentile(&r.disk_gets, 0.5),
                percentile(&r.disk_gets, 0.99)
            ),
            Err(e) => {
                eprintln!("offload_bench: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
