//! The data path of a dummy: writes and reads forwarded to the real client, the
//! bytes moved in place where the real client maps the caller's memory and staged
//! through the shared local buffer elsewhere, and whole-object reads copied straight
//! from the real client's segment when the object lies there.

use super::link::Link;
use super::wire::{self, FetchResult, Op};
use crate::store::error::{Doing, StoreError, StoreResult};
use crate::store::memory::Staging;
use crate::store::read::batch::check_lease;
use crate::store::vocab::{spread, total_len};
use crate::store::{BatchWrite, ErrorCode, Pieces, WriteMode};
use std::sync::atomic::{AtomicU64, Ordering};

impl Link {
    /// Writes objects through the real client: pieces it maps are sent as they are,
    /// the others staged through the local buffer.
    pub(super) fn write(&self, batch: BatchWrite<'_>) -> Vec<StoreResult<()>> {
        let (keys, items) = (batch.keys, batch.items);
        let n = keys.len();
        if items.len() != n {
            return mismatched(items.len(), n);
        }
        let mut results = vec![Ok(()); n];
        let mut stagings = Vec::new();
        let mut send: Vec<Pieces> = Vec::with_capacity(n);
        for (i, pieces) in items.iter().enumerate() {
            if self.memory().pieces_mapped(pieces) {
                send.push(pieces.clone());
                continue;
            }
            let total = total_len(pieces);
            match self.memory().stage("put", keys[i], total) {
                Ok(s) => {
                    for (addr, off, len) in spread(pieces, total) {
                        // SAFETY: the caller's piece is readable (the trait's
                        // contract); the staging range is ours and `total` long.
                        unsafe { copy(addr, s.addr() + off, len) };
                    }
                    send.push(vec![(s.addr(), total)]);
                    stagings.push(s);
                }
                Err(e) => {
                    results[i] = Err(e);
                    send.push(Vec::new());
                }
            }
        }
        let (idx, sub_keys, sub_items) = select(keys, send, &results);
        let upsert = batch.mode == WriteMode::Upsert;
        let args = (upsert, sub_keys, sub_items, batch.config.clone());
        let n_sub = idx.len();
        if n_sub > 0 {
            for (i, r) in idx
                .into_iter()
                .zip(self.call_batch::<_, ()>(Op::Write, &args, n_sub))
            {
                results[i] = r;
            }
        }
        drop(stagings);
        results
    }

    /// Reads objects into `items` through the real client: pieces it maps are
    /// filled in place, the others staged through the local buffer.
    pub(super) fn read(&self, keys: &[&str], items: &[Pieces]) -> Vec<StoreResult<u64>> {
        let n = keys.len();
        if items.len() != n {
            return mismatched(items.len(), n);
        }
        let mut results: Vec<StoreResult<u64>> = vec![Ok(0); n];
        let mut staged: Vec<Option<Staging<'_>>> = Vec::with_capacity(n);
        let mut send: Vec<Pieces> = Vec::with_capacity(n);
        for (i, pieces) in items.iter().enumerate() {
            if self.memory().pieces_mapped(pieces) {
                send.push(pieces.clone());
                staged.push(None);
                continue;
            }
            let total = total_len(pieces);
            match self.memory().stage("get", keys[i], total) {
                Ok(s) => {
                    send.push(vec![(s.addr(), total)]);
                    staged.push(Some(s));
                }
                Err(e) => {
                    results[i] = Err(e);
                    send.push(Vec::new());
                    staged.push(None);
                }
            }
        }
        let (idx, sub_keys, sub_items) = select(keys, send, &results);
        if !idx.is_empty() {
            let got = self.call_batch::<_, u64>(Op::Read, &(sub_keys, sub_items), idx.len());
            for (i, r) in idx.into_iter().zip(got) {
                results[i] = r;
            }
        }
        for (i, s) in staged.iter().enumerate() {
            if let (Some(s), Ok(size)) = (s, &results[i]) {
                for (addr, off, len) in spread(&items[i], *size) {
                    // SAFETY: the caller's piece is writable (the trait's contract);
                    // the staging range holds `size` bytes the real client wrote.
                    unsafe { copy(s.addr() + off, addr, len) };
                }
            }
        }
        results
    }

    /// Whole objects copied into `alloc`'s memory: straight from the real client's
    /// segment (mapped here) when the object lies there, else through the local
    /// buffer, where the real client reads it. The staging offered is the size of the
    /// last objects that needed it (so a stream of same-sized gets costs one call
    /// each); objects that did not fit are read again into staging of their size.
    ///
    /// # Safety
    /// As [`StoreApi::batch_get_alloc_addr`].
    pub(super) unsafe fn fetch(
        &self,
        read_hint: &AtomicU64,
        keys: &[&str],
        alloc: &mut dyn FnMut(usize, u64) -> Option<u64>,
    ) -> Vec<StoreResult<u64>> {
        let n = keys.len();
        let mut results: Vec<StoreResult<u64>> = vec![Err(ErrorCode::INTERNAL_ERROR.into()); n];
        let hint = read_hint.load(Ordering::Relaxed);
        let mut pending: Vec<(usize, u64)> = (0..n).map(|k| (k, hint)).collect();
        // The largest object that needed staging (not in the real client's segment).
        let mut staged = 0;
        for round in 0..2 {
            if pending.is_empty() {
                break;
            }
            let mut stagings: Vec<Option<Staging<'_>>> = Vec::with_capacity(pending.len());
            let mut asked = Vec::with_capacity(pending.len());
            for &(k, cap) in &pending {
                let s = match cap {
                    0 => None,
                    cap if round == 0 => self.memory().staging().and_then(|s| s.allocate(cap)),
                    cap => match self.memory().stage("get", keys[k], cap) {
                        Ok(s) => Some(s),
                        Err(e) => {
                            results[k] = Err(e);
                            continue;
                        }
                    },
                };
                asked.push((k, cap));
                stagings.push(s);
            }
            pending = asked;
            if pending.is_empty() {
                break;
            }
            let offered: Vec<(u64, u64)> = stagings
                .iter()
                .map(|s| s.as_ref().map_or((0, 0), |s| (s.addr(), s.len())))
                .collect();
            let sub_keys: Vec<String> = pending.iter().map(|&(k, _)| keys[k].to_string()).collect();
            let started = std::time::Instant::now();
            let conn = match self.connection() {
                Ok(c) => c,
                Err(e) => {
                    for &(k, _) in &pending {
                        results[k] = Err(e.clone());
                    }
                    return results;
                }
            };
            let replies = match Link::exchange::<_, Vec<FetchResult>>(
                &conn,
                Op::Fetch,
                &(sub_keys, offered),
                None,
            ) {
                Ok(r) if r.len() == pending.len() => Some(r),
                Ok(r) => {
                    let cause = format!(
                        "dummy client: the real client fetched {} of {} keys",
                        r.len(),
                        pending.len()
                    );
                    for &(k, _) in &pending {
                        results[k] = Err(StoreError::internal(cause.clone()));
                    }
                    None
                }
                Err(e) => {
                    for &(k, _) in &pending {
                        results[k] = Err(e.clone());
                    }
                    return results;
                }
            };
            let mut again = Vec::new();
            let mut located = false;
            for ((&(k, _), reply), staging) in pending
                .iter()
                .zip(replies.into_iter().flatten())
                .zip(&stagings)
            {
                match reply {
                    Ok((size, at, ttl)) => {
                        let source = if at != 0 {
                            located = true;
                            self.memory().in_segment(at, size)
                        } else {
                            staged = staged.max(size);
                            staging.as_ref().map(|s| s.addr())
                        };
                        results[k] = match (source, alloc(k, size)) {
                            (Some(src), Some(dst)) => {
                                // SAFETY: `alloc` returned `size` writable bytes (the
                                // contract); the source holds the object: in the
                                // staging, or in the real client's segment where the
                                // object stays held until `Done`.
                                unsafe { copy(src, dst, size) };
                                let key = keys[k];
                                check_lease(started, ttl)
                                    .doing(format_args!(
                                        "dummy client: get('{key}'): the read lease expired \
                                         during the read"
                                    ))
                                    .map(|()| size)
                            }
                            (None, _) => Err(StoreError::internal(format!(
                                "dummy client: get('{}'): the real client's answer \
                                 ({size} bytes at {at:#x}) points at no memory mapped here",
                                keys[k]
                            ))),
                            (_, None) => Err(StoreError::invalid(format!(
                                "dummy client: get('{}'): cannot allocate {size} bytes",
                                keys[k]
                            ))),
                        };
                    }
                    Err((code, size)) if code == ErrorCode::BUFFER_OVERFLOW && size > 0 => {
                        staged = staged.max(size);
                        if round == 0 {
                            again.push((k, size));
                        } else {
                            results[k] = Err(ErrorCode::INVALID_PARAMS.into());
                        }
                    }
                    Err((code, _)) => results[k] = Err(code.into()),
                }
            }
            // The located objects are copied: their reads may end.
            if !located || wire::send_request(&conn, Op::Done, &(), None).is_ok() {
                self.keep(conn);
            }
            drop(stagings);
            pending = again;
        }
        read_hint.store(staged, Ordering::Relaxed);
        results
    }
}

/// `n` failures of a batch given `items` lists of pieces for `n` keys (-600).
fn mismatched<T: Clone>(items: usize, n: usize) -> Vec<StoreResult<T>> {
    let cause = format!("dummy client: {items} buffer lists for {n} keys");
    vec![Err(StoreError::invalid(cause)); n]
}

/// The keys still `Ok` in `results`, with their pieces: (index, key, pieces).
fn select(
    keys: &[&str],
    send: Vec<Pieces>,
    results: &[StoreResult<impl Sized>],
) -> (Vec<usize>, Vec<String>, Vec<Pieces>) {
    let mut idx = Vec::new();
    let mut sub_keys = Vec::new();
    let mut sub_items = Vec::new();
    for (i, pieces) in send.into_iter().enumerate() {
        if results[i].is_ok() {
            idx.push(i);
            sub_keys.push(keys[i].to_string());
            sub_items.push(pieces);
        }
    }
    (idx, sub_keys, sub_items)
}

/// Copies `len` bytes from `src` to `dst`.
///
/// # Safety
/// Both ranges must be valid for `len` bytes and must not overlap.
unsafe fn copy(src: u64, dst: u64, len: u64) {
    // SAFETY: per the contract.
    unsafe {
        std::ptr::copy_nonoverlapping(
            src as usize as *const u8,
            dst as usize as *mut u8,
            len as usize,
        )
    };
}
