//! The engine's registered memory regions and the guards that keep a region alive
//! while a transfer touches it.

use super::region_leases::PinTables;
use super::shared_regions::{EpochTable, Share};
use crate::error::{Error, Result};
use crate::sys::cuda::Gpu;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// One registered region of the caller's memory.
#[derive(Debug)]
pub struct Region {
    /// Base address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Location tag the caller gave (`cpu:0`, `*`, ...).
    pub location: String,
    /// Whether peers may read and write it.
    pub remote_accessible: bool,
    /// The GPU whose memory it is (asked of the GPU runtime at registration); `None`
    /// for host memory.
    pub device: Option<u32>,
    /// The file same-host peers may map it through, once shared.
    pub share: OnceLock<Share>,
    /// Its epoch slot and generation while it is leased to same-host peers (caller
    /// memory they copy with `process_vm_*`, see `te::region_leases`).
    lease: Mutex<Option<(u64, u64)>>,
    in_use: RwLock<()>,
    removed: AtomicBool,
}

/// Proof that a region stays registered (and its memory valid) while held.
pub struct RegionGuard<'a> {
    _guard: parking_lot::RwLockReadGuard<'a, ()>,
}

impl Region {
    /// Whether `[addr, addr+len)` lies inside this region.
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.addr + self.len)
    }

    /// Pins the region for one transfer; `None` once it was unregistered.
    pub fn pin(&self) -> Option<RegionGuard<'_>> {
        let guard = self.in_use.read();
        (!self.removed.load(Ordering::Acquire)).then_some(RegionGuard { _guard: guard })
    }
}

/// A memory range to register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// Base address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
}

/// The set of registered regions, ordered by base address.
#[derive(Default)]
pub struct MemoryRegistry {
    regions: RwLock<BTreeMap<u64, Arc<Region>>>,
    /// Generations of the shared regions (created with the first one).
    epochs: OnceLock<Arc<EpochTable>>,
    /// Same-host peers' pins on leased regions.
    pins: PinTables,
}

impl MemoryRegistry {
    /// Registers one region; zero length or NULL is -1, overlap is -7.
    pub fn register(&self, range: Range, location: &str, remote_accessible: bool) -> Result<()> {
        self.register_all(&[range], location, remote_accessible)
    }

    /// Registers several regions atomically: all or none.
    pub fn register_all(&self, ranges: &[Range], location: &str, remote: bool) -> Result<()> {
        let mut sorted = ranges.to_vec();
        sorted.sort_by_key(|r| r.addr);
        for r in &sorted {
            if r.len == 0 || r.addr == 0 {
                return Err(Error::InvalidArgument(format!(
                    "cannot register {:#x}+{}: NULL address or zero length",
                    r.addr, r.len
                )));
            }
            if r.addr.checked_add(r.len).is_none() {
                return Err(Error::InvalidArgument(format!(
                    "region {:#x}+{} wraps around the address space",
                    r.addr, r.len
                )));
            }
        }
        for pair in sorted.windows(2) {
            if pair[0].addr + pair[0].len > pair[1].addr {
                return Err(overlap(pair[1]));
            }
        }
        let mut regions = self.regions.write();
        for r in &sorted {
            if Self::overlaps(&regions, *r) {
                return Err(overlap(*r));
            }
        }
        for r in sorted {
            regions.insert(
                r.addr,
                Arc::new(Region {
                    addr: r.addr,
                    len: r.len,
                    location: location.to_string(),
                    remote_accessible: remote,
                    device: crate::sys::cuda::device_of(r.addr),
                    share: OnceLock::new(),
                    lease: Mutex::new(None),
                    in_use: RwLock::new(()),
                    removed: AtomicBool::new(false),
                }),
            );
        }
        Ok(())
    }

    fn overlaps(regions: &BTreeMap<u64, Arc<Region>>, r: Range) -> bool {
        let end = r.addr + r.len;
        regions
            .range(..end)
            .next_back()
            .is_some_and(|(_, prev)| prev.addr + prev.len > r.addr)
    }

    /// Unregisters the region based exactly at `addr` (-3 when unknown). Returns once
    /// no transfer touches it any more.
    pub fn unregister(&self, addr: u64) -> Result<()> {
        let region = self.regions.write().remove(&addr).ok_or_else(|| {
            Error::AddressNotRegistered(format!("no region registered at {addr:#x}"))
        })?;
        // Same-host peers' copies through the file fail from here on.
        if let (Some(share), Some(epochs)) = (region.share.get(), self.epochs.get()) {
            epochs.retire(share.slot, share.gen);
        }
        self.end_lease(&region);
        let _exclusive = region.in_use.write();
        region.removed.store(true, Ordering::Release);
        Ok(())
    }

    /// Lets same-host peers map the remotely accessible host-memory region based
    /// exactly at `addr` through `file` (a sealed memfd holding it from `offset`).
    pub fn share(&self, addr: u64, file: OwnedFd, offset: u64) -> Result<()> {
        let region = self.regions.read().get(&addr).cloned().ok_or_else(|| {
            Error::AddressNotRegistered(format!("no region registered at {addr:#x}"))
        })?;
        if !region.remote_accessible || region.device.is_some() {
            return Err(Error::InvalidArgument(format!(
                "region {addr:#x} is not remotely accessible host memory"
            )));
        }
        let epochs = self.epoch_table()?;
        let (slot, gen) = epochs
            .assign()
            .ok_or_else(|| Error::InvalidArgument("every same-host epoch slot is taken".into()))?;
        let share = Share {
            file,
            offset,
            slot,
            gen,
        };
        if region.share.set(share).is_err() {
            epochs.retire(slot, gen);
            return Err(Error::InvalidArgument(format!(
                "region {addr:#x} is shared already"
            )));
        }
        // Unregistered meanwhile: its generation must end too.
        let still_registered = self
            .regions
            .read()
            .get(&addr)
            .is_some_and(|r| Arc::ptr_eq(r, &region));
        if !still_registered {
            epochs.retire(slot, gen);
        }
        Ok(())
    }

    /// The generations table, created with the first region shared or leased.
    fn epoch_table(&self) -> Result<Arc<EpochTable>> {
        if let Some(e) = self.epochs.get() {
            return Ok(e.clone());
        }
        let table = EpochTable::new().map_err(|e| {
            Error::InvalidArgument(format!("creating the same-host epoch table: {e}"))
        })?;
        Ok(self.epochs.get_or_init(|| Arc::new(table)).clone())
    }

    /// Leases `region` (remotely accessible host memory, not shared as a file) to
    /// same-host peers: its epoch `(slot, generation)`, assigned on the first call and
    /// kept until it is unregistered. `None` when it cannot be leased (unregistered,
    /// GPU memory, no slot left).
    pub fn lease(&self, region: &Arc<Region>) -> Option<(u64, u64)> {
        if !region.remote_accessible || region.device.is_some() {
            return None;
        }
        let epochs = self.epoch_table().ok()?;
        let mut lease = region.lease.lock();
        if let Some(held) = *lease {
            return Some(held);
        }
        // Checked under the lease lock: unregistration takes the lease after removing
        // the region, so one assigned here is always ended.
        let registered = self
            .regions
            .read()
            .get(&region.addr)
            .is_some_and(|r| Arc::ptr_eq(r, region));
        if !registered {
            return None;
        }
        *lease = Some(epochs.assign()?);
        *lease
    }

    /// Ends `region`'s lease, if any: peers' checks fail from now on, and this returns
    /// once no copy through it is under way.
    fn end_lease(&self, region: &Region) {
        let Some((slot, gen)) = region.lease.lock().take() else {
            return;
        };
        if let Some(epochs) = self.epochs.get() {
            epochs.retire(slot, gen);
        }
        self.pins.wait_unpinned(slot);
    }

    /// Ends every lease (the same-host listener stops: no peer may copy on its own
    /// from then on); returns once no copy through one is under way.
    pub fn end_leases(&self) {
        for region in self.regions() {
            self.end_lease(&region);
        }
    }

    /// The pin tables of same-host peers' connections.
    pub fn pin_tables(&self) -> &PinTables {
        &self.pins
    }

    /// The table of shared regions' generations, once a region was shared.
    pub fn epochs(&self) -> Option<&Arc<EpochTable>> {
        self.epochs.get()
    }

    /// The region that fully contains `[addr, addr+len)`.
    pub fn find(&self, addr: u64, len: u64) -> Option<Arc<Region>> {
        let regions = self.regions.read();
        let (_, region) = regions.range(..=addr).next_back()?;
        region.contains(addr, len).then(|| region.clone())
    }

    /// The remotely accessible region holding the whole of `[addr, addr+len)` (a
    /// peer's request: empty ones and ones longer than memory hold nothing).
    pub fn accessible(&self, addr: u64, len: u64) -> Option<Arc<Region>> {
        if len == 0 || usize::try_from(len).is_err() {
            return None;
        }
        self.find(addr, len).filter(|r| r.remote_accessible)
    }

    /// The GPU runtime when `addr` is GPU memory (registered as such, or so the
    /// runtime says); `None` for host memory and on hosts without a GPU runtime.
    pub fn gpu_of(&self, addr: u64) -> Option<Arc<dyn Gpu>> {
        let gpu = crate::sys::cuda::system()?;
        let device = match self.find(addr, 1) {
            Some(region) => region.device,
            None => gpu.device_of(addr),
        };
        device.map(|_| gpu)
    }

    /// Every registered region as (addr, len), in address order.
    pub fn ranges(&self) -> Vec<Range> {
        self.regions
            .read()
            .values()
            .map(|r| Range {
                addr: r.addr,
                len: r.len,
            })
            .collect()
    }

    /// Every registered region, in address order.
    pub fn regions(&self) -> Vec<Arc<Region>> {
        self.regions.read().values().cloned().collect()
    }

    /// Whether any region is registered.
    pub fn is_empty(&self) -> bool {
        self.regions.read().is_empty()
    }
}

fn overlap(r: Range) -> Error {
    Error::AddressOverlapped(format!(
        "region {:#x}+{} overlaps a registered region",
        r.addr, r.len
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(addr: u64, len: u64) -> Range {
        Range { addr, len }
    }

    #[test]
    fn register_rules() {
        let m = MemoryRegistry::default();
        assert_eq!(
            m.register(r(0x1000, 0), "*", true).unwrap_err().err_code(),
            -1
        );
        m.register(r(0x1000, 0x1000), "*", true).unwrap();
        assert_eq!(
            m.register(r(0x1800, 0x1000), "*", true)
                .unwrap_err()
                .err_code(),
            -7
        );
        assert_eq!(
            m.register(r(0x800, 0x900), "*", true)
                .unwrap_err()
                .err_code(),
            -7
        );
        m.register(r(0x2000, 0x10), "*", false).unwrap();
        assert!(m.find(0x1000, 0x1000).is_some());
        assert!(
            m.find(0x1ff0, 0x20).is_none(),
            "adjacent regions are not merged"
        );
        assert!(!m.find(0x2000, 1).unwrap().remote_accessible);
        assert_eq!(m.unregister(0x1001).unwrap_err().err_code(), -3);
        m.unregister(0x1000).unwrap();
        assert!(m.find(0x1000, 1).is_none());
    }

    #[test]
    fn batch_is_all_or_nothing() {
        let m = MemoryRegistry::default();
        let err = m
            .register_all(&[r(0x1000, 0x100), r(0x1080, 0x100)], "*", true)
            .unwrap_err();
        assert_eq!(err.err_code(), -7);
        assert!(m.is_empty());
        m.register_all(&[r(0x3000, 0x100), r(0x1000, 0x100)], "*", true)
            .unwrap();
        assert_eq!(m.ranges(), vec![r(0x1000, 0x100), r(0x3000, 0x100)]);
    }

    #[test]
    fn unregister_waits_for_pins_and_fences_later_ones() {
        let m = Arc::new(MemoryRegistry::default());
        m.register(r(0x1000, 0x100), "*", true).unwrap();
        let region = m.find(0x1000, 1).unwrap();
        let pin = region.pin().unwrap();
        let m2 = m.clone();
        let t = std::thread::spawn(move || m2.unregister(0x1000));
        drop(pin);
        t.join().unwrap().unwrap();
        assert!(region.pin().is_none());
    }
}
