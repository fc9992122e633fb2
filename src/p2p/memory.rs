//! The buffers the P2P Store registered with its Transfer Engine, counted: the same
//! buffer given by several objects (or twice by one caller) is registered once and
//! unregistered with its last user, as upstream's Go store does; a buffer that
//! overlaps another one without being the same is refused.

use super::error::{P2pError, P2pResult};
use crate::te::TransferEngine;
use parking_lot::Mutex;

/// One registered buffer and how many users it has.
struct Entry {
    addr: u64,
    len: u64,
    users: usize,
    /// Registered by this store (not by the engine's owner before it).
    ours: bool,
}

/// The registered buffers of one store.
#[derive(Default)]
pub struct Registrations {
    entries: Mutex<Vec<Entry>>,
}

impl Registrations {
    /// Registers every buffer (remotely readable, at `location`) or none: on an error
    /// the ones this call registered are released again.
    pub fn add_all(
        &self,
        engine: &TransferEngine,
        buffers: &[(u64, u64)],
        location: &str,
    ) -> P2pResult<()> {
        for (i, &(addr, len)) in buffers.iter().enumerate() {
            if let Err(e) = self.add(engine, addr, len, location) {
                self.remove_all(engine, &buffers[..i]);
                return Err(e);
            }
        }
        Ok(())
    }

    fn add(&self, engine: &TransferEngine, addr: u64, len: u64, location: &str) -> P2pResult<()> {
        let mut entries = self.entries.lock();
        if let Some(e) = entries.iter_mut().find(|e| e.addr == addr && e.len == len) {
            e.users += 1;
            return Ok(());
        }
        let end = addr.saturating_add(len);
        if let Some(e) = entries
            .iter()
            .find(|e| addr < e.addr.saturating_add(e.len) && e.addr < end)
        {
            return Err(P2pError::InvalidArgument(format!(
                "buffer {addr:#x}+{len} overlaps the registered buffer {:#x}+{}",
                e.addr, e.len
            )));
        }
        let ours = !engine.is_registered(addr, len);
        if ours {
            engine
                .register_memory(addr, len, location, true)
                .map_err(|e| P2pError::Engine(format!("registering {addr:#x}+{len}: {e}")))?;
        }
        entries.push(Entry {
            addr,
            len,
            users: 1,
            ours,
        });
        Ok(())
    }

    /// Releases one use of every buffer; the last use unregisters it (when this store
    /// registered it).
    pub fn remove_all(&self, engine: &TransferEngine, buffers: &[(u64, u64)]) {
        for &(addr, len) in buffers {
            let last = {
                let mut entries = self.entries.lock();
                let Some(i) = entries.iter().position(|e| e.addr == addr && e.len == len) else {
                    continue;
                };
                entries[i].users -= 1;
                if entries[i].users > 0 {
                    continue;
                }
                entries.swap_remove(i).ours
            };
            if last {
                if let Err(e) = engine.unregister_memory(addr) {
                    log::warn!("p2p: unregistering {addr:#x}+{len}: {e}");
                }
            }
        }
    }
}
