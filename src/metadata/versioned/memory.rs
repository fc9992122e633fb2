//! Versioned keys in this process: [`VersionedMap`], the table the HTTP metadata
//! server keeps, and [`InMemoryVersionedStore`], a [`VersionedStore`] over one.

use std::collections::BTreeMap;
use std::ops::Bound;

use parking_lot::Mutex;

use super::seam::{Swapped, Versioned, VersionedStore};
use crate::error::Result;

/// Keys in order, each with its value and the version of its last write. One counter
/// for the whole map numbers the writes (the first is 1), so the versions of a key only
/// grow, across a delete and a re-create too; a delete takes no number.
#[derive(Debug, Default)]
pub struct VersionedMap {
    entries: BTreeMap<String, Versioned>,
    last_version: u64,
}

impl VersionedMap {
    /// The value and version of `key`.
    pub fn get(&self, key: &str) -> Option<&Versioned> {
        self.entries.get(key)
    }

    /// The version of `key`; `None` when absent.
    pub fn version_of(&self, key: &str) -> Option<u64> {
        self.entries.get(key).map(|v| v.version)
    }

    /// Writes `key`; the version the write got.
    pub fn insert(&mut self, key: &str, value: Vec<u8>) -> u64 {
        self.last_version += 1;
        let version = self.last_version;
        self.entries
            .insert(key.to_string(), Versioned { value, version });
        version
    }

    /// Removes `key`; what it held, `None` when it did not exist.
    pub fn remove(&mut self, key: &str) -> Option<Versioned> {
        self.entries.remove(key)
    }

    /// Every key that starts with `prefix`, in key order.
    pub fn list(&self, prefix: &str) -> Vec<(String, Versioned)> {
        self.entries
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, v)| (key.clone(), v.clone()))
            .collect()
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no key.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every key, in order.
    pub fn keys(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }
}

/// A [`VersionedStore`] in this process, for tests of the modules that use one: one
/// [`VersionedMap`] behind a lock, so every operation is atomic.
#[derive(Debug, Default)]
pub struct InMemoryVersionedStore {
    map: Mutex<VersionedMap>,
}

impl InMemoryVersionedStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl VersionedStore for InMemoryVersionedStore {
    fn get_versioned(&self, key: &str) -> Result<Option<Versioned>> {
        Ok(self.map.lock().get(key).cloned())
    }

    fn create(&self, key: &str, value: &[u8]) -> Result<bool> {
        let mut map = self.map.lock();
        if map.get(key).is_some() {
            return Ok(false);
        }
        map.insert(key, value.to_vec());
        Ok(true)
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<()> {
        self.map.lock().insert(key, value.to_vec());
        Ok(())
    }

    fn compare_and_swap(&self, key: &str, version: u64, value: Option<&[u8]>) -> Result<bool> {
        let mut map = self.map.lock();
        if map.version_of(key) != Some(version) {
            return Ok(false);
        }
        match value {
            Some(value) => drop(map.insert(key, value.to_vec())),
            None => drop(map.remove(key)),
        }
        Ok(true)
    }

    fn swap(&self, key: &str, version: u64, value: Option<&[u8]>) -> Result<Swapped> {
        let mut map = self.map.lock();
        if map.version_of(key) != Some(version) {
            return Ok(Swapped::Lost(map.get(key).cloned()));
        }
        Ok(Swapped::Written(match value {
            Some(value) => Some(map.insert(key, value.to_vec())),
            None => {
                map.remove(key);
                None
            }
        }))
    }

    fn list(&self, prefix: &str) -> Result<Vec<(String, Versioned)>> {
        Ok(self.map.lock().list(prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_grow_across_delete_and_recreate() {
        let mut map = VersionedMap::default();
        assert_eq!(map.insert("a", b"1".to_vec()), 1);
        assert_eq!(map.insert("b", b"2".to_vec()), 2);
        assert_eq!(map.remove("a").map(|v| v.version), Some(1));
        assert_eq!(map.remove("a"), None);
        assert_eq!(map.insert("a", b"3".to_vec()), 3);
        assert_eq!(map.version_of("a"), Some(3));
        assert_eq!(map.version_of("zz"), None);
    }

    #[test]
    fn lists_exactly_the_prefix_in_order() {
        let mut map = VersionedMap::default();
        for key in ["p/b", "p", "p/a", "q", "o", "p/a/x", "p\u{10FFFF}"] {
            map.insert(key, key.as_bytes().to_vec());
        }
        let keys = |prefix: &str| -> Vec<String> {
            map.list(prefix).into_iter().map(|(k, _)| k).collect()
        };
        assert_eq!(keys("p/"), ["p/a", "p/a/x", "p/b"]);
        assert_eq!(keys("p"), ["p", "p/a", "p/a/x", "p/b", "p\u{10FFFF}"]);
        assert_eq!(keys("").len(), 7);
        assert!(keys("r").is_empty());
        assert_eq!(map.list("q")[0].1.value, b"q");
    }

    #[test]
    fn the_store_follows_the_contract() {
        let s = InMemoryVersionedStore::new();
        assert_eq!(s.get_versioned("k").unwrap(), None);
        assert!(s.create("k", b"a").unwrap());
        assert!(!s.create("k", b"b").unwrap());
        let v1 = s.get_versioned("k").unwrap().unwrap();
        assert_eq!(v1.value, b"a");
        assert!(s.compare_and_swap("k", v1.version, Some(b"c")).unwrap());
        assert!(!s.compare_and_swap("k", v1.version, Some(b"d")).unwrap());
        let v2 = s.get_versioned("k").unwrap().unwrap();
        assert!(v2.version > v1.version && v2.value == b"c");
        s.put("k", b"e").unwrap();
        let v3 = s.get_versioned("k").unwrap().unwrap();
        assert!(v3.version > v2.version);
        assert!(!s.compare_and_swap("k", v2.version, None).unwrap());
        assert!(s.compare_and_swap("k", v3.version, None).unwrap());
        assert_eq!(s.get_versioned("k").unwrap(), None);
        assert!(!s.compare_and_swap("k", v3.version, None).unwrap());
        assert!(s.create("k", b"f").unwrap());
        let v4 = s.get_versioned("k").unwrap().unwrap();
        assert_eq!(
            s.swap("k", v3.version, Some(b"g")).unwrap(),
            Swapped::Lost(Some(v4.clone()))
        );
        let Swapped::Written(Some(v5)) = s.swap("k", v4.version, Some(b"g")).unwrap() else {
            panic!("the swap over the current version was not written");
        };
        assert_eq!(s.get_versioned("k").unwrap().unwrap().version, v5);
        assert_eq!(s.swap("k", v5, None).unwrap(), Swapped::Written(None));
        assert_eq!(s.swap("k", v5, None).unwrap(), Swapped::Lost(None));
    }
}
