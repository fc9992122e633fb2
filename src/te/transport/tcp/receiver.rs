//! The receiver thread of a TCP lane's connection: reads each reply in order,
//! settles its slice, and on a broken connection sends what was in flight again.

use super::lane_state::{log_rejected, status_outcome, Again, InFlight, Ledger, Outcome, Slice};
use super::reader::SocketReader;
use super::wire::STATUS_LEN;
use crate::te::transport::request::Op;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The receiver thread of one connection: reads the replies in order.
pub(super) struct ReceiverCtx {
    pub(super) stream: TcpStream,
    pub(super) in_flight: Arc<InFlight>,
    pub(super) broken: Arc<AtomicBool>,
    pub(super) outstanding: Arc<AtomicUsize>,
    pub(super) ledger: Ledger,
    pub(super) v2: bool,
}

impl ReceiverCtx {
    /// Runs until the connection closes.
    pub(super) fn run(self) {
        let mut reader = SocketReader::new(self.stream.as_raw_fd());
        while let Some(slice) = self.in_flight.pop() {
            let outcome = self.receive(&mut reader, &slice);
            // Counted down only once the outcome is handled: a sender waiting for the
            // reply must see a refused or broken connection marked before it sends
            // the next slice, or that slice would go to a connection already closing.
            match outcome {
                Outcome::Done => self.ledger.settle(slice, true),
                Outcome::Rejected => {
                    log_rejected(&slice);
                    self.ledger.settle(slice, false);
                    // The slices behind it are not at fault: the peer closes after a
                    // rejection, so they go again without spending a retry (each
                    // rejection fails its own slice, so this always makes progress).
                    self.break_connection(Again::Free);
                }
                Outcome::Broken(e) => {
                    log::debug!("tcp data connection broke: {e}");
                    // Marked broken before the slice goes again, so the sender retries
                    // it on a fresh connection rather than on this one.
                    let why = Again::after(&e);
                    self.break_connection(why);
                    self.ledger.send_again(slice, why);
                }
            }
            self.outstanding.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Closes the connection and re-queues everything still in flight on it.
    fn break_connection(&self, why: Again) {
        self.broken.store(true, Ordering::SeqCst);
        let _ = self.stream.shutdown(Shutdown::Both);
        for slice in self.in_flight.close() {
            self.ledger.send_again(slice, why);
        }
    }

    fn receive(&self, reader: &mut SocketReader, slice: &Slice) -> Outcome {
        if self.v2 {
            let status = match reader.read_array::<STATUS_LEN>() {
                Ok(status) => status,
                Err(e) => return Outcome::Broken(e),
            };
            if let Some(refused) = status_outcome(&status) {
                return refused;
            }
        }
        let received = match (slice.op, self.v2) {
            (Op::Write, true) => Ok(()),
            (Op::Write, false) => reader.read_array::<1>().map(drop),
            // SAFETY: the destination is the caller's buffer, valid until the task
            // completes (upstream contract); `len` fits usize since it came from one.
            (Op::Read, _) => unsafe {
                reader.read_raw(slice.local as usize as *mut u8, slice.len as usize)
            },
        };
        match received {
            Ok(()) => Outcome::Done,
            Err(e) if !self.v2 && e.kind() == std::io::ErrorKind::UnexpectedEof => {
                Outcome::Rejected
            }
            Err(e) => Outcome::Broken(e),
        }
    }
}
