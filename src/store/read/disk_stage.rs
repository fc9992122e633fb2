//! Reads of objects that only a client's local disk holds (LOCAL_DISK replicas, spec
//! tiers-events-conductor.md §1.5). Before the transfers of a batch of reads, every
//! object without a complete memory replica but with a disk copy is staged by the
//! copy's owner: one `batch_get_offload_object` per owner, which loads the objects
//! into the owner's registered memory and says where. Its replica list is then
//! replaced by that staged memory (same replica id), so the read itself is an
//! ordinary Transfer Engine read; the owner is told to release the staging space once
//! the reads are over ([`StagedDiskReads`] dropped), or frees it after its GC TTL.
//! What holds a staged object is that staging, not a read lease: its list's lease
//! becomes the time the owner keeps the batch (counted from when this began staging),
//! so a slow disk does not fail the read as an expired lease.
//! Works with upstream owners (their offload RPC server) as with ours.

use crate::wire::master_api::{
    BufferDescriptor, ErrorCode, GetReplicaListResponse, MasterResult, ReplicaDescriptor,
    ReplicaLocation, ReplicaStatus,
};
use crate::wire::offload_rpc;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long an owner may take to stage a batch from its disk.
const STAGE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long releasing a staged batch may take (the owner frees it later otherwise).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// Batches staged by owners for this batch of reads; released when dropped.
#[derive(Default)]
pub(crate) struct StagedDiskReads {
    /// (owner's offload RPC address, batch id).
    batches: Vec<(String, u64)>,
}

impl Drop for StagedDiskReads {
    fn drop(&mut self) {
        for (endpoint, batch) in self.batches.drain(..) {
            match offload_rpc::release_offload_buffer(&endpoint, batch, RELEASE_TIMEOUT) {
                Ok(true) => {}
                Ok(false) => log::debug!("store: {endpoint} no longer had staged batch {batch}"),
                Err(e) => log::debug!("store: releasing staged batch {batch} at {endpoint}: {e}"),
            }
        }
    }
}

/// The disk copy to read `resp`'s object from, when it has no complete memory
/// replica: (replica id, size, owner's offload RPC address).
fn disk_only(resp: &GetReplicaListResponse) -> Option<(u64, u64, String)> {
    let in_memory = resp.replicas.iter().any(|r| {
        r.status == ReplicaStatus::Complete && matches!(r.location, ReplicaLocation::Memory(_))
    });
    if in_memory {
        return None;
    }
    resp.replicas.iter().find_map(|r| match &r.location {
        ReplicaLocation::LocalDisk {
            object_size,
            transport_endpoint,
            ..
        } if r.status == ReplicaStatus::Complete => {
            Some((r.id, *object_size, transport_endpoint.clone()))
        }
        _ => None,
    })
}

/// Stages, with their owners, the objects among `lists` (the replica lists of
/// `tenant`'s `keys`) that only a disk holds, and points their lists at the staged
/// memory; an object whose owner cannot stage it gets the owner's error. Each call to
/// an owner counts one in `calls`.
pub(crate) fn stage(
    tenant: &str,
    keys: &[String],
    lists: &mut [MasterResult<GetReplicaListResponse>],
    calls: &AtomicU64,
) -> StagedDiskReads {
    let mut staged = StagedDiskReads::default();
    let began = Instant::now();
    // owner -> (index, replica id, size) of each object it holds.
    let mut by_owner: BTreeMap<String, Vec<(usize, u64, u64)>> = BTreeMap::new();
    for (i, list) in lists.iter().enumerate() {
        if let Some((id, size, owner)) = list.as_ref().ok().and_then(disk_only) {
            by_owner.entry(owner).or_default().push((i, id, size));
        }
    }
    for (owner, items) in by_owner {
        let storage_keys: Vec<String> = items
            .iter()
            .map(|&(i, _, _)| offload_rpc::storage_key(tenant, &keys[i]))
            .collect();
        let sizes: Vec<i64> = items
            .iter()
            .map(|&(_, _, size)| i64::try_from(size).unwrap_or(i64::MAX))
            .collect();
        calls.fetch_add(1, Ordering::Relaxed);
        match offload_rpc::batch_get_offload_object(&owner, &storage_keys, &sizes, STAGE_TIMEOUT) {
            Ok(batch) => {
                let held_ms = u64::try_from(began.elapsed().as_millis())
                    .unwrap_or(u64::MAX)
                    .saturating_add(batch.gc_ttl_ms);
                for (&(i, id, size), &address) in items.iter().zip(&batch.pointers) {
                    if let Ok(resp) = &mut lists[i] {
                        if batch.gc_ttl_ms > 0 {
                            resp.lease_ttl_ms = held_ms;
                        }
                        resp.replicas = vec![ReplicaDescriptor {
                            id,
                            location: ReplicaLocation::Memory(BufferDescriptor {
                                size,
                                buffer_address: address,
                                protocol: "tcp".into(),
                                transport_endpoint: batch.transfer_engine_addr.clone(),
                            }),
                            status: ReplicaStatus::Complete,
                        }];
                    }
                }
                staged.batches.push((owner, batch.batch_id));
            }
            Err(e) => {
                log::warn!(
                    "store: {} object(s) on the disk of {owner} could not be staged: {e}",
                    items.len()
                );
                let e = if e == ErrorCode::NOT_SUPPORTED {
                    ErrorCode::RPC_FAIL
                } else {
                    e
                };
                for &(i, _, _) in &items {
                    lists[i] = Err(e);
                }
            }
        }
    }
    staged
}
