//! The simulator's flags, checked into [`Settings`], and the conductor configuration
//! a replay runs with.

use mooncake::conductor::{ConductorConfig, CostModel, Policy};
use mooncake::config::comma_list;
use mooncake::config::flags::{kind_in, parse_bool, FlagKind, Flags};

use crate::sim::SimConfig;

pub(crate) const USAGE: &str = "\
Usage: conductor_sim [flags]

Replays traces against the conductor (one started in this process per policy on a
free port, or --conductor) with simulated instances, and prints per policy: average
and p90 TTFT, p90 TBT, prefix-cache hit rate, refused requests, effective requests
(TTFT and TBT within the SLOs) and the conductor's TTFT prediction error.

Flags:
  --trace data/fast25/conversation_trace.jsonl,data/fast25/synthetic_trace.jsonl
  --limit 0                  requests per trace (0: all)
  --policies all             comma-separated policies (or all)
  --prefill 8 --decode 8     simulated instances
  --prefill_kv_blocks 4096   KV cache of a prefill instance (blocks)
  --decode_kv_blocks 4096    KV capacity of a decode instance (blocks)
  --max_batch 128            most requests one decode instance runs at once
  --speedup 1.3              arrivals this many times faster than the trace (the
                             trace comes from a larger fleet: at 1.3x, 8 prefill
                             instances are offered about 90 % of their capacity
                             before any cache hit; the header prints the figure)
  --overload_speedup 2       the early-rejection comparison's load (0: skip it)
  --ttft_slo_ms 30000 --tbt_slo_ms 100
                             the SLOs (the paper's effective-request limits)
  --noise 0.1                simulated durations vary by this fraction
  --seed 7
  --block_tokens 512
  --cost_model \"\"            what the instances really take (JSON or a file; the
                             simulator's default differs from the conductor's prior
                             so the conductor has to learn it)
  --prior \"\"                 the conductor's prior (JSON or a file; default its own)
  --conductor \"\"             http://host:port of a running conductor instead (one
                             replay per trace, with that conductor's policy)
  --bench_calls 20000        schedule calls timed for the scheduling rate (0: skip)
  --scaling \"\"               only measure the scheduling rate at these points,
                             INSTANCESxBLOCKS comma-separated (e.g. 8x1000,1024x1000),
                             each with a prefix index of BLOCKS blocks and
                             --bench_calls calls (bench/scaling.sh)
  -h, --help";

pub(crate) const FLAGS: &[(&str, bool)] = &[
    ("trace", false),
    ("limit", false),
    ("policies", false),
    ("prefill", false),
    ("decode", false),
    ("prefill_kv_blocks", false),
    ("decode_kv_blocks", false),
    ("max_batch", false),
    ("speedup", false),
    ("overload_speedup", false),
    ("ttft_slo_ms", false),
    ("tbt_slo_ms", false),
    ("noise", false),
    ("seed", false),
    ("block_tokens", false),
    ("cost_model", false),
    ("prior", false),
    ("conductor", false),
    ("bench_calls", false),
    ("scaling", false),
    ("early_rejection", true),
    ("help", true),
    ("h", true),
];

pub(crate) fn kind_of(name: &str) -> Option<FlagKind> {
    kind_in(FLAGS, name)
}

/// What the instances really take by default: deliberately not the conductor's
/// prior ([`CostModel::default`]), so its predictions have to be learned.
pub(crate) fn default_truth() -> CostModel {
    let mut m = CostModel::default();
    m.prefill.base_ms = 30.0;
    m.prefill.ms_per_1k_tokens = 100.0;
    m.prefill.ms_per_1m_token_pairs = 2.5;
    m.transfer.base_ms = 1.0;
    m.transfer.bandwidth_gbps = 80.0;
    m.decode.base_ms = 18.0;
    m.decode.ms_per_request = 0.4;
    m.decode.ms_per_1k_context = 0.04;
    m
}

pub(crate) struct Settings {
    pub(crate) traces: Vec<String>,
    pub(crate) limit: usize,
    pub(crate) policies: Vec<Policy>,
    pub(crate) sim: SimConfig,
    pub(crate) overload_speedup: f64,
    pub(crate) prior: CostModel,
    pub(crate) conductor: Option<String>,
    pub(crate) bench_calls: usize,
    pub(crate) scaling: Vec<Point>,
}

pub(crate) fn cost_model(
    flags: &Flags,
    name: &str,
    default: CostModel,
) -> Result<CostModel, String> {
    match flags.get(name) {
        Some(v) if !v.trim().is_empty() => {
            CostModel::from_flag(v).map_err(|e| format!("--{name}: {e}"))
        }
        _ => Ok(default),
    }
}

pub(crate) fn settings(flags: &Flags) -> Result<Settings, String> {
    let policies = match flags.get("policies").unwrap_or("all") {
        "all" => Policy::ALL.to_vec(),
        list => comma_list(list)
            .iter()
            .map(|p| Policy::parse(p).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?,
    };
    let sim = SimConfig {
        prefill: flags.number("prefill", 8)?,
        decode: flags.number("decode", 8)?,
        prefill_kv_blocks: flags.number("prefill_kv_blocks", 4096)?,
        decode_kv_blocks: flags.number("decode_kv_blocks", 4096)?,
        max_batch: flags.number("max_batch", 128)?,
        speedup: flags.number("speedup", 1.3)?,
        noise: flags.number("noise", 0.1)?,
        truth: cost_model(flags, "cost_model", default_truth())?,
        block_tokens: flags.number("block_tokens", 512)?,
        ttft_slo_ms: flags.number("ttft_slo_ms", 30_000.0)?,
        tbt_slo_ms: flags.number("tbt_slo_ms", 100.0)?,
        send_slos: match flags.get("early_rejection") {
            Some(v) => parse_bool("early_rejection", v)?,
            None => false,
        },
        seed: flags.number("seed", 7)?,
    };
    if sim.prefill == 0 || sim.decode == 0 || sim.max_batch == 0 || sim.block_tokens == 0 {
        return Err("--prefill, --decode, --max_batch and --block_tokens must be > 0".into());
    }
    if !sim.speedup.is_finite() || sim.speedup <= 0.0 || !(0.0..1.0).contains(&sim.noise) {
        return Err("--speedup must be > 0 and --noise in [0, 1)".into());
    }
    Ok(Settings {
        traces: comma_list(
            flags.get("trace").unwrap_or(
                "data/fast25/conversation_trace.jsonl,data/fast25/synthetic_trace.jsonl",
            ),
        ),
        limit: flags.number("limit", 0)?,
        policies,
        sim,
        overload_speedup: flags.number("overload_speedup", 2.0)?,
        prior: cost_model(flags, "prior", CostModel::default())?,
        conductor: flags
            .get("conductor")
            .filter(|c| !c.is_empty())
            .map(str::to_string),
        bench_calls: flags.number("bench_calls", 20_000)?,
        scaling: parse_points(flags.get("scaling").unwrap_or(""))?,
    })
}

pub(crate) fn conductor_config(s: &Settings, policy: Policy, sim: &SimConfig) -> ConductorConfig {
    ConductorConfig {
        policy,
        block_tokens: sim.block_tokens,
        ttft_slo_ms: 0.0,
        tbt_slo_ms: 0.0,
        early_rejection: true,
        cost_model: s.prior,
        ..ConductorConfig::default()
    }
}

/// One point of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Point {
    pub(crate) instances: usize,
    pub(crate) blocks: u64,
}

/// Reads `8x1000,1024x100000`.
pub(crate) fn parse_points(list: &str) -> Result<Vec<Point>, String> {
    list.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (i, b) = p
                .trim()
                .split_once('x')
                .ok_or_else(|| format!("--scaling: '{p}' is not INSTANCESxBLOCKS"))?;
            let instances: usize = i
                .parse()
                .map_err(|_| format!("--scaling: bad instance count in '{p}'"))?;
            let blocks: u64 = b
                .parse()
                .map_err(|_| format!("--scaling: bad block count in '{p}'"))?;
            if instances < 2 || blocks == 0 {
                return Err(format!(
                    "--scaling: '{p}' needs >= 2 instances and >= 1 block"
                ));
            }
            Ok(Point { instances, blocks })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_read_and_checked() {
        assert_eq!(
            parse_points("8x1000, 1024x1000000").unwrap(),
            vec![
                Point {
                    instances: 8,
                    blocks: 1000
                },
                Point {
                    instances: 1024,
                    blocks: 1_000_000
                }
            ]
        );
        for bad in ["8", "1x10", "8x0", "ax10", "8x-1"] {
            assert!(parse_points(bad).is_err(), "{bad}");
        }
    }
}
