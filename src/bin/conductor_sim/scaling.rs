//! `--scaling`: how the scheduling rate changes with the fleet and the prefix index
//! (`bench/scaling.sh`).
//!
//! For each `INSTANCESxBLOCKS` point a fresh conductor (global_cache_aware) gets half
//! the instances as prefill and half as decode (at least one each), and its prefix
//! index is filled with BLOCKS blocks in chains of [`CHAIN`] (each chain held by one
//! prefill instance, reported as KV events). Each prefill instance holds its share of
//! BLOCKS and one chain more, so the index stays at BLOCKS blocks: every new block
//! evicts an old one. Then requests, each a prefix of a random chain (8 to 32 blocks)
//! followed by 4 new blocks, are scheduled and completed one after the other on one
//! thread: `--bench_calls / 4` to warm up, then `--bench_calls` timed. Prints per
//! point:
//! `SCALING instances=.. blocks=.. calls_per_s=.. us_per_call=.. rss_mb=..`
//! (calls/s counts the time spent in `schedule` only; rss is the process's after the
//! index was filled).

use std::time::Instant;

use mooncake::conductor::index::medium;
use mooncake::conductor::{Completion, Conductor, ConductorConfig, Policy, ScheduleRequest};

use crate::bench::register_fleet;
use crate::settings::Point;

/// Blocks per stored chain (a conversation's context).
const CHAIN: u64 = 32;
/// New blocks each request adds after its cached prefix.
const FRESH: u64 = 4;
/// Tokens per block.
const BLOCK_TOKENS: u64 = 512;

/// A well-spread block hash for block number `n`.
fn hash(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A tiny xorshift generator.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// The process's resident memory in MB.
fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A conductor with the point's instances and a filled index.
fn prepare(point: Point) -> Result<std::sync::Arc<Conductor>, String> {
    let prefill = (point.instances / 2).max(1);
    let decode = (point.instances - prefill).max(1);
    let chains = point.blocks.div_ceil(CHAIN);
    let per_prefill = point.blocks.div_ceil(prefill as u64);
    let config = ConductorConfig {
        policy: Policy::GlobalCacheAware,
        block_tokens: BLOCK_TOKENS,
        ttft_slo_ms: 0.0,
        tbt_slo_ms: 0.0,
        ..ConductorConfig::default()
    };
    let conductor = Conductor::new(config);
    conductor.with(|sch| {
        register_fleet(sch, prefill, decode, per_prefill + CHAIN)?;
        let mut stored = Vec::with_capacity(CHAIN as usize);
        for c in 0..chains {
            stored.clear();
            let last = ((c + 1) * CHAIN).min(point.blocks);
            stored.extend((c * CHAIN..last).map(hash));
            let holder = format!("p{}", c % prefill as u64);
            sch.apply_events(&holder, (&stored, medium::GPU), (&[], medium::GPU))
                .ok_or("a registered instance is unknown")?;
        }
        Ok::<(), String>(())
    })?;
    Ok(conductor)
}

/// Measures one point; returns its report line.
fn measure(point: Point, calls: usize) -> Result<String, String> {
    let conductor = prepare(point)?;
    let rss = rss_mb();
    let chains = point.blocks.div_ceil(CHAIN);
    let mut rng = Rng(0x5EED_0000 + point.instances as u64 + point.blocks);
    let mut fresh = point.blocks;
    let mut spent = 0.0;
    let warm_up = calls / 4;
    for k in 0..warm_up + calls {
        let chain = rng.below(chains);
        let first = chain * CHAIN;
        let cached = (8 + rng.below(CHAIN - 7)).min(point.blocks - first);
        let mut hash_ids: Vec<u64> = (first..first + cached).map(hash).collect();
        hash_ids.extend((fresh..fresh + FRESH).map(hash));
        fresh += FRESH;
        let now = k as f64 * 50.0;
        let req = ScheduleRequest {
            request_id: format!("s{k}"),
            input_length: hash_ids.len() as u64 * BLOCK_TOKENS,
            hash_ids,
            output_length_hint: Some(100),
            ttft_slo_ms: None,
            tbt_slo_ms: None,
            now_ms: Some(now),
        };
        let started = Instant::now();
        let placed = conductor.schedule(&req);
        if k >= warm_up {
            spent += started.elapsed().as_secs_f64();
        }
        placed.map_err(|e| format!("scaling schedule: {e:?}"))?;
        conductor.complete(&Completion {
            request_id: req.request_id,
            prefill_ms: 1000.0,
            queue_ms: 0.0,
            transfer_ms: 0.0,
            ttft_ms: 1000.0,
            tbt_ms: 20.0,
            output_length: 100,
            now_ms: Some(now),
        });
    }
    conductor.shutdown();
    let rate = calls as f64 / spent.max(1e-9);
    Ok(format!(
        "SCALING instances={} blocks={} calls_per_s={rate:.0} us_per_call={:.2} rss_mb={rss:.1}",
        point.instances,
        point.blocks,
        1e6 / rate
    ))
}

/// `--scaling`: every point in turn, one line each.
pub(crate) fn run(points: &[Point], calls: usize) -> Result<(), String> {
    for &point in points {
        println!("{}", measure(point, calls.max(1))?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_point_schedules_every_call() {
        let line = measure(
            Point {
                instances: 4,
                blocks: 100,
            },
            50,
        )
        .unwrap();
        assert!(line.starts_with("SCALING instances=4 blocks=100 calls_per_s="));
    }
}
