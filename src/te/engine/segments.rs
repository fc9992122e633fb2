//! The remote segments an engine knows: opening them by name, fetching and
//! refreshing their descriptors, and where their RPC daemons listen.

use super::state::{Inner, TransferEngine};
use crate::error::{Error, Result};
use crate::host::addr::parse_host_port;
use crate::metadata::SegmentDesc;
use crate::te::segment::LOCAL_SEGMENT_ID;
use serde_json::{json, Value};
use std::sync::Arc;

impl TransferEngine {
    /// Opens a segment by name, returning its id (0 for this engine's own name).
    pub fn open_segment(&self, name: &str) -> Result<i32> {
        let name = name.trim_start_matches('/');
        if name.is_empty() {
            return Err(Error::InvalidArgument("segment name is empty".into()));
        }
        if name == self.inner.local.name {
            return Ok(LOCAL_SEGMENT_ID);
        }
        if let Some(id) = self.inner.segments.id_of(name) {
            return Ok(id);
        }
        let desc = self.inner.fetch_descriptor(name)?;
        self.inner
            .segments
            .insert(name, desc)
            .ok_or_else(|| Error::InvalidArgument("segment ids exhausted".into()))
    }

    /// Whether the segment `name` belongs to an engine on this host: this engine's
    /// own, or one whose descriptor carries this process's host identity (what the
    /// same-host path goes by). Opens the segment (fetching its descriptor once) when
    /// it is not open yet; `false` when it cannot be opened.
    pub fn is_same_host(&self, name: &str) -> bool {
        let Ok(id) = self.open_segment(name) else {
            return false;
        };
        if id == LOCAL_SEGMENT_ID {
            return true;
        }
        let Some(mine) = crate::te::transport::same_host::identity::host_identity() else {
            return false;
        };
        self.segment_descriptor(id)
            .is_some_and(|d| d.same_host.as_ref().is_some_and(|sh| sh.identity == mine))
    }

    /// Refreshes a cached segment's descriptor, then opens it.
    pub fn open_segment_no_cache(&self, name: &str) -> Result<i32> {
        self.inner.refresh(name.trim_start_matches('/'));
        self.open_segment(name)
    }

    /// Drops the cached name -> id mapping; a later open gets a new id.
    pub fn remove_local_segment(&self, name: &str) -> Result<()> {
        let name = name.trim_start_matches('/');
        if name.is_empty() {
            return Err(Error::InvalidArgument("segment name is empty".into()));
        }
        self.inner.segments.forget(name);
        Ok(())
    }

    /// Refetches every cached remote descriptor.
    pub fn sync_segment_cache(&self) {
        self.inner.sync_all();
    }

    /// The descriptor of a remote segment id (fetched again when it was dropped for
    /// idleness; `None` when that fails or the id is not open).
    pub fn segment_descriptor(&self, id: i32) -> Option<Arc<SegmentDesc>> {
        if id == LOCAL_SEGMENT_ID {
            return self.inner.local.descriptor().map(Arc::new);
        }
        self.inner.segment(id).ok().map(|(_, d)| d)
    }
}

impl Inner {
    /// Fetches the descriptor of segment `name`: from the metadata store, or in P2P
    /// mode from the peer itself (sending ours).
    pub(super) fn fetch_descriptor(&self, name: &str) -> Result<SegmentDesc> {
        match &self.store {
            Some(store) => {
                let bytes = store
                    .get(&self.keys.segment(name))?
                    .ok_or_else(|| Error::Metadata(format!("segment '{name}' is not published")))?;
                SegmentDesc::from_slice(&bytes)
            }
            None => {
                let (host, port) = parse_host_port(name, self.config.handshake_port);
                let own = self
                    .local
                    .descriptor()
                    .map_or_else(|| json!({"name": self.local.name}), |d| d.to_json());
                let reply = self.rpc_client.exchange_metadata(&host, port, &own)?;
                SegmentDesc::from_json(&reply)
            }
        }
    }

    /// Fetches a cached segment's descriptor again (kept as it was when that fails).
    pub(super) fn refresh(&self, name: &str) {
        if self.segments.id_of(name).is_none() {
            return;
        }
        match self.fetch_descriptor(name) {
            Ok(desc) => {
                if self.segments.replace(name, Arc::new(desc)) {
                    self.rpc_meta_cache.lock().remove(name);
                }
            }
            Err(e) => log::warn!("refreshing segment '{name}': {e}"),
        }
    }

    /// Refreshes every cached segment.
    pub(super) fn sync_all(&self) {
        for name in self.segments.names() {
            self.refresh(&name);
        }
    }

    /// The name and descriptor of a remote segment id, fetching the descriptor again
    /// when it was dropped for idleness. Drops idle descriptors first, when due (with
    /// the RPC addresses of segments no longer cached).
    pub(super) fn segment(&self, id: i32) -> Result<(String, Arc<SegmentDesc>)> {
        if self.segments.drop_idle() {
            self.rpc_meta_cache
                .lock()
                .retain(|name, _| self.segments.is_cached(name));
        }
        let not_open = || Error::InvalidArgument(format!("segment id {id} is not open"));
        let (name, desc) = self.segments.get(id).ok_or_else(not_open)?;
        if let Some(desc) = desc {
            return Ok((name, desc));
        }
        let fresh = Arc::new(self.fetch_descriptor(&name)?);
        self.segments.replace(&name, fresh.clone());
        Ok((name, fresh))
    }

    /// Where segment `segment`'s RPC daemon listens (its `rpc_meta`, cached).
    pub(super) fn rpc_address(&self, segment: &str) -> Result<(String, u16)> {
        let Some(store) = &self.store else {
            return Ok(parse_host_port(segment, self.config.handshake_port));
        };
        if let Some(addr) = self.rpc_meta_cache.lock().get(segment) {
            return Ok(addr.clone());
        }
        let bytes = store
            .get(&self.keys.rpc_meta(segment))?
            .ok_or_else(|| Error::Metadata(format!("no rpc_meta for segment '{segment}'")))?;
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| Error::MalformedJson(format!("rpc_meta of '{segment}': {e}")))?;
        let host = v.get("ip_or_host_name").and_then(Value::as_str);
        let port = v.get("rpc_port").and_then(Value::as_u64);
        let (Some(host), Some(port)) = (host, port) else {
            return Err(Error::MalformedJson(format!(
                "rpc_meta of '{segment}': {v}"
            )));
        };
        let addr = (host.to_string(), port as u16);
        self.rpc_meta_cache
            .lock()
            .insert(segment.to_string(), addr.clone());
        Ok(addr)
    }
}
