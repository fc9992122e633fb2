//! Verified Transfer Engine traffic, in a child process of its own (`soak
//! te-initiator`) so its engine's memory is measured alone: it writes a block derived
//! from a fresh generation into a target's buffer, reads it back and compares. A cycle
//! that overlaps a restart of its target (the target's incarnation changed) is not
//! checked; any other difference is a corrupt read.
//!
//! The driver tells the child where the targets are with `target <slot> <segment>
//! <incarnation>` and `target <slot> down` lines on its stdin; the child prints its
//! cumulative tally as one `TE pid=<pid> key=value...` line every second and once more when its
//! stdin closes, then exits.

use mooncake::te::{Op, TaskStatus, TransferEngine, TransferRequest};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The first argument that runs the soak executable as the initiator child.
pub const INITIATOR_MODE: &str = "te-initiator";

/// Largest block moved by one request.
const MAX_BLOCK: usize = 1 << 20;

/// Where each target is now: its segment name and incarnation (`None` while down).
#[derive(Default)]
pub struct Targets {
    /// `(segment name, incarnation)` per target.
    pub slots: Mutex<Vec<Option<(String, u64)>>>,
}

/// What the loop saw.
#[derive(Default)]
pub struct TeTally {
    /// Cycles whose read-back matched.
    pub verified: AtomicU64,
    /// Transfers that failed (a target down, stopped or restarting).
    pub failed: AtomicU64,
    /// Cycles not checked because their target restarted meanwhile.
    pub interrupted: AtomicU64,
    /// Read-backs that differed from what was written.
    pub corrupt: AtomicU64,
    /// Transfers not final within the deadline.
    pub late: AtomicU64,
    /// Slowest transfer, in milliseconds.
    pub max_ms: AtomicU64,
}

impl TeTally {
    /// The tally as one `TE pid=<this process> key=value...` line.
    pub fn line(&self) -> String {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "TE pid={} verified={} failed={} interrupted={} corrupt={} late={} max_ms={}",
            std::process::id(),
            load(&self.verified),
            load(&self.failed),
            load(&self.interrupted),
            load(&self.corrupt),
            load(&self.late),
            load(&self.max_ms)
        )
    }
}

/// The initiator's figures as the driver sees them: the last cumulative line of each
/// child process (by pid), so a restarted child's earlier counts are kept.
#[derive(Default)]
pub struct TeFigures {
    by_pid: HashMap<u64, HashMap<String, u64>>,
}

impl TeFigures {
    /// Takes a `TE pid=<pid> key=value...` line.
    pub fn update(&mut self, line: &str) {
        let mut figures: HashMap<String, u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|w| w.split_once('='))
            .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
            .collect();
        if let Some(pid) = figures.remove("pid") {
            self.by_pid.insert(pid, figures);
        }
    }

    /// One figure summed over every child process (`max_ms`: the largest).
    pub fn get(&self, k: &str) -> u64 {
        let each = self.by_pid.values().map(|f| f.get(k).copied().unwrap_or(0));
        if k == "max_ms" {
            each.max().unwrap_or(0)
        } else {
            each.sum()
        }
    }
}

/// The initiator child's main: an engine over TCP, the loop, the stdin reader and the
/// tally printer. Exits 0 when its stdin closes.
pub fn initiator_main(deadline: Duration) -> ExitCode {
    let engine = match TransferEngine::new("P2PHANDSHAKE", "127.0.0.1", false)
        .and_then(|e| e.install("tcp", None).map(|_| e))
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!("soak te-initiator: engine: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (targets, tally, stop) = (
        Targets::default(),
        TeTally::default(),
        AtomicBool::new(false),
    );
    let stdin_closed = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| run(&engine, &targets, &tally, deadline, &stop));
        scope.spawn(|| {
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                apply_target_line(&targets, &line);
            }
            stdin_closed.store(true, Ordering::Relaxed);
        });
        let mut out = std::io::stdout();
        let mut seconds = 0u64;
        while !stdin_closed.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_secs(1));
            let _ = writeln!(out, "{}", tally.line());
            seconds += 1;
            #[cfg(target_env = "gnu")]
            if seconds % 30 == 0 {
                log_heap(seconds);
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    println!("{}", tally.line());
    ExitCode::SUCCESS
}

/// Logs glibc's view of the heap, the thread count and resident memory by kind (to this
/// child's log), so growth of resident memory can be told apart: live bytes growing is
/// a leak, free bytes growing is fragmentation, anonymous memory growing with a flat
/// heap is thread stacks.
#[cfg(target_env = "gnu")]
fn log_heap(seconds: u64) {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let m = unsafe { libc::mallinfo2() };
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map_or("?", str::trim)
            .to_string()
    };
    eprintln!(
        "heap at {seconds} s: in use {} KiB (mmapped {} KiB), free in arenas {} KiB, \
         arenas {} KiB; threads {}, RssAnon {}, RssFile {}",
        (m.uordblks + m.hblkhd) / 1024,
        m.hblkhd / 1024,
        m.fordblks / 1024,
        m.arena / 1024,
        field("Threads:"),
        field("RssAnon:"),
        field("RssFile:")
    );
}

/// Applies one `target <slot> <segment> <incarnation>` or `target <slot> down` line.
fn apply_target_line(targets: &Targets, line: &str) {
    let words: Vec<&str> = line.split_whitespace().collect();
    let (slot, what) = match words[..] {
        ["target", slot, ref rest @ ..] => match slot.parse::<usize>() {
            Ok(slot) if slot < 1024 => (slot, rest),
            _ => return,
        },
        _ => return,
    };
    let entry = match what {
        ["down"] => None,
        [name, incarnation] => match incarnation.parse() {
            Ok(n) => Some((name.to_string(), n)),
            Err(_) => return,
        },
        _ => return,
    };
    let mut slots = targets.slots.lock();
    if slots.len() <= slot {
        slots.resize(slot + 1, None);
    }
    slots[slot] = entry;
}

/// The driver's line telling the child where target `slot` is now.
pub fn target_line(slot: usize, target: Option<&(String, u64)>) -> String {
    match target {
        Some((name, incarnation)) => format!("target {slot} {name} {incarnation}"),
        None => format!("target {slot} down"),
    }
}

/// Runs until `stop`, moving data to and from the targets with `engine`.
pub fn run(
    engine: &TransferEngine,
    targets: &Targets,
    tally: &TeTally,
    deadline: Duration,
    stop: &AtomicBool,
) {
    let mut src = vec![0u8; MAX_BLOCK];
    let mut dst = vec![0u8; MAX_BLOCK];
    for buf in [&mut src, &mut dst] {
        engine
            .register_memory(buf.as_mut_ptr() as u64, MAX_BLOCK as u64, "cpu:0", true)
            .expect("registering the soak's buffers");
    }
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut generation = 0u64;
    let mut opened: Vec<Option<(String, i32)>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let slots = targets.slots.lock().clone();
        if slots.is_empty() {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        opened.resize(slots.len(), None);
        let t = next() as usize % slots.len();
        let Some((name, incarnation)) = slots[t].clone() else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let id = match &opened[t] {
            Some((n, id)) if *n == name => *id,
            _ => match engine.open_segment_no_cache(&name) {
                Ok(id) => {
                    opened[t] = Some((name.clone(), id));
                    id
                }
                Err(_) => {
                    tally.failed.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            },
        };
        let Some(buffer) = engine
            .segment_descriptor(id)
            .and_then(|d| d.buffers.first().map(|b| (b.addr, b.length)))
        else {
            opened[t] = None;
            continue;
        };
        let len = 4096 + (next() as usize % (MAX_BLOCK - 4096));
        let offset = (next() % (buffer.1 - len as u64)) & !63;
        generation += 1;
        fill(&mut src[..len], generation);
        let at = buffer.0 + offset;
        let write = TransferRequest::new(Op::Write, src.as_ptr() as u64, id, at, len as u64);
        let read = TransferRequest::new(Op::Read, dst.as_ptr() as u64, id, at, len as u64);
        let ok =
            transfer(engine, write, deadline, tally) && transfer(engine, read, deadline, tally);
        let same_incarnation =
            targets.slots.lock().get(t).cloned().flatten() == Some((name.clone(), incarnation));
        if !ok {
            tally.failed.fetch_add(1, Ordering::Relaxed);
            opened[t] = None;
        } else if !same_incarnation {
            tally.interrupted.fetch_add(1, Ordering::Relaxed);
        } else if dst[..len] == src[..len] {
            tally.verified.fetch_add(1, Ordering::Relaxed);
        } else {
            tally.corrupt.fetch_add(1, Ordering::Relaxed);
            log::error!("soak: TE read-back from {name} differs (generation {generation})");
        }
    }
    for buf in [&src, &dst] {
        let _ = engine.unregister_memory(buf.as_ptr() as u64);
    }
}

/// Bytes that differ with the position and the generation.
fn fill(buf: &mut [u8], generation: u64) {
    let mut x = generation.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
}

/// Runs one request to its end; whether it completed. Not final within `deadline`
/// counts as late (and failed).
fn transfer(
    engine: &TransferEngine,
    request: TransferRequest,
    deadline: Duration,
    tally: &TeTally,
) -> bool {
    let started = Instant::now();
    let batch = engine.allocate_batch(1);
    if engine.submit(batch, &[request]).is_err() {
        let _ = engine.free_batch(batch);
        return false;
    }
    let status = loop {
        match engine.transfer_status(batch, 0) {
            Ok((s, _)) if s.is_terminal() => break Some(s),
            Ok(_) if started.elapsed() > deadline => break None,
            Ok(_) => std::thread::sleep(Duration::from_micros(200)),
            Err(_) => break Some(TaskStatus::Failed),
        }
    };
    let ms = started.elapsed().as_millis() as u64;
    tally.max_ms.fetch_max(ms, Ordering::Relaxed);
    let Some(status) = status else {
        tally.late.fetch_add(1, Ordering::Relaxed);
        // The batch cannot be freed while its task runs; it is left to the engine.
        return false;
    };
    let _ = engine.free_batch(batch);
    status == TaskStatus::Completed
}
