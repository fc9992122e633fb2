//! Maps, in the background, the pages of a freshly mapped peer region that the peer
//! already backs, so that copies into it run at memory speed from the start.
//!
//! A process that maps a peer's segment has none of its pages in its own page tables:
//! each 4 KiB page costs a fault at its first copy (about 0.5-0.9 us here, a 1 MiB
//! write into a fresh mapping twice the time of one into a mapped range). Pages the
//! peer already backs (its segment was written before, by it or by an earlier process)
//! are mapped here in bulk instead: `mincore` finds them and `MADV_POPULATE_READ` maps
//! them (shared memory needs no write notification, so the entries are writable, and
//! the kernel maps neighbouring pages of one fault together): about 60 us per MiB, off
//! the copying threads. Pages the peer does not back yet are left alone (populating
//! them would allocate the peer's memory); the copy that first writes them populates
//! them itself (`mapped.rs`).

use crate::host::mapping::page_size;
use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

/// Bytes of peers' regions a process maps ahead in all (page tables cost about 2 MiB
/// per GiB mapped); past it, pages are mapped by the copies that use them.
const BUDGET: u64 = 16 << 30;
/// Bytes looked at per `mincore` call (its vector is one byte per page).
const STEP: u64 = 64 << 20;

/// A mapping whose pages can be mapped ahead.
pub trait Premappable: Send + Sync {
    /// The address and length (both whole pages) of the live mapping's pages, `None`
    /// once what it maps is no longer registered.
    fn live_pages(&self) -> Option<(u64, u64)>;
}

/// The background thread that maps peers' backed pages ahead, started with the first
/// region; stopped and joined on drop.
#[derive(Default)]
pub struct Premapper {
    worker: Mutex<Option<Worker>>,
    stop: Arc<AtomicBool>,
    /// Bytes mapped ahead so far.
    mapped: Arc<AtomicU64>,
}

struct Worker {
    jobs: Sender<Weak<dyn Premappable>>,
    thread: JoinHandle<()>,
}

impl Premapper {
    /// Maps `region`'s backed pages ahead, after the regions queued before it. The
    /// region is held weakly: one forgotten (unregistered, its peer gone) is skipped.
    pub fn queue(&self, region: &Arc<impl Premappable + 'static>) {
        let mut worker = self.worker.lock();
        if worker.is_none() {
            let (jobs, queued) = crossbeam_channel::unbounded();
            let stop = self.stop.clone();
            let mapped = self.mapped.clone();
            let spawned = std::thread::Builder::new()
                .name("mc-premap".into())
                .spawn(move || run(queued, &stop, &mapped));
            match spawned {
                Ok(thread) => *worker = Some(Worker { jobs, thread }),
                Err(e) => {
                    log::debug!("same-host: no thread to map peers' pages ahead: {e}");
                    return;
                }
            }
        }
        if let Some(w) = worker.as_ref() {
            let region: Arc<dyn Premappable> = region.clone();
            let _ = w.jobs.send(Arc::downgrade(&region));
        }
    }

    /// Bytes of peers' regions mapped ahead so far (diagnostics).
    pub fn bytes_mapped(&self) -> u64 {
        self.mapped.load(Ordering::Relaxed)
    }
}

impl Drop for Premapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(Worker { jobs, thread }) = self.worker.get_mut().take() {
            drop(jobs);
            let _ = thread.join();
        }
    }
}

fn run(queued: Receiver<Weak<dyn Premappable>>, stop: &AtomicBool, total: &AtomicU64) {
    let mut left = BUDGET;
    while let Ok(region) = queued.recv() {
        if left == 0 {
            continue;
        }
        let mut at = 0;
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            // Held for one step only, so a forgotten region is unmapped promptly.
            let Some(r) = region.upgrade() else {
                break;
            };
            let Some((here, len)) = r.live_pages() else {
                break;
            };
            if at >= len || left == 0 {
                break;
            }
            let step = STEP.min(len - at);
            // SAFETY: `[here + at, + step)` lies inside the live mapping `r` holds.
            let mapped = unsafe { map_backed_pages(here + at, step, left) };
            left -= mapped;
            total.fetch_add(mapped, Ordering::Relaxed);
            at += step;
        }
    }
}

/// Maps into this process's page tables the pages of `[addr, addr + len)` that the
/// shared memory behind them already backs, at most `budget` bytes of them; how many
/// bytes it mapped. Pages not backed are left unbacked.
///
/// # Safety
/// `[addr, addr + len)` must lie inside a live shared mapping of this process;
/// `addr` must be page-aligned.
pub unsafe fn map_backed_pages(addr: u64, len: u64, budget: u64) -> u64 {
    let page = page_size();
    let pages = len.div_ceil(page) as usize;
    let mut resident = vec![0u8; pages];
    // SAFETY: per the contract the range is mapped; the vector has one byte per page.
    let rc = unsafe {
        libc::mincore(
            addr as usize as *mut libc::c_void,
            len as usize,
            resident.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return 0;
    }
    let mut mapped = 0;
    let mut i = 0;
    while i < pages && mapped < budget {
        if resident[i] & 1 == 0 {
            i += 1;
            continue;
        }
        let start = i;
        while i < pages && resident[i] & 1 == 1 {
            i += 1;
        }
        let bytes = ((i - start) as u64 * page).min(budget - mapped);
        // SAFETY: a page-aligned run inside the live mapping; populating reads no
        // contents and changes none. A kernel without MADV_POPULATE_READ (before 5.14)
        // refuses it, and the copies map the pages as before.
        let rc = unsafe {
            libc::madvise(
                (addr + start as u64 * page) as usize as *mut libc::c_void,
                bytes as usize,
                libc::MADV_POPULATE_READ,
            )
        };
        if rc != 0 {
            return mapped;
        }
        mapped += bytes;
    }
    mapped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::mapping::Mapping;
    use std::io::{Read, Seek, SeekFrom};

    /// Whether this process's page tables map the page at `addr` (`/proc/self/pagemap`,
    /// bit 63).
    fn page_present(addr: u64) -> bool {
        let mut f = std::fs::File::open("/proc/self/pagemap").unwrap();
        f.seek(SeekFrom::Start(addr / page_size() * 8)).unwrap();
        let mut entry = [0u8; 8];
        f.read_exact(&mut entry).unwrap();
        u64::from_le_bytes(entry) >> 63 == 1
    }

    fn backed(m: &Mapping, page: u64) -> bool {
        let mut v = [0u8; 1];
        // SAFETY: one page inside the live mapping `m`, one byte of vector.
        unsafe {
            libc::mincore(
                (m.addr() + page * page_size()) as usize as *mut libc::c_void,
                page_size() as usize,
                v.as_mut_ptr(),
            )
        };
        v[0] & 1 == 1
    }

    #[test]
    fn backed_pages_are_mapped_and_unbacked_ones_stay_unbacked() {
        const PAGES: u64 = 64;
        let owner = Mapping::shared(PAGES * page_size()).unwrap();
        // The owner backs the even pages of the first half.
        for page in (0..PAGES / 2).step_by(2) {
            // SAFETY: a byte inside the owner's live mapping.
            unsafe { *((owner.addr() + page * page_size()) as *mut u8) = 7 };
        }
        let file = owner.shared_file().unwrap().try_clone().unwrap();
        let peer = Mapping::from_shared_file(file, PAGES * page_size()).unwrap();
        assert!((0..PAGES).all(|p| !page_present(peer.addr() + p * page_size())));

        // SAFETY: the whole of the live mapping `peer`, page-aligned.
        let mapped = unsafe { map_backed_pages(peer.addr(), PAGES * page_size(), u64::MAX) };

        assert_eq!(mapped, PAGES / 4 * page_size());
        for page in 0..PAGES {
            let written = page < PAGES / 2 && page % 2 == 0;
            assert_eq!(
                page_present(peer.addr() + page * page_size()),
                written,
                "page {page}"
            );
            assert_eq!(backed(&owner, page), written, "page {page} backed");
        }
        // SAFETY: a byte of a mapped page of `peer`.
        assert_eq!(unsafe { *(peer.addr() as *const u8) }, 7);
    }

    #[test]
    fn the_budget_bounds_what_is_mapped() {
        let owner = Mapping::shared(16 * page_size()).unwrap();
        for page in 0..16 {
            // SAFETY: a byte inside the owner's live mapping.
            unsafe { *((owner.addr() + page * page_size()) as *mut u8) = 1 };
        }
        let file = owner.shared_file().unwrap().try_clone().unwrap();
        let peer = Mapping::from_shared_file(file, 16 * page_size()).unwrap();
        // SAFETY: the whole of the live mapping `peer`, page-aligned.
        let mapped = unsafe { map_backed_pages(peer.addr(), 16 * page_size(), 3 * page_size()) };
        assert_eq!(mapped, 3 * page_size());
        assert!((0..3).all(|p| page_present(peer.addr() + p * page_size())));
    }
}
