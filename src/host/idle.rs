//! A coarse clock for dropping per-peer state nobody used for a while: when each
//! piece of state was last used, and whether it is time to look for idle ones again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Longest pause between two looks for idle state.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// Milliseconds since its creation, and the time of the last sweep.
#[derive(Debug)]
pub struct IdleClock {
    started: Instant,
    last_sweep_ms: AtomicU64,
    idle: Duration,
}

impl IdleClock {
    /// A clock for state dropped after `idle` without use; it is looked for every
    /// `idle` or every 10 s, whichever is shorter.
    pub fn new(idle: Duration) -> IdleClock {
        IdleClock {
            started: Instant::now(),
            last_sweep_ms: AtomicU64::new(0),
            idle,
        }
    }

    /// How long state may go unused before it is dropped.
    pub fn idle(&self) -> Duration {
        self.idle
    }

    /// Milliseconds since the clock started (the time stamps of "last used").
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Whether state last used at `last_used_ms` is idle at `now_ms`.
    pub fn is_idle(&self, last_used_ms: u64, now_ms: u64) -> bool {
        now_ms.saturating_sub(last_used_ms) >= self.idle.as_millis() as u64
    }

    /// Whether the caller should look for idle state now (true for one caller per
    /// sweep period).
    pub fn sweep_due(&self, now_ms: u64) -> bool {
        let every = self.idle.min(SWEEP_EVERY).as_millis() as u64;
        let last = self.last_sweep_ms.load(Ordering::Relaxed);
        now_ms.saturating_sub(last) >= every
            && self
                .last_sweep_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sweep_per_period() {
        let c = IdleClock::new(Duration::from_secs(60));
        assert!(!c.sweep_due(5_000));
        assert!(c.sweep_due(10_000));
        assert!(!c.sweep_due(10_001));
        assert!(c.sweep_due(20_000));
        assert!(!c.is_idle(0, 59_999));
        assert!(c.is_idle(0, 60_000));
        let eager = IdleClock::new(Duration::ZERO);
        assert!(eager.sweep_due(0));
        assert!(eager.sweep_due(0));
        assert!(eager.is_idle(7, 7));
    }
}
