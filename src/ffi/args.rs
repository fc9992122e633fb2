//! Readers of C arguments: strings, arrays and snprintf-style output buffers, with
//! NULL pointers and impossible lengths rejected before anything is read.

use super::fail::{invalid, FfiError};
use std::borrow::Cow;
use std::ffi::{c_char, CStr};

/// Reads a NUL-terminated argument; NULL is an invalid argument.
///
/// # Safety
/// A non-NULL `ptr` must point to a NUL-terminated string that outlives the call.
pub(crate) unsafe fn c_str<'a>(ptr: *const c_char, what: &str) -> Result<Cow<'a, str>, FfiError> {
    if ptr.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(ptr) }.to_string_lossy())
}

/// Refuses a NULL output pointer: an invalid argument named `what`.
pub(crate) fn require_out<T>(ptr: *mut T, what: &str) -> Result<(), FfiError> {
    if ptr.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    Ok(())
}

/// Reads an optional NUL-terminated string; NULL reads as `default`.
///
/// # Safety
/// A non-NULL `ptr` must point to a NUL-terminated string that outlives the call.
pub(crate) unsafe fn c_str_or<'a>(ptr: *const c_char, default: &'a str) -> Cow<'a, str> {
    if ptr.is_null() {
        return Cow::Borrowed(default);
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    unsafe { CStr::from_ptr(ptr) }.to_string_lossy()
}

/// Views `count` elements at `ptr`; a zero count is an empty slice whatever `ptr` is,
/// and NULL, misaligned or impossibly long arrays are invalid arguments.
///
/// # Safety
/// A non-NULL `ptr` must point to `count` initialised elements that outlive the call.
pub(crate) unsafe fn c_slice<'a, T>(
    ptr: *const T,
    count: usize,
    what: &str,
) -> Result<&'a [T], FfiError> {
    if count == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(invalid(format!("{what} is NULL but its count is {count}")));
    }
    if count > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(invalid(format!(
            "{what}: count {count} is larger than any array"
        )));
    }
    if (ptr as usize) % std::mem::align_of::<T>() != 0 {
        return Err(invalid(format!("{what} ({ptr:p}) is not aligned")));
    }
    // SAFETY: non-NULL, aligned, length bounded; the caller guarantees the elements.
    Ok(unsafe { std::slice::from_raw_parts(ptr, count) })
}

/// `snprintf(buf, len, "%s", text)`: copies what fits, always NUL-terminates when
/// `len > 0`, and never writes past `len` bytes.
///
/// # Safety
/// `buf` must be valid for `len` bytes of writes.
pub(crate) unsafe fn write_truncated(buf: *mut c_char, len: usize, text: &str) {
    if len == 0 || buf.is_null() {
        return;
    }
    let n = text.len().min(len - 1);
    // SAFETY: n + 1 <= len bytes, which the caller guarantees are writable.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
}

/// Copies `text` into a fixed C character array, truncated and NUL-terminated.
pub(crate) fn fill_c_array(dst: &mut [c_char], text: &str) {
    dst.fill(0);
    let room = dst.len().saturating_sub(1);
    for (d, b) in dst.iter_mut().zip(text.bytes().take(room)) {
        *d = b as c_char;
    }
}

/// The NUL-terminated text of a fixed C character array (all of it without a NUL).
pub(crate) fn c_array_text(src: &[c_char]) -> String {
    let bytes: Vec<u8> = src
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_is_snprintf_like() {
        let mut buf = [0x55 as c_char; 6];
        // SAFETY: buf has 6 bytes; only 4 are offered.
        unsafe { write_truncated(buf.as_mut_ptr(), 4, "abcdef") };
        assert_eq!(&buf[..5], &[97, 98, 99, 0, 0x55]);
    }

    #[test]
    fn slices_reject_null_and_huge_counts() {
        // SAFETY: the checks reject every pointer before it is read.
        unsafe {
            assert!(c_slice::<u64>(std::ptr::null(), 1, "a").is_err());
            assert!(c_slice::<u64>(std::ptr::null(), 0, "a").unwrap().is_empty());
            let x = [1u64];
            assert!(c_slice(x.as_ptr(), usize::MAX, "a").is_err());
            assert_eq!(c_slice(x.as_ptr(), 1, "a").unwrap(), &[1]);
        }
    }
}
