//! The per-engine segment cache: name <-> id and id -> descriptor. Id 0 is the
//! engine's own segment; remote ids count up from 1 and are never reused.
//!
//! An id stays valid to its holder for the engine's life (the C ABI hands ids out),
//! but the descriptor behind it, the large part, is dropped once the segment went
//! unused for a while ([`SegmentCache::drop_idle`]) and fetched again on next use: a
//! long-lived engine meets many peers that are gone for good (a restarted process
//! gets a new name), and keeps only their small name <-> id pair.

use crate::host::idle::IdleClock;
use crate::metadata::SegmentDesc;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Id of the engine's own segment (`LOCAL_SEGMENT`).
pub const LOCAL_SEGMENT_ID: i32 = 0;

/// One remote segment.
struct Entry {
    name: Arc<str>,
    /// `None` once dropped for idleness.
    desc: Option<Arc<SegmentDesc>>,
    /// When it was last looked up ([`IdleClock::now_ms`]).
    last_used_ms: AtomicU64,
}

#[derive(Default)]
struct Entries {
    by_name: HashMap<Arc<str>, i32>,
    by_id: HashMap<i32, Entry>,
    next_id: i32,
}

/// Cached remote segments of one engine.
pub struct SegmentCache {
    entries: RwLock<Entries>,
    clock: IdleClock,
}

impl SegmentCache {
    /// An empty cache whose first remote id will be 1; descriptors unused for
    /// `clock`'s idle time are dropped.
    pub fn new(clock: IdleClock) -> SegmentCache {
        SegmentCache {
            entries: RwLock::new(Entries {
                next_id: 1,
                ..Default::default()
            }),
            clock,
        }
    }

    /// The cached id of `name`.
    pub fn id_of(&self, name: &str) -> Option<i32> {
        self.entries.read().by_name.get(name).copied()
    }

    /// Caches a freshly fetched descriptor under `name`, returning its id (existing
    /// mapping kept if another thread won the race; its descriptor is set if it had
    /// none).
    pub fn insert(&self, name: &str, desc: SegmentDesc) -> Option<i32> {
        let now_ms = self.clock.now_ms();
        let mut e = self.entries.write();
        if let Some(&id) = e.by_name.get(name) {
            if let Some(entry) = e.by_id.get_mut(&id) {
                entry.desc.get_or_insert_with(|| Arc::new(desc));
            }
            return Some(id);
        }
        let id = e.next_id;
        e.next_id = e.next_id.checked_add(1)?;
        let name: Arc<str> = Arc::from(name);
        e.by_name.insert(name.clone(), id);
        let entry = Entry {
            name,
            desc: Some(Arc::new(desc)),
            last_used_ms: AtomicU64::new(now_ms),
        };
        e.by_id.insert(id, entry);
        Some(id)
    }

    /// The name of a remote id and its descriptor, `None` when it was dropped for
    /// idleness (fetch it again and [`SegmentCache::replace`] it).
    pub fn get(&self, id: i32) -> Option<(String, Option<Arc<SegmentDesc>>)> {
        let now_ms = self.clock.now_ms();
        let e = self.entries.read();
        let entry = e.by_id.get(&id)?;
        entry.last_used_ms.store(now_ms, Ordering::Relaxed);
        Some((entry.name.to_string(), entry.desc.clone()))
    }

    /// Sets the descriptor of a cached name; true when it changed (or had been
    /// dropped).
    pub fn replace(&self, name: &str, desc: Arc<SegmentDesc>) -> bool {
        let mut e = self.entries.write();
        let Some(id) = e.by_name.get(name).copied() else {
            return false;
        };
        match e.by_id.get_mut(&id).map(|entry| &mut entry.desc) {
            Some(Some(old)) if old.same_as(&desc) => false,
            Some(slot) => {
                *slot = Some(desc);
                true
            }
            None => false,
        }
    }

    /// Forgets the name -> id mapping (a later open gets a new id).
    pub fn forget(&self, name: &str) {
        let mut e = self.entries.write();
        if let Some(id) = e.by_name.remove(name) {
            e.by_id.remove(&id);
        }
    }

    /// Names of the remote segments whose descriptor is cached.
    pub fn names(&self) -> Vec<String> {
        let e = self.entries.read();
        let cached = e.by_id.values().filter(|entry| entry.desc.is_some());
        cached.map(|entry| entry.name.to_string()).collect()
    }

    /// Whether `name`'s descriptor is cached.
    pub fn is_cached(&self, name: &str) -> bool {
        let e = self.entries.read();
        let id = e.by_name.get(name);
        id.and_then(|id| e.by_id.get(id))
            .is_some_and(|entry| entry.desc.is_some())
    }

    /// Drops the descriptors unused for the idle time and not in use right now,
    /// when it is time to look (see [`IdleClock::sweep_due`]); whether it looked.
    pub fn drop_idle(&self) -> bool {
        let now_ms = self.clock.now_ms();
        if !self.clock.sweep_due(now_ms) {
            return false;
        }
        let dropped: Vec<Arc<SegmentDesc>> = {
            let mut e = self.entries.write();
            let idle = e.by_id.values_mut().filter(|entry| {
                let unused = entry
                    .desc
                    .as_ref()
                    .is_some_and(|d| Arc::strong_count(d) == 1);
                unused
                    && self
                        .clock
                        .is_idle(entry.last_used_ms.load(Ordering::Relaxed), now_ms)
            });
            idle.filter_map(|entry| entry.desc.take()).collect()
        };
        if !dropped.is_empty() {
            log::debug!("dropped {} idle segment descriptors", dropped.len());
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn desc(port: u16) -> SegmentDesc {
        SegmentDesc {
            name: "a".into(),
            protocol: "tcp".into(),
            tcp_data_port: port,
            ..Default::default()
        }
    }

    #[test]
    fn ids_start_at_one_and_are_not_reused() {
        let c = SegmentCache::new(IdleClock::new(Duration::from_secs(60)));
        assert_eq!(c.insert("a", desc(1)), Some(1));
        assert_eq!(c.insert("a", desc(2)), Some(1));
        assert_eq!(c.insert("b", desc(1)), Some(2));
        c.forget("a");
        assert_eq!(c.id_of("a"), None);
        assert!(c.get(1).is_none());
        assert_eq!(c.insert("a", desc(1)), Some(3));
        assert!(c.replace("a", Arc::new(desc(9))));
        assert!(!c.replace("a", Arc::new(desc(9))));
        assert_eq!(c.get(3).unwrap().1.unwrap().tcp_data_port, 9);
    }

    #[test]
    fn idle_descriptors_are_dropped_and_ids_stay() {
        let c = SegmentCache::new(IdleClock::new(Duration::ZERO));
        assert_eq!(c.insert("a", desc(1)), Some(1));
        assert_eq!(c.insert("b", desc(2)), Some(2));
        let (_, held) = c.get(2).unwrap();
        assert!(c.drop_idle());
        // In use right now: kept.
        assert!(c.is_cached("b") && !c.is_cached("a"));
        assert_eq!(c.names(), vec!["b".to_string()]);
        drop(held);
        assert!(c.drop_idle());
        assert!(c.names().is_empty());
        assert_eq!(c.get(1), Some(("a".to_string(), None)));
        assert_eq!(c.id_of("a"), Some(1));
        // Fetched again: the same id gets it back.
        assert!(c.replace("a", Arc::new(desc(3))));
        assert_eq!(c.insert("a", desc(4)), Some(1));
        assert_eq!(c.get(1).unwrap().1.unwrap().tcp_data_port, 3);
        let patient = SegmentCache::new(IdleClock::new(Duration::from_secs(3600)));
        patient.insert("a", desc(1));
        assert!(!patient.drop_idle());
        assert!(patient.is_cached("a"));
    }
}
