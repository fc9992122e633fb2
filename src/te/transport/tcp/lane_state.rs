//! The state one TCP lane's threads share: the slices it moves, where it talks, the
//! replies still to be read on a connection, and the accounting of its load.

use super::wire::{decode_status, STATUS_LEN, STATUS_OK};
use crate::te::batch::Task;
use crate::te::transport::request::Op;
use crossbeam_channel::Sender;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// One contiguous piece of a task, moved by one request on the wire.
pub struct Slice {
    /// Read or write.
    pub op: Op,
    /// Local address (source of a write, destination of a read).
    pub local: u64,
    /// Absolute address in the target process.
    pub remote: u64,
    /// Length in bytes (never 0).
    pub len: u64,
    /// The task this slice completes.
    pub task: Arc<Task>,
    /// How many more times it may be retried after a connection failure.
    pub retries_left: u8,
    /// Sent again after a connection broke under it: it goes alone, its reply read
    /// before anything else is sent, so that a peer closing on a request it refused
    /// (and resetting the connection) cannot take it down again.
    pub resent: bool,
}

/// Where and how a lane talks.
#[derive(Clone)]
pub struct LaneConfig {
    /// Peer host.
    pub host: String,
    /// Peer data port.
    pub port: u16,
    /// Use acknowledged (v2) framing.
    pub v2: bool,
    /// Connect deadline.
    pub connect_timeout: Duration,
    /// Deadline for each reply read and each send.
    pub io_timeout: Duration,
    /// How long an inline exchange waits for a reply before handing it over
    /// (`INLINE_WAIT` in production).
    pub inline_wait: Duration,
}

/// Requests sent on one connection whose replies are still to be read, in order.
pub(super) struct InFlight {
    pub(super) state: Mutex<(VecDeque<Slice>, bool)>,
    pub(super) ready: Condvar,
}

impl InFlight {
    pub(super) fn new() -> InFlight {
        InFlight {
            state: Mutex::new((VecDeque::new(), false)),
            ready: Condvar::new(),
        }
    }

    pub(super) fn push(&self, slice: Slice) -> Result<(), Slice> {
        let mut s = self.state.lock();
        if s.1 {
            return Err(slice);
        }
        s.0.push_back(slice);
        self.ready.notify_one();
        Ok(())
    }

    pub(super) fn pop(&self) -> Option<Slice> {
        let mut s = self.state.lock();
        loop {
            if let Some(slice) = s.0.pop_front() {
                return Some(slice);
            }
            if s.1 {
                return None;
            }
            self.ready.wait(&mut s);
        }
    }

    /// Refuses further pushes and wakes the receiver, which still reads (or fails
    /// and sends again) what is queued before it stops.
    pub(super) fn seal(&self) {
        let mut s = self.state.lock();
        s.1 = true;
        self.ready.notify_all();
    }

    /// Refuses further pushes and hands back what is queued.
    pub(super) fn close(&self) -> Vec<Slice> {
        let mut s = self.state.lock();
        s.1 = true;
        self.ready.notify_all();
        s.0.drain(..).collect()
    }
}

/// One live connection: requests are pushed to `in_flight` and sent under
/// `exclusive`, and the receiver thread reads their replies in order.
pub(super) struct Connection {
    pub(super) stream: TcpStream,
    pub(super) in_flight: Arc<InFlight>,
    pub(super) broken: Arc<AtomicBool>,
    /// Held while pushing and sending, and for a whole inline exchange.
    pub(super) exclusive: Mutex<()>,
    /// Slices sent whose reply the receiver thread has not finished reading.
    pub(super) outstanding: Arc<AtomicUsize>,
    pub(super) receiver: Mutex<Option<JoinHandle<()>>>,
}

impl Connection {
    pub(super) fn break_now(&self) {
        self.broken.store(true, Ordering::SeqCst);
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// Closes the connection and waits for its receiver thread, which settles or
    /// sends again every slice still in flight (it alone decides which, so a slice
    /// the peer never refused is not failed by a close racing the receiver).
    pub(super) fn shut(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
        self.in_flight.seal();
        if let Some(receiver) = self.receiver.lock().take() {
            let _ = receiver.join();
        }
    }
}

/// The accounting every side of a lane shares: its load, whether it is stopping, and
/// the way back into the sender thread's queue.
#[derive(Clone)]
pub(super) struct Ledger {
    pub(super) queued_bytes: Arc<AtomicU64>,
    pub(super) stopping: Arc<AtomicBool>,
    pub(super) queue: Sender<Slice>,
}

impl Ledger {
    /// Records a slice's outcome: it leaves the lane's load and counts for its task.
    pub(super) fn settle(&self, slice: Slice, ok: bool) {
        self.queued_bytes.fetch_sub(slice.len, Ordering::Relaxed);
        slice.task.finish_slice(ok);
    }

    /// Drops a slice of a cancelled task before it is sent.
    pub(super) fn skip(&self, slice: Slice) {
        self.queued_bytes.fetch_sub(slice.len, Ordering::Relaxed);
        slice.task.skip_slice();
    }

    /// Queues a slice on the sender thread again, spending one of its retries unless
    /// `why` is [`Again::Free`] (and sending it alone after [`Again::Broken`]); fails
    /// it when none is left or the lane is stopping.
    pub(super) fn send_again(&self, mut slice: Slice, why: Again) {
        let charge = why != Again::Free;
        if (charge && slice.retries_left == 0) || self.stopping.load(Ordering::SeqCst) {
            self.settle(slice, false);
            return;
        }
        if charge {
            slice.retries_left -= 1;
            slice.resent = why == Again::Broken;
        }
        if let Err(e) = self.queue.send(slice) {
            self.settle(e.0, false);
        }
    }
}

/// Why a slice goes again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Again {
    /// Not its fault (a request ahead of it was refused, or it never left): no retry
    /// is spent.
    Free,
    /// Its connection was reset or closed: a retry is spent, and it goes alone (a
    /// peer that closes on a refusal cannot take it down again).
    Broken,
    /// Its peer stopped answering (a timeout): a retry is spent; going alone would
    /// only wait out the timeout once per slice.
    Silent,
}

impl Again {
    /// How a connection that failed with `e` sends its slices again.
    pub(super) fn after(e: &std::io::Error) -> Again {
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Again::Silent,
            _ => Again::Broken,
        }
    }
}

/// Logs a request the peer refused.
pub(super) fn log_rejected(slice: &Slice) {
    log::warn!(
        "peer rejected {:?} of {} bytes at {:#x}",
        slice.op,
        slice.len,
        slice.remote
    );
}

/// What a v2 status frame means for its slice: `None` when accepted.
pub(super) fn status_outcome(status: &[u8; STATUS_LEN]) -> Option<Outcome> {
    match decode_status(status) {
        Some(STATUS_OK) => None,
        Some(_) => Some(Outcome::Rejected),
        None => Some(Outcome::Broken(std::io::Error::other("bad status magic"))),
    }
}

/// How one request's reply ended.
pub(super) enum Outcome {
    Done,
    Rejected,
    Broken(std::io::Error),
}
