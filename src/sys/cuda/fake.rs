//! A GPU runtime for tests: chosen host ranges play device memory (of a chosen device),
//! copies are memcpys that are counted, and device allocations come from the heap. It
//! lets the engine's device-memory paths (location resolution, TCP staging, dma-buf
//! registration) run on machines without a GPU.

use super::gpu::{Gpu, GpuError};
use crate::sys::memmove::memmove;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// The fake runtime.
pub struct FakeGpu {
    devices: u32,
    /// Start -> (end, device, allocated by `alloc`).
    ranges: Mutex<BTreeMap<u64, (u64, u32, bool)>>,
    copies: AtomicU64,
    bytes: AtomicU64,
}

impl FakeGpu {
    /// A runtime with `devices` devices and no device memory yet.
    pub fn new(devices: u32) -> FakeGpu {
        FakeGpu {
            devices,
            ranges: Mutex::new(BTreeMap::new()),
            copies: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// Makes `[addr, addr + len)` (host memory the caller keeps alive) count as memory
    /// of `device`.
    pub fn mark_device_memory(&self, device: u32, addr: u64, len: u64) {
        self.ranges.lock().insert(addr, (addr + len, device, false));
    }

    /// Copies made so far, and the bytes they moved.
    pub fn copies(&self) -> (u64, u64) {
        (
            self.copies.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

impl Gpu for FakeGpu {
    fn provider(&self) -> String {
        "fake".into()
    }

    fn device_count(&self) -> u32 {
        self.devices
    }

    fn device_of(&self, addr: u64) -> Option<u32> {
        let ranges = self.ranges.lock();
        let (_, &(end, device, _)) = ranges.range(..=addr).next_back()?;
        (addr < end).then_some(device)
    }

    fn pci_bus_id(&self, _device: u32) -> Option<String> {
        None
    }

    fn copy(&self, dst: u64, src: u64, len: u64) -> Result<(), GpuError> {
        self.copies.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(len, Ordering::Relaxed);
        // SAFETY: the caller guarantees both ranges are valid for `len` bytes (device
        // ranges here are host memory).
        unsafe { memmove(dst, src, len) };
        Ok(())
    }

    fn dmabuf_fd(&self, addr: u64, len: u64) -> Result<RawFd, GpuError> {
        // The range is page-aligned around the device memory, as the driver wants it.
        let overlaps = self
            .ranges
            .lock()
            .iter()
            .any(|(&start, &(end, _, _))| start < addr + len && addr < end);
        if !overlaps {
            return Err(GpuError::NotDeviceMemory);
        }
        // SAFETY: plain eventfd creation; the caller closes it.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(GpuError::Os {
                call: "eventfd",
                errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            });
        }
        Ok(fd)
    }

    fn alloc(&self, device: u32, len: u64) -> Result<u64, GpuError> {
        if device >= self.devices || len == 0 {
            return Err(GpuError::BadAllocation { device, len });
        }
        let layout = std::alloc::Layout::from_size_align(len as usize, 4096)?;
        // SAFETY: a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) } as u64;
        if p == 0 {
            return Err(GpuError::OutOfMemory);
        }
        self.ranges.lock().insert(p, (p + len, device, true));
        Ok(p)
    }

    fn free(&self, addr: u64) {
        let entry = self.ranges.lock().remove(&addr);
        if let Some((end, _, true)) = entry {
            let layout = std::alloc::Layout::from_size_align((end - addr) as usize, 4096)
                .expect("the layout of an allocation");
            // SAFETY: allocated by `alloc` with this layout, freed once.
            unsafe { std::alloc::dealloc(addr as usize as *mut u8, layout) };
        }
    }
}
