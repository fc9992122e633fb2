//! `conductor_sim`: replays request traces (the FAST'25 format) against the
//! conductor's HTTP API with simulated prefill and decode instances, and prints per
//! policy the TTFT, TBT, prefix-cache hit rate, refusals, effective request capacity
//! and prediction error (README "Conductor"); then the early-rejection comparison at
//! an overload, and the conductor's scheduling rate.

mod backend;
mod cluster;
mod sim;
mod trace;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use mooncake::conductor::api::Api;
use mooncake::conductor::{Completion, InstanceSpec, Role};
use mooncake::conductor::{Conductor, ConductorConfig, CostModel, Policy, ScheduleRequest};
use mooncake::config::comma_list;
use mooncake::config::flags::{kind_in, parse_bool, run_main, FlagKind, Flags};
use mooncake::host::logger;
use mooncake::runtime::http_server::{self, HttpHandler, HttpReply, HttpServer};
use serde_json::json;

use backend::Http;
use sim::{RunResult, SimConfig};
use trace::TraceRequest;

const USAGE: &str = "\
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
  -h, --help";

const FLAGS: &[(&str, bool)] = &[
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
    ("early_rejection", true),
    ("help", true),
    ("h", true),
];

fn kind_of(name: &str) -> Option<FlagKind> {
    kind_in(FLAGS, name)
}

/// What the instances really take by default: deliberately not the conductor's
/// prior ([`CostModel::default`]), so its predictions have to be learned.
fn default_truth() -> CostModel {
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

struct Settings {
    traces: Vec<String>,
    limit: usize,
    policies: Vec<Policy>,
    sim: SimConfig,
    overload_speedup: f64,
    prior: CostModel,
    conductor: Option<String>,
    bench_calls: usize,
}

fn cost_model(flags: &Flags, name: &str, default: CostModel) -> Result<CostModel, String> {
    match flags.get(name) {
        Some(v) if !v.trim().is_empty() => {
            CostModel::from_flag(v).map_err(|e| format!("--{name}: {e}"))
        }
        _ => Ok(default),
    }
}

fn settings(flags: &Flags) -> Result<Settings, String> {
    let policies = match flags.get("policies").unwrap_or("all") {
        "all" => Policy::ALL.to_vec(),
        list => comma_list(list)
            .iter()
            .map(|p| Policy::parse(p))
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
    })
}

/// A conductor in this process, serving HTTP on a free port.
fn start_conductor(config: ConductorConfig) -> Result<(HttpServer, String), String> {
    let conductor = Conductor::new(config);
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("literal address");
    let server = HttpServer::start(addr, "conductor", Arc::new(Api(conductor)))
        .map_err(|e| e.to_string())?;
    let base = format!("http://{}", server.local_addr());
    Ok((server, base))
}

fn conductor_config(s: &Settings, policy: Policy, sim: &SimConfig) -> ConductorConfig {
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

fn header() {
    println!("| policy | early rejection | avg TTFT (s) | p90 TTFT (s) | p90 TBT (ms) | cache hit rate | refused | effective (TTFT <= SLO, TBT <= SLO) | accepted missing an SLO | TTFT prediction error (median after warm-up) | replay |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
}

fn row(policy: &str, rejection: bool, r: &RunResult) {
    println!(
        "| {policy} | {} | {:.2} | {:.2} | {:.1} | {:.1} % | {} | {} ({:.1} %) | {:.1} % | {} | {:.1} s, {:.0} calls/s |",
        if rejection { "on" } else { "off" },
        r.ttft_mean / 1e3,
        r.ttft_p90 / 1e3,
        r.tbt_p90,
        100.0 * r.hit_rate,
        r.rejected,
        r.effective,
        100.0 * r.effective as f64 / r.requests.max(1) as f64,
        100.0 * r.accepted_missed_fraction(),
        r.prediction_error
            .map_or("-".into(), |e| format!("{:.1} %", 100.0 * e)),
        r.wall_s,
        r.calls as f64 / r.wall_s.max(1e-9),
    );
    eprintln!(
        "ROW policy={policy} rejection={rejection} ttft_mean_ms={:.1} ttft_p90_ms={:.1} tbt_p90_ms={:.2} hit_rate={:.4} rejected={} effective={} requests={} accepted_missed={} prediction_error={} forgotten={}",
        r.ttft_mean,
        r.ttft_p90,
        r.tbt_p90,
        r.hit_rate,
        r.rejected,
        r.effective,
        r.requests,
        r.accepted_missed,
        r.prediction_error.unwrap_or(-1.0),
        r.forgotten
    );
}

fn verdict(what: &str, met: bool) {
    println!("- {what}: {}", if met { "met" } else { "MISSED" });
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

/// CPU time of this process's threads named `name`, in seconds.
fn thread_cpu_seconds(name: &str) -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    let mut total = 0.0;
    for task in tasks.flatten() {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let at = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        total += (at(11) + at(12)) / ticks;
    }
    total
}

/// Answers every request with one fixed placement: the HTTP server's own cost, the
/// floor under the conductor's.
struct FixedPlacement;

impl HttpHandler for FixedPlacement {
    fn handle(&self, _method: &str, _target: &str, _body: &[u8]) -> HttpReply {
        HttpReply {
            status: 200,
            content_type: "application/json",
            body: br#"{"prefill":"p0","decode":"d0","prefix_blocks":0,"transfer_blocks":0,"transfer_from":null,"est_ttft_ms":1.0,"est_tbt_ms":1.0}"#.to_vec(),
        }
    }
}

/// Sends `n` schedule calls over one keep-alive connection to `base`: calls per second
/// end to end, and per CPU-second of the server's connection thread.
fn http_rate(base: &str, n: usize, trace: &[TraceRequest]) -> Result<(f64, f64), String> {
    let mut http = Http::new(base);
    let cpu_before = thread_cpu_seconds(http_server::CONNECTION_THREAD);
    let started = Instant::now();
    for k in 0..n {
        let t = &trace[k % trace.len()];
        let body = json!({"request_id": format!("h{k}"), "hash_ids": t.hash_ids, "input_length": t.input_length, "now_ms": k as f64 * 300.0});
        http.schedule(&body)?;
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = thread_cpu_seconds(http_server::CONNECTION_THREAD) - cpu_before;
    let per_cpu = if cpu > 0.0 { n as f64 / cpu } else { 0.0 };
    Ok((n as f64 / wall, per_cpu))
}

/// Schedule calls per second through the HTTP handler on one thread (JSON in and
/// out, no socket), each completed straight away.
fn handler_rate(
    config: &ConductorConfig,
    register: &dyn Fn(&Conductor) -> Result<(), String>,
    n: usize,
    trace: &[TraceRequest],
) -> Result<f64, String> {
    let api = Api(Conductor::new(config.clone()));
    register(&api.0)?;
    let mut spent = 0.0;
    for k in 0..n {
        let t = &trace[k % trace.len()];
        let body = json!({"request_id": format!("j{k}"), "hash_ids": t.hash_ids, "input_length": t.input_length, "now_ms": k as f64 * 300.0}).to_string();
        let started = Instant::now();
        let reply = api.handle("POST", "/v1/schedule", body.as_bytes());
        spent += started.elapsed().as_secs_f64();
        if reply.status != 200 {
            return Err(format!("bench schedule: HTTP {}", reply.status));
        }
        let done = json!({"request_id": format!("j{k}"), "prefill_ms": 1000.0, "queue_ms": 0.0, "transfer_ms": 0.0, "ttft_ms": 1000.0, "tbt_ms": 20.0, "output_length": 100, "now_ms": k as f64 * 300.0}).to_string();
        api.handle("POST", "/v1/complete", done.as_bytes());
    }
    Ok(n as f64 / spent.max(1e-9))
}

/// The scheduling rate: calls straight into the scheduler on one thread, and over
/// HTTP with one keep-alive connection (with the conductor's CPU time per call, beside
/// that of the same server answering a fixed reply).
fn bench(s: &Settings, trace: &[TraceRequest]) -> Result<(), String> {
    let n = s.bench_calls;
    let sim = &s.sim;
    let config = conductor_config(s, Policy::GlobalCacheAware, sim);
    let register = |c: &Conductor| {
        c.with(|sch| {
            for i in 0..sim.prefill {
                let spec = InstanceSpec {
                    id: format!("p{i}"),
                    role: Role::Prefill,
                    kv_capacity_blocks: sim.prefill_kv_blocks,
                    max_batch: 0,
                };
                sch.register(spec, 0.0).map(|_| ())?;
            }
            for i in 0..sim.decode {
                let spec = InstanceSpec {
                    id: format!("d{i}"),
                    role: Role::Decode,
                    kv_capacity_blocks: 0,
                    max_batch: 0,
                };
                sch.register(spec, 0.0).map(|_| ())?;
            }
            Ok::<(), String>(())
        })
    };
    let conductor = Conductor::new(config.clone());
    register(&conductor)?;
    let mut spent = 0.0;
    for k in 0..n {
        let t = &trace[k % trace.len()];
        let req = ScheduleRequest {
            request_id: format!("b{k}"),
            hash_ids: t.hash_ids.clone(),
            input_length: t.input_length,
            output_length_hint: None,
            ttft_slo_ms: None,
            tbt_slo_ms: None,
            now_ms: Some(k as f64 * 300.0),
        };
        let started = Instant::now();
        let placed = conductor.schedule(&req);
        spent += started.elapsed().as_secs_f64();
        placed.map_err(|e| format!("bench schedule: {e:?}"))?;
        conductor.complete(&Completion {
            request_id: req.request_id,
            prefill_ms: 1000.0,
            queue_ms: 0.0,
            transfer_ms: 0.0,
            ttft_ms: 1000.0,
            tbt_ms: 20.0,
            output_length: 100,
            now_ms: req.now_ms,
        });
    }
    let direct = n as f64 / spent.max(1e-9);
    let handler_rate = handler_rate(&config, &register, n, trace)?;
    let (server, base) = start_conductor(config)?;
    let mut http = Http::new(&base);
    for i in 0..sim.prefill {
        http.register(&format!("p{i}"), "prefill", sim.prefill_kv_blocks, 0)?;
    }
    for i in 0..sim.decode {
        http.register(&format!("d{i}"), "decode", 0, 0)?;
    }
    let (http_wall, http_cpu) = http_rate(&base, n, trace)?;
    server.stop();
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("literal address");
    let floor =
        HttpServer::start(addr, "fixed", Arc::new(FixedPlacement)).map_err(|e| e.to_string())?;
    let (_, floor_cpu) = http_rate(&format!("http://{}", floor.local_addr()), n, trace)?;
    floor.stop();
    println!(
        "\n### Scheduling rate (global_cache_aware, {} prefill + {} decode instances, {n} calls)\n",
        sim.prefill, sim.decode
    );
    println!("| path | calls/s |\n|---|---|");
    println!("| in process, one thread (scheduling only) | {direct:.0} |");
    println!(
        "| in process, through the HTTP handler (JSON in and out, no socket) | {handler_rate:.0} |"
    );
    println!(
        "| HTTP, one keep-alive connection, end to end (client in the same process) | {http_wall:.0} |"
    );
    let us = |rate: f64| if rate > 0.0 { 1e6 / rate } else { 0.0 };
    if http_cpu > 0.0 && floor_cpu > 0.0 {
        println!(
            "| HTTP, per CPU-second of the conductor's connection thread | {http_cpu:.0} ({:.1} us a call) |",
            us(http_cpu)
        );
        println!(
            "| HTTP, the same server answering a fixed reply (the floor: socket calls, parsing) | {floor_cpu:.0} ({:.1} us a call) |",
            us(floor_cpu)
        );
    }
    println!();
    verdict(
        &format!("{direct:.0} schedule calls per second on one core (target >= 20,000)"),
        direct >= 20_000.0,
    );
    eprintln!("ROW bench direct_calls_per_s={direct:.0} http_calls_per_s={http_wall:.0} http_calls_per_cpu_s={http_cpu:.0} handler_calls_per_s={handler_rate:.0} fixed_reply_calls_per_cpu_s={floor_cpu:.0}");
    Ok(())
}

fn run(s: Settings) -> Result<(), String> {
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
        bench(&s, &trace::load(first, s.limit)?)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    logger::install();
    run_main("conductor_sim", USAGE, kind_of, settings, run)
}
