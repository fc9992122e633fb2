//! Ranged reads (upstream's Python `get_into_ranges`): byte ranges of several
//! objects gathered into registered destination buffers, with one master call and
//! one transfer batch.

use super::client::{Client, Inner};
use super::transfer::Move;
use crate::te::Op;
use crate::wire::master_api::ErrorCode;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One fragment of a ranged read: `len` bytes at offset `src` of an object, written
/// at offset `dst` of a destination buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// Offset in the destination buffer.
    pub dst: u64,
    /// Offset in the object.
    pub src: u64,
    /// Bytes to read.
    pub len: u64,
}

/// Everything read into one destination buffer: per key, its fragments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangedRead {
    /// Address of the destination buffer (inside memory registered with
    /// [`Client::register_buffer`]; 0 or anything else fails every fragment).
    pub buffer: u64,
    /// The source objects, each with the fragments read from it.
    pub keys: Vec<(String, Vec<Range>)>,
}

/// Per buffer, per key, per fragment: the bytes read or an error code.
pub type RangedResults = Vec<Vec<Vec<Result<u64, ErrorCode>>>>;

/// Results of the shape of `reads` with every fragment failed with `e`.
pub fn failed(reads: &[RangedRead], e: ErrorCode) -> RangedResults {
    reads
        .iter()
        .map(|r| r.keys.iter().map(|(_, f)| vec![Err(e); f.len()]).collect())
        .collect()
}

/// Bytes from `addr` to the end of the registered region holding it (0: none does).
fn capacity(inner: &Inner, addr: u64) -> u64 {
    if addr == 0 {
        return 0;
    }
    let registered = inner.registered.lock();
    match registered.range(..=addr).next_back() {
        Some((&base, &len)) if addr - base < len => len - (addr - base),
        _ => 0,
    }
}

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
        let shape = |e: ErrorCode| failed(reads, e);
        let inner = match self.inner() {
            Ok(i) => i,
            Err(e) => return shape(e),
        };
        let mut results = shape(ErrorCode::INVALID_PARAMS);
        let caps: Vec<u64> = reads.iter().map(|r| capacity(&inner, r.buffer)).collect();
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
        let start = Instant::now();
        let (lists, _reads) = inner.reads.begin(&keys);
        let mut lists = match lists {
            Ok(l) => l,
            Err(e) => return shape(e),
        };
        lists.resize(keys.len(), Err(ErrorCode::INTERNAL_ERROR));
        let (mut moves, mut owners) = (Vec::new(), Vec::new());
        for (i, read) in reads.iter().enumerate().filter(|(i, _)| caps[*i] > 0) {
            for (j, (key, frags)) in read.keys.iter().enumerate() {
                let found = lists[index[key.as_str()]]
                    .as_ref()
                    .map_err(|e| *e)
                    .and_then(|resp| Ok((inner.choose(&resp.replicas)?, resp.lease_ttl_ms)));
                for (k, f) in frags.iter().enumerate() {
                    if !fits(f.dst, f.len, caps[i]) {
                        continue;
                    }
                    let (d, ttl) = match &found {
                        Ok(v) => *v,
                        Err(e) => {
                            results[i][j][k] = Err(*e);
                            continue;
                        }
                    };
                    if !fits(f.src, f.len, d.size) {
                        log::error!(
                            "store: get_into_ranges('{key}'): [{}, +{}) outside {} bytes",
                            f.src,
                            f.len,
                            d.size
                        );
                        continue;
                    }
                    results[i][j][k] = Ok(f.len);
                    moves.push(Move {
                        local: read.buffer + f.dst,
                        remote: d.buffer_address + f.src,
                        len: f.len,
                        endpoint: d.transport_endpoint.clone(),
                    });
                    owners.push((i, j, k, ttl));
                }
            }
        }
        // SAFETY: every destination lies inside a registered region (checked above),
        // writable per this function's contract.
        let done = unsafe { inner.execute(Op::Read, &moves) };
        for ((i, j, k, ttl), outcome) in owners.into_iter().zip(done) {
            if let Err(e) = outcome {
                results[i][j][k] = Err(e);
            } else if start.elapsed() > Duration::from_millis(ttl) {
                log::warn!("store: get_into_ranges: a read lease expired during the read");
                results[i][j][k] = Err(ErrorCode::LEASE_EXPIRED);
            }
        }
        results
    }
}

#[cfg(test)]
#[path = "ops_ranges_tests.rs"]
mod tests;
