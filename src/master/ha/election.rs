//! Leader election, as upstream: the leader holds
//! `mooncake-store/<cluster_id>/master_view` (value: its RPC `ip:port`, which upstream
//! clients read) and keeps it alive: in etcd under a lease, in Redis as a key with a
//! TTL renewed only by its holder. Ours also publishes, with the same lifetime,
//! `mooncake-store/<cluster_id>/replication_view`: where its standbys fetch the
//! metadata stream.

use crate::metadata::etcd::{EtcdMetadataStore, LeaseState};
use crate::metadata::redis::{RedisAuth, RedisMetadataStore};
use crate::metadata::MetadataStore;
use crate::wire::master_view::master_view_key;
use std::time::Duration;

/// Where the view lives.
enum Backend {
    Etcd(EtcdMetadataStore),
    Redis(RedisMetadataStore),
}

impl Backend {
    fn store(&self) -> &dyn MetadataStore {
        match self {
            Backend::Etcd(e) => e,
            Backend::Redis(r) => r,
        }
    }
}

/// The etcd keys of one cluster.
pub struct Election {
    backend: Backend,
    view_key: String,
    replication_key: String,
    /// Redis only: bumped by every win (the view version).
    version_key: String,
    ttl: Duration,
}

/// A won election: what keeps it alive and the view version it was won at (reported
/// to clients).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// etcd lease id (0 in Redis).
    pub lease: i64,
    /// etcd revision of the win, or Redis's win counter.
    pub revision: i64,
    /// The view's value while this term lasts.
    pub holder: String,
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
    /// The election of `cluster_id` in the etcd at `endpoints` (or in Redis when they
    /// are `redis://host:port`, credentials from `MC_REDIS_*`), with leases of `ttl`
    /// (whole seconds, at least 1).
    pub fn new(endpoints: &str, cluster_id: &str, ttl: Duration) -> crate::error::Result<Election> {
        let backend = if endpoints.trim().starts_with("redis://") {
            Backend::Redis(RedisMetadataStore::new(endpoints, RedisAuth::from_env())?)
        } else {
            Backend::Etcd(EtcdMetadataStore::new(endpoints)?)
        };
        Ok(Election {
            backend,
            view_key: master_view_key(cluster_id),
            replication_key: format!("mooncake-store/{cluster_id}/replication_view"),
            version_key: format!("mooncake-store/{cluster_id}/view_version"),
            ttl: Duration::from_secs(ttl.as_secs().max(1)),
        })
    }

    /// The lease TTL.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The current leader, `None` while there is none.
    pub fn leader(&self) -> crate::error::Result<Option<Leader>> {
        let store = self.backend.store();
        let Some(rpc) = store.get(&self.view_key)? else {
            return Ok(None);
        };
        let rpc = String::from_utf8_lossy(&rpc).trim().to_string();
        if rpc.is_empty() {
            return Ok(None);
        }
        let replication = store
            .get(&self.replication_key)?
            .map(|r| String::from_utf8_lossy(&r).trim().to_string())
            .filter(|r| !r.is_empty());
        Ok(Some(Leader { rpc, replication }))
    }

    /// Tries to become the leader as `rpc` (streaming from `replication`); `None` when
    /// another master holds the view.
    pub fn campaign(&self, rpc: &str, replication: &str) -> crate::error::Result<Option<Term>> {
        let etcd = match &self.backend {
            Backend::Etcd(e) => e,
            Backend::Redis(r) => {
                let won = r.create_with_ttl(
                    (&self.view_key, rpc.as_bytes()),
                    (&self.replication_key, replication.as_bytes()),
                    &self.version_key,
                    self.ttl,
                )?;
                return Ok(won.map(|revision| Term {
                    lease: 0,
                    revision,
                    holder: rpc.to_string(),
                }));
            }
        };
        let lease = etcd.grant_lease(self.ttl.as_secs() as i64)?;
        let won = etcd.create_with_lease(
            &self.view_key,
            &[
                (&self.view_key, rpc.as_bytes()),
                (&self.replication_key, replication.as_bytes()),
            ],
            lease,
        );
        match won {
            Ok(Some(revision)) => Ok(Some(Term {
                lease,
                revision,
                holder: rpc.to_string(),
            })),
            other => {
                let _ = etcd.revoke_lease(lease);
                other.map(|_| None)
            }
        }
    }

    /// Renews the term once.
    pub fn keep_alive(&self, term: &Term) -> crate::error::Result<LeaseState> {
        match &self.backend {
            Backend::Etcd(e) => e.keep_alive(term.lease),
            Backend::Redis(r) => {
                let held = r.renew_if_owner(
                    &self.view_key,
                    &self.replication_key,
                    term.holder.as_bytes(),
                    self.ttl,
                )?;
                Ok(if held {
                    LeaseState::Alive(self.ttl.as_secs() as i64)
                } else {
                    LeaseState::Gone
                })
            }
        }
    }

    /// Gives the leadership up at once (the view disappears).
    pub fn resign(&self, term: &Term) {
        let done = match &self.backend {
            Backend::Etcd(e) => e.revoke_lease(term.lease),
            Backend::Redis(r) => r.delete_if_owner(
                &self.view_key,
                &self.replication_key,
                term.holder.as_bytes(),
            ),
        };
        if let Err(e) = done {
            log::warn!("master ha: giving up the view: {e}");
        }
    }
}
