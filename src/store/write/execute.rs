//! One attempt of a write: Start, one transfer batch into the replicas, then End for
//! the objects written and Revoke for the others.

use super::plan::{config_for, replica_moves, WriteItem};
use super::rpc;
use crate::store::error::StoreResult;
use crate::store::state::ClientState;
use crate::store::transfer::MovePlan;
use crate::store::vocab::WriteMode;
use crate::te::Op;
use crate::wire::master_api::{ErrorCode, ReplicateConfig};

/// Per item: its outcome, and whether a failure may be tried again (its replicas
/// could not be written and were revoked, or it vanished with its segment before the
/// End).
pub(crate) type Attempt = (Vec<StoreResult<()>>, Vec<bool>);

/// Writes `items` once. Empty objects get -600 without reaching the master; with
/// [`WriteMode::Put`] an existing key is a success that keeps the old value.
///
/// # Safety
/// Every piece must be readable until this returns.
pub(crate) unsafe fn attempt(
    state: &ClientState,
    mode: WriteMode,
    items: &[WriteItem<'_>],
    config: &ReplicateConfig,
) -> Attempt {
    let mut results: Vec<StoreResult<()>> = vec![Ok(()); items.len()];
    let mut retryable = vec![false; items.len()];
    let started: Vec<usize> = (0..items.len())
        .filter(|&s| {
            if items[s].len == 0 {
                results[s] = Err(ErrorCode::INVALID_PARAMS.into());
            }
            items[s].len > 0
        })
        .collect();
    if started.is_empty() {
        return (results, retryable);
    }
    let keys: Vec<String> = started.iter().map(|&s| items[s].key.to_string()).collect();
    let lens: Vec<u64> = started.iter().map(|&s| items[s].len).collect();
    let cfg = config_for(config, started.iter().map(|&s| &items[s]));
    let starts = rpc::start(state, mode, &keys, &lens, &cfg);
    let (mut plan, mut pending) = (MovePlan::new(), Vec::new());
    for (&s, start) in started.iter().zip(starts) {
        match start {
            Ok(replicas) => {
                pending.push(s);
                match replica_moves(&items[s], &replicas) {
                    Ok(moves) => moves.into_iter().for_each(|m| plan.push(s, m)),
                    Err(e) => results[s] = Err(e),
                }
            }
            Err(ErrorCode::OBJECT_ALREADY_EXISTS) if mode == WriteMode::Put => {}
            Err(e) => results[s] = Err(e.into()),
        }
    }
    // SAFETY: every source is readable per this function's contract.
    for (s, outcome) in unsafe { state.run(Op::Write, plan) } {
        if results[s].is_ok() {
            results[s] = outcome.map_err(|e| e.context(format_args!("writing '{}'", items[s].key)));
        }
    }
    let (ok, failed): (Vec<usize>, Vec<usize>) =
        pending.into_iter().partition(|&s| results[s].is_ok());
    let names =
        |v: &[usize]| -> Vec<String> { v.iter().map(|&s| items[s].key.to_string()).collect() };
    if !ok.is_empty() {
        for (&s, r) in ok.iter().zip(rpc::end(state, mode, &names(&ok))) {
            retryable[s] = r == Err(ErrorCode::OBJECT_NOT_FOUND);
            results[s] = r.map_err(Into::into);
        }
    }
    let revoked = rpc::revoke(state, mode, &names(&failed));
    for (&s, gone) in failed.iter().zip(revoked) {
        retryable[s] = gone && matches!(&results[s], Err(e) if e.code == ErrorCode::TRANSFER_FAIL);
    }
    (results, retryable)
}
