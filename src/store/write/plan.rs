//! Planning a write: the objects of a batch (duplicate keys collapsed), the group
//! ids the master is given for them, and the moves that copy each object into its
//! replicas.

use crate::store::error::{StoreError, StoreResult};
use crate::store::transfer::Move;
use crate::store::vocab::{spread, total_len, Pieces};
use crate::wire::master_api::{ErrorCode, ReplicaDescriptor, ReplicaLocation, ReplicateConfig};
use std::collections::HashMap;

/// One object of a write: the concatenation of its pieces, `len` bytes in all.
#[derive(Clone)]
pub(crate) struct WriteItem<'a> {
    /// Its key.
    pub key: &'a str,
    /// Where its bytes are, in order.
    pub pieces: &'a [(u64, u64)],
    /// Its size.
    pub len: u64,
    /// Its group id, when the caller gave one per object.
    pub group: Option<String>,
}

impl<'a> WriteItem<'a> {
    /// The object `key` made of `pieces`.
    pub(crate) fn new(key: &'a str, pieces: &'a [(u64, u64)], group: Option<String>) -> Self {
        WriteItem {
            key,
            pieces,
            len: total_len(pieces),
            group,
        }
    }
}

/// The objects of a batch write with duplicate keys collapsed into one write of the
/// last pieces given, and for each input its object's index. `groups`: one group id
/// per key.
pub(crate) fn unique_items<'a>(
    keys: &[&'a str],
    items: &'a [Pieces],
    groups: Option<&[String]>,
) -> (Vec<WriteItem<'a>>, Vec<usize>) {
    let mut slot_of: HashMap<&str, usize> = HashMap::new();
    let mut unique: Vec<WriteItem<'a>> = Vec::new();
    let mut positions = Vec::with_capacity(keys.len());
    for (i, (&key, pieces)) in keys.iter().zip(items).enumerate() {
        let item = WriteItem::new(key, pieces, groups.map(|g| g[i].clone()));
        let slot = match slot_of.get(key) {
            Some(&s) => {
                unique[s] = item;
                s
            }
            None => {
                unique.push(item);
                slot_of.insert(key, unique.len() - 1);
                unique.len() - 1
            }
        };
        positions.push(slot);
    }
    (unique, positions)
}

/// `config` for a start of `items`: with one group id per object when every object
/// has one (the group ids given follow the objects actually started), else as given.
pub(crate) fn config_for<'i, 'a: 'i>(
    config: &ReplicateConfig,
    items: impl Iterator<Item = &'i WriteItem<'a>> + Clone,
) -> ReplicateConfig {
    let mut cfg = config.clone();
    if cfg.group_ids.is_some() && items.clone().all(|i| i.group.is_some()) {
        cfg.group_ids = Some(items.map(|i| i.group.clone().unwrap_or_default()).collect());
    }
    cfg
}

/// The moves that write `item` into every memory replica; -702 when a replica is too
/// small.
pub(crate) fn replica_moves(
    item: &WriteItem<'_>,
    replicas: &[ReplicaDescriptor],
) -> StoreResult<Vec<Move>> {
    let mut moves = Vec::new();
    for r in replicas {
        match &r.location {
            ReplicaLocation::Memory(d) => {
                if d.size < item.len || d.buffer_address == 0 {
                    let cause = format!(
                        "writing '{}': replica {} on segment '{}' has {} bytes at {:#x} for {}",
                        item.key, r.id, d.transport_endpoint, d.size, d.buffer_address, item.len
                    );
                    return Err(StoreError::new(ErrorCode::INVALID_REPLICA, cause));
                }
                moves.extend(spread(item.pieces, item.len).map(|(addr, off, len)| Move {
                    local: addr,
                    remote: d.buffer_address + off,
                    len,
                    endpoint: d.transport_endpoint.clone(),
                }));
            }
            other => log::warn!("store: skipping unsupported replica kind {other:?}"),
        }
    }
    Ok(moves)
}
