//! The P2P Store's metadata: one [`Payload`] per object under upstream's key prefix,
//! read and changed with compare-and-swap on the key's version (etcd: its mod
//! revision), so concurrent receivers and departing nodes never lose each other's
//! changes.

use super::error::{P2pError, P2pResult};
use super::payload::Payload;
use crate::metadata::versioned::{Swapped, VersionedStore};

/// Upstream's key prefix: an object `name` lives at `mooncake/checkpoint/<name>`.
pub const KEY_PREFIX: &str = "mooncake/checkpoint/";

/// The payloads in a versioned metadata store.
pub struct Meta {
    store: Box<dyn VersionedStore>,
}

/// What [`Meta::update`] found.
#[derive(Debug)]
pub enum Updated {
    /// The payload as it now stands (changed or not).
    Kept(Payload),
    /// The change left no location, so the key was deleted.
    Deleted,
    /// There is no such object.
    Missing,
}

fn metadata_error(doing: &str, name: &str, e: impl std::fmt::Display) -> P2pError {
    P2pError::Metadata(format!("{doing} '{name}': {e}"))
}

impl Meta {
    /// Payloads in `store`.
    pub fn new(store: Box<dyn VersionedStore>) -> Meta {
        Meta { store }
    }

    /// The payload of `name` and its version.
    pub fn get(&self, name: &str) -> P2pResult<Option<(Payload, u64)>> {
        let found = self
            .store
            .get_versioned(&key(name))
            .map_err(|e| metadata_error("reading", name, e))?;
        found
            .map(|v| Ok((Payload::decode(name, &v.value)?, v.version)))
            .transpose()
    }

    /// Writes the payload of a new object: `false` when one exists (`force`: replaces
    /// it instead).
    pub fn create(&self, payload: &Payload, force: bool) -> P2pResult<bool> {
        let (key, value) = (key(&payload.name), payload.encode());
        let written = if force {
            self.store.put(&key, &value).map(|()| true)
        } else {
            self.store.create(&key, &value)
        };
        written.map_err(|e| metadata_error("writing", &payload.name, e))
    }

    /// Applies `change` to the payload of `name` until it is written over the version
    /// it was read at (a concurrent change makes it apply again to the payload as it
    /// then stands). `change` says whether it changed anything; a payload with no
    /// location left is deleted, as upstream does.
    pub fn update(
        &self,
        name: &str,
        change: impl FnMut(&mut Payload) -> bool,
    ) -> P2pResult<Updated> {
        self.update_from(name, None, change)
            .map(|(updated, _)| updated)
    }

    /// [`update`](Self::update) starting from `known`, a payload of `name` with the
    /// version it was read or written at, instead of reading it first (when it is
    /// stale, the lost swap brings the payload as it stands). Also returns the version
    /// of the payload in [`Updated::Kept`], when the store tells it.
    pub fn update_from(
        &self,
        name: &str,
        known: Option<(Payload, u64)>,
        mut change: impl FnMut(&mut Payload) -> bool,
    ) -> P2pResult<(Updated, Option<u64>)> {
        let mut current = match known {
            Some(known) => Some(known),
            None => self.get(name)?,
        };
        loop {
            let Some((mut payload, version)) = current else {
                return Ok((Updated::Missing, None));
            };
            if !change(&mut payload) {
                return Ok((Updated::Kept(payload), Some(version)));
            }
            let empty = payload.is_empty();
            let value = (!empty).then(|| payload.encode());
            let swapped = self
                .store
                .swap(&key(name), version, value.as_deref())
                .map_err(|e| metadata_error("updating", name, e))?;
            current = match swapped {
                Swapped::Written(_) if empty => return Ok((Updated::Deleted, None)),
                Swapped::Written(written) => return Ok((Updated::Kept(payload), written)),
                Swapped::Lost(None) => None,
                Swapped::Lost(Some(now)) => Some((Payload::decode(name, &now.value)?, now.version)),
            };
        }
    }

    /// The raw value of a key outside the payloads (an agent's address).
    pub fn get_raw(&self, key: &str) -> crate::error::Result<Option<Vec<u8>>> {
        Ok(self.store.get_versioned(key)?.map(|v| v.value))
    }

    /// Writes a key outside the payloads.
    pub fn put_raw(&self, key: &str, value: &[u8]) -> crate::error::Result<()> {
        self.store.put(key, value)
    }

    /// Deletes a key outside the payloads (nothing when absent).
    pub fn remove_raw(&self, key: &str) -> crate::error::Result<()> {
        while let Some(v) = self.store.get_versioned(key)? {
            if self.store.compare_and_swap(key, v.version, None)? {
                break;
            }
        }
        Ok(())
    }

    /// Every object whose name starts with `prefix`; a value that is not a payload is
    /// left out (and logged), so one corrupt key does not hide the others.
    pub fn list(&self, prefix: &str) -> P2pResult<Vec<Payload>> {
        let entries = self
            .store
            .list(&key(prefix))
            .map_err(|e| metadata_error("listing", prefix, e))?;
        let mut payloads = Vec::with_capacity(entries.len());
        for (key, v) in entries {
            let name = key.strip_prefix(KEY_PREFIX).unwrap_or(&key);
            match Payload::decode(name, &v.value) {
                Ok(p) => payloads.push(p),
                Err(e) => log::warn!("p2p: listing: {e}"),
            }
        }
        Ok(payloads)
    }
}

/// The metadata key of object `name`.
pub fn key(name: &str) -> String {
    format!("{KEY_PREFIX}{name}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::versioned::InMemoryVersionedStore;

    fn meta() -> Meta {
        Meta::new(Box::new(InMemoryVersionedStore::default()))
    }

    /// Registers object "a" (three shards of node "n:1") in `m`.
    fn with_a(m: &Meta) {
        let a = Payload::registered("a", "n:1", &[(64, 10)], 4, None);
        assert!(m.create(&a, false).unwrap());
    }

    #[test]
    fn objects_are_created_once_unless_forced() {
        let m = meta();
        let p = Payload::registered("a", "n:1", &[(64, 10)], 4, None);
        assert!(m.create(&p, false).unwrap());
        assert!(!m.create(&p, false).unwrap());
        assert!(m.create(&p, true).unwrap());
        let (got, _) = m.get("a").unwrap().unwrap();
        assert_eq!(got, p);
        assert!(m.get("b").unwrap().is_none());
    }

    #[test]
    fn an_update_that_empties_the_payload_deletes_it() {
        let m = meta();
        with_a(&m);
        match m.update("a", |p| p.add_replica(0, loc("r:1"))).unwrap() {
            Updated::Kept(p) => assert!(p.shards[0].held_by("r:1")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            m.update("a", |p| p.remove_segment("x:1")).unwrap(),
            Updated::Kept(_)
        ));
        assert!(matches!(
            m.update("a", |p| p.remove_segment("n:1") | p.remove_segment("r:1"))
                .unwrap(),
            Updated::Deleted
        ));
        assert!(matches!(m.update("a", |_| true).unwrap(), Updated::Missing));
    }

    #[test]
    fn concurrent_updates_all_stick() {
        let m = meta();
        with_a(&m);
        std::thread::scope(|s| {
            for t in 0..4 {
                let m = &m;
                s.spawn(move || {
                    for i in 0..25 {
                        m.update("a", |p| p.add_replica(0, loc(&format!("r{t}-{i}:1"))))
                            .unwrap();
                    }
                });
            }
        });
        let (p, _) = m.get("a").unwrap().unwrap();
        assert_eq!(p.shards[0].replica_list.len(), 100);
    }

    #[test]
    fn listing_skips_corrupt_values() {
        let store = InMemoryVersionedStore::default();
        store.put(&key("ckpt/bad"), b"{").unwrap();
        let m = Meta::new(Box::new(store));
        m.create(
            &Payload::registered("ckpt/a", "n:1", &[(64, 1)], 4, None),
            false,
        )
        .unwrap();
        m.create(
            &Payload::registered("other", "n:1", &[(64, 1)], 4, None),
            false,
        )
        .unwrap();
        let names: Vec<String> = m
            .list("ckpt/")
            .unwrap()
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(names, ["ckpt/a"]);
        assert!(matches!(m.get("ckpt/bad"), Err(P2pError::Corrupt { .. })));
    }

    fn loc(segment: &str) -> super::super::payload::Location {
        super::super::payload::Location {
            segment_name: segment.into(),
            offset: 1,
        }
    }
}
