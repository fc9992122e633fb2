//! The reads of [`Client`] into caller memory: one buffer or several pieces per
//! object, and whole objects into memory the client allocates; all through the read
//! pipeline ([`ReadBatch`]).

use super::whole::Located;
use crate::store::api::one;
use crate::store::error::{StoreError, StoreResult};
use crate::store::read::batch::ReadBatch;
use crate::store::transfer::{Move, MovePlan};
use crate::store::vocab::{spread, total_len, Pieces, ReadTarget};
use crate::store::{Client, StoreApi};
use crate::wire::master_api::ErrorCode;

impl Client {
    /// Reads `key` into `buf` (its capacity); returns the object's size. -600 when
    /// `buf` is too small, -704 missing, -703 not complete, -707 when the read lease
    /// expired during the read (the bytes may be torn).
    pub fn get_into(&self, key: &str, buf: &mut [u8]) -> StoreResult<u64> {
        // SAFETY: the slice is writable for the duration of the call.
        unsafe { StoreApi::get_into_raw(self, key, buf.as_mut_ptr() as u64, buf.len() as u64) }
    }

    /// Reads several objects (one master call, one transfer batch); one result per
    /// item: the object's size or an error code as for [`Client::get_into`].
    pub fn batch_get_into(&self, keys: &[&str], bufs: &mut [&mut [u8]]) -> Vec<StoreResult<u64>> {
        let items: Vec<(u64, u64)> = bufs
            .iter_mut()
            .map(|b| (b.as_mut_ptr() as u64, b.len() as u64))
            .collect();
        // SAFETY: the slices are distinct, writable, and borrowed for the call.
        unsafe { StoreApi::batch_get_into_raw(self, keys, &items) }
    }

    /// Reads several objects, each scattered over its pieces in order (one master
    /// call, one transfer batch). Per key: the object's size, -600 when the pieces
    /// hold fewer bytes than the object, -704 missing, -703 not complete, -707 lease
    /// expired during the read, -800 transfer failure. Pieces beyond the object's
    /// size are left untouched.
    ///
    /// # Safety
    /// Every piece must be writable, and not otherwise accessed, until this returns.
    pub unsafe fn batch_get_into_multi_raw(
        &self,
        keys: &[&str],
        items: &[Pieces],
    ) -> Vec<StoreResult<u64>> {
        let n = keys.len();
        let state = match self.state() {
            Ok(s) if items.len() == n => s,
            Ok(_) => {
                let cause = format!("get: {} buffer lists for {n} keys", items.len());
                return vec![Err(StoreError::invalid(cause)); n];
            }
            Err(e) => return vec![Err(e.into()); n],
        };
        let owned: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let batch = match ReadBatch::begin(&state, &owned) {
            Ok(b) => b,
            Err(e) => return vec![Err(e); n],
        };
        let mut results: Vec<StoreResult<u64>> = Vec::with_capacity(n);
        let (mut plan, mut planned) = (MovePlan::new(), Vec::new());
        for (i, pieces) in items.iter().enumerate() {
            let r = batch.source(i).and_then(|src| {
                let d = src.replica;
                let cap = total_len(pieces);
                if cap < d.size {
                    return Err(StoreError::invalid(format!(
                        "get('{}'): buffers of {cap} bytes for an object of {}",
                        keys[i], d.size
                    )));
                }
                for (addr, off, len) in spread(pieces, d.size) {
                    let mv = Move {
                        local: addr,
                        remote: d.buffer_address + off,
                        len,
                        endpoint: d.transport_endpoint.clone(),
                    };
                    plan.push(i, mv);
                }
                planned.push((i, src.ttl_ms));
                Ok(d.size)
            });
            results.push(r);
        }
        // SAFETY: every destination is writable per this function's contract.
        for (i, outcome) in unsafe { batch.transfer(plan) } {
            if let Err(e) = outcome {
                results[i] = Err(e.context(format_args!("get('{}')", keys[i])));
            }
        }
        for (i, ttl) in planned {
            if results[i].is_ok() {
                if let Err(e) = batch.check(keys[i], ttl) {
                    results[i] = Err(e);
                }
            }
        }
        results
    }

    /// Reads whole objects into memory from `alloc(key index, size)` (one master call,
    /// one transfer batch); per key the filled target and the object's size, or an
    /// error code as for [`Client::get_into`] (-600 when `alloc` declined). Targets of
    /// failed keys are dropped.
    ///
    /// # Safety
    /// The address a target reports must be writable for the size it was allocated
    /// with, for as long as the target lives.
    pub unsafe fn batch_get_alloc_raw<T: ReadTarget>(
        &self,
        keys: &[&str],
        alloc: impl FnMut(usize, u64) -> Option<T>,
    ) -> Vec<StoreResult<(T, u64)>> {
        // SAFETY: forwarded contract.
        let (found, held) = unsafe { self.get_whole(keys, alloc, false) };
        self.end_held_reads(held);
        found
            .into_iter()
            .map(|r| match r? {
                (Located::Read(target), size, _) => Ok((target, size)),
                (Located::Own(_), _, _) => Err(ErrorCode::INTERNAL_ERROR.into()),
            })
            .collect()
    }

    /// Reads a whole object into a new vector, with one master call.
    pub fn get(&self, key: &str) -> StoreResult<Vec<u8>> {
        one(self.batch_get(&[key]))
    }

    /// Reads whole objects into new vectors; see [`Client::batch_get_alloc_raw`].
    pub fn batch_get(&self, keys: &[&str]) -> Vec<StoreResult<Vec<u8>>> {
        let alloc = |_: usize, n: u64| usize::try_from(n).ok().map(|n| vec![0u8; n]);
        // SAFETY: a vector's buffer is writable for its length while it lives.
        unsafe { self.batch_get_alloc_raw(keys, alloc) }
            .into_iter()
            .map(|r| r.map(|(v, _)| v))
            .collect()
    }
}
