//! `--mode=master_load` and `--mode=master_fill`: metadata load on a master (ours or
//! upstream's) over coro_rpc, with no data plane at all.
//!
//! A fake client ([`crate::fake_client`]) mounts fake segments (made-up base addresses; the master only
//! allocates ranges in them, it never touches their memory), pings every second from a
//! side thread (remounting when the master answers NEED_REMOUNT, as real clients do),
//! and unmounts them at the end. Each load thread owns one [`MasterRpcClient`] with a
//! single connection and makes one call at a time, or, with `--pipeline=N`, one raw
//! connection ([`Pipe`]) on which it keeps rounds of N operations in flight.

use crate::fake_client::{connect, put_batch, put_one, FakeClient};
use crate::phase::Phase;
use crate::pipeline::{decode, Pipe};
use crate::settings::Settings;
use crate::stats::{report, Row, Samples};
use mooncake::host::net::random_u64;
use mooncake::runtime::signals;
use mooncake::wire::codec::rpc;
use mooncake::wire::master_api::{
    MasterApi, ObjectMeta, ReplicaType, ReplicateConfig, Uuid, DEFAULT_TENANT,
};
use mooncake::wire::rpc_client::MasterRpcClient;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Progress report period of the fill.
const PROGRESS_PERIOD: Duration = Duration::from_secs(5);

/// Collects the first error of a worker for the log.
fn note(first: &mut Option<String>, what: impl FnOnce() -> String) {
    if first.is_none() {
        *first = Some(what());
    }
}

/// What one load thread did in a phase.
#[derive(Default)]
struct Work {
    samples: Samples,
    ops: u64,
    errors: u64,
    first_error: Option<String>,
    new_keys: Vec<String>,
}

/// A tiny xorshift generator for picking keys.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

struct PhaseCtx<'a> {
    s: &'a Settings,
    id: Uuid,
    keys: &'a [String],
    deadline: Instant,
    /// Tells this run's new keys from those of earlier runs with the same prefix.
    run: u32,
}

impl PhaseCtx<'_> {
    /// An existing key: one of an earlier fill's (`--filled`) or of this run's.
    fn pick(&self, rng: &mut Rng) -> String {
        let filled = self.s.filled as usize;
        let i = rng.below(filled + self.keys.len());
        match i.checked_sub(filled) {
            Some(own) => self.keys[own].clone(),
            None => fill_key(&self.s.key_prefix, i as u64),
        }
    }
}

/// One load thread of one phase.
fn worker(ctx: &PhaseCtx<'_>, phase: Phase, tid: usize, m: &MasterRpcClient) -> Work {
    let mut w = Work::default();
    let mut rng = Rng(random_u64() | 1);
    let len = ctx.s.object_size;
    let mut k: u64 = 0;
    while Instant::now() < ctx.deadline && !signals::stop_requested() {
        let op = match phase {
            Phase::Mixed => Phase::ALL[(k % 3) as usize],
            p => p,
        };
        let t = Instant::now();
        let r: Result<(), String> = match op {
            Phase::Put => {
                let key = format!(
                    "{}-{}-{:08x}-t{tid}-{k}",
                    ctx.s.key_prefix,
                    phase.name(),
                    ctx.run
                );
                match put_one(m, ctx.id, &key, len) {
                    Ok(()) => {
                        if phase == Phase::Put {
                            w.new_keys.push(key);
                        }
                        Ok(())
                    }
                    Err(e) => Err(format!("put {key}: {e}")),
                }
            }
            Phase::GetReplicaList => {
                let key = ctx.pick(&mut rng);
                m.get_replica_list(&key, DEFAULT_TENANT)
                    .map(|_| ())
                    .map_err(|e| format!("GetReplicaList {key}: {e}"))
            }
            Phase::ExistKey | Phase::Mixed => {
                let key = ctx.pick(&mut rng);
                match m.exist_key(&key, DEFAULT_TENANT) {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(format!("ExistKey {key}: false")),
                    Err(e) => Err(format!("ExistKey {key}: {e}")),
                }
            }
        };
        w.samples.push(t.elapsed());
        w.ops += 1;
        if let Err(e) = r {
            w.errors += 1;
            note(&mut w.first_error, || e);
        }
        k += 1;
    }
    w
}

/// One load thread of one phase with `--pipeline` operations per round on a raw
/// connection of its own; each operation of a round counts one latency sample of the
/// whole round.
fn pipelined_worker(ctx: &PhaseCtx<'_>, phase: Phase, tid: usize) -> Work {
    let mut w = Work::default();
    let mut pipe = match Pipe::connect(&ctx.s.master_server_addr, ctx.s.rpc_timeout) {
        Ok(p) => p,
        Err(e) => {
            w.errors += 1;
            note(&mut w.first_error, || e);
            return w;
        }
    };
    let mut rng = Rng(random_u64() | 1);
    let len = ctx.s.object_size;
    let tenant = DEFAULT_TENANT.to_string();
    let mut k: u64 = 0;
    while Instant::now() < ctx.deadline && !signals::stop_requested() {
        let t = Instant::now();
        let mut ops = Vec::with_capacity(ctx.s.pipeline);
        for _ in 0..ctx.s.pipeline {
            let op = match phase {
                Phase::Mixed => Phase::ALL[(k % 3) as usize],
                p => p,
            };
            match op {
                Phase::Put => {
                    let key = format!(
                        "{}-{}-{:08x}-p{tid}-{k}",
                        ctx.s.key_prefix,
                        phase.name(),
                        ctx.run
                    );
                    let config = ReplicateConfig::default();
                    pipe.push::<rpc::PutStart>(&(ctx.id, key.clone(), len, config, tenant.clone()));
                    let meta = ObjectMeta {
                        key: key.clone(),
                        checksum: None,
                    };
                    pipe.push::<rpc::PutEnd>(&(ctx.id, meta, ReplicaType::All, tenant.clone()));
                    ops.push((op, Some(key)));
                }
                Phase::GetReplicaList => {
                    let key = ctx.pick(&mut rng);
                    pipe.push::<rpc::GetReplicaList>(&(key, tenant.clone()));
                    ops.push((op, None));
                }
                Phase::ExistKey | Phase::Mixed => {
                    let key = ctx.pick(&mut rng);
                    pipe.push::<rpc::ExistKey>(&(key, tenant.clone()));
                    ops.push((op, None));
                }
            }
            k += 1;
        }
        let replies = match pipe.round() {
            Ok(r) => r,
            Err(e) => {
                w.errors += ops.len() as u64;
                note(&mut w.first_error, || e);
                break;
            }
        };
        let elapsed = t.elapsed();
        let mut bodies = replies.iter();
        for (op, key) in ops {
            let checked = match op {
                Phase::Put => {
                    let start = bodies.next().map(|b| decode::<rpc::PutStart>(b));
                    let end = bodies.next().map(|b| decode::<rpc::PutEnd>(b));
                    match (start, end) {
                        (Some(Ok(Ok(_))), Some(Ok(Ok(())))) => Ok(()),
                        other => Err(format!("put: {other:?}")),
                    }
                }
                Phase::GetReplicaList => {
                    match bodies.next().map(|b| decode::<rpc::GetReplicaList>(b)) {
                        Some(Ok(Ok(_))) => Ok(()),
                        other => Err(format!("GetReplicaList: {other:?}")),
                    }
                }
                Phase::ExistKey | Phase::Mixed => {
                    match bodies.next().map(|b| decode::<rpc::ExistKey>(b)) {
                        Some(Ok(Ok(true))) => Ok(()),
                        other => Err(format!("ExistKey: {other:?}")),
                    }
                }
            };
            w.samples.push(elapsed);
            w.ops += 1;
            match checked {
                Ok(()) if phase == Phase::Put => w.new_keys.extend(key),
                Ok(()) => {}
                Err(e) => {
                    w.errors += 1;
                    note(&mut w.first_error, || e);
                }
            }
        }
    }
    w
}

/// Runs one phase on every connection; returns its row and the keys it stored.
fn run_phase(
    s: &Settings,
    fake: &FakeClient,
    conns: &[MasterRpcClient],
    keys: &[String],
    phase: Phase,
) -> (Row, Vec<String>) {
    let start = Instant::now();
    let ctx = PhaseCtx {
        s,
        id: fake.id,
        keys,
        deadline: start + s.duration,
        run: random_u64() as u32,
    };
    let works: Vec<Work> = std::thread::scope(|scope| {
        let handles: Vec<_> = conns
            .iter()
            .enumerate()
            .map(|(tid, m)| {
                let ctx = &ctx;
                scope.spawn(move || {
                    if s.pipeline > 1 {
                        pipelined_worker(ctx, phase, tid)
                    } else {
                        worker(ctx, phase, tid, m)
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let mut samples = Samples::default();
    let (mut ops, mut errors, mut new_keys) = (0, 0, Vec::new());
    for w in works {
        ops += w.ops;
        errors += w.errors;
        if let Some(e) = w.first_error {
            log::warn!("{}: first error: {e}", phase.name());
        }
        samples.extend(w.samples);
        new_keys.extend(w.new_keys);
    }
    let size = match phase {
        Phase::Put | Phase::Mixed => s.object_size,
        _ => 0,
    };
    let row = Row::new(
        phase.name(),
        size,
        ops as f64 / elapsed,
        &mut samples,
        errors,
    );
    (row, new_keys)
}

/// `--mode=master_load`.
pub fn load(s: &Settings) -> Result<(), String> {
    let fake = FakeClient::mount(s)?;
    let result = load_with(s, &fake);
    fake.close();
    let rows = result?;
    report(
        &format!(
            "store_bench master_load on {} ({} threads, {} s per phase, {} B objects)",
            s.master_server_addr,
            s.threads,
            s.duration.as_secs(),
            s.object_size
        ),
        &rows,
    );
    Ok(())
}

fn load_with(s: &Settings, fake: &FakeClient) -> Result<Vec<Row>, String> {
    let conns = (0..s.threads)
        .map(|_| connect(s))
        .collect::<Result<Vec<_>, String>>()?;
    let mut keys: Vec<String> = (0..s.prefill)
        .map(|i| format!("{}-pre-{i}", s.key_prefix))
        .collect();
    let mut stored = 0;
    for chunk in keys.chunks(256) {
        let (ok, err) = put_batch(&*fake.master, fake.id, chunk, s.object_size);
        stored += ok;
        if let Some(e) = err {
            log::warn!("prefill: {e}");
        }
    }
    if stored < keys.len() as u64 {
        return Err(format!("prefill stored {stored} of {} keys", keys.len()));
    }
    let mut rows = Vec::new();
    for &phase in &s.phases {
        if signals::stop_requested() {
            break;
        }
        if phase != Phase::Put && keys.is_empty() && s.filled == 0 {
            log::warn!(
                "{}: skipped, no keys (use --prefill or --filled)",
                phase.name()
            );
            continue;
        }
        let (row, new) = run_phase(s, fake, &conns, &keys, phase);
        eprintln!("{}", row.row_line());
        rows.push(row);
        keys.extend(new);
    }
    Ok(rows)
}

/// The key of fill object `i` (31 bytes with the default prefix).
fn fill_key(prefix: &str, i: u64) -> String {
    format!("{prefix}-obj-{i:016}")
}

/// `--mode=master_fill`.
pub fn fill(s: &Settings) -> Result<(), String> {
    let fake = FakeClient::mount(s)?;
    let result = fill_with(s, &fake);
    if result.is_ok() && s.hold {
        eprintln!("store_bench: holding the fake client until SIGINT/SIGTERM");
        signals::wait_for_stop();
    }
    fake.close();
    result
}

fn fill_with(s: &Settings, fake: &FakeClient) -> Result<(), String> {
    let conns = (0..s.threads)
        .map(|_| connect(s))
        .collect::<Result<Vec<_>, String>>()?;
    let next = AtomicU64::new(0);
    let filled = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    let start = Instant::now();
    let (n, step) = (s.objects, s.fill_batch as u64);
    let first_errors: Vec<Option<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = conns
            .iter()
            .map(|m| {
                let (next, filled, failed) = (&next, &filled, &failed);
                scope.spawn(move || {
                    let mut first = None;
                    while !signals::stop_requested() {
                        let lo = next.fetch_add(step, Ordering::Relaxed);
                        if lo >= n {
                            break;
                        }
                        let hi = (lo + step).min(n);
                        let keys: Vec<String> =
                            (lo..hi).map(|i| fill_key(&s.key_prefix, i)).collect();
                        let (ok, err) = if keys.len() == 1 {
                            match put_one(m, fake.id, &keys[0], s.object_size) {
                                Ok(()) => (1, None),
                                Err(e) => (0, Some(e)),
                            }
                        } else {
                            put_batch(m, fake.id, &keys, s.object_size)
                        };
                        filled.fetch_add(ok, Ordering::Relaxed);
                        failed.fetch_add(keys.len() as u64 - ok, Ordering::Relaxed);
                        if let Some(e) = err {
                            note(&mut first, || format!("{}: {e}", keys[0]));
                        }
                    }
                    first
                })
            })
            .collect();
        let mut last = Instant::now();
        while handles.iter().any(|h| !h.is_finished()) {
            std::thread::sleep(Duration::from_millis(50));
            if last.elapsed() >= PROGRESS_PERIOD {
                last = Instant::now();
                eprintln!(
                    "store_bench: {} / {n} objects",
                    filled.load(Ordering::Relaxed)
                );
            }
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(None))
            .collect()
    });
    for e in first_errors.into_iter().flatten() {
        log::warn!("fill: first error of a thread: {e}");
    }
    let secs = start.elapsed().as_secs_f64();
    let (ok, bad) = (filled.into_inner(), failed.into_inner());
    println!(
        "filled {ok} objects in {secs:.1} s ({:.0} objects/s), {bad} failed",
        ok as f64 / secs
    );
    if ok == 0 && n > 0 {
        return Err("no object could be stored".into());
    }
    Ok(())
}
