//! The scheduler: picks a prefill and a decode instance for each request from where its
//! prefix is cached, the queues and the SLOs (the paper's Algorithm 1 and the simpler
//! policies), keeps its view of the instances' load, and learns from completions.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::config::{ConductorConfig, Policy};
use super::index::{medium, PrefixIndex, Slot};
use super::instances::{InstanceSpec, Instances, Role};
use super::predict::{decode_features, prefill_features, transfer_features, ErrorLog, Predictors};

/// Most assignments awaiting completion; beyond it the oldest are forgotten.
const MAX_PENDING: usize = 1 << 20;
/// Output length assumed before any completion was seen.
const DEFAULT_OUTPUT_TOKENS: f64 = 256.0;

/// A request to place.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRequest {
    /// The caller's id for it (unique among requests not yet completed).
    pub request_id: String,
    /// Block hashes of its prompt, in order.
    pub hash_ids: Vec<u64>,
    /// Prompt tokens.
    pub input_length: u64,
    /// Expected output tokens, when known.
    pub output_length_hint: Option<u64>,
    /// TTFT SLO for this request (else the conductor's default).
    pub ttft_slo_ms: Option<f64>,
    /// TBT SLO for this request (else the conductor's default).
    pub tbt_slo_ms: Option<f64>,
    /// The conductor's clock now (virtual time), else wall time.
    pub now_ms: Option<f64>,
}

/// Where a request goes (serialized as the schedule call's reply).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Placement {
    /// The prefill instance.
    pub prefill: String,
    /// The decode instance.
    pub decode: String,
    /// Prompt blocks not recomputed (cached there, or pulled there first).
    pub prefix_blocks: u64,
    /// Blocks to pull to the prefill instance before it starts.
    pub transfer_blocks: u64,
    /// Where to pull them from.
    pub transfer_from: Option<String>,
    /// Predicted time to first token.
    pub est_ttft_ms: f64,
    /// Predicted time between tokens.
    pub est_tbt_ms: f64,
}

/// Why a request was not placed.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Refused to protect the SLOs (HTTP 429).
    Rejected {
        /// What would be missed.
        reason: String,
        /// Predicted time to first token.
        est_ttft_ms: f64,
        /// Predicted time between tokens.
        est_tbt_ms: f64,
    },
    /// No instance of a role it needs is registered (HTTP 503).
    NoInstance(String),
    /// The request id is already placed and not completed (HTTP 409).
    Duplicate(String),
    /// The request is malformed (HTTP 400).
    Invalid(String),
}

/// What really happened to a placed request.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The placed request.
    pub request_id: String,
    /// Prefill execution time.
    pub prefill_ms: f64,
    /// Time spent waiting in the prefill queue.
    pub queue_ms: f64,
    /// Time spent pulling the prefix.
    pub transfer_ms: f64,
    /// Time to first token.
    pub ttft_ms: f64,
    /// Average time between tokens.
    pub tbt_ms: f64,
    /// Tokens produced.
    pub output_length: u64,
    /// The conductor's clock now, else wall time.
    pub now_ms: Option<f64>,
}

/// An assignment awaiting its completion.
#[derive(Debug, Clone)]
struct Pending {
    prefill: (Slot, u64),
    decode: (Slot, u64),
    scheduled_ms: f64,
    predicted_end_ms: f64,
    shift_at_schedule: f64,
    est_ttft_ms: f64,
    est_prefill_ms: f64,
    est_tbt_ms: f64,
    computed_tokens: f64,
    prefix_tokens: f64,
    transfer_blocks: u64,
    decode_batch: f64,
    decode_context: f64,
    decode_blocks: u64,
    request_context: u64,
}

/// A prefill option for a request: where, with how much of its prefix, and when it
/// would start and end.
#[derive(Debug, Clone, Copy)]
struct Choice {
    slot: Slot,
    prefix_blocks: usize,
    transfer_blocks: usize,
    prefill_ms: f64,
    start_ms: f64,
    ttft_ms: f64,
}

/// Counters kept for `/v1/stats` and `/metrics`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    /// Requests placed.
    pub scheduled: u64,
    /// Requests refused because their TTFT SLO would be missed.
    pub rejected_ttft: u64,
    /// Requests refused because their TBT SLO would be missed.
    pub rejected_tbt: u64,
    /// Requests refused because no decode instance had room.
    pub rejected_no_room: u64,
    /// Prompt blocks of placed requests.
    pub request_blocks: u64,
    /// Of them, blocks not recomputed.
    pub prefix_blocks: u64,
    /// Of them, blocks pulled from another instance.
    pub transfer_blocks: u64,
    /// Completions learned from.
    pub completed: u64,
    /// Completions of requests the conductor did not know (or had forgotten).
    pub unknown_completions: u64,
    /// Assignments forgotten without a completion.
    pub expired: u64,
    /// Blocks reported stored.
    pub events_stored: u64,
    /// Blocks reported removed.
    pub events_removed: u64,
    /// Blocks the conductor dropped from an instance's view beyond its capacity.
    pub evicted: u64,
}

/// The scheduler's whole state (behind one lock in [`super::Conductor`]).
#[derive(Debug)]
pub struct Scheduler {
    config: ConductorConfig,
    /// Registered instances.
    pub instances: Instances,
    /// Where blocks are.
    pub index: PrefixIndex,
    /// The learned cost model.
    pub predictors: Predictors,
    /// TTFT prediction errors.
    pub ttft_errors: ErrorLog,
    /// Prefill-time prediction errors.
    pub prefill_errors: ErrorLog,
    /// TBT prediction errors.
    pub tbt_errors: ErrorLog,
    /// Counters.
    pub counters: Counters,
    pending: HashMap<String, Pending>,
    expiry: BinaryHeap<(Reverse<u64>, String)>,
    output_tokens_mean: f64,
    rotation: usize,
    rng: u64,
    prefix_scratch: Vec<u32>,
    last_now_ms: f64,
}

impl Scheduler {
    /// A scheduler with no instances.
    pub fn new(config: ConductorConfig) -> Scheduler {
        let warmup = config.warmup_requests;
        Scheduler {
            predictors: Predictors::new(&config.cost_model, config.prior_weight),
            ttft_errors: ErrorLog::new(warmup),
            prefill_errors: ErrorLog::new(warmup),
            tbt_errors: ErrorLog::new(warmup),
            rng: config.seed | 1,
            config,
            instances: Instances::default(),
            index: PrefixIndex::new(),
            counters: Counters::default(),
            pending: HashMap::new(),
            expiry: BinaryHeap::new(),
            output_tokens_mean: DEFAULT_OUTPUT_TOKENS,
            rotation: 0,
            prefix_scratch: Vec::new(),
            last_now_ms: 0.0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ConductorConfig {
        &self.config
    }

    /// The latest clock reading seen.
    pub fn now_ms(&self) -> f64 {
        self.last_now_ms
    }

    /// Assignments awaiting completion.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Registers `spec` (an existing instance of the same role is updated in place);
    /// `Err` when the id is taken by another role.
    pub fn register(&mut self, spec: InstanceSpec, now: f64) -> Result<bool, String> {
        self.tick(now);
        if let Some(slot) = self.instances.slot_of(&spec.id) {
            let instance = self.instances.get_mut(slot).expect("indexed slot is live");
            if instance.spec.role != spec.role {
                return Err(format!(
                    "instance {:?} is registered as {}",
                    spec.id,
                    instance.spec.role.name()
                ));
            }
            instance.spec = spec.clone();
            self.index.add_instance(slot, index_capacity(&spec));
            return Ok(false);
        }
        let capacity = index_capacity(&spec);
        let slot = self.instances.insert(spec, now);
        self.index.add_instance(slot, capacity);
        Ok(true)
    }

    /// Removes an instance: its blocks leave the index, its assignments are dropped
    /// (nothing waits for them). `(blocks, assignments)`, or `None` when unknown.
    pub fn unregister(&mut self, id: &str) -> Option<(usize, usize)> {
        let (slot, instance) = self.instances.remove(id)?;
        let blocks = self.index.remove_instance(slot);
        let generation = instance.generation;
        let mut dropped = Vec::new();
        for (rid, p) in &self.pending {
            if p.prefill == (slot, generation) || p.decode == (slot, generation) {
                dropped.push(rid.clone());
            }
        }
        for rid in &dropped {
            if let Some(p) = self.pending.remove(rid) {
                self.release(&p);
            }
        }
        Some((blocks, dropped.len()))
    }

    /// Applies an instance's report: blocks it now holds (in the media given with
    /// them) and blocks it dropped (from the media given with them). `None` when the
    /// instance is unknown.
    pub fn apply_events(
        &mut self,
        id: &str,
        (stored, stored_in): (&[u64], u8),
        (removed, removed_from): (&[u64], u8),
    ) -> Option<()> {
        let slot = self.instances.slot_of(id)?;
        for b in stored {
            self.counters.evicted += self.index.store(slot, *b, stored_in) as u64;
        }
        for b in removed {
            self.index.remove(slot, *b, removed_from);
        }
        self.counters.events_stored += stored.len() as u64;
        self.counters.events_removed += removed.len() as u64;
        Some(())
    }

    /// Forgets every block of the instance called `id`.
    pub fn clear_instance(&mut self, id: &str) -> Option<usize> {
        let slot = self.instances.slot_of(id)?;
        Some(self.index.clear_instance(slot))
    }

    /// Places a request, or says why not.
    pub fn schedule(&mut self, req: &ScheduleRequest, now: f64) -> Result<Placement, Refusal> {
        if req.request_id.is_empty() {
            return Err(Refusal::Invalid("request_id must not be empty".into()));
        }
        if req.input_length == 0 {
            return Err(Refusal::Invalid("input_length must be > 0".into()));
        }
        self.tick(now);
        if self.pending.contains_key(&req.request_id) {
            return Err(Refusal::Duplicate(format!(
                "request {:?} is already placed and not completed",
                req.request_id
            )));
        }
        if self.instances.prefill.is_empty() {
            return Err(Refusal::NoInstance(
                "no prefill instance is registered".into(),
            ));
        }
        if self.instances.decode.is_empty() {
            return Err(Refusal::NoInstance(
                "no decode instance is registered".into(),
            ));
        }
        self.rotation = self.rotation.wrapping_add(1);
        let best = self.choose_prefill(req, now);
        let output = req
            .output_length_hint
            .map_or(self.output_tokens_mean, |o| o as f64);
        let context = req.input_length as f64 + output;
        let decode = self.choose_decode(context);
        let est_tbt = decode.map_or(f64::INFINITY, |(_, tbt, _, _)| tbt);
        let ttft_slo = req.ttft_slo_ms.unwrap_or(self.config.ttft_slo_ms);
        let tbt_slo = req.tbt_slo_ms.unwrap_or(self.config.tbt_slo_ms);
        let reject = |reason: String| Refusal::Rejected {
            reason,
            est_ttft_ms: best.ttft_ms,
            est_tbt_ms: if est_tbt.is_finite() { est_tbt } else { -1.0 },
        };
        let Some((d_slot, est_tbt, batch, held)) = decode else {
            self.counters.rejected_no_room += 1;
            return Err(reject("no decode instance has room".into()));
        };
        if self.config.early_rejection && ttft_slo > 0.0 && best.ttft_ms > ttft_slo {
            self.counters.rejected_ttft += 1;
            return Err(reject(format!(
                "predicted TTFT {:.0} ms exceeds the SLO of {ttft_slo} ms",
                best.ttft_ms
            )));
        }
        if self.config.early_rejection && tbt_slo > 0.0 && est_tbt > tbt_slo {
            self.counters.rejected_tbt += 1;
            return Err(reject(format!(
                "predicted TBT {est_tbt:.1} ms exceeds the SLO of {tbt_slo} ms"
            )));
        }
        Ok(self.commit(req, now, best, (d_slot, est_tbt, batch, held), context))
    }

    /// Records a placement: the queues, the decode load, the index and the pending
    /// assignment.
    fn commit(
        &mut self,
        req: &ScheduleRequest,
        now: f64,
        best: Choice,
        (d_slot, est_tbt, batch, held): (Slot, f64, f64, f64),
        context: f64,
    ) -> Placement {
        let bt = self.config.block_tokens;
        let decode_blocks = (context as u64).div_ceil(bt);
        let transfer_from = (best.transfer_blocks > 0)
            .then(|| self.best_holder(&req.hash_ids, best.prefix_blocks))
            .flatten();
        let p = self
            .instances
            .get_mut(best.slot)
            .expect("live prefill slot");
        p.busy_until_ms = best.start_ms + best.prefill_ms;
        p.prefills += 1;
        let p_gen = p.generation;
        let shift_at_schedule = p.shift_ms;
        let d = self.instances.get_mut(d_slot).expect("live decode slot");
        d.decode.add(decode_blocks, context as u64);
        let d_gen = d.generation;
        for b in &req.hash_ids {
            self.counters.evicted += self.index.store(best.slot, *b, medium::GPU) as u64;
        }
        let c = &mut self.counters;
        c.scheduled += 1;
        c.request_blocks += req.hash_ids.len() as u64;
        c.prefix_blocks += best.prefix_blocks as u64;
        c.transfer_blocks += best.transfer_blocks as u64;
        let prefix_tokens = self.prefix_tokens(best.prefix_blocks, req.input_length);
        let predicted_end_ms = now + best.ttft_ms;
        let decode_end = predicted_end_ms + est_tbt * (context - req.input_length as f64);
        let expires = decode_end + self.config.assignment_timeout_ms;
        self.pending.insert(
            req.request_id.clone(),
            Pending {
                prefill: (best.slot, p_gen),
                decode: (d_slot, d_gen),
                scheduled_ms: now,
                predicted_end_ms,
                shift_at_schedule,
                est_ttft_ms: best.ttft_ms,
                est_prefill_ms: best.prefill_ms,
                est_tbt_ms: est_tbt,
                computed_tokens: req.input_length as f64 - prefix_tokens,
                prefix_tokens,
                transfer_blocks: best.transfer_blocks as u64,
                decode_batch: batch,
                decode_context: held,
                decode_blocks,
                request_context: context as u64,
            },
        );
        self.expiry
            .push((Reverse(expires.max(0.0) as u64), req.request_id.clone()));
        if self.pending.len() > MAX_PENDING {
            self.expire_oldest();
        }
        Placement {
            prefill: self.instances.name(best.slot).to_string(),
            decode: self.instances.name(d_slot).to_string(),
            prefix_blocks: best.prefix_blocks as u64,
            transfer_blocks: best.transfer_blocks as u64,
            transfer_from,
            est_ttft_ms: best.ttft_ms,
            est_tbt_ms: est_tbt,
        }
    }

    /// Learns from what happened to a placed request; `false` when it is unknown.
    pub fn complete(&mut self, done: &Completion, now: f64) -> bool {
        self.tick(now);
        let Some(p) = self.pending.remove(&done.request_id) else {
            self.counters.unknown_completions += 1;
            return false;
        };
        self.release(&p);
        self.counters.completed += 1;
        let preds = &mut self.predictors;
        if done.prefill_ms > 0.0 {
            let x = prefill_features(p.computed_tokens, p.prefix_tokens);
            preds.prefill.observe(&x, done.prefill_ms);
            self.prefill_errors
                .record(p.est_prefill_ms, done.prefill_ms);
        }
        if p.transfer_blocks > 0 && done.transfer_ms > 0.0 {
            let x = transfer_features(p.transfer_blocks as f64);
            preds.transfer.observe(&x, done.transfer_ms);
        }
        if done.tbt_ms > 0.0 {
            let x = decode_features(p.decode_batch, p.decode_context);
            preds.decode.observe(&x, done.tbt_ms);
            self.tbt_errors.record(p.est_tbt_ms, done.tbt_ms);
        }
        self.ttft_errors.record(p.est_ttft_ms, done.ttft_ms);
        if done.output_length > 0 {
            self.output_tokens_mean += (done.output_length as f64 - self.output_tokens_mean) / 64.0;
        }
        // Work placed behind this request on its prefill instance moves with its error
        // (less what earlier completions already moved it by).
        let actual_end = p.scheduled_ms + done.ttft_ms;
        if let Some(i) = self.instances.live_mut(p.prefill.0, p.prefill.1) {
            let expected_end = p.predicted_end_ms + (i.shift_ms - p.shift_at_schedule);
            if done.ttft_ms > 0.0 && i.busy_until_ms > now && i.busy_until_ms >= expected_end {
                let delta = actual_end - expected_end;
                i.busy_until_ms = (i.busy_until_ms + delta).max(now);
                i.shift_ms += delta;
            }
        }
        true
    }

    /// Moves the clock to `now` (never backwards) and forgets expired assignments.
    fn tick(&mut self, now: f64) {
        if now > self.last_now_ms {
            self.last_now_ms = now;
        }
        let now = self.last_now_ms;
        while let Some((Reverse(at), _)) = self.expiry.peek() {
            if *at as f64 > now {
                break;
            }
            let (_, rid) = self.expiry.pop().expect("peeked");
            if let Some(p) = self.pending.remove(&rid) {
                self.counters.expired += 1;
                self.release(&p);
            }
        }
    }

    /// Forgets the assignment that expires first (the table is full).
    fn expire_oldest(&mut self) {
        while let Some((_, rid)) = self.expiry.pop() {
            if let Some(p) = self.pending.remove(&rid) {
                self.counters.expired += 1;
                self.release(&p);
                return;
            }
        }
    }

    /// Takes an assignment off its instances' load.
    fn release(&mut self, p: &Pending) {
        if let Some(i) = self.instances.live_mut(p.prefill.0, p.prefill.1) {
            i.prefills = i.prefills.saturating_sub(1);
        }
        if let Some(i) = self.instances.live_mut(p.decode.0, p.decode.1) {
            i.decode.release(p.decode_blocks, p.request_context);
        }
    }

    /// Cached prompt tokens that `blocks` whole blocks stand for (at least one token is
    /// always computed).
    fn prefix_tokens(&self, blocks: usize, input_length: u64) -> f64 {
        (blocks as u64 * self.config.block_tokens).min(input_length.saturating_sub(1)) as f64
    }

    /// The prefill option of `slot` using `prefix` blocks, `transfer` of them pulled
    /// first.
    fn option(
        &self,
        slot: Slot,
        req: &ScheduleRequest,
        prefix: usize,
        transfer: usize,
        now: f64,
    ) -> Choice {
        let instance = self.instances.get(slot).expect("live prefill slot");
        let prefix_tokens = self.prefix_tokens(prefix, req.input_length);
        let computed = req.input_length as f64 - prefix_tokens;
        let prefill_ms = self.predictors.prefill_ms(computed, prefix_tokens);
        let transfer_ms = self.predictors.transfer_ms(transfer as f64);
        let start_ms = instance.busy_until_ms.max(now).max(now + transfer_ms);
        Choice {
            slot,
            prefix_blocks: prefix,
            transfer_blocks: transfer,
            prefill_ms,
            start_ms,
            ttft_ms: start_ms + prefill_ms - now,
        }
    }

    /// Picks the prefill instance by the configured policy.
    fn choose_prefill(&mut self, req: &ScheduleRequest, now: f64) -> Choice {
        let mut prefix = std::mem::take(&mut self.prefix_scratch);
        self.index
            .prefix_lengths(&req.hash_ids, medium::ALL, &mut prefix);
        let local = |slot: Slot| prefix.get(slot as usize).copied().unwrap_or(0) as usize;
        let n = self.instances.prefill.len();
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let rotation = self.rotation;
        let candidates = (0..n).map(|k| self.instances.prefill[(k + rotation) % n]);
        let best = match self.config.policy {
            Policy::Random => {
                let slot = self.instances.prefill[(self.rng % n as u64) as usize];
                self.option(slot, req, local(slot), 0, now)
            }
            Policy::RoundRobin => {
                let slot = self.instances.prefill[rotation % n];
                self.option(slot, req, local(slot), 0, now)
            }
            Policy::LeastLoaded => {
                let slot = candidates
                    .min_by(|a, b| self.queue(*a, now).total_cmp(&self.queue(*b, now)))
                    .expect("a prefill instance");
                self.option(slot, req, local(slot), 0, now)
            }
            Policy::LocalCacheAware => candidates
                .map(|slot| self.option(slot, req, local(slot), 0, now))
                .min_by(|a, b| a.ttft_ms.total_cmp(&b.ttft_ms))
                .expect("a prefill instance"),
            Policy::GlobalCacheAware => {
                let best_len = prefix.iter().copied().max().unwrap_or(0) as usize;
                let threshold = self.config.balancing_threshold;
                candidates
                    .map(|slot| {
                        let own = local(slot);
                        let here = self.option(slot, req, own, 0, now);
                        if best_len > own && best_len as f64 >= threshold * own as f64 {
                            let pulled = self.option(slot, req, best_len, best_len - own, now);
                            if pulled.ttft_ms < here.ttft_ms {
                                return pulled;
                            }
                        }
                        here
                    })
                    .min_by(|a, b| a.ttft_ms.total_cmp(&b.ttft_ms))
                    .expect("a prefill instance")
            }
        };
        self.prefix_scratch = prefix;
        best
    }

    /// Predicted prefill queue of `slot` at `now`.
    fn queue(&self, slot: Slot, now: f64) -> f64 {
        self.instances
            .get(slot)
            .map_or(f64::INFINITY, |i| i.queue_ms(now))
    }

    /// The instance holding the longest prefix of `blocks` (at least `len` blocks).
    fn best_holder(&self, blocks: &[u64], len: usize) -> Option<String> {
        let last = *blocks.get(len.checked_sub(1)?)?;
        self.index
            .holders(last)
            .iter()
            .map(|&(slot, _)| slot)
            .find(|&slot| self.index.prefix_of(slot, &blocks[..len], medium::ALL) == len)
            .map(|slot| self.instances.name(slot).to_string())
    }

    /// The decode instance with room and the lowest predicted TBT for a request of
    /// `context` tokens: `(slot, TBT, batch, context held)` as predicted with it.
    fn choose_decode(&self, context: f64) -> Option<(Slot, f64, f64, f64)> {
        let blocks = (context as u64).div_ceil(self.config.block_tokens);
        let n = self.instances.decode.len();
        (0..n)
            .map(|k| self.instances.decode[(k + self.rotation) % n])
            .filter_map(|slot| {
                let i = self.instances.get(slot)?;
                if !i.decode_has_room(blocks) {
                    return None;
                }
                let batch = (i.decode.requests + 1) as f64;
                let held = i.decode.context as f64 + context;
                Some((slot, self.predictors.tbt_ms(batch, held), batch, held))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }
}

/// What the index may hold for an instance: a prefill instance's cache capacity; a
/// decode instance's capacity is for running requests, so its cache is not limited
/// by the conductor.
fn index_capacity(spec: &InstanceSpec) -> u64 {
    match spec.role {
        Role::Prefill => spec.kv_capacity_blocks,
        Role::Decode | Role::Store => 0,
    }
}
