//! The Conductor: KVCache-centric global scheduling (Mooncake, FAST'25 §6). It keeps an
//! index of which instance holds which prefix blocks (fed by instances' reports over
//! HTTP and by Mooncake masters' or engines' KV events over ZeroMQ), its own view of
//! every instance's queue, and a cost model learned online from completions; for each
//! request it picks a prefill and a decode instance (optionally pulling a cached prefix
//! to the prefill instance first) or refuses the request early when its SLOs cannot
//! be met.
//!
//! [`scheduler`] decides, [`index`] and [`instances`] hold the state, [`predict`]
//! learns, [`api`] is the HTTP contract (with [`report`] and [`json_reply`]),
//! [`indexer`] the indexer API of upstream's design documents, [`events`] reads
//! KV-event payloads and [`sources`] subscribes to their publishers, feeding the
//! [`shared`] scheduler.

pub mod api;
pub mod config;
pub mod events;
pub mod index;
pub mod indexer;
pub mod instances;
pub mod json_reply;
pub mod predict;
pub mod report;
pub mod scheduler;
pub mod shared;
pub mod sources;

use std::sync::Arc;

pub use config::{ConductorConfig, CostModel, Policy};
pub use instances::{InstanceSpec, Role};
pub use scheduler::{Completion, Placement, Refusal, ScheduleRequest, Scheduler};

/// A running conductor's state, shared by its HTTP threads and event subscribers.
#[derive(Debug)]
pub struct Conductor {
    shared: Arc<shared::SharedScheduler>,
    /// The KV-event subscriptions.
    pub sources: sources::Sources,
}

impl Conductor {
    /// A conductor with no instances.
    pub fn new(config: ConductorConfig) -> Arc<Conductor> {
        Arc::new(Conductor {
            shared: Arc::new(shared::SharedScheduler::new(Scheduler::new(config))),
            sources: sources::Sources::default(),
        })
    }

    /// The clock: `given` (virtual time) or milliseconds since start.
    pub fn now(&self, given: Option<f64>) -> f64 {
        self.shared.now(given)
    }

    /// Runs `f` with the scheduler locked.
    pub fn with<R>(&self, f: impl FnOnce(&mut Scheduler) -> R) -> R {
        self.shared.with(f)
    }

    /// Places a request (see [`Scheduler::schedule`]).
    pub fn schedule(&self, req: &ScheduleRequest) -> Result<Placement, Refusal> {
        let now = self.now(req.now_ms);
        self.with(|s| s.schedule(req, now))
    }

    /// Learns from a completion (see [`Scheduler::complete`]).
    pub fn complete(&self, done: &Completion) -> bool {
        let now = self.now(done.now_ms);
        self.with(|s| s.complete(done, now))
    }

    /// Stops every KV-event subscription.
    pub fn shutdown(&self) {
        self.sources.stop_all();
    }
}

impl shared::SchedulerOwner for Conductor {
    fn shared_scheduler(&self) -> &Arc<shared::SharedScheduler> {
        &self.shared
    }
}
