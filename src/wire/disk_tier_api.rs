//! The master's disk-tier RPCs (spec tiers-events-conductor.md §1.3-1.4, §1.10): a
//! client that keeps objects on its local disk mounts that disk, drains the offload
//! tasks the master queued for it, reports what it wrote, and announces what it drops.
//!
//! A separate trait from [`MasterApi`]: only masters that have a disk tier serve it
//! ([`MasterApi::disk_tier`]); others answer "function not registered", as a master
//! without these handlers does.
//!
//! [`MasterApi`]: super::master_api::MasterApi
//! [`MasterApi::disk_tier`]: super::master_api::MasterApi::disk_tier

use super::master_rpcs::{master_rpcs, trait_method};
use super::master_types::{MasterResult, ReplicaDescriptor, ReplicaType, Uuid};

/// `OffloadTaskItem`: an object the master asks its owner to copy to disk (also the
/// wire type of `PromotionTaskItem`, which has the same fields).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OffloadTaskItem {
    /// Tenant of the key.
    pub tenant_id: String,
    /// Object key.
    pub key: String,
    /// Value size in bytes.
    pub size: i64,
}

/// `PromotionTaskItem`: an object on disk the master asks its holder to copy back to
/// memory.
pub type PromotionTaskItem = OffloadTaskItem;

/// `StorageObjectMetadata`: where an offloaded object landed. A negative `data_size`
/// reports a failed offload (upstream's NACK).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageObjectMetadata {
    /// Container of the object on the owner's disk (the owner's own numbering).
    pub bucket_id: i64,
    /// Offset in the container.
    pub offset: i64,
    /// Stored key length.
    pub key_size: i64,
    /// Value size; < 0: the offload failed.
    pub data_size: i64,
    /// The owner's offload RPC address (`host:port`), where readers fetch it.
    pub transport_endpoint: String,
}

/// Result of `PromotionAllocStart`: the memory replica to copy the object into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotionAllocation {
    /// A PROCESSING memory replica.
    pub memory_descriptor: ReplicaDescriptor,
}

/// Declares [`DiskTierApi`] from the RPC table's `tier` rows.
macro_rules! disk_tier_api {
    (all [$($all:tt)*] master [$($master:tt)*] tier [$($row:tt)*]) => {
        /// The disk-tier RPCs of a master (upstream's names in each method's doc).
        pub trait DiskTierApi: Send + Sync {
            $(trait_method!($row);)*
        }
    };
}

master_rpcs!(disk_tier_api);
