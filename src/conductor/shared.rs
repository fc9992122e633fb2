//! What the conductor's HTTP threads and its KV-event subscribers share: the scheduler
//! under its lock, and the clock. The subscribers hold it weakly, so they never reach
//! back into the [`super::Conductor`] that owns them.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::scheduler::Scheduler;

/// The scheduler behind its lock, with the conductor's start time.
#[derive(Debug)]
pub struct SharedScheduler {
    scheduler: Mutex<Scheduler>,
    started: Instant,
}

impl SharedScheduler {
    /// Wraps `scheduler`; the clock starts now.
    pub fn new(scheduler: Scheduler) -> SharedScheduler {
        SharedScheduler {
            scheduler: Mutex::new(scheduler),
            started: Instant::now(),
        }
    }

    /// The clock: `given` (virtual time) or milliseconds since start.
    pub fn now(&self, given: Option<f64>) -> f64 {
        given.unwrap_or_else(|| self.started.elapsed().as_secs_f64() * 1e3)
    }

    /// Runs `f` with the scheduler locked.
    pub fn with<R>(&self, f: impl FnOnce(&mut Scheduler) -> R) -> R {
        f(&mut self.scheduler.lock())
    }
}

/// What KV-event subscriptions feed: whatever owns the shared scheduler (the
/// [`super::Conductor`]), so that they need not know it.
pub trait SchedulerOwner {
    /// The scheduler it shares.
    fn shared_scheduler(&self) -> &Arc<SharedScheduler>;
}

impl<T: SchedulerOwner + ?Sized> SchedulerOwner for Arc<T> {
    fn shared_scheduler(&self) -> &Arc<SharedScheduler> {
        (**self).shared_scheduler()
    }
}
