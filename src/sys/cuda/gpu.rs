//! [`Gpu`]: the narrow trait every GPU runtime implements (the CUDA driver, the fake).

use std::os::fd::RawFd;

/// What the engine needs from a GPU runtime.
pub trait Gpu: Send + Sync {
    /// Short name for logs (`cuda 12040`, `fake`).
    fn provider(&self) -> String;
    /// Number of devices.
    fn device_count(&self) -> u32;
    /// The device whose memory holds `addr`; `None` for host memory (including
    /// pinned host memory the driver knows of).
    fn device_of(&self, addr: u64) -> Option<u32>;
    /// The PCI bus id of `device` in sysfs form (`0000:3b:00.0`), if known.
    fn pci_bus_id(&self, device: u32) -> Option<String>;
    /// Copies `len` bytes from `src` to `dst`, either of which may be device memory,
    /// synchronously.
    fn copy(&self, dst: u64, src: u64, len: u64) -> Result<(), String>;
    /// A dma-buf file descriptor for `[addr, addr + len)` of device memory (both
    /// page-aligned), for `ibv_reg_dmabuf_mr`; the caller closes it.
    fn dmabuf_fd(&self, addr: u64, len: u64) -> Result<RawFd, String>;
    /// Allocates `len` bytes of memory on `device` (for tools and tests).
    fn alloc(&self, device: u32, len: u64) -> Result<u64, String>;
    /// Frees memory from [`Gpu::alloc`].
    fn free(&self, addr: u64);
}
