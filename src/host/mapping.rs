//! [`Mapping`]: memory this library maps for itself, anonymous or of a sealed
//! shared-memory file (memfd) that other processes of the host may map too (a dummy
//! client's buffers, a store segment its same-host peers map once).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::OnceLock;

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
    /// Maps `len` (> 0) zeroed bytes (fails with ENOMEM, or EINVAL for absurd sizes).
    pub fn zeroed(len: u64) -> io::Result<Mapping> {
        map(len, None)
    }

    /// Maps `len` (> 0) zeroed bytes of a new shared-memory file (memfd), sealed
    /// against shrinking and growing, so that a process it is passed to can map it
    /// and never meets a truncated file (SIGBUS).
    pub fn shared(len: u64) -> io::Result<Mapping> {
        let size = checked_size(len)?;
        map(len, Some(memfd(size)?))
    }

    /// Maps the first `len` bytes of a shared-memory file received from another
    /// process: refused (EPERM) unless it is sealed against shrinking, so its owner
    /// cannot make this process fault, and (EINVAL) unless it is `len` bytes or longer.
    pub fn from_shared_file(file: OwnedFd, len: u64) -> io::Result<Mapping> {
        checked_size(len)?;
        // SAFETY: fcntl and fstat on a descriptor this value owns.
        let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "a shared-memory file that is not sealed against shrinking",
            ));
        }
        // SAFETY: `st` is written by fstat before it is read.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstat(file.as_raw_fd(), &mut st) } != 0 || (st.st_size as u64) < len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a shared-memory file shorter than the {len} bytes announced"),
            ));
        }
        map(len, Some(file))
    }

    /// Maps the first `len` (> 0) bytes of a regular file, which must be that long:
    /// `shared`, writes reach the file (a download lands in it); else private and
    /// copy-on-write, so the file is never changed (a file published as it is).
    pub fn of_file(file: &std::fs::File, len: u64, shared: bool) -> io::Result<Mapping> {
        Mapping::of_file_at(file, 0, len, shared)
    }

    /// Maps `len` (> 0) bytes of a regular file from `offset` (a multiple of the page
    /// size), which must lie inside the file; `shared` as for [`Mapping::of_file`].
    pub fn of_file_at(
        file: &std::fs::File,
        offset: u64,
        len: u64,
        shared: bool,
    ) -> io::Result<Mapping> {
        let size = checked_size(len)?;
        let file_len = file.metadata()?.len();
        if offset.checked_add(len).map_or(true, |end| end > file_len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{len} bytes from offset {offset} exceed the file's {file_len} bytes"),
            ));
        }
        let offset = libc::off_t::try_from(offset)
            .ok()
            .filter(|&o| o as u64 % page_size() == 0)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("offset {offset} is not a multiple of the page size"),
                )
            })?;
        let flags = if shared {
            libc::MAP_SHARED
        } else {
            libc::MAP_PRIVATE
        };
        // The mapping outlives the borrowed descriptor, as mmap allows.
        Ok(Mapping {
            addr: mmap(size, flags, file.as_raw_fd(), offset)?,
            len,
            file: None,
        })
    }

    /// Writes a shared file mapping's changed pages back to the file and waits.
    pub fn sync(&self) -> io::Result<()> {
        // SAFETY: exactly the region mmap returned, still mapped.
        let rc = unsafe {
            libc::msync(
                self.addr as usize as *mut libc::c_void,
                self.len as usize,
                libc::MS_SYNC,
            )
        };
        match rc {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
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

/// `len` as a mappable size: EINVAL for zero or absurd lengths.
fn checked_size(len: u64) -> io::Result<usize> {
    match usize::try_from(len) {
        Ok(size) if size > 0 && size <= isize::MAX as usize => Ok(size),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot map {len} bytes"),
        )),
    }
}

/// A new memfd of `size` bytes, sealed against shrinking and growing.
fn memfd(size: usize) -> io::Result<OwnedFd> {
    // SAFETY: the name is NUL-terminated; the flags are plain integers.
    let fd = unsafe {
        libc::memfd_create(
            c"mooncake_shm".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
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
            return Err(io::Error::last_os_error());
        }
    }
    Ok(file)
}

/// Maps `len` bytes: anonymous and private without a file, shared with one.
fn map(len: u64, file: Option<OwnedFd>) -> io::Result<Mapping> {
    let size = checked_size(len)?;
    let (flags, fd) = match &file {
        Some(f) => (libc::MAP_SHARED, f.as_raw_fd()),
        None => (
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
        ),
    };
    Ok(Mapping {
        addr: mmap(size, flags, fd, 0)?,
        len,
        file,
    })
}

/// The system's page size in bytes (read once).
pub fn page_size() -> u64 {
    static SIZE: OnceLock<u64> = OnceLock::new();
    *SIZE.get_or_init(|| {
        // SAFETY: sysconf reads a constant of the system.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
    })
}

/// A fresh readable and writable mapping of `size` bytes (of `fd` from `offset`, or
/// anonymous with `fd` -1), placed by the kernel: its address.
fn mmap(size: usize, flags: libc::c_int, fd: libc::c_int, offset: libc::off_t) -> io::Result<u64> {
    // SAFETY: a fresh mapping chosen by the kernel; no existing memory is affected.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            offset,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(ptr as u64)
}

/// Maps `len` zeroed private bytes at an address aligned to `align` (a power of two;
/// `len` and `align` multiples of the page size), for memory kept outside a
/// [`Mapping`]; give it back with [`unmap_aligned`].
pub fn map_aligned(len: usize, align: usize) -> io::Result<NonNull<u8>> {
    let span = len
        .checked_add(align)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    let start = mmap(span, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)? as usize;
    let aligned = (start + align - 1) & !(align - 1);
    let tail = start + span - (aligned + len);
    // SAFETY: both ranges lie inside the mapping just made, outside the part kept, and
    // nothing else knows of them.
    unsafe {
        if aligned > start {
            libc::munmap(start as *mut libc::c_void, aligned - start);
        }
        if tail > 0 {
            libc::munmap((aligned + len) as *mut libc::c_void, tail);
        }
    }
    NonNull::new(aligned as *mut u8).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))
}

/// Gives back memory from [`map_aligned`].
///
/// # Safety
/// `ptr` and `len` are those of a `map_aligned` call, and nothing uses the memory after.
pub unsafe fn unmap_aligned(ptr: NonNull<u8>, len: usize) {
    // SAFETY: exactly a region `map_aligned` kept (the caller's contract).
    unsafe { libc::munmap(ptr.as_ptr().cast::<libc::c_void>(), len) };
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly the region mmap returned; nothing uses it any more.
        unsafe { libc::munmap(self.addr as usize as *mut libc::c_void, self.len as usize) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_memory_is_aligned_zeroed_and_writable() {
        let len = 256 << 10;
        for _ in 0..4 {
            let p = map_aligned(len, len).unwrap();
            assert_eq!(p.as_ptr() as usize % len, 0);
            // SAFETY: the mapping is live, `len` bytes long, and only used here.
            let bytes = unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), len) };
            assert!(bytes.iter().all(|&b| b == 0));
            bytes.fill(0xa5);
            assert!(bytes.iter().all(|&b| b == 0xa5));
            // SAFETY: `p` and `len` are those of the call above; nothing uses it after.
            unsafe { unmap_aligned(p, len) };
        }
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
        assert!(Mapping::from_shared_file(longer, 8193).is_err());
        // SAFETY: a fresh memfd without seals, owned below.
        let raw = unsafe { libc::memfd_create(c"unsealed".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(raw >= 0);
        // SAFETY: the descriptor was just created and is owned by nothing else.
        let unsealed = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate on the descriptor owned above.
        assert_eq!(unsafe { libc::ftruncate(raw, 4096) }, 0);
        let refused = Mapping::from_shared_file(unsealed, 4096).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied);
        assert!(Mapping::zeroed(4096).unwrap().shared_file().is_none());
    }

    #[test]
    fn file_mappings_write_through_when_shared_and_never_when_private() {
        let dir = std::env::temp_dir().join(format!("mc-mapping-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, vec![1u8; 8192]).unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let shared = Mapping::of_file(&file, 8192, true).unwrap();
        let private = Mapping::of_file(&file, 4096, false).unwrap();
        // SAFETY: both mappings are live and at least 4096 bytes long.
        unsafe {
            *((shared.addr() + 10) as *mut u8) = 7;
            *((private.addr() + 20) as *mut u8) = 9;
        }
        shared.sync().unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!((on_disk[10], on_disk[20]), (7, 1));
        assert!(
            Mapping::of_file(&file, 8193, true).is_err(),
            "longer than the file"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn file_ranges_map_from_a_page_aligned_offset_inside_the_file() {
        let dir = std::env::temp_dir().join(format!("mc-mapping-at-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let page = page_size();
        let mut bytes = vec![0u8; 3 * page as usize];
        bytes[page as usize] = 5;
        std::fs::write(&path, &bytes).unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let second = Mapping::of_file_at(&file, page, 2 * page, true).unwrap();
        // SAFETY: the mapping is live and two pages long.
        unsafe {
            assert_eq!(*(second.addr() as *const u8), 5);
            *((second.addr() + 1) as *mut u8) = 6;
        }
        second.sync().unwrap();
        assert_eq!(std::fs::read(&path).unwrap()[page as usize + 1], 6);
        for (offset, len) in [(page, 2 * page + 1), (1, page), (u64::MAX - 1, 2)] {
            let refused = Mapping::of_file_at(&file, offset, len, true).unwrap_err();
            assert_eq!(
                refused.kind(),
                io::ErrorKind::InvalidInput,
                "{offset} {len}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
