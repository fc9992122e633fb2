//! Transfers to the engine's own segment: a memcpy validated against the registry (a
//! GPU runtime copy when either side is GPU memory).

use crate::error::{Error, Result};
use crate::sys::cuda::GpuError;
use crate::te::memory::MemoryRegistry;
use crate::te::transport::request::Op;

/// Copies between `local` and the registered region at `target`; the target range
/// must lie inside one registered region, which stays pinned during the copy.
pub fn copy(memory: &MemoryRegistry, op: Op, local: u64, target: u64, len: u64) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    let outside = || {
        Error::AddressNotRegistered(format!(
            "local segment has no registered region holding {target:#x}+{len}"
        ))
    };
    let region = memory.find(target, len).ok_or_else(outside)?;
    let _pin = region.pin().ok_or_else(outside)?;
    let len = usize::try_from(len).map_err(|_| outside())?;
    let (src, dst) = match op {
        Op::Write => (local, target),
        Op::Read => (target, local),
    };
    if let Some(gpu) = crate::sys::cuda::system() {
        let local_device = memory
            .find(local, len as u64)
            .map_or_else(|| gpu.device_of(local), |r| r.device);
        if region.device.is_some() || local_device.is_some() {
            return gpu
                .copy(dst, src, len as u64)
                .map_err(|e| Error::InvalidArgument(format!("GPU copy: {e}")));
        }
    }
    // SAFETY: the target range is inside a pinned registered region; the local
    // range is the caller's buffer (upstream contract). `copy` tolerates overlap.
    unsafe { std::ptr::copy(src as usize as *const u8, dst as usize as *mut u8, len) };
    Ok(())
}

/// Copies `len` bytes from `src` to `dst` anywhere in this process: through the GPU
/// runtime when either is GPU memory (a caller's device buffer), else a memmove.
///
/// # Safety
/// Both ranges must be valid for `len` bytes.
pub unsafe fn copy_bytes(dst: u64, src: u64, len: u64) -> std::result::Result<(), GpuError> {
    if let Some(gpu) = crate::sys::cuda::system() {
        if gpu.device_of(dst).is_some() || gpu.device_of(src).is_some() {
            return gpu.copy(dst, src, len);
        }
    }
    // SAFETY: valid ranges per the contract; `copy` tolerates overlap.
    unsafe {
        std::ptr::copy(
            src as usize as *const u8,
            dst as usize as *mut u8,
            len as usize,
        )
    };
    Ok(())
}
