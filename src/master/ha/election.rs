//! Leader election in etcd, as upstream: the leader holds
//! `mooncake-store/<cluster_id>/master_view` (value: its RPC `ip:port`, which upstream
//! clients read) under a lease it keeps alive. Ours also publishes, under the same
//! lease, `mooncake-store/<cluster_id>/replication_view`: where its standbys fetch the
//! metadata stream.

use crate::metadata::etcd::{EtcdMetadataStore, LeaseState};
use crate::metadata::MetadataStore;
use std::time::Duration;

/// Upstream's default `--cluster_id`.
pub const DEFAULT_CLUSTER_ID: &str = "mooncake_cluster";

/// The etcd keys of one cluster.
pub struct Election {
    etcd: EtcdMetadataStore,
    view_key: String,
    replication_key: String,
    ttl: Duration,
}

/// A won election: the lease to keep alive and the revision it was won at (the view
/// version reported to clients).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    /// etcd lease id.
    pub lease: i64,
    /// etcd revision of the win.
    pub revision: i64,
}

/// The leader as etcd names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// Its RPC `ip:port`.
    pub rpc: String,
    /// Its replication `ip:port` (absent for an upstream leader).
    pub replication: Option<String>,
}

impl Election {
    /// The election of `cluster_id` in the etcd at `endpoints`, with leases of `ttl`
    /// (whole seconds, at least 1).
    pub fn new(endpoints: &str, cluster_id: &str, ttl: Duration) -> crate::error::Result<Election> {
        Ok(Election {
            etcd: EtcdMetadataStore::new(endpoints)?,
            view_key: format!("mooncake-store/{cluster_id}/master_view"),
            replication_key: format!("mooncake-store/{cluster_id}/replication_view"),
            ttl: Duration::from_secs(ttl.as_secs().max(1)),
        })
    }

    /// The lease TTL.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The current leader, `None` while there is none.
    pub fn leader(&self) -> crate::error::Result<Option<Leader>> {
        let Some(rpc) = self.etcd.get(&self.view_key)? else {
            return Ok(None);
        };
        let rpc = String::from_utf8_lossy(&rpc).trim().to_string();
        if rpc.is_empty() {
            return Ok(None);
        }
        let replication = self
            .etcd
            .get(&self.replication_key)?
            .map(|r| String::from_utf8_lossy(&r).trim().to_string())
            .filter(|r| !r.is_empty());
        Ok(Some(Leader { rpc, replication }))
    }

    /// Tries to become the leader as `rpc` (streaming from `replication`); `None` when
    /// another master holds the view.
    pub fn campaign(&self, rpc: &str, replication: &str) -> crate::error::Result<Option<Term>> {
        let lease = self.etcd.grant_lease(self.ttl.as_secs() as i64)?;
        let won = self.etcd.create_with_lease(
            &self.view_key,
            &[
                (&self.view_key, rpc.as_bytes()),
                (&self.replication_key, replication.as_bytes()),
            ],
            lease,
        );
        match won {
            Ok(Some(revision)) => Ok(Some(Term { lease, revision })),
            other => {
                let _ = self.etcd.revoke_lease(lease);
                other.map(|_| None)
            }
        }
    }

    /// Renews the term's lease once.
    pub fn keep_alive(&self, term: &Term) -> crate::error::Result<LeaseState> {
        self.etcd.keep_alive(term.lease)
    }

    /// Gives the leadership up at once (the view disappears with the lease).
    pub fn resign(&self, term: &Term) {
        if let Err(e) = self.etcd.revoke_lease(term.lease) {
            log::warn!("master ha: revoking the leader lease: {e}");
        }
    }
}
