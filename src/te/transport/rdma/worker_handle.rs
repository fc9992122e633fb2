//! How the rest of the RDMA transport talks to a worker thread: the messages it
//! takes and the handle that sends them, wakes it and stops it.

use super::error::RdmaError;
use super::slice::Slice;
use crate::sys::verbs::Cq;
use crossbeam_channel::Sender;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a worker is told.
pub enum Msg {
    /// Slices to post.
    Slices(Vec<Slice>),
    /// The endpoint to this peer NIC path is now connected (or failed to: `Some`).
    Connected(String, Option<RdmaError>),
    /// Stop after failing what is left.
    Stop,
}

/// A worker as others see it.
pub struct WorkerHandle {
    /// Its completion queue (the endpoints it owns complete there).
    pub cq: Cq,
    pub(super) tx: Sender<Msg>,
    pub(super) wake_fd: RawFd,
    pub(super) sleeping: Arc<AtomicBool>,
    pub(super) thread: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl WorkerHandle {
    /// Sends `msg` and wakes the worker if it sleeps.
    pub fn send(&self, msg: Msg) {
        if self.tx.send(msg).is_ok() && self.sleeping.swap(false, Ordering::AcqRel) {
            let one: u64 = 1;
            // SAFETY: writing 8 bytes to the worker's eventfd, alive until join.
            unsafe { libc::write(self.wake_fd, (&one as *const u64).cast(), 8) };
        }
    }

    /// Stops the thread and waits for it.
    pub fn stop(&self) {
        let _ = self.tx.send(Msg::Stop);
        let one: u64 = 1;
        // SAFETY: as in `send`.
        unsafe { libc::write(self.wake_fd, (&one as *const u64).cast(), 8) };
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        // SAFETY: the eventfd is ours and closed once, after the thread stopped.
        unsafe { libc::close(self.wake_fd) };
    }
}
