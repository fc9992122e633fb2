//! Large copies shared with helper threads ([`CopyPool`]). One thread copies at
//! 5-15 GB/s where the memory system gives several times that to a few threads, and a
//! 1 MiB value is most of a same-host `get_into`'s time. So a copy of at least
//! [`MIN_SHARED`] bytes is cut into [`PIECE`]-byte pieces that the calling thread and
//! any idle helper take in turn (an atomic counter hands each piece out once): the
//! caller starts at once and never waits for a helper that is busy or not yet awake,
//! only for the pieces a helper took, and returns when every piece is done.

use crate::sys::memmove::memmove;
use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// The smallest copy shared with helpers: below it, waking one costs more than it
/// saves.
pub const MIN_SHARED: u64 = 512 << 10;
/// The bytes one taker copies at a time.
const PIECE: u64 = 128 << 10;
/// Helpers at most, whatever the CPU count.
pub const MAX_HELPERS: usize = 3;
/// How long the caller spins for a helper's last piece (a 128 KiB piece takes 10-25 us)
/// before it sleeps until the helper wakes it (a wake-up costs 20-50 us on a VM).
const SPIN_BUDGET: Duration = Duration::from_micros(50);

/// One shared copy: `pieces` pieces of `[src, src + len)` to `[dst, dst + len)`.
struct Job {
    dst: u64,
    src: u64,
    len: u64,
    pieces: u64,
    /// The next piece to hand out (past `pieces`: none left).
    next: AtomicU64,
    /// Pieces not yet copied.
    left: AtomicU64,
    /// The thread that waits for the last piece.
    caller: Thread,
}

impl Job {
    /// Copies pieces until none is left to take. `helper`: a helper thread, which
    /// wakes the caller when it finishes the last piece.
    ///
    /// # Safety
    /// While any piece is not yet done, both ranges must be valid (and must not
    /// overlap) as [`CopyPool::copy`] requires; the caller waits for every piece.
    unsafe fn take_pieces(&self, helper: bool) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.pieces {
                return;
            }
            let at = i * PIECE;
            let n = PIECE.min(self.len - at);
            // SAFETY: piece `i` is handed out once (the counter), it lies inside both
            // ranges, which stay valid until `left` reaches zero (the caller waits
            // for that), and they do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (self.src + at) as usize as *const u8,
                    (self.dst + at) as usize as *mut u8,
                    n as usize,
                )
            };
            // Release: the bytes are written before the caller can see the piece done.
            if self.left.fetch_sub(1, Ordering::AcqRel) == 1 && helper {
                self.caller.unpark();
            }
        }
    }
}

/// Helper threads for large copies, started by [`CopyPool::new`]; they live as long
/// as the process. A child forked from it has none of them and copies alone.
pub struct CopyPool {
    jobs: Option<Sender<Arc<Job>>>,
    helpers: usize,
    /// The process the helpers run in.
    pid: u32,
}

impl CopyPool {
    /// A pool of `helpers` threads (at most [`MAX_HELPERS`]; 0 copies on the calling
    /// thread only). A helper that cannot be started leaves the pool smaller.
    pub fn new(helpers: usize) -> CopyPool {
        let wanted = helpers.min(MAX_HELPERS);
        let (tx, rx) = crossbeam_channel::unbounded::<Arc<Job>>();
        let started = (0..wanted)
            .filter(|i| {
                let rx = rx.clone();
                thread::Builder::new()
                    .name(format!("mc-copy-{i}"))
                    .spawn(move || serve(rx))
                    .is_ok()
            })
            .count();
        CopyPool {
            jobs: (started > 0).then_some(tx),
            helpers: started,
            pid: std::process::id(),
        }
    }

    /// The default helper count for this machine: one fewer than the CPUs this
    /// process may use, at most [`MAX_HELPERS`].
    pub fn default_helpers() -> usize {
        thread::available_parallelism()
            .map_or(1, |n| n.get())
            .saturating_sub(1)
            .min(MAX_HELPERS)
    }

    /// Helper threads running.
    pub fn helpers(&self) -> usize {
        self.helpers
    }

    /// Copies `len` bytes from `src` to `dst`, sharing a copy of [`MIN_SHARED`] bytes
    /// or more with idle helpers; the ranges may overlap (an overlapping copy is a
    /// plain `memmove` on this thread). Returns when every byte is copied.
    ///
    /// # Safety
    /// Both ranges must be valid for `len` bytes (`src` readable, `dst` writable) in
    /// this process until this returns.
    pub unsafe fn copy(&self, dst: u64, src: u64, len: u64) {
        let overlap = dst < src.saturating_add(len) && src < dst.saturating_add(len);
        let shared = len >= MIN_SHARED && !overlap && std::process::id() == self.pid;
        let Some(jobs) = self.jobs.as_ref().filter(|_| shared) else {
            // SAFETY: valid ranges per the contract; `memmove` tolerates overlap.
            unsafe { memmove(dst, src, len) };
            return;
        };
        let pieces = len.div_ceil(PIECE);
        let job = Arc::new(Job {
            dst,
            src,
            len,
            pieces,
            next: AtomicU64::new(0),
            left: AtomicU64::new(pieces),
            caller: thread::current(),
        });
        let invited = (self.helpers as u64).min(pieces - 1);
        for _ in 0..invited {
            // The helpers hold the receiver for the life of the process.
            let _ = jobs.send(job.clone());
        }
        // SAFETY: the ranges are valid until this returns, which waits below until
        // no piece is left undone.
        unsafe { job.take_pieces(false) };
        // A helper's last piece ends within microseconds: spin a little before sleeping.
        let spin_until = Instant::now() + SPIN_BUDGET;
        while Instant::now() < spin_until {
            for _ in 0..64 {
                if job.left.load(Ordering::Acquire) == 0 {
                    return;
                }
                std::hint::spin_loop();
            }
        }
        while job.left.load(Ordering::Acquire) != 0 {
            // A helper still copies the pieces it took; it unparks this thread when
            // it finishes the last one (a wake-up before `park` is not lost).
            thread::park();
        }
    }
}

/// A helper's loop: takes pieces of every job it is handed.
fn serve(jobs: Receiver<Arc<Job>>) {
    for job in jobs {
        // SAFETY: the job's caller waits until every piece is done, so the ranges
        // are valid for every piece this thread can still take.
        unsafe { job.take_pieces(true) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn copies_every_byte_with_and_without_helpers() {
        for helpers in [0, 1, 3] {
            let pool = CopyPool::new(helpers);
            assert_eq!(pool.helpers(), helpers);
            // Below, at and above the sharing size; a last piece shorter than the rest.
            for len in [0, 1, 4096, MIN_SHARED as usize, 3 * (1 << 20) + 12_345] {
                let src = pattern(len, helpers as u8);
                let mut dst = vec![0u8; len];
                // SAFETY: both vectors live for the call and do not overlap.
                unsafe { pool.copy(dst.as_mut_ptr() as u64, src.as_ptr() as u64, len as u64) };
                assert!(dst == src, "helpers {helpers}, {len} bytes");
            }
        }
    }

    #[test]
    fn overlapping_ranges_copy_as_memmove() {
        let pool = CopyPool::new(1);
        let len = 2 << 20;
        let mut buf = pattern(len + 4096, 7);
        let expected: Vec<u8> = buf[..len].to_vec();
        let base = buf.as_mut_ptr() as u64;
        // SAFETY: both ranges lie inside `buf`.
        unsafe { pool.copy(base + 4096, base, len as u64) };
        assert!(buf[4096..] == expected[..]);
    }

    #[test]
    fn many_threads_share_the_helpers() {
        let pool = Arc::new(CopyPool::new(2));
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let pool = pool.clone();
                thread::spawn(move || {
                    let src = pattern(MIN_SHARED as usize * 2 + 8 * 999, t);
                    for round in 0..8 {
                        let len = MIN_SHARED as usize * 2 + round * 999;
                        let mut dst = vec![0u8; len];
                        // SAFETY: both vectors live for the call and do not overlap.
                        unsafe {
                            pool.copy(dst.as_mut_ptr() as u64, src.as_ptr() as u64, len as u64)
                        };
                        assert!(dst[..] == src[..len], "thread {t} round {round}");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("copier");
        }
    }
}
