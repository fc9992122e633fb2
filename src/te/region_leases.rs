//! Caller memory leased to same-host peers: the target answers a peer's share request
//! for a registered, remotely accessible region of plain (not file-backed) host memory
//! once, and the peer then copies into and out of it with `process_vm_writev`/`readv`
//! without asking per batch.
//!
//! What keeps that safe is a pin table per peer connection: a small shared file of
//! one 64-bit counter per epoch slot (see `te::shared_regions`). Before a copy the
//! peer adds one to the slot's counter and then checks the region's generation; after
//! it, it takes the one away. Unregistration first ends the generation and then waits
//! until every open connection's counter for that slot is zero. Both sides use
//! sequentially consistent operations, so either the peer sees the ended generation
//! (and copies nothing) or unregistration sees its pin (and waits for the copy).
//! A connection that closes (its peer exited or let the lease go) stops counting:
//! the peer keeps it open for as long as it may copy through a lease. A peer stopped
//! (SIGSTOP) in the middle of a copy holds the unregistration until it goes on or
//! exits, as a batch granted over the grant path does.
//!
//! The peer names this process by pid in `process_vm_*`; it checks through a pidfd,
//! at the start of each submission, that the process still runs, so only a pid
//! reused within one submission (after the whole pid space wrapped) could be reached
//! instead.

use crate::host::mapping::Mapping;
use crate::te::shared_regions::{SLOTS, TABLE_BYTES};
use parking_lot::Mutex;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Longest pause between two looks at a pinned slot while unregistering.
const MAX_BACKOFF: Duration = Duration::from_millis(1);

/// The counter of `slot` in a pin table mapped at `base`.
///
/// # Safety
/// `base` must be a live, page-aligned mapping of at least [`TABLE_BYTES`] bytes that
/// outlives the returned reference, and `slot < SLOTS`.
unsafe fn cell<'a>(base: u64, slot: u64) -> &'a AtomicU64 {
    debug_assert!(slot < SLOTS);
    // SAFETY: per this function's contract the cell lies inside the mapping, 8-byte
    // aligned.
    unsafe { &*((base + slot * 8) as *const AtomicU64) }
}

/// One peer connection's pins, as the target holds them.
pub struct PinTable {
    page: Mapping,
    closed: AtomicBool,
}

impl PinTable {
    /// The table's file, for the peer to map.
    pub fn file(&self) -> &OwnedFd {
        self.page
            .shared_file()
            .expect("a pin table is a shared mapping")
    }

    fn is_pinned(&self, slot: u64) -> bool {
        // SAFETY: the mapping is TABLE_BYTES long and lives with `self`; slot < SLOTS
        // (checked by the caller).
        let count = unsafe { cell(self.page.addr(), slot) }.load(Ordering::SeqCst);
        count != 0 && !self.closed.load(Ordering::SeqCst)
    }
}

/// Every open connection's pin table, for unregistration to wait on.
#[derive(Default)]
pub struct PinTables {
    tables: Mutex<Vec<Arc<PinTable>>>,
}

impl PinTables {
    /// A new table for a connection, counted from now on (before its file is sent,
    /// so no pin can exist that unregistration does not see).
    pub fn open(&self) -> io::Result<Arc<PinTable>> {
        let table = Arc::new(PinTable {
            page: Mapping::shared(TABLE_BYTES)?,
            closed: AtomicBool::new(false),
        });
        self.tables.lock().push(table.clone());
        Ok(table)
    }

    /// Stops counting `table`: its connection closed, so its peer copies no more.
    pub fn close(&self, table: &Arc<PinTable>) {
        table.closed.store(true, Ordering::SeqCst);
        self.tables.lock().retain(|t| !Arc::ptr_eq(t, table));
    }

    /// Returns once no open connection pins `slot` (call it after the slot's
    /// generation ended: no new pin then holds).
    pub fn wait_unpinned(&self, slot: u64) {
        if slot >= SLOTS {
            return;
        }
        let tables = self.tables.lock().clone();
        let mut backoff = Duration::from_micros(5);
        for table in tables {
            while table.is_pinned(slot) {
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// A target's pin table as the peer maps it.
pub struct PeerPins {
    page: Mapping,
}

/// A pin held on one slot; dropping it lets unregistration go on.
pub struct Pin<'a> {
    cell: &'a AtomicU64,
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        self.cell.fetch_sub(1, Ordering::SeqCst);
    }
}

impl PeerPins {
    /// Maps a table received from the target (checked like any shared file).
    pub fn map(file: OwnedFd) -> io::Result<PeerPins> {
        Ok(PeerPins {
            page: Mapping::from_shared_file(file, TABLE_BYTES)?,
        })
    }

    /// Pins `slot` (check the region's generation after this, before copying);
    /// `None` for a slot outside the table.
    pub fn pin(&self, slot: u64) -> Option<Pin<'_>> {
        if slot >= SLOTS {
            return None;
        }
        // SAFETY: this process's mapping of the table lives with `self`; slot < SLOTS.
        let cell = unsafe { cell(self.page.addr(), slot) };
        cell.fetch_add(1, Ordering::SeqCst);
        Some(Pin { cell })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn unregistration_waits_for_pins_of_open_connections_only() {
        let tables = PinTables::default();
        let table = tables.open().unwrap();
        let peer = PeerPins::map(table.file().try_clone().unwrap()).unwrap();
        let pin = peer.pin(3).unwrap();
        assert!(peer.pin(SLOTS).is_none());
        let tables = Arc::new(tables);
        let (done_tx, done_rx) = mpsc::channel();
        let waiter = {
            let tables = tables.clone();
            std::thread::spawn(move || {
                tables.wait_unpinned(3);
                done_tx.send(()).unwrap();
            })
        };
        // Other slots are not held up.
        tables.wait_unpinned(4);
        assert!(
            done_rx.try_recv().is_err(),
            "returned while slot 3 is pinned"
        );
        drop(pin);
        done_rx.recv().unwrap();
        waiter.join().unwrap();
        // A connection that closed holding a pin (its peer died) holds nothing up.
        let _leaked = peer.pin(3).unwrap();
        tables.close(&table);
        tables.wait_unpinned(3);
    }
}
