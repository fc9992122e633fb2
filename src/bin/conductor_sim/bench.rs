//! `--bench`: the conductor's scheduling rate in process, through its HTTP handler and
//! over HTTP, against a fixed-reply floor.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use mooncake::conductor::api::Api;
use mooncake::conductor::{
    Completion, Conductor, ConductorConfig, InstanceSpec, Policy, Role, ScheduleRequest, Scheduler,
};
use mooncake::runtime::http_server::{self, HttpHandler, HttpReply, HttpServer};
use serde_json::json;

use crate::backend::{start_conductor, Http};
use crate::report::verdict;
use crate::settings::{conductor_config, Settings};
use crate::trace::TraceRequest;

/// CPU time of this process's threads named `name`, in seconds.
pub(crate) fn thread_cpu_seconds(name: &str) -> f64 {
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

/// Registers prefill instances `p0..` holding `prefill_kv_blocks` blocks each and
/// decode instances `d0..` without limits.
pub(crate) fn register_fleet(
    sch: &mut Scheduler,
    prefill: usize,
    decode: usize,
    prefill_kv_blocks: u64,
) -> Result<(), String> {
    for i in 0..prefill {
        let spec = InstanceSpec {
            id: format!("p{i}"),
            role: Role::Prefill,
            kv_capacity_blocks: prefill_kv_blocks,
            max_batch: 0,
        };
        sch.register(spec, 0.0).map_err(|e| e.to_string())?;
    }
    for i in 0..decode {
        let spec = InstanceSpec {
            id: format!("d{i}"),
            role: Role::Decode,
            kv_capacity_blocks: 0,
            max_batch: 0,
        };
        sch.register(spec, 0.0).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Answers every request with one fixed placement: the HTTP server's own cost, the
/// floor under the conductor's.
pub(crate) struct FixedPlacement;

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
pub(crate) fn http_rate(
    base: &str,
    n: usize,
    trace: &[TraceRequest],
) -> Result<(f64, f64), String> {
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
pub(crate) fn handler_rate(
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
pub(crate) fn bench(s: &Settings, trace: &[TraceRequest]) -> Result<(), String> {
    let n = s.bench_calls;
    let sim = &s.sim;
    let config = conductor_config(s, Policy::GlobalCacheAware, sim);
    let register = |c: &Conductor| {
        c.with(|sch| register_fleet(sch, sim.prefill, sim.decode, sim.prefill_kv_blocks))
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
