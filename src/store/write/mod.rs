//! The write pipeline: plan ([`plan`]: objects, group ids, moves into replicas) ->
//! execute ([`execute`]: Start, transfer, then End or Revoke, [`rpc`]) with one retry
//! policy ([`retry`]). Put, upsert, batch and multi-piece writes all go through
//! [`write`].

pub(crate) mod execute;
pub(crate) mod plan;
pub(crate) mod retry;
pub(crate) mod rpc;

use crate::store::error::StoreResult;
use crate::store::state::ClientState;
use crate::store::vocab::WriteMode;
use crate::wire::master_api::ReplicateConfig;
use plan::WriteItem;
use retry::Retries;

/// Writes `items` (one result each), trying again the items the retry policy allows.
///
/// # Safety
/// Every piece must be readable until this returns.
pub(crate) unsafe fn write(
    state: &ClientState,
    mode: WriteMode,
    items: &[WriteItem<'_>],
    config: &ReplicateConfig,
) -> Vec<StoreResult<()>> {
    let mut retries = Retries::begin();
    // SAFETY: forwarded contract.
    let (mut results, mut retryable) = unsafe { execute::attempt(state, mode, items, config) };
    loop {
        let again: Vec<usize> = (0..items.len())
            .filter(|&s| retryable[s] && results[s].is_err())
            .collect();
        if again.is_empty() || !retries.another() {
            return results;
        }
        log::info!(
            "store: {} object(s) could not be written; trying again",
            again.len()
        );
        let subset: Vec<WriteItem<'_>> = again.iter().map(|&s| items[s].clone()).collect();
        // SAFETY: forwarded contract (a subset of the same items).
        let (retried, still) = unsafe { execute::attempt(state, mode, &subset, config) };
        for ((s, r), v) in again.into_iter().zip(retried).zip(still) {
            results[s] = r;
            retryable[s] = v;
        }
    }
}
