//! [`memmove`]: a byte copy between two addresses of this process, given as the
//! engine carries them (`u64`).

/// Copies `len` bytes from address `src` to address `dst`; the ranges may overlap.
///
/// # Safety
/// Both ranges must be valid for `len` bytes in this process.
#[inline]
pub unsafe fn memmove(dst: u64, src: u64, len: u64) {
    // SAFETY: both ranges are valid per the contract; `copy` tolerates overlap.
    unsafe {
        std::ptr::copy(
            src as usize as *const u8,
            dst as usize as *mut u8,
            len as usize,
        )
    };
}
