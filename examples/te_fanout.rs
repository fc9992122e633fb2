//! One initiator against many peers: how the Transfer Engine's throughput and memory
//! grow with the number of peers it talks to (`bench/scaling.sh`).
//!
//! `te_fanout --peers=N` starts a second process (this program again) that hosts N
//! target engines, each on its own 127.0.0.1 port (P2P handshake, TCP, the same-host
//! path off so every byte crosses a socket). The initiator engine, in this process,
//! opens all N segments, then `--threads` threads write (`--op=read`: read) batches of
//! `--batch_size` requests of `--block_size` bytes for `--duration` seconds, each batch
//! to the next peer in turn, so every peer's connection stays in use.
//!
//! Prints one line:
//! `FANOUT peers=N gbps=.. init_rss_mb=.. init_per_peer_kb=.. init_threads=..
//! targets_rss_mb=.. targets_per_peer_kb=.. targets_threads=..`
//! where the initiator's per-peer figure is its resident memory after the run less
//! that before it opened any segment (its own buffer already touched), over N, and the
//! targets' is the target process's resident memory over N (each target's buffer,
//! `batch_size * block_size * threads` bytes, included).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mooncake::config::Config;
use mooncake::te::{Op, TaskStatus, TransferEngine, TransferRequest};

fn flag(name: &str, default: u64) -> u64 {
    std::env::args()
        .find_map(|a| {
            a.strip_prefix(&format!("--{name}="))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(default)
}

fn text_flag(name: &str) -> Option<String> {
    std::env::args().find_map(|a| a.strip_prefix(&format!("--{name}=")).map(str::to_string))
}

/// A `/proc/<pid>/status` field in kB (or a count), 0 when unreadable.
fn status_field(pid: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// An engine on 127.0.0.1 with TCP only.
fn engine() -> Result<TransferEngine, String> {
    let config = Config {
        disable_same_host: true,
        ..Config::global().clone()
    };
    let engine = TransferEngine::with_config(config, "P2PHANDSHAKE", "127.0.0.1", false)
        .map_err(|e| format!("starting an engine: {e}"))?;
    engine
        .install("tcp", None)
        .map_err(|e| format!("installing tcp: {e}"))?;
    Ok(engine)
}

/// The target process: `peers` engines, each with one registered buffer of `bytes`;
/// prints their segment names, then `ready`, and serves until stdin closes.
fn serve(peers: usize, bytes: usize) -> Result<(), String> {
    let mut nodes = Vec::with_capacity(peers);
    let mut out = std::io::stdout().lock();
    for _ in 0..peers {
        let engine = engine()?;
        let mut buffer = vec![1u8; bytes];
        engine
            .register_memory(buffer.as_mut_ptr() as u64, bytes as u64, "cpu:0", true)
            .map_err(|e| format!("registering a target buffer: {e}"))?;
        writeln!(out, "{}", engine.segment_name()).map_err(|e| e.to_string())?;
        nodes.push((engine, buffer));
    }
    writeln!(out, "ready").map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    drop(out);
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    for (engine, buffer) in &nodes {
        let _ = engine.unregister_memory(buffer.as_ptr() as u64);
    }
    Ok(())
}

/// Kills the target process when the run ends, however it ends.
struct Targets(Child);

impl Drop for Targets {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Settings of one run.
struct Run {
    peers: usize,
    threads: usize,
    batch: usize,
    block: u64,
    op: Op,
    duration: Duration,
}

/// One initiator thread: batches to peer after peer until `running` clears.
fn worker(
    engine: &TransferEngine,
    run: &Run,
    thread: usize,
    local: u64,
    peers: &[(i32, u64)],
    running: &AtomicBool,
) -> Result<u64, String> {
    let mut batches = 0u64;
    let mut requests = Vec::with_capacity(run.batch);
    let mut next = thread;
    while running.load(Ordering::Relaxed) {
        let (segment, remote) = peers[next % peers.len()];
        next += run.threads;
        requests.clear();
        for i in 0..run.batch {
            let offset = run.block * (thread * run.batch + i) as u64;
            requests.push(TransferRequest {
                op: run.op,
                source: local + offset,
                target_id: segment,
                target_offset: remote + offset,
                length: run.block,
            });
        }
        let batch = engine.allocate_batch(run.batch);
        engine.submit(batch, &requests).map_err(|e| e.to_string())?;
        while !engine
            .wait_batch(batch, Duration::from_secs(1))
            .map_err(|e| e.to_string())?
        {}
        for task in 0..run.batch {
            match engine.transfer_status(batch, task) {
                Ok((TaskStatus::Completed, _)) => {}
                other => return Err(format!("task {task} of a batch: {other:?}")),
            }
        }
        engine.free_batch(batch).map_err(|e| e.to_string())?;
        batches += 1;
    }
    Ok(batches)
}

fn initiate(run: &Run) -> Result<String, String> {
    let bytes = run.block as usize * run.batch * run.threads;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let child = Command::new(exe)
        .arg(format!("--serve={}", run.peers))
        .arg(format!("--bytes={bytes}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the target process: {e}"))?;
    let mut targets = Targets(child);
    let stdout = targets.0.stdout.take().ok_or("no target stdout")?;
    let mut names = Vec::with_capacity(run.peers);
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| e.to_string())?;
        if line == "ready" {
            break;
        }
        names.push(line);
    }
    if names.len() != run.peers {
        return Err(format!(
            "the target process started {} of {} peers",
            names.len(),
            run.peers
        ));
    }
    let engine = engine()?;
    let mut local = vec![1u8; bytes];
    engine
        .register_memory(local.as_mut_ptr() as u64, bytes as u64, "cpu:0", true)
        .map_err(|e| format!("registering the local buffer: {e}"))?;
    let rss_before = status_field("self", "VmRSS:");
    let mut peers = Vec::with_capacity(run.peers);
    for name in &names {
        let segment = engine
            .open_segment(name)
            .map_err(|e| format!("opening {name}: {e}"))?;
        let base = engine
            .segment_descriptor(segment)
            .and_then(|d| d.buffers.first().map(|b| b.addr))
            .ok_or_else(|| format!("{name} has no buffer"))?;
        peers.push((segment, base));
    }
    let running = AtomicBool::new(true);
    let start = Instant::now();
    let counts: Vec<Result<u64, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..run.threads)
            .map(|t| {
                let (engine, peers, running) = (&engine, &peers, &running);
                let local = local.as_ptr() as u64;
                scope.spawn(move || worker(engine, run, t, local, peers, running))
            })
            .collect();
        std::thread::sleep(run.duration);
        running.store(false, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a worker panicked".into())))
            .collect()
    });
    let seconds = start.elapsed().as_secs_f64();
    let mut batches = 0;
    for c in counts {
        batches += c?;
    }
    let rss_after = status_field("self", "VmRSS:");
    let threads = status_field("self", "Threads:");
    let pid = targets.0.id().to_string();
    let (t_rss, t_threads) = (status_field(&pid, "VmRSS:"), status_field(&pid, "Threads:"));
    let _ = engine.unregister_memory(local.as_ptr() as u64);
    drop(targets);
    let moved = batches as f64 * run.batch as f64 * run.block as f64;
    let n = run.peers as f64;
    Ok(format!(
        "FANOUT peers={} gbps={:.3} init_rss_mb={:.1} init_per_peer_kb={:.1} init_threads={threads} \
         targets_rss_mb={:.1} targets_per_peer_kb={:.1} targets_threads={t_threads}",
        run.peers,
        moved / seconds / 1e9,
        rss_after as f64 / 1024.0,
        rss_after.saturating_sub(rss_before) as f64 / n,
        t_rss as f64 / 1024.0,
        t_rss as f64 / n,
    ))
}

fn main() {
    if std::env::args().any(|a| a == "--help" || a == "-h") {
        println!(
            "Usage: te_fanout --peers=N [--threads=2] [--batch_size=16] [--block_size=65536] \
             [--duration=3] [--op=write|read]"
        );
        return;
    }
    let serve_peers = flag("serve", 0) as usize;
    let result = if serve_peers > 0 {
        serve(serve_peers, flag("bytes", 1 << 20) as usize).map(|()| None)
    } else {
        let op = match text_flag("op").as_deref() {
            None | Some("write") => Op::Write,
            Some("read") => Op::Read,
            Some(other) => {
                eprintln!("te_fanout: --op={other} is not write|read");
                std::process::exit(2);
            }
        };
        let run = Run {
            peers: flag("peers", 1).max(1) as usize,
            threads: flag("threads", 2).max(1) as usize,
            batch: flag("batch_size", 16).max(1) as usize,
            block: flag("block_size", 65536).max(1),
            op,
            duration: Duration::from_secs(flag("duration", 3).max(1)),
        };
        initiate(&run).map(Some)
    };
    match result {
        Ok(Some(line)) => println!("{line}"),
        Ok(None) => {}
        Err(e) => {
            eprintln!("te_fanout: {e}");
            std::process::exit(1);
        }
    }
}
