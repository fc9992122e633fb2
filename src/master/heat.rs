//! Read heat for dynamic (hot-object) replication (spec dynamic-replication §1, §2.1,
//! §2.2): `--dynamic_replication_mode` (`off`, `observe`, `enforce`), and per key a
//! tumbling window of `--dynamic_replication_heat_window_seconds` counting the reads
//! that found between 1 and `max_memory_replicas - 1` readable memory replicas. The
//! read that makes the count reach `max(1, ceil(qps × window))` queues the key for a
//! copy (enforce) or is logged (observe): at most once per window.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use parking_lot::Mutex;

use super::config::{DynamicMode, MasterConfig};

/// Keys whose windows are kept at most (reads of further keys are not counted).
const MAX_WINDOWS: usize = 50_000;
/// Keys waiting for a copy at most.
const MAX_QUEUED: usize = 50_000;

/// (tenant, key).
pub(super) type HotKey = (String, String);

#[derive(Debug, Clone, Copy)]
struct Window {
    /// ns on the master's clock.
    start: u64,
    hits: u32,
}

/// Read heat per key, and the keys found hot.
pub(super) struct Heat {
    mode: DynamicMode,
    window_ns: u64,
    min_hits: u32,
    /// Readable memory replicas at which an object is no longer replicated.
    pub max_replicas: usize,
    windows: Mutex<HashMap<HotKey, Window>>,
    queue: Mutex<(VecDeque<HotKey>, HashSet<HotKey>)>,
}

impl Heat {
    /// The heat tracking `config` asks for.
    pub fn new(config: &MasterConfig) -> Heat {
        let window = config
            .dynamic_replication_heat_window
            .max(Duration::from_secs(1));
        let hits =
            (config.dynamic_replication_admission_qps_threshold * window.as_secs_f64()).ceil();
        Heat {
            mode: config.dynamic_replication_mode,
            window_ns: u64::try_from(window.as_nanos()).unwrap_or(u64::MAX),
            min_hits: if hits.is_finite() && hits >= 1.0 {
                hits.min(f64::from(u32::MAX)) as u32
            } else {
                1
            },
            max_replicas: config.dynamic_replication_max_memory_replicas.max(1) as usize,
            windows: Mutex::new(HashMap::new()),
            queue: Mutex::new((VecDeque::new(), HashSet::new())),
        }
    }

    /// The mode.
    pub fn mode(&self) -> DynamicMode {
        self.mode
    }

    /// A read of (tenant, key) that found `memory` readable memory replicas, at `now`.
    pub fn note_read(&self, tenant: &str, key: &str, memory: usize, now: u64) {
        if self.mode == DynamicMode::Off || memory == 0 || memory >= self.max_replicas {
            return;
        }
        let hot_key = (tenant.to_string(), key.to_string());
        let hot = {
            let mut windows = self.windows.lock();
            if windows.len() >= MAX_WINDOWS && !windows.contains_key(&hot_key) {
                return;
            }
            let w = windows.entry(hot_key.clone()).or_insert(Window {
                start: now,
                hits: 0,
            });
            if now.saturating_sub(w.start) >= self.window_ns {
                *w = Window {
                    start: now,
                    hits: 0,
                };
            }
            w.hits = w.hits.saturating_add(1);
            w.hits == self.min_hits
        };
        if !hot {
            return;
        }
        if self.mode == DynamicMode::Observe {
            log::info!("dynamic_replication_observe_would_propose key={key}");
            return;
        }
        let mut q = self.queue.lock();
        if q.0.len() < MAX_QUEUED && q.1.insert(hot_key.clone()) {
            q.0.push_back(hot_key);
        }
    }

    /// Whether (tenant, key) is hot in its current window at `now`.
    pub fn is_hot(&self, key: &HotKey, now: u64) -> bool {
        self.windows.lock().get(key).is_some_and(|w| {
            now.saturating_sub(w.start) < self.window_ns && w.hits >= self.min_hits
        })
    }

    /// Up to `n` keys found hot, oldest first.
    pub fn take_hot(&self, n: usize) -> Vec<HotKey> {
        let mut q = self.queue.lock();
        let n = n.min(q.0.len());
        let taken: Vec<HotKey> = q.0.drain(..n).collect();
        for k in &taken {
            q.1.remove(k);
        }
        taken
    }

    /// Forgets windows that ended more than one window ago.
    pub fn sweep(&self, now: u64) {
        let horizon = self.window_ns.saturating_mul(2);
        self.windows
            .lock()
            .retain(|_, w| now.saturating_sub(w.start) <= horizon);
    }
}

/// Upstream's `StableScore`: 64-bit FNV-1a of the key, a 0xff separator, the segment
/// name and another separator (the tie-breaker of source and target choice).
pub(super) fn stable_score(key: &str, segment: &str) -> u64 {
    const OFFSET: u64 = 1_469_598_103_934_665_603;
    const PRIME: u64 = 1_099_511_628_211;
    let mut h = OFFSET;
    for part in [key, segment] {
        for b in part.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(PRIME);
        }
        h ^= 0xff;
        h = h.wrapping_mul(PRIME);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heat(mode: DynamicMode, window_s: u64, qps: f64, max: u64) -> Heat {
        Heat::new(&MasterConfig {
            dynamic_replication_mode: mode,
            dynamic_replication_heat_window: Duration::from_secs(window_s),
            dynamic_replication_admission_qps_threshold: qps,
            dynamic_replication_max_memory_replicas: max,
            ..MasterConfig::default()
        })
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_key_is_hot_once_per_window_at_the_threshold() {
        let h = heat(DynamicMode::Enforce, 5, 1.0, 2);
        assert_eq!(h.min_hits, 5);
        let key = ("t".to_string(), "k".to_string());
        for i in 0..4 {
            h.note_read("t", "k", 1, i);
        }
        assert!(h.take_hot(10).is_empty() && !h.is_hot(&key, 4));
        h.note_read("t", "k", 1, 5);
        h.note_read("t", "k", 1, 6);
        assert!(h.is_hot(&key, 7));
        assert_eq!(h.take_hot(10), vec![key.clone()]);
        // More reads in the same window do not queue it again; a new window may.
        for i in 0..10 {
            h.note_read("t", "k", 1, 10 + i);
        }
        assert!(h.take_hot(10).is_empty());
        for i in 0..5 {
            h.note_read("t", "k", 1, 6 * S + i);
        }
        assert_eq!(h.take_hot(10), vec![key.clone()]);
        // Reads at the cap or without a memory replica are not counted.
        for i in 0..10 {
            h.note_read("t", "full", 2, i);
            h.note_read("t", "disk", 0, i);
        }
        assert!(h.take_hot(10).is_empty());
        h.sweep(100 * S);
        assert!(!h.is_hot(&key, 100 * S));
    }

    #[test]
    fn observe_and_off_queue_nothing_and_scores_are_fnv() {
        for mode in [DynamicMode::Observe, DynamicMode::Off] {
            let h = heat(mode, 10, 0.1, 3);
            for i in 0..5 {
                h.note_read("t", "k", 1, i);
            }
            assert!(h.take_hot(10).is_empty());
        }
        assert_eq!(heat(DynamicMode::Enforce, 10, 0.8, 2).min_hits, 8);
        assert_eq!(heat(DynamicMode::Enforce, 2, 2.0, 2).min_hits, 4);
        assert_ne!(stable_score("k", "a"), stable_score("k", "b"));
        assert_eq!(stable_score("", ""), {
            let p = 1_099_511_628_211u64;
            ((1_469_598_103_934_665_603u64 ^ 0xff).wrapping_mul(p) ^ 0xff).wrapping_mul(p)
        });
    }
}
