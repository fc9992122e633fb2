//! The master's side of a write: Start, End and Revoke for Put or Upsert, one
//! single-object call for one key, one batch call for several.

use crate::store::state::ClientState;
use crate::store::vocab::{fit, WriteMode};
use crate::wire::master_api::{
    ErrorCode, MasterResult, ObjectMeta, ReplicaDescriptor, ReplicaType, ReplicateConfig,
};

/// Whether a revoke left nothing behind: done, or the object was already gone (its
/// segment left under the write).
pub(crate) fn is_gone(revoke: Result<(), ErrorCode>) -> bool {
    matches!(revoke, Ok(()) | Err(ErrorCode::OBJECT_NOT_FOUND))
}

/// Start: the replicas to write each key into.
pub(crate) fn start(
    state: &ClientState,
    mode: WriteMode,
    keys: &[String],
    lens: &[u64],
    config: &ReplicateConfig,
) -> Vec<MasterResult<Vec<ReplicaDescriptor>>> {
    let (m, c, t) = (state.master(), state.client_id(), state.tenant());
    if keys.len() == 1 {
        return vec![match mode {
            WriteMode::Put => m.put_start(c, &keys[0], lens[0], config, t),
            WriteMode::Upsert => m.upsert_start(c, &keys[0], lens[0], config, t),
        }];
    }
    let r = match mode {
        WriteMode::Put => m.batch_put_start(c, keys, lens, config, t),
        WriteMode::Upsert => m.batch_upsert_start(c, keys, lens, config, t),
    };
    match r {
        Ok(v) => fit(v, keys.len()),
        Err(e) => vec![Err(e); keys.len()],
    }
}

/// End for written keys.
pub(crate) fn end(state: &ClientState, mode: WriteMode, keys: &[String]) -> Vec<MasterResult<()>> {
    let (m, c, t) = (state.master(), state.client_id(), state.tenant());
    let metas: Vec<ObjectMeta> = keys
        .iter()
        .map(|k| ObjectMeta {
            key: k.clone(),
            checksum: None,
        })
        .collect();
    if metas.len() == 1 {
        return vec![match mode {
            WriteMode::Put => m.put_end(c, &metas[0], ReplicaType::All, t),
            WriteMode::Upsert => m.upsert_end(c, &metas[0], ReplicaType::All, t),
        }];
    }
    let r = match mode {
        WriteMode::Put => m.batch_put_end(c, &metas, ReplicaType::All, t),
        WriteMode::Upsert => m.batch_upsert_end(c, &metas, t),
    };
    match r {
        Ok(v) => fit(v, keys.len()),
        Err(e) => vec![Err(e); keys.len()],
    }
}

/// Revoke for keys whose write failed; per key, whether nothing of it is left
/// (failures are only logged).
pub(crate) fn revoke(state: &ClientState, mode: WriteMode, keys: &[String]) -> Vec<bool> {
    let (m, c, t) = (state.master(), state.client_id(), state.tenant());
    let r = match (mode, keys.len()) {
        (_, 0) => return Vec::new(),
        (WriteMode::Put, 1) => Ok(vec![m.put_revoke(c, &keys[0], ReplicaType::All, t)]),
        (WriteMode::Upsert, 1) => Ok(vec![m.upsert_revoke(c, &keys[0], ReplicaType::All, t)]),
        (WriteMode::Put, _) => m.batch_put_revoke(c, keys, ReplicaType::All, t),
        (WriteMode::Upsert, _) => m.batch_upsert_revoke(c, keys, t),
    };
    match r {
        Ok(each) => fit(each, keys.len())
            .into_iter()
            .zip(keys)
            .map(|(r, k)| {
                if !is_gone(r) {
                    log::warn!("store: revoking '{k}': {r:?}");
                }
                is_gone(r)
            })
            .collect(),
        Err(e) => {
            log::warn!("store: revoking {} key(s): {e}", keys.len());
            vec![false; keys.len()]
        }
    }
}
