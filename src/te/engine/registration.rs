//! Registering memory: with the engine's registry (what every transport serves),
//! with the transports that need it themselves (the RDMA NICs), and shared with
//! same-host peers; each change republishes the descriptor.

use super::state::{Inner, TransferEngine};
use crate::error::Result;
use crate::te::memory::Range;

impl TransferEngine {
    /// Whether `[addr, addr + len)` lies inside one registered region.
    pub fn is_registered(&self, addr: u64, len: u64) -> bool {
        self.inner.local.memory.find(addr, len).is_some()
    }

    /// Registers one region (with the transports too: the RDMA NICs) and republishes
    /// the descriptor.
    pub fn register_memory(&self, addr: u64, len: u64, location: &str, remote: bool) -> Result<()> {
        let memory = &self.inner.local.memory;
        memory.register(Range { addr, len }, location, remote)?;
        self.inner
            .register_with_transports(&[Range { addr, len }], location, remote)?;
        self.inner.publish_or_rollback(&[addr])
    }

    /// Lets same-host peers map the remotely accessible region based at `addr` through
    /// `file`, a sealed memfd holding it from `offset` (memory this library allocated
    /// itself, e.g. a store segment): they then copy without a round trip to this
    /// process per transfer. Nothing to do when the same-host path is disabled.
    pub fn share_memory(&self, addr: u64, file: std::os::fd::OwnedFd, offset: u64) -> Result<()> {
        if self.inner.config.disable_same_host {
            return Ok(());
        }
        self.inner.local.memory.share(addr, file, offset)
    }

    /// Registers several regions (remotely accessible) and publishes once.
    pub fn register_memory_batch(&self, ranges: &[Range], location: &str) -> Result<()> {
        self.inner
            .local
            .memory
            .register_all(ranges, location, true)?;
        self.inner
            .register_with_transports(ranges, location, true)?;
        let addrs: Vec<u64> = ranges.iter().map(|r| r.addr).collect();
        self.inner.publish_or_rollback(&addrs)
    }

    /// Unregisters the region based at `addr` and republishes. Returns once no
    /// transfer touches it any more.
    pub fn unregister_memory(&self, addr: u64) -> Result<()> {
        self.inner.local.memory.unregister(addr)?;
        for t in self.inner.local.transports.all() {
            t.unregister(addr);
        }
        self.inner.publish_descriptor()
    }

    /// Unregisters several regions (best effort), publishing once; first error wins.
    pub fn unregister_memory_batch(&self, addrs: &[u64]) -> Result<()> {
        let mut first = None;
        let transports = self.inner.local.transports.all();
        for &addr in addrs {
            match self.inner.local.memory.unregister(addr) {
                Ok(()) => {
                    for t in &transports {
                        t.unregister(addr);
                    }
                }
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        let published = self.inner.publish_descriptor();
        first.map_or(published, Err)
    }
}

impl Inner {
    /// Registers `ranges` (already in the engine's registry) with every installed
    /// transport; on failure every range is unregistered again, from the transports
    /// and the engine.
    pub(super) fn register_with_transports(
        &self,
        ranges: &[Range],
        location: &str,
        remote: bool,
    ) -> Result<()> {
        let transports = self.local.transports.all();
        for (done_transports, t) in transports.iter().enumerate() {
            for (i, r) in ranges.iter().enumerate() {
                let device = self
                    .local
                    .memory
                    .find(r.addr, r.len)
                    .and_then(|region| region.device);
                if let Err(e) = t.register(*r, location, device, remote) {
                    for done in &ranges[..i] {
                        t.unregister(done.addr);
                    }
                    for earlier in &transports[..done_transports] {
                        for r in ranges {
                            earlier.unregister(r.addr);
                        }
                    }
                    for r in ranges {
                        let _ = self.local.memory.unregister(r.addr);
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}
