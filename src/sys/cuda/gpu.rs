//! [`Gpu`]: the narrow trait every GPU runtime implements (the CUDA driver, the fake),
//! and [`GpuError`], why one of its calls failed.

use crate::sys::dl::DlError;
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
    fn copy(&self, dst: u64, src: u64, len: u64) -> Result<(), GpuError>;
    /// A dma-buf file descriptor for `[addr, addr + len)` of device memory (both
    /// page-aligned), for `ibv_reg_dmabuf_mr`; the caller closes it.
    fn dmabuf_fd(&self, addr: u64, len: u64) -> Result<RawFd, GpuError>;
    /// Allocates `len` bytes of memory on `device` (for tools and tests).
    fn alloc(&self, device: u32, len: u64) -> Result<u64, GpuError>;
    /// Frees memory from [`Gpu::alloc`].
    fn free(&self, addr: u64);
}

/// Why a GPU runtime call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuError {
    /// The driver library did not load.
    #[error(transparent)]
    Library(#[from] DlError),
    /// The driver library lacks an entry point the engine calls.
    #[error("{library} lacks {symbol}")]
    MissingSymbol {
        /// The library's file name.
        library: String,
        /// The entry point, as the source names it.
        symbol: &'static str,
    },
    /// `cuInit` failed.
    #[error("cuInit returned {code}")]
    Init {
        /// The `CUresult` it returned.
        code: i32,
    },
    /// The driver sees no device.
    #[error("no CUDA device")]
    NoDevice,
    /// A device ordinal the runtime does not have.
    #[error("no CUDA device {device}")]
    UnknownDevice {
        /// The ordinal asked for.
        device: u32,
    },
    /// A device's primary context could not be retained.
    #[error("retaining device {device}'s context: {code}")]
    RetainContext {
        /// The device.
        device: u32,
        /// The `CUresult` the driver returned.
        code: i32,
    },
    /// A driver call failed.
    #[error("{call}: {code}")]
    Driver {
        /// The entry point.
        call: &'static str,
        /// The `CUresult` it returned.
        code: i32,
    },
    /// A driver call on `len` bytes failed.
    #[error("{call} of {len} bytes: {code}")]
    DriverSized {
        /// The entry point.
        call: &'static str,
        /// The bytes it was asked to handle.
        len: u64,
        /// The `CUresult` it returned.
        code: i32,
    },
    /// The driver cannot export dma-buf handles.
    #[error("the driver has no cuMemGetHandleForAddressRange (CUDA < 11.7)")]
    NoDmaBuf,
    /// The address is not device memory.
    #[error("not device memory")]
    NotDeviceMemory,
    /// A system call failed.
    #[error("{}", std::io::Error::from_raw_os_error(*errno))]
    Os {
        /// The call.
        call: &'static str,
        /// The errno it set.
        errno: i32,
    },
    /// An allocation the runtime cannot make (unknown device, zero length).
    #[error("cannot allocate {len} bytes on device {device}")]
    BadAllocation {
        /// The device asked for.
        device: u32,
        /// The length asked for.
        len: u64,
    },
    /// An allocation whose size has no valid layout.
    #[error(transparent)]
    Layout(#[from] std::alloc::LayoutError),
    /// The allocator had no memory left.
    #[error("out of memory")]
    OutOfMemory,
}
