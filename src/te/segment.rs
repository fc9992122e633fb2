//! The per-engine segment cache: name <-> id and id -> descriptor. Id 0 is the
//! engine's own segment; remote ids count up from 1 and are never reused.

use crate::metadata::SegmentDesc;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;

/// Id of the engine's own segment (`LOCAL_SEGMENT`).
pub const LOCAL_SEGMENT_ID: i32 = 0;

#[derive(Default)]
struct Entries {
    by_name: HashMap<String, i32>,
    by_id: HashMap<i32, (String, Arc<SegmentDesc>)>,
    next_id: i32,
}

/// Cached remote segments of one engine.
pub struct SegmentCache {
    entries: RwLock<Entries>,
}

impl SegmentCache {
    /// An empty cache whose first remote id will be 1.
    pub fn new() -> SegmentCache {
        SegmentCache {
            entries: RwLock::new(Entries {
                next_id: 1,
                ..Default::default()
            }),
        }
    }

    /// The cached id of `name`.
    pub fn id_of(&self, name: &str) -> Option<i32> {
        self.entries.read().by_name.get(name).copied()
    }

    /// Caches a freshly fetched descriptor under `name`, returning its id (existing
    /// mapping kept if another thread won the race).
    pub fn insert(&self, name: &str, desc: SegmentDesc) -> Option<i32> {
        let mut e = self.entries.write();
        if let Some(id) = e.by_name.get(name) {
            return Some(*id);
        }
        let id = e.next_id;
        e.next_id = e.next_id.checked_add(1)?;
        e.by_name.insert(name.to_string(), id);
        e.by_id.insert(id, (name.to_string(), Arc::new(desc)));
        Some(id)
    }

    /// The descriptor and name of a remote id.
    pub fn get(&self, id: i32) -> Option<(String, Arc<SegmentDesc>)> {
        self.entries.read().by_id.get(&id).cloned()
    }

    /// Replaces the descriptor of a cached name; true when it changed.
    pub fn replace(&self, name: &str, desc: SegmentDesc) -> bool {
        let mut e = self.entries.write();
        let Some(id) = e.by_name.get(name).copied() else {
            return false;
        };
        match e.by_id.get_mut(&id) {
            Some((_, old)) if !old.same_as(&desc) => {
                *old = Arc::new(desc);
                true
            }
            _ => false,
        }
    }

    /// Forgets the name -> id mapping (a later open gets a new id).
    pub fn forget(&self, name: &str) {
        let mut e = self.entries.write();
        if let Some(id) = e.by_name.remove(name) {
            e.by_id.remove(&id);
        }
    }

    /// Names of every cached remote segment.
    pub fn names(&self) -> Vec<String> {
        self.entries.read().by_name.keys().cloned().collect()
    }
}

impl Default for SegmentCache {
    fn default() -> Self {
        SegmentCache::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let c = SegmentCache::new();
        assert_eq!(c.insert("a", desc(1)), Some(1));
        assert_eq!(c.insert("a", desc(2)), Some(1));
        assert_eq!(c.insert("b", desc(1)), Some(2));
        c.forget("a");
        assert_eq!(c.id_of("a"), None);
        assert!(c.get(1).is_none());
        assert_eq!(c.insert("a", desc(1)), Some(3));
        assert!(c.replace("a", desc(9)));
        assert!(!c.replace("a", desc(9)));
        assert_eq!(c.get(3).unwrap().1.tcp_data_port, 9);
    }
}
