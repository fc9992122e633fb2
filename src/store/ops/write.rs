//! The writes of [`Client`]: put and upsert of bytes (staged through the local
//! buffer), zero-copy puts, and batch writes of objects scattered over several
//! buffers; all through the write pipeline ([`write`]).

use crate::store::api::{one, StoreApi};
use crate::store::error::{StoreError, StoreResult};
use crate::store::memory::reserve_for;
use crate::store::vocab::{BatchWrite, WriteMode};
use crate::store::write::plan::{unique_items, WriteItem};
use crate::store::write::write;
use crate::store::Client;
use crate::wire::master_api::ReplicateConfig;

impl Client {
    /// Stores a copy of `value` under `key`. Like upstream, the value's size is
    /// reserved in the local buffer for the duration of the put: -600 when `value` is
    /// empty or larger than the free local buffer; an existing key is a success that
    /// keeps the old value.
    pub fn put(&self, key: &str, value: &[u8], config: &ReplicateConfig) -> StoreResult<()> {
        self.write_value(WriteMode::Put, key, value, config)
    }

    /// Stores `value` under `key`, replacing an existing object (staged through the
    /// local buffer like [`Client::put`]): -600 when empty or larger than the free
    /// local buffer.
    pub fn upsert(&self, key: &str, value: &[u8], config: &ReplicateConfig) -> StoreResult<()> {
        self.write_value(WriteMode::Upsert, key, value, config)
    }

    /// The body of [`Client::put`] and [`Client::upsert`]: `value`'s size reserved in
    /// the local buffer for the duration of the write.
    fn write_value(
        &self,
        mode: WriteMode,
        key: &str,
        value: &[u8],
        config: &ReplicateConfig,
    ) -> StoreResult<()> {
        let state = self.state()?;
        let what = || match mode {
            WriteMode::Put => format!("put('{key}')"),
            WriteMode::Upsert => format!("upsert('{key}')"),
        };
        let mut reserved = reserve_for(state.staging(), what, value.len() as u64)?;
        // An upsert always writes from the local buffer. A put does where RDMA sends
        // only from registered memory, as upstream; TCP and the local copy take its
        // bytes straight from `value`.
        let staged = mode == WriteMode::Upsert || state.engine().needs_registered_buffers();
        let source = if staged {
            reserved.fill(value);
            reserved.addr()
        } else {
            value.as_ptr() as u64
        };
        let pieces = [(source, value.len() as u64)];
        let group = match mode {
            // Upstream's master takes exactly one group id for one object; anything
            // else is passed on as given.
            WriteMode::Put => match config.group_ids.as_deref() {
                Some([g]) => Some(g.clone()),
                _ => None,
            },
            WriteMode::Upsert => config
                .group_ids
                .as_ref()
                .map(|g| g.first().cloned().unwrap_or_default()),
        };
        let item = WriteItem::new(key, &pieces, group);
        // SAFETY: `value` and the reservation are readable until the write returns.
        one(unsafe { write(&state, mode, &[item], config) })
    }

    /// Stores `buf` under `key` without copying it first (zero-copy). An empty `buf`
    /// succeeds without storing anything.
    pub fn put_from(&self, key: &str, buf: &[u8], config: &ReplicateConfig) -> StoreResult<()> {
        // SAFETY: the slice is readable for the duration of the call.
        unsafe { StoreApi::put_from_raw(self, key, buf.as_ptr() as u64, buf.len() as u64, config) }
    }

    /// Zero-copy puts of several objects in one round of master calls; one result
    /// per item (existing keys succeed). Duplicate keys collapse into one put of the
    /// last buffer given for them.
    pub fn batch_put_from(
        &self,
        keys: &[&str],
        bufs: &[&[u8]],
        config: &ReplicateConfig,
    ) -> Vec<StoreResult<()>> {
        let items: Vec<(u64, u64)> = bufs
            .iter()
            .map(|b| (b.as_ptr() as u64, b.len() as u64))
            .collect();
        // SAFETY: every slice is readable for the duration of the call.
        unsafe { StoreApi::batch_put_from_raw(self, keys, &items, config) }
    }

    /// Zero-copy writes of several objects, each the concatenation of its pieces, in
    /// one round of master calls (single-object RPCs for one key). One result per
    /// key; duplicate keys collapse into one write of the last pieces given. Objects
    /// of total size 0 get -600. With `config.group_ids`, there must be one group
    /// id per key (else every key gets -600), as upstream's master requires.
    ///
    /// # Safety
    /// Every piece must be readable until this returns.
    pub unsafe fn batch_write_raw(&self, batch: BatchWrite<'_>) -> Vec<StoreResult<()>> {
        let (keys, config) = (batch.keys, batch.config);
        let n = keys.len();
        let groups = config.group_ids.as_ref().map_or(n, Vec::len);
        let state = match self.state() {
            Ok(s) if batch.items.len() == n && groups == n => s,
            Ok(_) => {
                let cause = format!(
                    "write: {} objects and {groups} group ids for {n} keys",
                    batch.items.len()
                );
                return vec![Err(StoreError::invalid(cause)); n];
            }
            Err(e) => return vec![Err(e.into()); n],
        };
        let (unique, positions) = unique_items(keys, batch.items, config.group_ids.as_deref());
        // SAFETY: forwarded contract.
        let results = unsafe { write(&state, batch.mode, &unique, config) };
        positions.into_iter().map(|s| results[s].clone()).collect()
    }
}
