//! Memory handed to C callers by `mooncake_store_batch_get_buffers` and released with
//! `mooncake_store_free_buffer`. Each buffer carries a 16-byte header (capacity and a
//! state tag) in front of the bytes the caller sees. Released buffers of 64 KiB or more
//! are kept, a few and bounded in bytes, for the next read: a fresh large allocation is
//! a new mapping whose pages fault in one by one as the transfer fills them, which
//! costs as much as copying the object again.

use parking_lot::Mutex;
use std::ffi::c_void;

/// Bytes in front of the caller's pointer (keeps it 16-byte aligned).
const HEADER: usize = 16;
/// Smallest buffer worth keeping.
const MIN_KEPT: usize = 64 << 10;
/// Most buffers kept.
const MAX_KEPT: usize = 8;
/// Most bytes kept.
const MAX_KEPT_BYTES: usize = 32 << 20;
/// Tag of a buffer the caller holds.
const LIVE: u64 = 0x6d63_6275_666c_6976;
/// Tag of a buffer that was released.
const RELEASED: u64 = 0x6d63_6275_6672_6565;

/// Released buffers: (capacity, start of the allocation).
struct Kept(Vec<(usize, usize)>);

static KEPT: Mutex<Kept> = Mutex::new(Kept(Vec::new()));

/// A buffer of at least the requested size, released on drop unless handed out.
pub struct Buffer(*mut u8);

impl Buffer {
    /// A buffer for `len` bytes (a kept one when one fits), `None` when out of memory.
    pub fn new(len: usize) -> Option<Buffer> {
        if len >= MIN_KEPT {
            if let Some(base) = take_kept(len) {
                // SAFETY: a kept allocation with a valid header.
                unsafe { set_tag(base, LIVE) };
                // SAFETY: a kept allocation holds HEADER + capacity bytes, so the
                // offset stays inside it.
                return Some(Buffer(unsafe { base.add(HEADER) }));
            }
        }
        let total = len.checked_add(HEADER)?;
        // SAFETY: plain allocation; the header is written before the pointer escapes.
        let base = unsafe { libc::malloc(total) }.cast::<u8>();
        if base.is_null() {
            return None;
        }
        // SAFETY: `base` holds at least HEADER bytes and malloc aligns to 16.
        unsafe {
            base.cast::<u64>().write(len as u64);
            set_tag(base, LIVE);
            Some(Buffer(base.add(HEADER)))
        }
    }

    /// The address of the first byte.
    pub fn addr(&self) -> u64 {
        self.0 as u64
    }

    /// Hands the buffer to the caller, who releases it with [`release`].
    pub fn into_raw(self) -> *mut c_void {
        let p = self.0;
        std::mem::forget(self);
        p.cast()
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: a live buffer of ours, not handed out.
        unsafe { release(self.0.cast()) };
    }
}

/// Releases a buffer from [`Buffer::into_raw`]; NULL is ignored. Returns false (and
/// touches nothing else) when the header says it was already released.
///
/// # Safety
/// `p` must be NULL or a pointer from [`Buffer::into_raw`].
pub unsafe fn release(p: *mut c_void) -> bool {
    if p.is_null() {
        return true;
    }
    // SAFETY: forwarded contract: the caller guarantees `p` came from
    // `Buffer::into_raw`, i.e. HEADER bytes past the start of one of our allocations.
    let base = unsafe { p.cast::<u8>().sub(HEADER) };
    // SAFETY: `base` starts one of our allocations (the caller's guarantee above).
    if unsafe { tag(base) } != LIVE {
        return false;
    }
    // SAFETY: as above; the tag said LIVE, so nobody else releases it concurrently
    // under the caller's contract.
    unsafe { set_tag(base, RELEASED) };
    // SAFETY: the first 8 header bytes of our allocation hold the capacity; malloc
    // aligned `base` for u64.
    let capacity = unsafe { base.cast::<u64>().read() } as usize;
    if capacity >= MIN_KEPT {
        let mut kept = KEPT.lock();
        let bytes: usize = kept.0.iter().map(|(c, _)| c).sum();
        if kept.0.len() < MAX_KEPT && bytes + capacity <= MAX_KEPT_BYTES {
            kept.0.push((capacity, base as usize));
            return true;
        }
    }
    // SAFETY: `base` is the pointer malloc returned for this buffer, and it was not
    // kept, so this is its only release.
    unsafe { libc::free(base.cast()) };
    true
}

/// Removes and returns the smallest kept allocation that holds `len` bytes without
/// wasting more than half of it.
fn take_kept(len: usize) -> Option<*mut u8> {
    let mut kept = KEPT.lock();
    let best = kept
        .0
        .iter()
        .enumerate()
        .filter(|(_, (c, _))| *c >= len && *c / 2 <= len)
        .min_by_key(|(_, (c, _))| *c)
        .map(|(i, _)| i)?;
    Some(kept.0.swap_remove(best).1 as *mut u8)
}

/// # Safety
/// `base` starts one of our allocations.
unsafe fn tag(base: *mut u8) -> u64 {
    // SAFETY: forwarded contract: the caller guarantees `base` starts one of our
    // allocations, whose 16-byte header holds the tag at offset 8, 8-aligned.
    unsafe { base.add(8).cast::<u64>().read() }
}

/// # Safety
/// `base` starts one of our allocations.
unsafe fn set_tag(base: *mut u8, tag: u64) {
    // SAFETY: forwarded contract: the caller guarantees `base` starts one of our
    // allocations, whose 16-byte header holds the tag at offset 8, 8-aligned.
    unsafe { base.add(8).cast::<u64>().write(tag) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_are_reused_and_double_release_is_refused() {
        let a = Buffer::new(1 << 20).unwrap();
        let addr = a.addr();
        // SAFETY: the buffer holds 1 MiB.
        unsafe { std::ptr::write_bytes(addr as *mut u8, 7, 1 << 20) };
        let p = a.into_raw();
        // SAFETY: from into_raw.
        assert!(unsafe { release(p) });
        // SAFETY: still from into_raw; the header of a released buffer stays readable
        // because a 1 MiB buffer is kept, not freed.
        assert!(!unsafe { release(p) }, "second release refused");
        let b = Buffer::new((1 << 20) - 100).unwrap();
        assert_eq!(b.addr(), addr, "the kept buffer is reused");
        let c = Buffer::new(3 << 20).unwrap();
        assert_ne!(c.addr(), addr);
        drop(b);
        // Far smaller requests do not take a large kept buffer.
        let small = Buffer::new(100 << 10).unwrap();
        assert_ne!(small.addr(), addr);
        let tiny = Buffer::new(0).unwrap();
        // SAFETY: from into_raw.
        assert!(unsafe { release(tiny.into_raw()) });
        // SAFETY: NULL is allowed and ignored.
        assert!(unsafe { release(std::ptr::null_mut()) });
    }
}
