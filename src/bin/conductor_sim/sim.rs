//! One replay of a trace against a conductor: requests arrive at their (scaled)
//! timestamps in virtual time, the conductor places them, the simulated instances run
//! them, and the instances report their blocks and the completions back, in virtual
//! time order.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::time::Instant;

use mooncake::conductor::CostModel;
use serde_json::{json, Value};

use crate::backend::{Decision, Http};
use crate::cluster::{BlockCache, Decode, Prefill, Running};
use crate::trace::TraceRequest;

/// How the simulated cluster is built and driven.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Prefill instances.
    pub prefill: usize,
    /// Decode instances.
    pub decode: usize,
    /// KV cache of a prefill instance, in blocks.
    pub prefill_kv_blocks: u64,
    /// KV capacity of a decode instance, in blocks.
    pub decode_kv_blocks: u64,
    /// Most requests one decode instance runs at once.
    pub max_batch: usize,
    /// Arrivals come this many times faster than the trace says.
    pub speedup: f64,
    /// Every simulated duration is scaled by a factor drawn in `1 ± noise`.
    pub noise: f64,
    /// What instances really take.
    pub truth: CostModel,
    /// Tokens per block.
    pub block_tokens: u64,
    /// The SLOs requests are judged by.
    pub ttft_slo_ms: f64,
    /// The SLOs requests are judged by.
    pub tbt_slo_ms: f64,
    /// Whether requests carry the SLOs (so the conductor may refuse them).
    pub send_slos: bool,
    /// Seed of the noise.
    pub seed: u64,
}

/// What one replay measured.
#[derive(Debug, Clone, Default)]
pub struct RunResult {
    /// Requests in the trace.
    pub requests: usize,
    /// Requests refused by the conductor.
    pub rejected: usize,
    /// Mean TTFT of the accepted requests (ms).
    pub ttft_mean: f64,
    /// 90th percentile TTFT (ms).
    pub ttft_p90: f64,
    /// 90th percentile TBT (ms), over requests with more than one output token.
    pub tbt_p90: f64,
    /// Prompt blocks not recomputed / all prompt blocks, over accepted requests.
    pub hit_rate: f64,
    /// Requests served within both SLOs (refused ones are not).
    pub effective: usize,
    /// Accepted requests that missed an SLO.
    pub accepted_missed: usize,
    /// The conductor's median relative TTFT prediction error after its warm-up.
    pub prediction_error: Option<f64>,
    /// Wall-clock seconds of the replay.
    pub wall_s: f64,
    /// HTTP calls made.
    pub calls: u64,
    /// Completions the conductor no longer knew (their assignment had expired).
    pub forgotten: u64,
}

impl RunResult {
    /// Accepted requests.
    pub fn accepted(&self) -> usize {
        self.requests - self.rejected
    }

    /// Fraction of all requests missing an SLO (refused ones count as missing).
    pub fn missed_fraction(&self) -> f64 {
        1.0 - self.effective as f64 / self.requests.max(1) as f64
    }

    /// Fraction of accepted requests missing an SLO.
    pub fn accepted_missed_fraction(&self) -> f64 {
        self.accepted_missed as f64 / self.accepted().max(1) as f64
    }
}

/// What happens next in virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// A request's prefill ends.
    PrefillDone(usize),
    /// A decode instance's step ends.
    Step(usize),
}

/// An event at a time (earliest first, then in the order they were made).
#[derive(Debug, Clone, Copy)]
struct At(f64, u64, Event);

impl PartialEq for At {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for At {}
impl PartialOrd for At {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for At {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
    }
}

/// What happened to one request.
#[derive(Debug, Clone, Default)]
struct Fate {
    accepted: bool,
    arrival: f64,
    decode: usize,
    queue_ms: f64,
    transfer_ms: f64,
    prefill_ms: f64,
    ttft: f64,
    tbt: Option<f64>,
    prefix_blocks: u64,
}

/// A replay in progress.
struct Replay<'a> {
    cfg: &'a SimConfig,
    trace: &'a [TraceRequest],
    api: &'a mut Http,
    prefix: &'a str,
    prefill: Vec<Prefill>,
    decode: Vec<Decode>,
    by_name: HashMap<String, (bool, usize)>,
    events: BinaryHeap<At>,
    seq: u64,
    rng: u64,
    fates: Vec<Fate>,
    forgotten: u64,
}

/// Replays `trace` against the conductor behind `api` (its instances registered
/// under `prefix`).
pub fn run(
    trace: &[TraceRequest],
    cfg: &SimConfig,
    api: &mut Http,
    prefix: &str,
) -> Result<RunResult, String> {
    let started = Instant::now();
    let calls_before = api.calls;
    let mut r = Replay {
        cfg,
        trace,
        api,
        prefix,
        prefill: Vec::new(),
        decode: Vec::new(),
        by_name: HashMap::new(),
        events: BinaryHeap::new(),
        seq: 0,
        rng: cfg.seed | 1,
        fates: vec![Fate::default(); trace.len()],
        forgotten: 0,
    };
    for i in 0..cfg.prefill {
        let id = format!("{prefix}p{i}");
        r.api.register(&id, "prefill", cfg.prefill_kv_blocks, 0)?;
        r.by_name.insert(id.clone(), (true, i));
        r.prefill.push(Prefill {
            id,
            busy_until: 0.0,
            cache: BlockCache::new(cfg.prefill_kv_blocks as usize),
        });
    }
    for i in 0..cfg.decode {
        let id = format!("{prefix}d{i}");
        r.api
            .register(&id, "decode", cfg.decode_kv_blocks, cfg.max_batch as u64)?;
        r.by_name.insert(id.clone(), (false, i));
        r.decode.push(Decode {
            max_batch: cfg.max_batch,
            running: Vec::new(),
            waiting: Default::default(),
            stepping: false,
        });
    }
    for (i, req) in trace.iter().enumerate() {
        let t = req.timestamp / cfg.speedup;
        r.advance(t)?;
        r.arrive(i, t)?;
    }
    r.advance(f64::INFINITY)?;
    let stats = r.api.stats()?;
    let mut result = r.summarize();
    result.prediction_error = stats
        .pointer("/prediction/ttft/median_error_after_warmup")
        .and_then(Value::as_f64);
    result.wall_s = started.elapsed().as_secs_f64();
    result.calls = api.calls - calls_before;
    for id in (0..cfg.prefill)
        .map(|i| format!("{prefix}p{i}"))
        .chain((0..cfg.decode).map(|i| format!("{prefix}d{i}")))
    {
        api.unregister(&id)?;
    }
    Ok(result)
}

impl Replay<'_> {
    /// A factor in `1 ± noise`.
    fn jitter(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let unit = (self.rng >> 11) as f64 / (1u64 << 53) as f64;
        1.0 + self.cfg.noise * (2.0 * unit - 1.0)
    }

    fn push(&mut self, at: f64, event: Event) {
        self.seq += 1;
        self.events.push(At(at, self.seq, event));
    }

    /// Runs every event up to `t`.
    fn advance(&mut self, t: f64) -> Result<(), String> {
        while let Some(At(at, _, event)) = self.events.peek().copied() {
            if at > t {
                break;
            }
            self.events.pop();
            match event {
                Event::PrefillDone(i) => self.prefill_done(i, at)?,
                Event::Step(d) => self.step(d, at)?,
            }
        }
        Ok(())
    }

    /// Request `i` arrives at `t`: placed by the conductor, started on its instances.
    fn arrive(&mut self, i: usize, t: f64) -> Result<(), String> {
        let req = &self.trace[i];
        let cfg = self.cfg;
        let mut body = json!({
            "request_id": format!("{}r{i}", self.prefix),
            "hash_ids": req.hash_ids,
            "input_length": req.input_length,
            "now_ms": t,
        });
        if cfg.send_slos {
            body["ttft_slo_ms"] = json!(cfg.ttft_slo_ms);
            body["tbt_slo_ms"] = json!(cfg.tbt_slo_ms);
        }
        self.fates[i].arrival = t;
        let (prefill, decode, transfer) = match self.api.schedule(&body)? {
            Decision::Rejected => return Ok(()),
            Decision::Placed {
                prefill,
                decode,
                transfer,
                ..
            } => (prefill, decode, transfer),
        };
        let p = match self.by_name.get(&prefill) {
            Some((true, p)) => *p,
            _ => return Err(format!("placed on {prefill:?}, not a prefill instance")),
        };
        let d = match self.by_name.get(&decode) {
            Some((false, d)) => *d,
            _ => return Err(format!("decoded on {decode:?}, not a decode instance")),
        };
        let local = self.prefill[p].cache.prefix(&req.hash_ids);
        // A pull brings what its source really holds, up to what was asked.
        let pulled = match transfer.and_then(|(from, n)| Some((*self.by_name.get(&from)?, n))) {
            Some(((true, s), n)) if s != p => {
                let available = self.prefill[s].cache.prefix(&req.hash_ids);
                available.min(local + n as usize).saturating_sub(local)
            }
            _ => 0,
        };
        let used = local + pulled;
        let prefix_tokens = (used as u64 * cfg.block_tokens).min(req.input_length - 1) as f64;
        let computed = req.input_length as f64 - prefix_tokens;
        let transfer_ms = if pulled > 0 {
            cfg.truth.transfer_ms(pulled as f64) * self.jitter()
        } else {
            0.0
        };
        let prefill_ms = cfg.truth.prefill_ms(computed, prefix_tokens) * self.jitter();
        let node = &mut self.prefill[p];
        let start = node.busy_until.max(t + transfer_ms);
        node.busy_until = start + prefill_ms;
        let end = node.busy_until;
        let evicted = node.cache.insert(&req.hash_ids);
        let id = node.id.clone();
        self.api.events(&id, &req.hash_ids, &evicted)?;
        let fate = &mut self.fates[i];
        fate.accepted = true;
        fate.decode = d;
        fate.queue_ms = (start - t - transfer_ms).max(0.0);
        fate.transfer_ms = transfer_ms;
        fate.prefill_ms = prefill_ms;
        fate.prefix_blocks = used as u64;
        self.push(end, Event::PrefillDone(i));
        Ok(())
    }

    /// Request `i`'s first token is out at `at`: it moves to its decode instance.
    fn prefill_done(&mut self, i: usize, at: f64) -> Result<(), String> {
        let fate = &mut self.fates[i];
        fate.ttft = at - fate.arrival;
        let req = &self.trace[i];
        if req.output_length <= 1 {
            return self.finish(i, at);
        }
        let d = fate.decode;
        let node = &mut self.decode[d];
        node.waiting.push_back(Running {
            request: i,
            remaining: req.output_length - 1,
            context: req.input_length + 1,
        });
        node.admit();
        if !node.stepping {
            self.start_step(d, at);
        }
        Ok(())
    }

    /// Starts decode instance `d`'s next step at `at` (none when its batch is empty).
    fn start_step(&mut self, d: usize, at: f64) {
        let node = &self.decode[d];
        if node.running.is_empty() {
            self.decode[d].stepping = false;
            return;
        }
        let dur = self
            .cfg
            .truth
            .tbt_ms(node.running.len() as f64, node.context() as f64);
        let dur = dur * self.jitter();
        self.decode[d].stepping = true;
        self.push(at + dur, Event::Step(d));
    }

    /// Decode instance `d`'s step ends at `at`: every running request has one more
    /// token; finished ones leave.
    fn step(&mut self, d: usize, at: f64) -> Result<(), String> {
        let node = &mut self.decode[d];
        let mut finished = Vec::new();
        node.running.retain_mut(|r| {
            r.remaining -= 1;
            r.context += 1;
            if r.remaining == 0 {
                finished.push(r.request);
                false
            } else {
                true
            }
        });
        node.admit();
        for i in finished {
            let fate = &mut self.fates[i];
            let first_token = fate.arrival + fate.ttft;
            fate.tbt = Some((at - first_token) / (self.trace[i].output_length - 1) as f64);
            self.finish(i, at)?;
        }
        self.start_step(d, at);
        Ok(())
    }

    /// Tells the conductor how request `i` went.
    fn finish(&mut self, i: usize, at: f64) -> Result<(), String> {
        let f = &self.fates[i];
        let body = json!({
            "request_id": format!("{}r{i}", self.prefix),
            "prefill_ms": f.prefill_ms,
            "queue_ms": f.queue_ms,
            "transfer_ms": f.transfer_ms,
            "ttft_ms": f.ttft,
            "tbt_ms": f.tbt.unwrap_or(0.0),
            "output_length": self.trace[i].output_length,
            "now_ms": at,
        });
        if !self.api.complete(&body)? {
            self.forgotten += 1;
        }
        Ok(())
    }

    fn summarize(&self) -> RunResult {
        let cfg = self.cfg;
        let accepted: Vec<(&Fate, &TraceRequest)> = self
            .fates
            .iter()
            .zip(self.trace)
            .filter(|(f, _)| f.accepted)
            .collect();
        let mut ttft: Vec<f64> = accepted.iter().map(|(f, _)| f.ttft).collect();
        let mut tbt: Vec<f64> = accepted.iter().filter_map(|(f, _)| f.tbt).collect();
        let within =
            |f: &Fate| f.ttft <= cfg.ttft_slo_ms && f.tbt.map_or(true, |t| t <= cfg.tbt_slo_ms);
        let effective = accepted.iter().filter(|(f, _)| within(f)).count();
        let blocks: u64 = accepted.iter().map(|(_, r)| r.hash_ids.len() as u64).sum();
        let reused: u64 = accepted.iter().map(|(f, _)| f.prefix_blocks).sum();
        RunResult {
            requests: self.trace.len(),
            rejected: self.trace.len() - accepted.len(),
            ttft_mean: ttft.iter().sum::<f64>() / ttft.len().max(1) as f64,
            ttft_p90: quantile(&mut ttft, 0.9),
            tbt_p90: quantile(&mut tbt, 0.9),
            hit_rate: reused as f64 / blocks.max(1) as f64,
            effective,
            accepted_missed: accepted.len() - effective,
            forgotten: self.forgotten,
            ..RunResult::default()
        }
    }
}

/// The `q` quantile of `v` (0 when empty).
pub fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}
