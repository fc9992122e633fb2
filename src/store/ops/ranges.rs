//! Ranged reads (upstream's Python `get_into_ranges`): byte ranges of several
//! objects gathered into registered destination buffers, with one master call and
//! one transfer batch, through the read pipeline ([`ReadBatch`]).

use crate::store::error::StoreError;
use crate::store::read::batch::ReadBatch;
use crate::store::transfer::{Move, MovePlan};
use crate::store::vocab::{ranged_failure, RangedRead, RangedResults};
use crate::store::Client;
use crate::wire::master_api::ErrorCode;
use std::collections::HashMap;

/// Whether `[off, off + len)` lies inside `size` bytes.
fn fits(off: u64, len: u64, size: u64) -> bool {
    off <= size && len <= size - off
}

impl Client {
    /// Reads byte ranges of objects into destination buffers. A buffer's capacity is
    /// what remains of the registered region it points into; as upstream, a buffer
    /// that is not inside registered memory fails every fragment with -600. Per
    /// fragment: its length, -600 when it does not fit the buffer or the object,
    /// -704 missing object, -703 not complete, -707 read lease expired during the
    /// read, -800 transfer failure. Each distinct key is looked up once.
    ///
    /// # Safety
    /// The registered regions the buffers point into must be writable, and not
    /// otherwise accessed, until this returns.
    pub unsafe fn get_into_ranges_raw(&self, reads: &[RangedRead]) -> RangedResults {
        let state = match self.state() {
            Ok(s) => s,
            Err(e) => return ranged_failure(reads, e.into()),
        };
        let mut results = ranged_failure(reads, ErrorCode::INVALID_PARAMS.into());
        let caps: Vec<u64> = reads
            .iter()
            .map(|r| state.registered_capacity(r.buffer))
            .collect();
        let mut keys: Vec<String> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (read, _) in reads.iter().zip(&caps).filter(|(_, &c)| c > 0) {
            for (key, _) in &read.keys {
                index.entry(key.as_str()).or_insert_with(|| {
                    keys.push(key.clone());
                    keys.len() - 1
                });
            }
        }
        if keys.is_empty() {
            return results;
        }
        let batch = match ReadBatch::begin(&state, &keys) {
            Ok(b) => b,
            Err(e) => return ranged_failure(reads, e),
        };
        let mut plan = MovePlan::new();
        for (i, read) in reads.iter().enumerate().filter(|(i, _)| caps[*i] > 0) {
            for (j, (key, frags)) in read.keys.iter().enumerate() {
                let found = batch.source(index[key.as_str()]);
                for (k, f) in frags.iter().enumerate() {
                    if !fits(f.dst, f.len, caps[i]) {
                        continue;
                    }
                    let src = match &found {
                        Ok(src) => src,
                        Err(e) => {
                            results[i][j][k] = Err(e.clone());
                            continue;
                        }
                    };
                    let d = src.replica;
                    if !fits(f.src, f.len, d.size) {
                        results[i][j][k] = Err(StoreError::invalid(format!(
                            "get_into_ranges('{key}'): [{}, +{}) outside {} bytes",
                            f.src, f.len, d.size
                        )));
                        continue;
                    }
                    results[i][j][k] = Ok(f.len);
                    let mv = Move {
                        local: read.buffer + f.dst,
                        remote: d.buffer_address + f.src,
                        len: f.len,
                        endpoint: d.transport_endpoint.clone(),
                    };
                    plan.push((i, j, k, src.ttl_ms), mv);
                }
            }
        }
        // SAFETY: every destination lies inside a registered region (checked above),
        // writable per this function's contract.
        for ((i, j, k, ttl), outcome) in unsafe { batch.transfer(plan) } {
            let key = &reads[i].keys[j].0;
            if let Err(e) = outcome.and_then(|()| batch.check(key, ttl)) {
                results[i][j][k] = Err(e);
            }
        }
        results
    }
}

#[cfg(test)]
#[path = "ranges_tests.rs"]
mod tests;
