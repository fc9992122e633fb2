//! Put and get sessions (upstream's `batch_put_session_*`, `batch_get_session_*`;
//! spec sessions §A): per key, held by the client. A get session caches one memory
//! replica of an object until its read lease runs out; a put session holds the memory
//! replicas a `BatchPutStart` reserved, written by ranged puts until it is ended or
//! revoked. Ends and revokes seal the session first and wait for ranged puts in
//! flight.

use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::time::Instant;

/// Where a replica's bytes are: its owner's segment name, address and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    /// The owner's Transfer Engine segment name.
    pub endpoint: String,
    /// The buffer's address in the owner's process.
    pub addr: u64,
    /// The buffer's size (the object's).
    pub size: u64,
}

/// A get session: the replica to read, and when the read lease ends.
#[derive(Debug, Clone)]
pub(crate) struct GetSession {
    /// The replica read from.
    pub place: Place,
    /// When the lease the start was granted ends.
    pub deadline: Instant,
}

/// A put session.
#[derive(Debug, Clone)]
pub(crate) struct PutSession {
    /// Every memory replica the start reserved.
    pub places: Vec<Place>,
    /// The object's size.
    pub size: u64,
    /// False once an end or a revoke began.
    pub writable: bool,
    /// Ranged puts in flight.
    pub inflight: u32,
}

#[derive(Default)]
struct Tables {
    gets: HashMap<String, GetSession>,
    puts: HashMap<String, PutSession>,
}

/// The sessions of one client.
#[derive(Default)]
pub(crate) struct Sessions {
    tables: Mutex<Tables>,
    /// Signalled when a ranged put ends.
    idle: Condvar,
}

impl Sessions {
    /// The get session of `key`, if any.
    pub fn get(&self, key: &str) -> Option<GetSession> {
        self.tables.lock().gets.get(key).cloned()
    }

    /// Starts (or replaces) the get session of `key`.
    pub fn set_get(&self, key: &str, session: GetSession) {
        self.tables.lock().gets.insert(key.to_string(), session);
    }

    /// Ends the get session of `key` (if any).
    pub fn end_get(&self, key: &str) {
        self.tables.lock().gets.remove(key);
    }

    /// Whether `key` has a put session.
    pub fn has_put(&self, key: &str) -> bool {
        self.tables.lock().puts.contains_key(key)
    }

    /// Starts the put session of `key`.
    pub fn set_put(&self, key: &str, session: PutSession) {
        self.tables.lock().puts.insert(key.to_string(), session);
    }

    /// For a ranged put: the writable session of `key`, counted in flight until
    /// [`Sessions::done_writing`].
    pub fn begin_write(&self, key: &str) -> Option<PutSession> {
        let mut t = self.tables.lock();
        let s = t.puts.get_mut(key).filter(|s| s.writable)?;
        s.inflight += 1;
        Some(s.clone())
    }

    /// A ranged put of `key` ended.
    pub fn done_writing(&self, key: &str) {
        let mut t = self.tables.lock();
        if let Some(s) = t.puts.get_mut(key) {
            s.inflight = s.inflight.saturating_sub(1);
        }
        self.idle.notify_all();
    }

    /// Seals the put sessions of `keys` (the others are `false`) and waits until no
    /// ranged put of them is in flight.
    pub fn seal(&self, keys: &[&str]) -> Vec<bool> {
        let mut t = self.tables.lock();
        let found: Vec<bool> = keys
            .iter()
            .map(|k| match t.puts.get_mut(*k) {
                Some(s) => {
                    s.writable = false;
                    true
                }
                None => false,
            })
            .collect();
        while keys
            .iter()
            .any(|k| t.puts.get(*k).is_some_and(|s| s.inflight > 0))
        {
            self.idle.wait(&mut t);
        }
        found
    }

    /// Ends the put session of `key`.
    pub fn end_put(&self, key: &str) {
        self.tables.lock().puts.remove(key);
    }
}
