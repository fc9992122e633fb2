//! Transfers to the engine's own segment: a memcpy validated against the registry (a
//! GPU runtime copy when either side is GPU memory), and [`LocalCopy`], the transport
//! that routes them.

use crate::error::{Error, Result};
use crate::host::parallel_copy::{CopyPool, MIN_SHARED};
use crate::metadata::SegmentDesc;
use crate::sys::cuda::GpuError;
use crate::sys::memmove::memmove;
use crate::te::batch::Task;
use crate::te::memory::MemoryRegistry;
use crate::te::transport::request::Op;
use crate::te::transport::seam::{
    Destination, Group, Rank, SegmentKind, Started, Target, Transport,
};
use std::sync::{Arc, OnceLock};

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
    // SAFETY: the target range is inside a pinned registered region, pinned until
    // the copy returns; the local range is the caller's buffer (upstream contract).
    unsafe { copy_host(dst, src, len as u64) };
    Ok(())
}

/// Copies host memory, the ranges possibly overlapping (as `memmove`): a copy of
/// [`MIN_SHARED`] bytes or more is shared with the process's copy helpers.
///
/// # Safety
/// Both ranges must be valid for `len` bytes until this returns.
unsafe fn copy_host(dst: u64, src: u64, len: u64) {
    if len < MIN_SHARED {
        // SAFETY: valid ranges per the contract; `memmove` tolerates overlap.
        unsafe { memmove(dst, src, len) }
    } else {
        // SAFETY: as above; the pool moves overlapping ranges as `memmove` does.
        unsafe { copy_pool().copy(dst, src, len) }
    }
}

/// The process's copy helpers (`MC_COPY_HELPERS`), started by the first large copy.
fn copy_pool() -> &'static CopyPool {
    static POOL: OnceLock<CopyPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let helpers = crate::config::Config::global()
            .copy_helpers
            .unwrap_or_else(CopyPool::default_helpers);
        CopyPool::new(helpers)
    })
}

/// Copies `len` bytes from `src` to `dst` anywhere in this process: through the GPU
/// runtime when either is GPU memory (a caller's device buffer), else in host memory,
/// a large copy shared with the copy helpers.
///
/// # Safety
/// Both ranges must be valid for `len` bytes.
pub unsafe fn copy_bytes(dst: u64, src: u64, len: u64) -> std::result::Result<(), GpuError> {
    if let Some(gpu) = crate::sys::cuda::system() {
        if gpu.device_of(dst).is_some() || gpu.device_of(src).is_some() {
            return gpu.copy(dst, src, len);
        }
    }
    // SAFETY: valid ranges per the contract, until the copy returns.
    unsafe { copy_host(dst, src, len) };
    Ok(())
}

/// The own segment as a transport: each request is a [`copy`] on the calling thread;
/// it adds nothing to the descriptor.
pub struct LocalCopy {
    memory: Arc<MemoryRegistry>,
}

impl LocalCopy {
    /// Copies to and from the regions of `memory` (the engine's own).
    pub fn new(memory: Arc<MemoryRegistry>) -> LocalCopy {
        LocalCopy { memory }
    }
}

impl Transport for LocalCopy {
    fn name(&self) -> &'static str {
        "local"
    }

    fn describe(&self, _desc: &mut SegmentDesc) {}

    fn shutdown(&self) {}

    fn rank(&self, _kind: SegmentKind) -> Rank {
        Rank::OwnSegment
    }

    /// The own segment only.
    fn reach(&self, target: &Target<'_>) -> Result<Option<Destination>> {
        Ok((target.kind() == SegmentKind::Own).then(|| Destination::new(())))
    }

    fn start(self: Arc<Self>, group: &Group<'_>, out: &mut Vec<Started>) {
        for r in group.requests {
            let task = match copy(&self.memory, r.op, r.local, r.remote, r.len) {
                Ok(()) => Task::done(r.len),
                Err(e) => {
                    log::warn!("local transfer failed: {e}");
                    Task::failed(r.len)
                }
            };
            out.push(Started::Task(task));
        }
    }
}
