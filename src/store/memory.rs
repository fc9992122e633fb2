//! The store client's own memory ([`Mapping`]s for the global segment, the local
//! staging buffer and a dummy's shared memory) and a first-fit allocator that hands out
//! pieces of a mapping.

pub use crate::host::mapping::Mapping;
use crate::store::error::{StoreError, StoreResult};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Alignment of every staging allocation (upstream's local buffer is 64-B aligned).
const STAGING_ALIGN: u64 = 64;

/// First-fit allocator over a mapping: free ranges by offset, coalesced on free.
#[derive(Debug)]
pub struct StagingBuffer {
    memory: Mapping,
    free: Mutex<BTreeMap<u64, u64>>,
}

/// One staging allocation; returned to the buffer on drop.
#[derive(Debug)]
pub struct Staging<'a> {
    buffer: &'a StagingBuffer,
    offset: u64,
    reserved: u64,
    len: u64,
}

impl StagingBuffer {
    /// Manages all of `memory`.
    pub fn new(memory: Mapping) -> StagingBuffer {
        let mut free = BTreeMap::new();
        free.insert(0, memory.len());
        StagingBuffer {
            memory,
            free: Mutex::new(free),
        }
    }

    /// The underlying mapping.
    pub fn memory(&self) -> &Mapping {
        &self.memory
    }

    /// Allocates `len` (> 0) bytes; `None` when zero or when no free range fits.
    pub fn allocate(&self, len: u64) -> Option<Staging<'_>> {
        let (offset, reserved) = self.reserve(len)?;
        Some(Staging {
            buffer: self,
            offset,
            reserved,
            len,
        })
    }

    /// [`StagingBuffer::allocate`], for an allocation that outlives the borrow (held
    /// across calls, e.g. until a reader releases it).
    pub fn allocate_shared(self: &Arc<Self>, len: u64) -> Option<SharedStaging> {
        let (offset, reserved) = self.reserve(len)?;
        Some(SharedStaging {
            buffer: self.clone(),
            offset,
            reserved,
        })
    }

    /// Takes the first free range that fits `len` rounded up: (offset, reserved).
    fn reserve(&self, len: u64) -> Option<(u64, u64)> {
        if len == 0 {
            return None;
        }
        let reserved = len.checked_add(STAGING_ALIGN - 1)? & !(STAGING_ALIGN - 1);
        let mut free = self.free.lock();
        let (&offset, &size) = free.iter().find(|(_, &size)| size >= reserved)?;
        free.remove(&offset);
        if size > reserved {
            free.insert(offset + reserved, size - reserved);
        }
        Some((offset, reserved))
    }

    fn release(&self, offset: u64, len: u64) {
        let mut free = self.free.lock();
        let (mut start, mut size) = (offset, len);
        if let Some((&prev, &prev_len)) = free.range(..offset).next_back() {
            if prev + prev_len == offset {
                free.remove(&prev);
                start = prev;
                size += prev_len;
            }
        }
        if let Some(next_len) = free.remove(&(offset + len)) {
            size += next_len;
        }
        free.insert(start, size);
    }

    /// Bytes currently free (in total, not necessarily contiguous).
    pub fn free_bytes(&self) -> u64 {
        self.free.lock().values().sum()
    }
}

impl Staging<'_> {
    /// Absolute address of the allocation.
    pub fn addr(&self) -> u64 {
        self.buffer.memory.addr() + self.offset
    }

    /// Requested length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the allocation is empty (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `data` (at most `len` bytes) to the start of the allocation.
    pub fn fill(&mut self, data: &[u8]) {
        let n = data.len().min(self.len as usize);
        // SAFETY: the allocation is `len` bytes inside the live mapping, owned
        // exclusively by this value; `data` is a separate Rust slice.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.addr() as usize as *mut u8, n) };
    }
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        self.buffer.release(self.offset, self.reserved);
    }
}

/// A staging allocation that keeps its buffer alive; returned to it on drop.
#[derive(Debug)]
pub struct SharedStaging {
    buffer: Arc<StagingBuffer>,
    offset: u64,
    reserved: u64,
}

impl SharedStaging {
    /// Absolute address of the allocation.
    pub fn addr(&self) -> u64 {
        self.buffer.memory.addr() + self.offset
    }

    /// The allocation as a writable slice.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the range is inside the live mapping (kept alive by `buffer`) and
        // owned exclusively by this value until it is dropped.
        unsafe {
            std::slice::from_raw_parts_mut(self.addr() as usize as *mut u8, self.reserved as usize)
        }
    }
}

impl Drop for SharedStaging {
    fn drop(&mut self) {
        self.buffer.release(self.offset, self.reserved);
    }
}

/// `len` bytes of `staging` reserved, or -600, `what` (built only then) saying for
/// what, when there is no local buffer, `len` is 0 or does not fit what is free.
pub(crate) fn reserve_for(
    staging: Option<&StagingBuffer>,
    what: impl FnOnce() -> String,
    len: u64,
) -> StoreResult<Staging<'_>> {
    staging.and_then(|s| s.allocate(len)).ok_or_else(|| {
        StoreError::invalid(format!(
            "{}: {len} bytes do not fit the free local buffer (or are empty)",
            what()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_first_fit_and_coalesces() {
        let buf = StagingBuffer::new(Mapping::zeroed(4096).unwrap());
        assert!(buf.allocate(0).is_none());
        let a = buf.allocate(100).unwrap();
        let b = buf.allocate(1000).unwrap();
        assert_eq!(a.addr() % 64, 0);
        assert_eq!(b.addr(), a.addr() + 128);
        assert!(buf.allocate(4096).is_none());
        drop(a);
        let c = buf.allocate(64).unwrap();
        assert_eq!(c.addr(), buf.memory().addr());
        drop(b);
        drop(c);
        assert_eq!(buf.free_bytes(), 4096);
        let mut whole = buf.allocate(4096).unwrap();
        whole.fill(&[7u8; 10]);
        assert!(buf.memory().contains(whole.addr(), 4096));
        assert!(!buf.memory().contains(whole.addr(), 4097));
    }

    #[test]
    fn shared_allocations_outlive_the_borrow() {
        let buf = Arc::new(StagingBuffer::new(Mapping::zeroed(4096).unwrap()));
        let mut a = buf.allocate_shared(100).unwrap();
        assert_eq!(a.as_mut_slice().len(), 128);
        a.as_mut_slice()[..3].copy_from_slice(b"abc");
        let held = vec![a, buf.allocate_shared(4096 - 128).unwrap()];
        assert!(buf.allocate_shared(1).is_none());
        drop(held);
        assert_eq!(buf.free_bytes(), 4096);
    }
}
