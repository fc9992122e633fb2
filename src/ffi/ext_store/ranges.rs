//! `mooncake_store_get_into_ranges`: byte ranges of objects gathered into registered
//! buffers (upstream's Python `get_into_ranges`), with its flattened arguments.

#![allow(non_camel_case_types)]

use crate::ffi::args::c_slice;
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::fail::{invalid, FfiError};
use crate::ffi::last_error::set_last_error;
use crate::ffi::store::args::keys_arg;
use crate::ffi::store::handle::client;
use crate::ffi::store::mooncake_store_t;
use crate::ffi::store::results::{codes, size_or_code, write_out};
use crate::store::{ErrorCode, Range, RangedRead};
use std::ffi::{c_char, c_int, c_void};

/// One fragment of `mooncake_store_get_into_ranges`: `size` bytes at `src_offset` of
/// the object, written at `dst_offset` of the destination buffer.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mooncake_range {
    /// Offset in the destination buffer.
    pub dst_offset: u64,
    /// Offset in the object.
    pub src_offset: u64,
    /// Bytes to read.
    pub size: u64,
}

/// Typedef of struct mooncake_range.
pub type mooncake_range_t = mooncake_range;

/// Sum of `counts`, or an invalid argument when it overflows.
fn total(counts: &[usize], what: &str) -> Result<usize, FfiError> {
    counts
        .iter()
        .try_fold(0usize, |a, &c| a.checked_add(c))
        .ok_or_else(|| invalid(format!("{what} add up to more than any array")))
}

/// Reads the flattened per-key arguments into one [`RangedRead`] per buffer of `bufs`,
/// buffer `i` taking `kcounts[i]` keys.
///
/// # Safety
/// As for `mooncake_store_get_into_ranges`.
unsafe fn reads_arg(
    bufs: &[*mut c_void],
    kcounts: &[usize],
    keys: *const *const c_char,
    range_counts: *const usize,
    ranges: *const mooncake_range_t,
) -> Result<Vec<RangedRead>, FfiError> {
    let nkeys = total(kcounts, "key_counts")?;
    // SAFETY: `nkeys` entries each, per the contract.
    let (names, rcounts) = unsafe {
        (
            if nkeys == 0 {
                Vec::new()
            } else {
                keys_arg(keys, nkeys)?
            },
            c_slice(range_counts, nkeys, "range_counts")?,
        )
    };
    // SAFETY: the sum of `range_counts` entries, per the contract.
    let all = unsafe { c_slice(ranges, total(rcounts, "range_counts")?, "ranges") }?;
    let (mut key_at, mut range_at) = (0, 0);
    let mut out = Vec::with_capacity(bufs.len());
    for (&buffer, &nk) in bufs.iter().zip(kcounts) {
        let mut read = RangedRead {
            buffer: buffer as u64,
            keys: Vec::with_capacity(nk),
        };
        for (name, &nr) in names[key_at..key_at + nk].iter().zip(&rcounts[key_at..]) {
            let frags = all[range_at..range_at + nr].iter().map(|r| Range {
                dst: r.dst_offset,
                src: r.src_offset,
                len: r.size,
            });
            read.keys.push((name.clone(), frags.collect()));
            range_at += nr;
        }
        key_at += nk;
        out.push(read);
    }
    Ok(out)
}

/// Reads byte ranges of objects into `buffer_count` destination buffers. Buffer `i`
/// takes the next `key_counts[i]` entries of `keys` (and of `range_counts`); key
/// entry `e` takes the next `range_counts[e]` entries of `ranges`; `results_out` gets
/// one value per range, in order: the bytes read, or -600 when the range does not fit
/// its buffer or the object, -704 missing object, -703 not complete, -707 read lease
/// expired during the read, -800 transfer failure. As upstream, a buffer's capacity
/// is what remains of the registered region (`mooncake_store_register_buffer`) it
/// points into; a NULL or unregistered buffer fails all its ranges with -600. Before
/// setup every range gets -600. Returns 0, or -1 (writing nothing) for a bad handle,
/// a NULL array with a non-zero count, a NULL key, or counts that overflow.
///
/// # Safety
/// `buffers` and `key_counts` hold `buffer_count` entries; `keys` and `range_counts`
/// the sum of `key_counts`; `ranges` and `results_out` the sum of `range_counts`;
/// keys are NUL-terminated; registered memory stays writable during the call.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_get_into_ranges(
    store: mooncake_store_t,
    buffers: *const *mut c_void,
    key_counts: *const usize,
    buffer_count: usize,
    keys: *const *const c_char,
    range_counts: *const usize,
    ranges: *const mooncake_range_t,
    results_out: *mut i64,
) -> c_int {
    ffi_boundary!(name = function, {
        let h = client(store)?;
        // SAFETY: `buffer_count` entries each, per the contract.
        let (bufs, kcounts) = unsafe {
            (
                c_slice(buffers, buffer_count, "buffers")?,
                c_slice(key_counts, buffer_count, "key_counts")?,
            )
        };
        // SAFETY: per the contract.
        let reads = unsafe { reads_arg(bufs, kcounts, keys, range_counts, ranges) }?;
        let count: usize = reads
            .iter()
            .flat_map(|r| &r.keys)
            .map(|(_, f)| f.len())
            .sum();
        if results_out.is_null() && count > 0 {
            return Err(invalid("results_out is NULL"));
        }
        let flat: Vec<i64> = match h {
            Some(c) => {
                // SAFETY: registered memory is writable per the contract.
                let results = unsafe { c.get_into_ranges_raw(&reads) };
                let results = results.into_iter().flatten().flatten().collect();
                let codes = codes(Some(function), results);
                codes.into_iter().map(size_or_code).collect()
            }
            None => {
                let e = ErrorCode::INVALID_PARAMS;
                if count > 0 {
                    set_last_error(function.get(), &e.to_string(), 0);
                }
                vec![i64::from(e.0); count]
            }
        };
        // SAFETY: results_out holds `count` entries.
        unsafe { write_out(results_out, count, flat) };
        Ok(0)
    })
}
