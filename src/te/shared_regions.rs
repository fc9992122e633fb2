//! Registered regions shared with same-host peers as files. A region backed by a
//! sealed memfd (a store segment) can be handed to a peer of the same user, which maps
//! it once and then copies with plain loads and stores, without asking this process
//! per transfer.
//!
//! Each shared region holds a slot of this engine's [`EpochTable`], a small shared
//! file of 64-bit generations that peers map read-only in effect: a slot holds the
//! region's (odd) generation while it is registered and the next (even) value from the
//! moment it is unregistered. A peer checks the generation before and after each copy,
//! so a copy that overlaps an unregistration fails (as the grant path refuses it),
//! and memory registered again at the same address is never reached through the old
//! file.

use crate::host::mapping::Mapping;
use parking_lot::Mutex;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// Slots per table: shared regions one engine can have at once.
pub const SLOTS: u64 = 8192;
/// Size of the table's file.
pub const TABLE_BYTES: u64 = SLOTS * 8;

/// One engine's generations, in a shared file.
pub struct EpochTable {
    page: Mapping,
    state: Mutex<Slots>,
}

struct Slots {
    /// The last generation written to each slot (authoritative: peers could scribble
    /// on their mapping of the file, never on this).
    gens: Vec<u64>,
    free: Vec<u64>,
}

impl EpochTable {
    /// A new table, every slot free.
    pub fn new() -> io::Result<EpochTable> {
        Ok(EpochTable {
            page: Mapping::shared(TABLE_BYTES)?,
            state: Mutex::new(Slots {
                gens: vec![0; SLOTS as usize],
                free: (0..SLOTS).rev().collect(),
            }),
        })
    }

    /// The table's file, for peers to map.
    pub fn file(&self) -> &OwnedFd {
        self.page
            .shared_file()
            .expect("an epoch table is a shared mapping")
    }

    /// Takes a free slot and makes it live: `(slot, generation)`; `None` when every
    /// slot is taken.
    pub fn assign(&self) -> Option<(u64, u64)> {
        let mut s = self.state.lock();
        let slot = s.free.pop()?;
        let gen = s.gens[slot as usize] + 1;
        s.gens[slot as usize] = gen;
        self.cell(slot).store(gen, Ordering::Release);
        Some((slot, gen))
    }

    /// Ends `gen` in `slot` (peers' checks fail from now on) and frees the slot.
    pub fn retire(&self, slot: u64, gen: u64) {
        let mut s = self.state.lock();
        let Some(current) = s.gens.get_mut(slot as usize) else {
            return;
        };
        if *current != gen {
            return;
        }
        *current = gen + 1;
        self.cell(slot).store(gen + 1, Ordering::SeqCst);
        s.free.push(slot);
    }

    fn cell(&self, slot: u64) -> &AtomicU64 {
        debug_assert!(slot < SLOTS);
        // SAFETY: the mapping is TABLE_BYTES long, page-aligned and lives as long as
        // `self`; slot < SLOTS keeps the cell inside it, 8-byte aligned.
        unsafe { &*((self.page.addr() + slot * 8) as *const AtomicU64) }
    }
}

/// A peer's table as this process maps it.
pub struct PeerEpochs {
    page: Mapping,
}

impl PeerEpochs {
    /// Maps a table received from a peer (checked like any shared file).
    pub fn map(file: OwnedFd) -> io::Result<PeerEpochs> {
        Ok(PeerEpochs {
            page: Mapping::from_shared_file(file, TABLE_BYTES)?,
        })
    }

    /// Whether `slot` still holds `gen` (the region it names is still registered).
    pub fn is_live(&self, slot: u64, gen: u64) -> bool {
        if slot >= SLOTS {
            return false;
        }
        // SAFETY: as in `EpochTable::cell`, on this process's mapping of the file.
        let cell = unsafe { &*((self.page.addr() + slot * 8) as *const AtomicU64) };
        cell.load(Ordering::SeqCst) == gen
    }
}

/// How a registered region is shared: its file and place in it, and its slot.
#[derive(Debug)]
pub struct Share {
    /// The file holding the region.
    pub file: OwnedFd,
    /// Offset of the region's first byte in the file.
    pub offset: u64,
    /// Its slot in the engine's table.
    pub slot: u64,
    /// Its generation there.
    pub gen: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_end_with_unregistration_and_never_come_back() {
        let table = EpochTable::new().unwrap();
        let peer = PeerEpochs::map(table.file().try_clone().unwrap()).unwrap();
        let (slot, gen) = table.assign().unwrap();
        assert!(peer.is_live(slot, gen));
        table.retire(slot, gen);
        assert!(!peer.is_live(slot, gen));
        // The slot is reused with a new generation: the old one stays dead.
        let (again, newer) = table.assign().unwrap();
        assert_eq!(again, slot);
        assert_ne!(newer, gen);
        assert!(peer.is_live(again, newer) && !peer.is_live(slot, gen));
        // Retiring a stale generation does nothing.
        table.retire(slot, gen);
        assert!(peer.is_live(again, newer));
        assert!(!peer.is_live(SLOTS, 1));
        let taken: Vec<_> = std::iter::from_fn(|| table.assign()).collect();
        assert_eq!(taken.len() as u64, SLOTS - 1);
    }
}
