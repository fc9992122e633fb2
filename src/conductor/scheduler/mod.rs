//! The scheduler: picks a prefill and a decode instance for each request from where its
//! prefix is cached, the queues and the SLOs (the paper's Algorithm 1 and the simpler
//! policies), keeps its view of the instances' load, and learns from completions.
//!
//! This file holds the vocabulary and the state with the instance bookkeeping;
//! `place.rs` places a request, `learn.rs` learns from completions and expires
//! assignments.

mod learn;
mod place;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::config::ConductorConfig;
use super::index::{PrefixIndex, Slot};
use super::instances::{InstanceSpec, Instances, Role};
use super::predict::{ErrorLog, Predictors};

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

/// Why an instance was not registered: its id is taken by another role (HTTP 409).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instance {id:?} is registered as {role}")]
pub struct RoleTaken {
    /// The instance id.
    pub id: String,
    /// The role it is registered with.
    pub role: &'static str,
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

/// The scheduler's whole state (behind one lock in [`super::shared::SharedScheduler`]).
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
    pub fn register(&mut self, spec: InstanceSpec, now: f64) -> Result<bool, RoleTaken> {
        self.tick(now);
        if let Some(slot) = self.instances.slot_of(&spec.id) {
            let instance = self.instances.get_mut(slot).expect("indexed slot is live");
            if instance.spec.role != spec.role {
                return Err(RoleTaken {
                    id: spec.id,
                    role: instance.spec.role.name(),
                });
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
