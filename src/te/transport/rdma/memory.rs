//! Memory regions registered with every NIC: one MR per NIC per chunk (a region longer
//! than the device's `max_mr_size` is split into chunks, each published as its own
//! buffer), registered on all NICs in parallel. GPU memory is registered directly
//! (GPUDirect through nvidia-peermem) or, when the NIC driver refuses that, as a
//! dma-buf exported by the CUDA driver. A region counts the slices in flight that
//! touch it; unregistering waits until none does.

use super::error::RdmaError;
use crate::error::{Error, Result};
use crate::sys::verbs::{Access, Dmabuf, MrKeys, Pd, Verbs};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One registered chunk: its range and its keys on each NIC (NIC index order).
#[derive(Debug, Clone)]
pub struct Chunk {
    /// Base address.
    pub addr: u64,
    /// Length.
    pub len: u64,
    /// Keys per NIC.
    pub keys: Vec<MrKeys>,
}

/// A registered region.
#[derive(Debug)]
pub struct Region {
    /// Base address.
    pub addr: u64,
    /// Length.
    pub len: u64,
    /// Its memory location (`cpu:0`, `cuda:1`, `*`), the topology entry it uses.
    pub location: String,
    /// Whether peers may access it.
    pub remote: bool,
    /// Its chunks, in address order.
    pub chunks: Vec<Chunk>,
    in_flight: AtomicU64,
    drained: (Mutex<()>, Condvar),
}

impl Region {
    /// The chunk holding `addr`.
    pub fn chunk(&self, addr: u64) -> Option<&Chunk> {
        self.chunks
            .iter()
            .find(|c| addr >= c.addr && addr < c.addr + c.len)
    }
}

/// A slice's hold on a region: while it lives, the region is not deregistered.
#[derive(Debug)]
pub struct Hold(Arc<Region>);

impl Hold {
    /// Holds `region`.
    pub fn new(region: Arc<Region>) -> Hold {
        region.in_flight.fetch_add(1, Ordering::AcqRel);
        Hold(region)
    }

    /// The region held.
    pub fn region(&self) -> &Region {
        &self.0
    }
}

impl Clone for Hold {
    fn clone(&self) -> Hold {
        Hold::new(self.0.clone())
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _g = self.0.drained.0.lock();
            self.0.drained.1.notify_all();
        }
    }
}

/// Registers one chunk on one NIC; device memory the NIC driver cannot pin directly
/// goes through dma-buf.
fn register_chunk(
    verbs: &dyn Verbs,
    pd: Pd,
    addr: u64,
    len: u64,
    access: Access,
    device: Option<u32>,
) -> std::result::Result<MrKeys, RdmaError> {
    match verbs.reg_mr(pd, addr, len, access) {
        Ok(keys) => Ok(keys),
        Err(direct) if device.is_some() => {
            register_dmabuf(verbs, pd, addr, len, access).map_err(|d| RdmaError::DeviceMemory {
                direct,
                dmabuf: Box::new(d),
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// Registers device memory as a dma-buf of the page-aligned range around it.
fn register_dmabuf(
    verbs: &dyn Verbs,
    pd: Pd,
    addr: u64,
    len: u64,
    access: Access,
) -> std::result::Result<MrKeys, RdmaError> {
    let gpu = crate::sys::cuda::system().ok_or(RdmaError::NoGpuRuntime)?;
    // SAFETY: sysconf has no preconditions.
    let page = (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as u64;
    let start = addr & !(page - 1);
    let end = (addr + len).div_ceil(page) * page;
    let fd: RawFd = gpu
        .dmabuf_fd(start, end - start)
        .map_err(RdmaError::Dmabuf)?;
    let buf = Dmabuf {
        fd,
        offset: addr - start,
        len,
        iova: addr,
    };
    let keys = verbs.reg_dmabuf_mr(pd, buf, access);
    // SAFETY: the fd came from the driver for this call; the MR keeps its own reference.
    unsafe { libc::close(fd) };
    keys.map_err(RdmaError::from)
}

/// The regions registered with the NICs.
#[derive(Default)]
pub struct Memory {
    regions: RwLock<BTreeMap<u64, Arc<Region>>>,
}

impl Memory {
    /// Registers `[addr, addr + len)` (memory of GPU `device`, or host memory) with
    /// every protection domain in `pds` (one per NIC, in NIC order), chunked at
    /// `max_mr`; all or nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn register(
        &self,
        verbs: &dyn Verbs,
        pds: &[Pd],
        addr: u64,
        len: u64,
        (location, device): (&str, Option<u32>),
        access: Access,
        max_mr: u64,
    ) -> Result<()> {
        let mut chunks = Vec::new();
        let mut at = addr;
        let end = addr + len;
        while at < end {
            let n = (end - at).min(max_mr.max(1));
            chunks.push((at, n));
            at += n;
        }
        let results: Vec<Vec<std::result::Result<MrKeys, RdmaError>>> = std::thread::scope(|s| {
            let handles: Vec<_> = pds
                .iter()
                .map(|&pd| {
                    let chunks = &chunks;
                    s.spawn(move || {
                        chunks
                            .iter()
                            .map(|&(a, n)| register_chunk(verbs, pd, a, n, access, device))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| vec![Err(RdmaError::RegistrationPanicked)])
                })
                .collect()
        });
        if let Some(e) = results.iter().flatten().find_map(|r| r.as_ref().err()) {
            let e = e.clone();
            for r in results.into_iter().flatten().flatten() {
                verbs.dereg_mr(r.mr);
            }
            return Err(Error::InvalidArgument(format!(
                "registering {len} bytes at {addr:#x} with the RDMA NICs: {e}"
            )));
        }
        let per_nic: Vec<Vec<MrKeys>> = results
            .into_iter()
            .map(|v| v.into_iter().flatten().collect())
            .collect();
        let chunks = chunks
            .iter()
            .enumerate()
            .map(|(i, &(a, n))| Chunk {
                addr: a,
                len: n,
                keys: per_nic.iter().map(|keys| keys[i]).collect(),
            })
            .collect();
        let region = Arc::new(Region {
            addr,
            len,
            location: location.to_string(),
            remote: access.remote,
            chunks,
            in_flight: AtomicU64::new(0),
            drained: (Mutex::new(()), Condvar::new()),
        });
        self.regions.write().insert(addr, region);
        Ok(())
    }

    /// Unregisters the region at `addr`: no new slice can use it, the call waits for
    /// those in flight, then deregisters its MRs. Unknown addresses are ignored.
    pub fn unregister(&self, verbs: &dyn Verbs, addr: u64) {
        let Some(region) = self.regions.write().remove(&addr) else {
            return;
        };
        {
            let mut g = region.drained.0.lock();
            while region.in_flight.load(Ordering::Acquire) > 0 {
                region.drained.1.wait(&mut g);
            }
        }
        for c in &region.chunks {
            for k in &c.keys {
                verbs.dereg_mr(k.mr);
            }
        }
    }

    /// The region that contains `[addr, addr + len)`.
    pub fn find(&self, addr: u64, len: u64) -> Option<Arc<Region>> {
        let regions = self.regions.read();
        let (_, r) = regions.range(..=addr).next_back()?;
        let end = addr.checked_add(len)?;
        (end <= r.addr + r.len).then(|| r.clone())
    }

    /// Every region, in address order.
    pub fn regions(&self) -> Vec<Arc<Region>> {
        self.regions.read().values().cloned().collect()
    }

    /// Deregisters everything (shutdown; nothing is in flight any more).
    pub fn clear(&self, verbs: &dyn Verbs) {
        let all: Vec<u64> = self.regions.read().keys().copied().collect();
        for addr in all {
            self.unregister(verbs, addr);
        }
    }
}
