//! The store client's own memory: anonymous mappings for the global segment and the
//! local staging buffer, sealed shared-memory files (memfd) that a dummy client and its
//! real client both map, and a first-fit allocator that hands out pieces of a mapping.

use crate::wire::master_api::ErrorCode;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Alignment of every staging allocation (upstream's local buffer is 64-B aligned).
const STAGING_ALIGN: u64 = 64;

/// A zero-filled, page-aligned mapping, unmapped on drop: anonymous, or of a sealed
/// shared-memory file another process of this host may map too.
///
/// Pages are only backed once touched, so a large segment costs nothing up front.
#[derive(Debug)]
pub struct Mapping {
    addr: u64,
    len: u64,
    /// The shared-memory file behind a shared mapping.
    file: Option<OwnedFd>,
}

// SAFETY: the mapping is plain memory owned by this value; access to its bytes is
// coordinated by the store (and by the peers writing through the TE), not by Rust
// references.
unsafe impl Send for Mapping {}
// SAFETY: as above; `Mapping` itself only exposes its address and length.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` (> 0) zeroed bytes; failures (ENOMEM, absurd sizes) are -600.
    pub fn zeroed(len: u64) -> Result<Mapping, ErrorCode> {
        map(len, None)
    }

    /// Maps `len` (> 0) zeroed bytes of a new shared-memory file (memfd), sealed
    /// against shrinking and growing, so that a process it is passed to can map it
    /// and never meets a truncated file (SIGBUS). -600 on any failure.
    pub fn shared(len: u64) -> Result<Mapping, ErrorCode> {
        let size = checked_size(len)?;
        let file = memfd(size).map_err(|e| {
            log::error!("store: creating {len} bytes of shared memory: {e}");
            ErrorCode::INVALID_PARAMS
        })?;
        map(len, Some(file))
    }

    /// Maps the first `len` bytes of a shared-memory file received from another
    /// process: -600 unless it is sealed against shrinking (so its owner cannot make
    /// this process fault) and at least `len` bytes long.
    pub fn from_shared_file(file: OwnedFd, len: u64) -> Result<Mapping, ErrorCode> {
        checked_size(len)?;
        // SAFETY: fcntl and fstat on a descriptor this value owns.
        let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
            log::error!("store: a shared-memory file is not sealed against shrinking");
            return Err(ErrorCode::INVALID_PARAMS);
        }
        // SAFETY: `st` is written by fstat before it is read.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstat(file.as_raw_fd(), &mut st) } != 0 || (st.st_size as u64) < len {
            log::error!("store: a shared-memory file is shorter than the {len} bytes announced");
            return Err(ErrorCode::INVALID_PARAMS);
        }
        map(len, Some(file))
    }

    /// The shared-memory file behind a [`Mapping::shared`] mapping.
    pub fn shared_file(&self) -> Option<&OwnedFd> {
        self.file.as_ref()
    }

    /// Base address.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the mapping is empty (never: zero-length mappings are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `[addr, addr + len)` lies inside the mapping.
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.addr + self.len)
    }
}

/// `len` as a mappable size: -600 for zero or absurd lengths.
fn checked_size(len: u64) -> Result<usize, ErrorCode> {
    match usize::try_from(len) {
        Ok(size) if size > 0 && size <= isize::MAX as usize => Ok(size),
        _ => Err(ErrorCode::INVALID_PARAMS),
    }
}

/// A new memfd of `size` bytes, sealed against shrinking and growing.
fn memfd(size: usize) -> std::io::Result<OwnedFd> {
    // SAFETY: the name is NUL-terminated; the flags are plain integers.
    let fd = unsafe {
        libc::memfd_create(
            c"mooncake_shm".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: memfd_create returned a fresh descriptor nothing else owns.
    let file = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate and fcntl on the descriptor owned above.
    unsafe {
        if libc::ftruncate(fd, size as libc::off_t) != 0
            || libc::fcntl(
                fd,
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(file)
}

/// Maps `len` bytes: anonymous and private without a file, shared with one.
fn map(len: u64, file: Option<OwnedFd>) -> Result<Mapping, ErrorCode> {
    let size = checked_size(len)?;
    let (flags, fd) = match &file {
        Some(f) => (libc::MAP_SHARED, f.as_raw_fd()),
        None => (
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
        ),
    };
    // SAFETY: a fresh mapping chosen by the kernel; no existing memory is affected.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        log::error!(
            "store: mapping {len} bytes failed: {}",
            std::io::Error::last_os_error()
        );
        return Err(ErrorCode::INVALID_PARAMS);
    }
    Ok(Mapping {
        addr: ptr as u64,
        len,
        file,
    })
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly the region mmap returned; nothing uses it any more.
        unsafe { libc::munmap(self.addr as usize as *mut libc::c_void, self.len as usize) };
    }
}

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
        Some(Staging {
            buffer: self,
            offset,
            reserved,
            len,
        })
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
    fn shared_memory_is_seen_through_a_second_mapping_and_unsealed_files_are_refused() {
        let a = Mapping::shared(8192).unwrap();
        let dup = a.shared_file().unwrap().try_clone().unwrap();
        let b = Mapping::from_shared_file(dup, 8192).unwrap();
        // SAFETY: both mappings are live, 8192 bytes long, and not otherwise borrowed.
        unsafe {
            *((a.addr() + 100) as *mut u8) = 42;
            assert_eq!(*((b.addr() + 100) as *const u8), 42);
        }
        let longer = a.shared_file().unwrap().try_clone().unwrap();
        assert_eq!(
            Mapping::from_shared_file(longer, 8193).unwrap_err(),
            ErrorCode::INVALID_PARAMS
        );
        // SAFETY: a fresh memfd without seals, owned below.
        let raw = unsafe { libc::memfd_create(c"unsealed".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(raw >= 0);
        // SAFETY: the descriptor was just created and is owned by nothing else.
        let unsealed = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate on the descriptor owned above.
        assert_eq!(unsafe { libc::ftruncate(raw, 4096) }, 0);
        assert_eq!(
            Mapping::from_shared_file(unsealed, 4096).unwrap_err(),
            ErrorCode::INVALID_PARAMS
        );
        assert!(Mapping::zeroed(4096).unwrap().shared_file().is_none());
    }
}
