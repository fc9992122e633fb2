//! TCP initiator side: a "lane" is one persistent connection to a peer with a sender
//! thread that pipelines requests and a receiver thread that reads the replies in
//! order. A broken connection fails only the slice it was rejected for; the other
//! slices in flight are retried once on a fresh connection.

use super::io::send_all;
use super::reader::SocketReader;
use super::wire::{decode_status, Header, Op, HEADER_LEN, STATUS_LEN, STATUS_OK};
use crate::te::batch::Task;
use crossbeam_channel::{Receiver, Sender};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
}

/// Requests sent on one connection whose replies are still to be read, in order.
struct InFlight {
    state: Mutex<(VecDeque<Slice>, bool)>,
    ready: Condvar,
}

impl InFlight {
    fn new() -> InFlight {
        InFlight {
            state: Mutex::new((VecDeque::new(), false)),
            ready: Condvar::new(),
        }
    }

    fn push(&self, slice: Slice) -> Result<(), Slice> {
        let mut s = self.state.lock();
        if s.1 {
            return Err(slice);
        }
        s.0.push_back(slice);
        self.ready.notify_one();
        Ok(())
    }

    fn pop(&self) -> Option<Slice> {
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

    fn close(&self) -> Vec<Slice> {
        let mut s = self.state.lock();
        s.1 = true;
        self.ready.notify_all();
        s.0.drain(..).collect()
    }
}

struct Connection {
    stream: TcpStream,
    in_flight: Arc<InFlight>,
    broken: Arc<AtomicBool>,
    receiver: JoinHandle<()>,
}

impl Connection {
    fn shut(self) {
        let _ = self.stream.shutdown(Shutdown::Both);
        for slice in self.in_flight.close() {
            slice.task.finish_slice(false);
        }
        let _ = self.receiver.join();
    }
}

/// One pipelined connection slot to a peer.
pub struct Lane {
    queue: Option<Sender<Slice>>,
    queued_bytes: Arc<AtomicU64>,
    stopping: Arc<AtomicBool>,
    sender: Option<JoinHandle<()>>,
}

impl Lane {
    /// Starts a lane; it connects on first use and reconnects after failures.
    pub fn start(config: LaneConfig) -> std::io::Result<Lane> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let queued_bytes = Arc::new(AtomicU64::new(0));
        let stopping = Arc::new(AtomicBool::new(false));
        let ctx = SenderCtx {
            config,
            queue: rx,
            requeue: tx.clone(),
            queued_bytes: queued_bytes.clone(),
            stopping: stopping.clone(),
        };
        let sender = std::thread::Builder::new()
            .name("mc-tcp-lane".into())
            .spawn(move || ctx.run())?;
        Ok(Lane {
            queue: Some(tx),
            queued_bytes,
            stopping,
            sender: Some(sender),
        })
    }

    /// Bytes queued or in flight on this lane (for load balancing).
    pub fn load(&self) -> u64 {
        self.queued_bytes.load(Ordering::Relaxed)
    }

    /// Queues a slice; it fails at once if the lane is shutting down.
    pub fn submit(&self, slice: Slice) {
        self.queued_bytes.fetch_add(slice.len, Ordering::Relaxed);
        let Some(queue) = &self.queue else {
            slice.task.finish_slice(false);
            return;
        };
        if let Err(e) = queue.send(slice) {
            e.0.task.finish_slice(false);
        }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.queue = None;
        if let Some(sender) = self.sender.take() {
            let _ = sender.join();
        }
    }
}

struct SenderCtx {
    config: LaneConfig,
    queue: Receiver<Slice>,
    requeue: Sender<Slice>,
    queued_bytes: Arc<AtomicU64>,
    stopping: Arc<AtomicBool>,
}

const MAX_PIPELINED_PER_SEND: usize = 32;

impl SenderCtx {
    fn run(self) {
        let mut conn: Option<Connection> = None;
        loop {
            let first = match self.queue.recv_timeout(Duration::from_millis(200)) {
                Ok(s) => s,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    if self.stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    continue;
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            };
            if self.stopping.load(Ordering::SeqCst) {
                self.fail(first);
                continue;
            }
            let mut batch = vec![first];
            while batch.len() < MAX_PIPELINED_PER_SEND {
                match self.queue.try_recv() {
                    Ok(s) => batch.push(s),
                    Err(_) => break,
                }
            }
            if conn
                .as_ref()
                .is_some_and(|c| c.broken.load(Ordering::SeqCst))
            {
                if let Some(c) = conn.take() {
                    c.shut();
                }
            }
            if conn.is_none() {
                match self.connect() {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        log::warn!(
                            "tcp connect to {}:{} failed: {e}",
                            self.config.host,
                            self.config.port
                        );
                        batch.into_iter().for_each(|s| self.fail(s));
                        continue;
                    }
                }
            }
            if let Some(c) = &conn {
                self.send_batch(c, batch);
            }
        }
        if let Some(c) = conn.take() {
            c.shut();
        }
        while let Ok(s) = self.queue.try_recv() {
            self.fail(s);
        }
    }

    fn fail(&self, slice: Slice) {
        self.queued_bytes.fetch_sub(slice.len, Ordering::Relaxed);
        slice.task.finish_slice(false);
    }

    fn connect(&self) -> std::io::Result<Connection> {
        let addrs: Vec<SocketAddr> = (self.config.host.as_str(), self.config.port)
            .to_socket_addrs()?
            .collect();
        let mut last = std::io::Error::other("host resolved to no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, self.config.connect_timeout) {
                Ok(stream) => return self.start_connection(stream),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn start_connection(&self, stream: TcpStream) -> std::io::Result<Connection> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(self.config.io_timeout))?;
        stream.set_write_timeout(Some(self.config.io_timeout))?;
        let in_flight = Arc::new(InFlight::new());
        let broken = Arc::new(AtomicBool::new(false));
        let rx = ReceiverCtx {
            stream: stream.try_clone()?,
            in_flight: in_flight.clone(),
            broken: broken.clone(),
            requeue: self.requeue.clone(),
            queued_bytes: self.queued_bytes.clone(),
            stopping: self.stopping.clone(),
            v2: self.config.v2,
        };
        let receiver = std::thread::Builder::new()
            .name("mc-tcp-recv".into())
            .spawn(move || rx.run())?;
        Ok(Connection {
            stream,
            in_flight,
            broken,
            receiver,
        })
    }

    fn send_batch(&self, conn: &Connection, batch: Vec<Slice>) {
        let v2 = self.config.v2;
        let mut headers: Vec<[u8; HEADER_LEN]> = Vec::with_capacity(batch.len() * 2);
        let mut plan: Vec<(Op, u64, u64)> = Vec::with_capacity(batch.len());
        for slice in batch {
            let (op, local, len) = (slice.op, slice.local, slice.len);
            headers.push(
                Header {
                    size: len,
                    addr: slice.remote,
                    op,
                    v2,
                }
                .encode(),
            );
            if op == Op::Write && !v2 {
                // A v1 write has no ack: a 1-byte read of its last byte, answered only
                // after the write was applied, proves the bytes landed.
                let last = slice.remote + len - 1;
                headers.push(
                    Header {
                        size: 1,
                        addr: last,
                        op: Op::Read,
                        v2,
                    }
                    .encode(),
                );
            }
            plan.push((op, local, len));
            if let Err(slice) = conn.in_flight.push(slice) {
                let _ = self.requeue.send(slice);
                plan.pop();
                headers.truncate(headers.len() - if op == Op::Write && !v2 { 2 } else { 1 });
            }
        }
        let mut pieces: Vec<(*const u8, usize)> = Vec::with_capacity(plan.len() * 3);
        let mut h = headers.iter();
        for (op, local, len) in plan {
            if let Some(header) = h.next() {
                pieces.push((header.as_ptr(), HEADER_LEN));
            }
            if op == Op::Write {
                pieces.push((local as usize as *const u8, len as usize));
                if !v2 {
                    if let Some(barrier) = h.next() {
                        pieces.push((barrier.as_ptr(), HEADER_LEN));
                    }
                }
            }
        }
        // SAFETY: headers live until the call returns; write sources are the caller's
        // buffers, which must stay valid until their tasks complete (upstream contract).
        if let Err(e) = unsafe { send_all(conn.stream.as_raw_fd(), &mut pieces) } {
            log::debug!(
                "tcp send to {}:{} failed: {e}",
                self.config.host,
                self.config.port
            );
            conn.broken.store(true, Ordering::SeqCst);
            let _ = conn.stream.shutdown(Shutdown::Both);
        }
    }
}

struct ReceiverCtx {
    stream: TcpStream,
    in_flight: Arc<InFlight>,
    broken: Arc<AtomicBool>,
    requeue: Sender<Slice>,
    queued_bytes: Arc<AtomicU64>,
    stopping: Arc<AtomicBool>,
    v2: bool,
}

enum Outcome {
    Done,
    Rejected,
    Broken(std::io::Error),
}

impl ReceiverCtx {
    fn run(self) {
        let mut reader = SocketReader::new(self.stream.as_raw_fd());
        while let Some(slice) = self.in_flight.pop() {
            match self.receive(&mut reader, &slice) {
                Outcome::Done => self.finish(slice, true),
                Outcome::Rejected => {
                    log::warn!(
                        "peer rejected {:?} of {} bytes at {:#x}",
                        slice.op,
                        slice.len,
                        slice.remote
                    );
                    self.finish(slice, false);
                    // The slices behind it are not at fault: the peer closes after a
                    // rejection, so they go again without spending a retry (each
                    // rejection fails its own slice, so this always makes progress).
                    self.break_connection(false);
                }
                Outcome::Broken(e) => {
                    log::debug!("tcp data connection broke: {e}");
                    self.retry_or_fail(slice, true);
                    self.break_connection(true);
                }
            }
        }
    }

    fn finish(&self, slice: Slice, ok: bool) {
        self.queued_bytes.fetch_sub(slice.len, Ordering::Relaxed);
        slice.task.finish_slice(ok);
    }

    /// Queues the slice again on this lane, spending one of its retries when `charge`.
    fn retry_or_fail(&self, mut slice: Slice, charge: bool) {
        if (charge && slice.retries_left == 0) || self.stopping.load(Ordering::SeqCst) {
            self.finish(slice, false);
            return;
        }
        if charge {
            slice.retries_left -= 1;
        }
        if let Err(e) = self.requeue.send(slice) {
            self.finish(e.0, false);
        }
    }

    /// Closes the connection and re-queues everything still in flight on it.
    fn break_connection(&self, charge_retries: bool) {
        self.broken.store(true, Ordering::SeqCst);
        let _ = self.stream.shutdown(Shutdown::Both);
        for slice in self.in_flight.close() {
            self.retry_or_fail(slice, charge_retries);
        }
    }

    fn receive(&self, reader: &mut SocketReader, slice: &Slice) -> Outcome {
        if self.v2 {
            let status = match reader.read_array::<STATUS_LEN>() {
                Ok(status) => status,
                Err(e) => return Outcome::Broken(e),
            };
            match decode_status(&status) {
                Some(STATUS_OK) => {}
                Some(_) => return Outcome::Rejected,
                None => return Outcome::Broken(std::io::Error::other("bad status magic")),
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
