//! Publishing this engine's metadata: its `rpc_meta` entry and segment descriptor,
//! again on demand ([`MetadataPublisher`]).

use super::state::{Inner, TransferEngine};
use crate::error::{Error, Result};
use crate::te::rpc::encode_json;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

impl TransferEngine {
    /// A handle that re-publishes this engine's metadata (its `rpc_meta` entry and
    /// segment descriptor), e.g. after the metadata server restarted empty. It holds
    /// no strong reference: once the engine is gone, re-publishing does nothing.
    pub fn metadata_publisher(&self) -> MetadataPublisher {
        MetadataPublisher(Arc::downgrade(&self.inner))
    }
}

/// Re-publishes an engine's metadata; see [`TransferEngine::metadata_publisher`].
#[derive(Clone)]
pub struct MetadataPublisher(Weak<Inner>);

impl MetadataPublisher {
    /// Writes the `rpc_meta` entry (accepting an identical existing one) and the
    /// current descriptor again. P2P engines publish nothing, so this is a no-op.
    pub fn republish(&self) -> Result<()> {
        let Some(inner) = self.0.upgrade() else {
            return Ok(());
        };
        let Some(store) = inner.store.as_ref() else {
            return Ok(());
        };
        if inner.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        inner.publish_rpc_meta().or_else(|e| {
            let key = inner.keys.rpc_meta(&inner.local.name);
            match store.get(&key) {
                Ok(Some(existing)) if existing == inner.rpc_meta_body() => Ok(()),
                _ => Err(e),
            }
        })?;
        inner.publish_descriptor()
    }
}

impl Inner {
    /// Writes this engine's `rpc_meta` entry.
    pub(super) fn publish_rpc_meta(&self) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        store
            .set(&self.keys.rpc_meta(&self.local.name), &self.rpc_meta_body())
            .map_err(|e| {
                Error::Metadata(format!(
                    "publishing rpc_meta for '{}' (is another engine using this name?): {e}",
                    self.local.name
                ))
            })?;
        self.rpc_meta_created.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// The rpc_meta value in upstream's `Json::FastWriter` form (sorted, newline).
    pub(super) fn rpc_meta_body(&self) -> Vec<u8> {
        encode_json(&json!({"ip_or_host_name": self.rpc_host, "rpc_port": self.rpc_port}))
    }

    /// Writes the current descriptor (nothing before a transport is installed).
    pub(super) fn publish_descriptor(&self) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let _serial = self.publish_lock.lock();
        let Some(desc) = self.local.descriptor() else {
            return Ok(());
        };
        store.set(
            &self.keys.segment(&self.local.name),
            &encode_json(&desc.to_json()),
        )?;
        self.descriptor_published.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Publishes the descriptor; when that fails, the regions based at `addrs` are
    /// unregistered again (from the engine and every transport).
    pub(super) fn publish_or_rollback(&self, addrs: &[u64]) -> Result<()> {
        self.publish_descriptor().inspect_err(|_| {
            let transports = self.local.transports.all();
            for &a in addrs {
                let _ = self.local.memory.unregister(a);
                for t in &transports {
                    t.unregister(a);
                }
            }
        })
    }
}
