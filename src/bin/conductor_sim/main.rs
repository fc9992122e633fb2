//! `conductor_sim`: replays request traces (the FAST'25 format) against the
//! conductor's HTTP API with simulated prefill and decode instances, and prints per
//! policy the TTFT, TBT, prefix-cache hit rate, refusals, effective request capacity
//! and prediction error (README "Conductor"); then the early-rejection comparison at
//! an overload, and the conductor's scheduling rate.

mod backend;
mod cluster;
mod sim;
mod trace;

mod bench;
mod report;
mod scaling;
mod settings;

use std::process::ExitCode;

use mooncake::conductor::Policy;
use mooncake::config::flags::run_main;
use serde_json::json;

use backend::{start_conductor, Http};
use report::{header, row, verdict};
use settings::{conductor_config, kind_of, settings, Settings, USAGE};
use sim::{RunResult, SimConfig};
use trace::TraceRequest;

/// One replay: against `--conductor`, or a fresh in-process conductor of `policy`.
fn replay(
    s: &Settings,
    trace: &[TraceRequest],
    policy: Policy,
    sim: &SimConfig,
    run: usize,
) -> Result<RunResult, String> {
    let prefix = format!("sim{}-{run}-", std::process::id());
    match &s.conductor {
        Some(url) => sim::run(trace, sim, &mut Http::new(url), &prefix),
        None => {
            let (server, base) = start_conductor(conductor_config(s, policy, sim))?;
            let result = sim::run(trace, sim, &mut Http::new(&base), &prefix);
            server.stop();
            result
        }
    }
}

fn run_trace(s: &Settings, path: &str) -> Result<(), String> {
    let trace = trace::load(path, s.limit)?;
    let sim = &s.sim;
    println!(
        "\n### {path}: {} requests, {} prefill + {} decode instances, speedup {} (prefill load offered without cache hits: {:.0} %)\n",
        trace.len(),
        sim.prefill,
        sim.decode,
        sim.speedup,
        100.0 * offered_load(&trace, sim)
    );
    header();
    let mut results = Vec::new();
    let policies: Vec<Policy> = if s.conductor.is_some() {
        vec![Policy::GlobalCacheAware]
    } else {
        s.policies.clone()
    };
    for (n, policy) in policies.iter().enumerate() {
        let r = replay(s, &trace, *policy, sim, n)?;
        row(
            if s.conductor.is_some() {
                "(external)"
            } else {
                policy.name()
            },
            sim.send_slos,
            &r,
        );
        results.push((*policy, r));
    }
    let get = |p: Policy| results.iter().find(|(q, _)| *q == p).map(|(_, r)| r);
    if let (Some(global), Some(least), Some(local)) = (
        get(Policy::GlobalCacheAware),
        get(Policy::LeastLoaded),
        get(Policy::LocalCacheAware),
    ) {
        println!();
        let vs_least = global.ttft_mean / least.ttft_mean.max(1e-9);
        let vs_local = global.ttft_mean / local.ttft_mean.max(1e-9);
        verdict(
            &format!(
                "global_cache_aware average TTFT {vs_least:.2}x least_loaded (target <= 0.7x)"
            ),
            vs_least <= 0.7,
        );
        verdict(
            &format!(
                "global_cache_aware average TTFT {:.1} % below local_cache_aware (target >= 10 %)",
                100.0 * (1.0 - vs_local)
            ),
            vs_local <= 0.9,
        );
        let hits = global.hit_rate / least.hit_rate.max(1e-9);
        verdict(
            &format!("global_cache_aware cache hit rate {hits:.2}x least_loaded (target >= 1.5x)"),
            hits >= 1.5,
        );
        if let Some(e) = global.prediction_error {
            verdict(
                &format!(
                    "median TTFT prediction error after warm-up {:.1} % (target <= 20 %)",
                    100.0 * e
                ),
                e <= 0.2,
            );
        }
    }
    if s.overload_speedup > 0.0 && s.conductor.is_none() {
        let over = SimConfig {
            speedup: sim.speedup * s.overload_speedup,
            ..sim.clone()
        };
        println!("\nEarly rejection at {}x the trace's load:\n", over.speedup);
        header();
        let plain = replay(
            s,
            &trace,
            Policy::LeastLoaded,
            &SimConfig {
                send_slos: false,
                ..over.clone()
            },
            100,
        )?;
        row("least_loaded", false, &plain);
        let guarded = replay(
            s,
            &trace,
            Policy::GlobalCacheAware,
            &SimConfig {
                send_slos: true,
                ..over
            },
            101,
        )?;
        row("global_cache_aware", true, &guarded);
        println!();
        verdict(&format!("least_loaded without rejection misses an SLO for {:.1} % of requests (the load must make it > 20 %)", 100.0 * plain.missed_fraction()), plain.missed_fraction() > 0.2);
        verdict(
            &format!(
                "with early rejection {:.1} % of accepted requests miss an SLO (target < 5 %)",
                100.0 * guarded.accepted_missed_fraction()
            ),
            guarded.accepted_missed_fraction() < 0.05,
        );
    }
    Ok(())
}

/// The prefill work of `trace` with no cache hits over the prefill instances' time.
fn offered_load(trace: &[TraceRequest], sim: &SimConfig) -> f64 {
    let work: f64 = trace
        .iter()
        .map(|r| sim.truth.prefill_ms(r.input_length as f64, 0.0))
        .sum();
    let span = trace.last().map_or(0.0, |r| r.timestamp) / sim.speedup;
    work / (sim.prefill as f64 * span.max(1.0))
}

fn run(s: Settings) -> Result<(), String> {
    if !s.scaling.is_empty() {
        return scaling::run(&s.scaling, s.bench_calls);
    }
    println!(
        "conductor_sim: SLOs TTFT {} ms, TBT {} ms; noise ±{:.0} %; instances' cost model {}",
        s.sim.ttft_slo_ms,
        s.sim.tbt_slo_ms,
        100.0 * s.sim.noise,
        json!({
            "prefill": {"base_ms": s.sim.truth.prefill.base_ms, "ms_per_1k_tokens": s.sim.truth.prefill.ms_per_1k_tokens, "ms_per_1m_token_pairs": s.sim.truth.prefill.ms_per_1m_token_pairs},
            "transfer": {"base_ms": s.sim.truth.transfer.base_ms, "block_bytes": s.sim.truth.transfer.block_bytes, "bandwidth_gbps": s.sim.truth.transfer.bandwidth_gbps},
            "decode": {"base_ms": s.sim.truth.decode.base_ms, "ms_per_request": s.sim.truth.decode.ms_per_request, "ms_per_1k_context": s.sim.truth.decode.ms_per_1k_context},
        })
    );
    for path in &s.traces {
        run_trace(&s, path)?;
    }
    if s.bench_calls > 0 && s.conductor.is_none() {
        let first = s.traces.first().ok_or("no trace")?;
        bench::bench(&s, &trace::load(first, s.limit)?)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    run_main("conductor_sim", USAGE, kind_of, settings, run)
}
