//! TCP initiator side: a "lane" is one persistent connection to a peer with a sender
//! thread that pipelines requests ([`super::sender`]) and a receiver thread that
//! reads the replies in order ([`super::receiver`]). A broken connection fails only
//! the slice it was rejected for; the other slices in flight go again, a few times at
//! most, on a fresh connection.

use super::io::{recv_exact, send_all};
use super::lane_state::{
    log_rejected, status_outcome, Again, Connection, LaneConfig, Ledger, Outcome, Slice,
};
use super::sender::SenderCtx;
use super::wire::{Header, HEADER_LEN, STATUS_LEN};
use crate::host::busy_poll;
use crate::te::transport::request::Op;
use parking_lot::Mutex;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most bytes a submitting thread moves itself in one go (see [`Lane::try_inline`]).
pub const INLINE_MAX_BYTES: u64 = 256 << 10;

/// How long an inline exchange waits for a reply (after busy-polling) before the
/// lane's receiver thread takes the slice over, unless configured otherwise.
pub const INLINE_WAIT: Duration = Duration::from_millis(2);

/// One pipelined connection slot to a peer.
pub struct Lane {
    ledger: Ledger,
    current: Arc<Mutex<Option<Arc<Connection>>>>,
    v2: bool,
    inline_wait: Duration,
    /// Dropped to stop the sender thread at once (it never carries a message).
    stop: Option<crossbeam_channel::Sender<()>>,
    sender: Option<JoinHandle<()>>,
}

impl Lane {
    /// Starts a lane; it connects on first use and reconnects after failures.
    pub fn start(config: LaneConfig) -> std::io::Result<Lane> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (stop, stopped) = crossbeam_channel::bounded(0);
        let ledger = Ledger {
            queued_bytes: Arc::new(AtomicU64::new(0)),
            stopping: Arc::new(AtomicBool::new(false)),
            queue: tx,
        };
        let current = Arc::new(Mutex::new(None));
        let (v2, inline_wait) = (config.v2, config.inline_wait);
        let ctx = SenderCtx {
            config,
            current: current.clone(),
            queue: rx,
            stopped,
            ledger: ledger.clone(),
        };
        let sender = std::thread::Builder::new()
            .name("mc-tcp-lane".into())
            .spawn(move || ctx.run())?;
        Ok(Lane {
            ledger,
            current,
            v2,
            inline_wait,
            stop: Some(stop),
            sender: Some(sender),
        })
    }

    /// Bytes queued or in flight on this lane (for load balancing).
    pub fn load(&self) -> u64 {
        self.ledger.queued_bytes.load(Ordering::Relaxed)
    }

    /// Queues a slice for the lane's sender thread.
    pub fn submit(&self, slice: Slice) {
        self.ledger
            .queued_bytes
            .fetch_add(slice.len, Ordering::Relaxed);
        if let Err(e) = self.ledger.queue.send(slice) {
            self.ledger.settle(e.0, false);
        }
    }

    /// Moves small slices on the calling thread when the lane is idle: it sends the
    /// requests back to back, busy-polls for the replies and reads them itself, so no
    /// other thread is woken on the way. Returns the slices untouched when the lane is
    /// busy, not yet connected, not v2, or they are too large (more than
    /// [`INLINE_MAX_BYTES`] in all); the caller then [`submit`](Lane::submit)s them.
    /// Replies slower than the lane's `inline_wait` are left to the receiver thread (those
    /// slices stay asynchronous), and failures are retried through the lane as usual.
    pub fn try_inline(&self, slices: Vec<Slice>) -> Vec<Slice> {
        let total: u64 = slices.iter().map(|s| s.len).sum();
        if !self.v2 || slices.is_empty() || total > INLINE_MAX_BYTES || self.load() != 0 {
            return slices;
        }
        let Some(conn) = self.current.lock().clone() else {
            return slices;
        };
        let Some(exclusive) = conn.exclusive.try_lock() else {
            return slices;
        };
        if conn.broken.load(Ordering::SeqCst) || conn.outstanding.load(Ordering::SeqCst) != 0 {
            return slices;
        }
        self.ledger.queued_bytes.fetch_add(total, Ordering::Relaxed);
        let fd = conn.stream.as_raw_fd();
        let headers: Vec<[u8; HEADER_LEN]> = slices
            .iter()
            .map(|s| {
                Header {
                    size: s.len,
                    addr: s.remote,
                    op: s.op,
                    v2: true,
                }
                .encode()
            })
            .collect();
        let mut pieces = Vec::with_capacity(slices.len() * 2);
        for (slice, header) in slices.iter().zip(&headers) {
            pieces.push((header.as_ptr(), HEADER_LEN));
            if slice.op == Op::Write {
                pieces.push((slice.local as usize as *const u8, slice.len as usize));
            }
        }
        // SAFETY: the headers live until the call returns; write sources are the
        // caller's buffers, valid until their tasks complete (upstream contract).
        if let Err(e) = unsafe { send_all(fd, &mut pieces) } {
            log::debug!("tcp inline send failed: {e}");
            conn.break_now();
            drop(exclusive);
            let why = Again::after(&e);
            slices
                .into_iter()
                .for_each(|s| self.ledger.send_again(s, why));
            return Vec::new();
        }
        let spin = crate::config::Config::global().busy_poll_budget();
        let mut left = slices.into_iter();
        while let Some(slice) = left.next() {
            let deadline = Instant::now() + spin + self.inline_wait;
            if !matches!(busy_poll::wait_readable(fd, spin, Some(deadline)), Ok(true)) {
                // Slow replies: the receiver thread reads them, in order, like any other.
                for slice in std::iter::once(slice).chain(left) {
                    conn.outstanding.fetch_add(1, Ordering::SeqCst);
                    if let Err(slice) = conn.in_flight.push(slice) {
                        conn.outstanding.fetch_sub(1, Ordering::SeqCst);
                        self.ledger.send_again(slice, Again::Broken);
                    }
                }
                return Vec::new();
            }
            match receive_inline(fd, &slice) {
                Outcome::Done => self.ledger.settle(slice, true),
                Outcome::Rejected => {
                    log_rejected(&slice);
                    conn.break_now();
                    drop(exclusive);
                    self.ledger.settle(slice, false);
                    // The peer closes after a rejection: the rest go again, uncharged.
                    left.for_each(|s| self.ledger.send_again(s, Again::Free));
                    return Vec::new();
                }
                Outcome::Broken(e) => {
                    log::debug!("tcp data connection broke: {e}");
                    conn.break_now();
                    drop(exclusive);
                    let why = Again::after(&e);
                    std::iter::once(slice)
                        .chain(left)
                        .for_each(|s| self.ledger.send_again(s, why));
                    return Vec::new();
                }
            }
        }
        Vec::new()
    }
}

/// Reads the v2 reply to `slice` straight from the socket (nothing else is in flight).
fn receive_inline(fd: std::os::fd::RawFd, slice: &Slice) -> Outcome {
    let mut status = [0u8; STATUS_LEN];
    // SAFETY: `status` is a live local buffer.
    if let Err(e) = unsafe { recv_exact(fd, status.as_mut_ptr(), STATUS_LEN) } {
        return Outcome::Broken(e);
    }
    if let Some(refused) = status_outcome(&status) {
        return refused;
    }
    if slice.op == Op::Read {
        // SAFETY: the destination is the caller's buffer, valid until the task
        // completes (upstream contract).
        let received =
            unsafe { recv_exact(fd, slice.local as usize as *mut u8, slice.len as usize) };
        if let Err(e) = received {
            return Outcome::Broken(e);
        }
    }
    Outcome::Done
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.ledger.stopping.store(true, Ordering::SeqCst);
        drop(self.stop.take());
        if let Some(sender) = self.sender.take() {
            let _ = sender.join();
        }
    }
}

#[cfg(test)]
#[path = "lane_tests.rs"]
mod tests;
