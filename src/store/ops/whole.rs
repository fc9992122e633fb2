//! Whole-object reads: into memory from `alloc` (every client), or, for a dummy
//! client that maps this client's segments, located when the chosen replica lies in
//! this client's own segment, the object then held (its read not ended) until the
//! dummy has copied it itself.

use crate::store::error::{StoreError, StoreResult};
use crate::store::read::batch::ReadBatch;
use crate::store::transfer::{Move, MovePlan};
use crate::store::vocab::ReadTarget;
use crate::store::Client;
use std::os::fd::OwnedFd;

/// Where an object's bytes are.
pub(crate) enum Located<T> {
    /// In this client's own segment, at this address.
    Own(u64),
    /// Read into this target.
    Read(T),
}

/// One object found: where it is, its size, its read lease TTL in ms.
pub(crate) type Found<T> = StoreResult<(Located<T>, u64, u64)>;

/// Reads that stay held until [`Client::end_held_reads`].
pub(crate) struct HeldReads(Vec<(String, u64)>);

impl Client {
    /// Per key: where the object is and its size and read-lease TTL (ms), or an error
    /// code as for `get_into` (-600 when `alloc` declined). The reads of located
    /// objects stay held until [`Client::end_held_reads`] (or their lease TTL).
    ///
    /// # Safety
    /// The address a target reports must be writable for the size it was allocated
    /// with, for as long as the target lives.
    pub(crate) unsafe fn batch_locate_or_read<T: ReadTarget>(
        &self,
        keys: &[&str],
        alloc: impl FnMut(usize, u64) -> Option<T>,
    ) -> (Vec<Found<T>>, HeldReads) {
        // SAFETY: forwarded contract.
        unsafe { self.get_whole(keys, alloc, true) }
    }

    /// Whole objects into targets from `alloc(key index, size)` (one master call, one
    /// transfer batch), objects in this client's own segment only located when
    /// `locate`; the reads, held.
    ///
    /// # Safety
    /// As [`Client::batch_locate_or_read`].
    pub(super) unsafe fn get_whole<T: ReadTarget>(
        &self,
        keys: &[&str],
        mut alloc: impl FnMut(usize, u64) -> Option<T>,
        locate: bool,
    ) -> (Vec<Found<T>>, HeldReads) {
        let n = keys.len();
        let none = HeldReads(Vec::new());
        let state = match self.state() {
            Ok(s) => s,
            Err(e) => return ((0..n).map(|_| Err(e.into())).collect(), none),
        };
        let owned: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let batch = match ReadBatch::begin(&state, &owned) {
            Ok(b) => b,
            Err(e) => return ((0..n).map(|_| Err(e.clone())).collect(), none),
        };
        let mut results = Vec::with_capacity(n);
        let mut plan = MovePlan::new();
        for (i, key) in keys.iter().enumerate() {
            results.push(batch.source(i).and_then(|src| {
                let (d, ttl) = (src.replica, src.ttl_ms);
                if locate && state.is_own(&d.transport_endpoint, d.buffer_address, d.size) {
                    return Ok((Located::Own(d.buffer_address), d.size, ttl));
                }
                let Some(mut target) = alloc(i, d.size) else {
                    let cause = format!("get('{key}'): cannot allocate {} bytes", d.size);
                    return Err(StoreError::invalid(cause));
                };
                let mv = Move {
                    local: target.addr(),
                    remote: d.buffer_address,
                    len: d.size,
                    endpoint: d.transport_endpoint.clone(),
                };
                plan.push((i, ttl), mv);
                Ok((Located::Read(target), d.size, ttl))
            }));
        }
        // SAFETY: every destination is a live target of its object's size.
        for ((i, ttl), outcome) in unsafe { batch.transfer(plan) } {
            let key = keys[i];
            let outcome = outcome
                .map_err(|e| e.context(format_args!("get('{key}')")))
                .and_then(|()| batch.check(key, ttl));
            if let Err(e) = outcome {
                results[i] = Err(e);
            }
        }
        (results, HeldReads(batch.hold()))
    }

    /// Ends reads held by [`Client::batch_locate_or_read`].
    pub(crate) fn end_held_reads(&self, held: HeldReads) {
        if held.0.is_empty() {
            return;
        }
        if let Ok(state) = self.state() {
            state.reads().end(held.0);
        }
    }

    /// This client's mounted segments: base, length and a descriptor of the sealed
    /// file holding each (segments whose memory is not a file are left out).
    pub(crate) fn own_segment_files(&self) -> Vec<(u64, u64, OwnedFd)> {
        match self.state() {
            Ok(state) => state.segment_files(),
            Err(_) => Vec::new(),
        }
    }
}
