//! The store's own vocabulary, shared by [`StoreApi`], the real and the dummy client,
//! and the C layer: how a write treats an existing key, objects as pieces of memory,
//! memory a whole-object read fills, and ranged reads.
//!
//! [`StoreApi`]: super::StoreApi

use crate::store::error::StoreError;
use crate::wire::master_api::{ErrorCode, MasterResult, ReplicateConfig};

/// How a write treats an existing key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Create only: an existing key is a success that keeps the old value.
    Put,
    /// Insert or replace (in place when the size is unchanged).
    Upsert,
}

/// The pieces `(address, length)` whose concatenation, in order, is one object.
pub type Pieces = Vec<(u64, u64)>;

/// A batch write: one object per key, each the concatenation of its pieces.
#[derive(Debug, Clone, Copy)]
pub struct BatchWrite<'a> {
    /// How the write treats existing keys.
    pub mode: WriteMode,
    /// The objects' keys.
    pub keys: &'a [&'a str],
    /// Per key, the pieces of its object.
    pub items: &'a [Pieces],
    /// How the objects are replicated.
    pub config: &'a ReplicateConfig,
}

/// Owned memory a whole-object get reads into; `addr` stays valid while it lives.
pub trait ReadTarget {
    /// Address of the first byte.
    fn addr(&mut self) -> u64;
}

impl ReadTarget for Vec<u8> {
    fn addr(&mut self) -> u64 {
        self.as_mut_ptr() as u64
    }
}

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
    /// `register_buffer`; 0 or anything else fails every fragment).
    pub buffer: u64,
    /// The source objects, each with the fragments read from it.
    pub keys: Vec<(String, Vec<Range>)>,
}

/// Per buffer, per key, per fragment: the bytes read or why not (`E = ErrorCode`:
/// the code alone, as the dummy's wire carries it).
pub type RangedResults<E = StoreError> = Vec<Vec<Vec<Result<u64, E>>>>;

/// Results of the shape of `reads` with every fragment failed with `e`.
pub fn ranged_failure(reads: &[RangedRead], e: StoreError) -> RangedResults {
    reads
        .iter()
        .map(|r| {
            let keys = r.keys.iter();
            keys.map(|(_, f)| vec![Err(e.clone()); f.len()]).collect()
        })
        .collect()
}

/// `results` with every error turned into another by `f`.
pub(crate) fn map_ranged<E, F>(
    results: RangedResults<E>,
    mut f: impl FnMut(E) -> F,
) -> RangedResults<F> {
    let mut one = |r: Result<u64, E>| r.map_err(&mut f);
    results
        .into_iter()
        .map(|keys| {
            keys.into_iter()
                .map(|frags| frags.into_iter().map(&mut one).collect())
                .collect()
        })
        .collect()
}

/// The total length of an object's pieces.
pub(crate) fn total_len(pieces: &[(u64, u64)]) -> u64 {
    pieces.iter().map(|p| p.1).sum()
}

/// The pieces of an object that hold its first `limit` bytes, in order: (address,
/// offset in the object, length), the last one cut at `limit`.
pub(crate) fn spread(
    pieces: &[(u64, u64)],
    limit: u64,
) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
    let mut off = 0;
    pieces.iter().map_while(move |&(addr, len)| {
        if off >= limit {
            return None;
        }
        let len = len.min(limit - off);
        let at = off;
        off += len;
        Some((addr, at, len))
    })
}

/// Keeps a batch answer aligned with its `n` inputs (missing answers: -1).
pub(crate) fn fit<T: Clone>(mut v: Vec<MasterResult<T>>, n: usize) -> Vec<MasterResult<T>> {
    v.resize(n, Err(ErrorCode::INTERNAL_ERROR));
    v
}

/// One key's fragments of a session's ranged call: (local address, length, offset in
/// the object).
pub type Fragments = Vec<(u64, u64, u64)>;
