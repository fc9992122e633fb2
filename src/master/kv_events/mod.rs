//! KV events (spec tiers-events-conductor.md §2): the master announces every completed
//! put (`stored`) and every object that is gone (`removed`) to ZeroMQ subscribers, as
//! upstream's master built with libzmq does, byte for byte on the wire.
//!
//! [`config`] holds the flags (how a key becomes a block hash is the wire
//! protocol's, `crate::wire::kv_key_hash`, shared with the conductor),
//! [`payload`] the msgpack event maps, [`pipeline`] the bounded queue and numbering,
//! and [`KvEvents`] the PUB socket (`crate::codec::zmtp`) and its worker thread. Which
//! master operations emit what is decided at the call sites (`write`, `remove`,
//! `eviction`): see [`Medium::for_put_end`].
//!
//! Across an HA failover (ours, not upstream's: its master publishes nothing there), a
//! leader's term is numbered apart from every other ([`term_first_seq`]) and starts
//! with `cleared` and a `stored` event for every object the new leader holds, so a
//! subscriber connected to every master's endpoint rebuilds its index from the stream
//! alone: on `cleared` it forgets the backend, and it ignores batches of a term older
//! than the newest it has seen (a deposed leader's late messages).

pub mod config;
pub mod payload;
pub mod pipeline;
mod publisher;

pub use config::{KvEventConfig, KV_EVENT_FLAGS};
pub use payload::Medium;
pub use pipeline::KvEventStats;
pub use publisher::{
    term_first_seq, KvEvents, HIGH_WATER_MARK, MAX_QUEUED_BYTES, MAX_SUBSCRIBERS,
    MAX_SUBSCRIBERS_PER_PEER,
};

use crate::wire::master_api::ReplicaType;

impl Medium {
    /// The medium of a `stored` event for a PutEnd of replica type `kind`
    /// (upstream's `MediumForReplicaType`): disk-like types are `disk`, the rest
    /// `cpu`. For `ALL` upstream looks at the object (memory replica first); every
    /// replica this master holds is a memory replica, so that is `cpu` too.
    pub fn for_put_end(kind: ReplicaType) -> Medium {
        match kind {
            ReplicaType::Disk | ReplicaType::LocalDisk | ReplicaType::NofSsd => Medium::Disk,
            ReplicaType::Memory | ReplicaType::All | ReplicaType::Dfs => Medium::Cpu,
        }
    }
}
