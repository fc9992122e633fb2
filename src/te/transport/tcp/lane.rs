//! TCP initiator side: a "lane" is one persistent connection to a peer with a sender
//! thread that pipelines requests and a receiver thread that reads the replies in
//! order. A broken connection fails only the slice it was rejected for; the other
//! slices in flight are retried once on a fresh connection.

use super::io::{recv_exact, send_all};
use super::reader::SocketReader;
use super::wire::{decode_status, Header, HEADER_LEN, STATUS_LEN, STATUS_OK};
use crate::host::busy_poll;
use crate::te::batch::Task;
use crate::te::transport::request::Op;
use crossbeam_channel::{Receiver, Sender};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most bytes a submitting thread moves itself in one go (see [`Lane::try_inline`]).
pub const INLINE_MAX_BYTES: u64 = 256 << 10;

/// How long an inline exchange waits for a reply (after busy-polling) before the
/// lane's receiver thread takes the slice over, unless configured otherwise.
pub const INLINE_WAIT: Duration = Duration::from_millis(2);

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
    /// How long an inline exchange waits for a reply before handing it over
    /// ([`INLINE_WAIT`] in production).
    pub inline_wait: Duration,
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

/// One live connection: requests are pushed to `in_flight` and sent under
/// `exclusive`, and the receiver thread reads their replies in order.
struct Connection {
    stream: TcpStream,
    in_flight: Arc<InFlight>,
    broken: Arc<AtomicBool>,
    /// Held while pushing and sending, and for a whole inline exchange.
    exclusive: Mutex<()>,
    /// Slices sent whose reply the receiver thread has not finished reading.
    outstanding: Arc<AtomicUsize>,
    receiver: Mutex<Option<JoinHandle<()>>>,
}

impl Connection {
    fn break_now(&self) {
        self.broken.store(true, Ordering::SeqCst);
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    fn shut(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
        for slice in self.in_flight.close() {
            slice.task.finish_slice(false);
        }
        if let Some(receiver) = self.receiver.lock().take() {
            let _ = receiver.join();
        }
    }
}

/// The accounting every side of a lane shares: its load, whether it is stopping, and
/// the way back into the sender thread's queue.
#[derive(Clone)]
struct Ledger {
    queued_bytes: Arc<AtomicU64>,
    stopping: Arc<AtomicBool>,
    queue: Sender<Slice>,
}

impl Ledger {
    /// Records a slice's outcome: it leaves the lane's load and counts for its task.
    fn settle(&self, slice: Slice, ok: bool) {
        self.queued_bytes.fetch_sub(slice.len, Ordering::Relaxed);
        slice.task.finish_slice(ok);
    }

    /// Queues a slice on the sender thread again, spending one of its retries when
    /// `charge`; fails it when none is left or the lane is stopping.
    fn send_again(&self, mut slice: Slice, charge: bool) {
        if (charge && slice.retries_left == 0) || self.stopping.load(Ordering::SeqCst) {
            self.settle(slice, false);
            return;
        }
        if charge {
            slice.retries_left -= 1;
        }
        if let Err(e) = self.queue.send(slice) {
            self.settle(e.0, false);
        }
    }
}

/// Logs a request the peer refused.
fn log_rejected(slice: &Slice) {
    log::warn!(
        "peer rejected {:?} of {} bytes at {:#x}",
        slice.op,
        slice.len,
        slice.remote
    );
}

/// What a v2 status frame means for its slice: `None` when accepted.
fn status_outcome(status: &[u8; STATUS_LEN]) -> Option<Outcome> {
    match decode_status(status) {
        Some(STATUS_OK) => None,
        Some(_) => Some(Outcome::Rejected),
        None => Some(Outcome::Broken(std::io::Error::other("bad status magic"))),
    }
}

/// One pipelined connection slot to a peer.
pub struct Lane {
    ledger: Ledger,
    current: Arc<Mutex<Option<Arc<Connection>>>>,
    v2: bool,
    inline_wait: Duration,
    sender: Option<JoinHandle<()>>,
}

impl Lane {
    /// Starts a lane; it connects on first use and reconnects after failures.
    pub fn start(config: LaneConfig) -> std::io::Result<Lane> {
        let (tx, rx) = crossbeam_channel::unbounded();
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
            slices
                .into_iter()
                .for_each(|s| self.ledger.send_again(s, true));
            return Vec::new();
        }
        let spin = busy_poll::budget();
        let mut left = slices.into_iter();
        while let Some(slice) = left.next() {
            let deadline = Instant::now() + spin + self.inline_wait;
            if !matches!(busy_poll::wait_readable(fd, spin, Some(deadline)), Ok(true)) {
                // Slow replies: the receiver thread reads them, in order, like any other.
                for slice in std::iter::once(slice).chain(left) {
                    conn.outstanding.fetch_add(1, Ordering::SeqCst);
                    if let Err(slice) = conn.in_flight.push(slice) {
                        conn.outstanding.fetch_sub(1, Ordering::SeqCst);
                        self.ledger.send_again(slice, true);
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
                    left.for_each(|s| self.ledger.send_again(s, false));
                    return Vec::new();
                }
                Outcome::Broken(e) => {
                    log::debug!("tcp data connection broke: {e}");
                    conn.break_now();
                    drop(exclusive);
                    std::iter::once(slice)
                        .chain(left)
                        .for_each(|s| self.ledger.send_again(s, true));
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
        if let Err(e) =
            unsafe { recv_exact(fd, slice.local as usize as *mut u8, slice.len as usize) }
        {
            return Outcome::Broken(e);
        }
    }
    Outcome::Done
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.ledger.stopping.store(true, Ordering::SeqCst);
        if let Some(sender) = self.sender.take() {
            let _ = sender.join();
        }
    }
}

struct SenderCtx {
    config: LaneConfig,
    current: Arc<Mutex<Option<Arc<Connection>>>>,
    queue: Receiver<Slice>,
    ledger: Ledger,
}

const MAX_PIPELINED_PER_SEND: usize = 32;

impl SenderCtx {
    fn run(self) {
        let mut conn: Option<Arc<Connection>> = None;
        loop {
            let first = match self.queue.recv_timeout(Duration::from_millis(200)) {
                Ok(s) => s,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    if self.ledger.stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    continue;
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            };
            if self.ledger.stopping.load(Ordering::SeqCst) {
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
                    self.retire(&c);
                }
            }
            if conn.is_none() {
                match self.connect() {
                    Ok(c) => {
                        let c = Arc::new(c);
                        *self.current.lock() = Some(c.clone());
                        conn = Some(c);
                    }
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
            self.retire(&c);
        }
        while let Ok(s) = self.queue.try_recv() {
            self.fail(s);
        }
    }

    fn fail(&self, slice: Slice) {
        self.ledger.settle(slice, false);
    }

    /// Stops offering `conn` to inline callers, waits out any exchange in progress,
    /// then closes it.
    fn retire(&self, conn: &Connection) {
        *self.current.lock() = None;
        conn.break_now();
        drop(conn.exclusive.lock());
        conn.shut();
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
        let outstanding = Arc::new(AtomicUsize::new(0));
        let rx = ReceiverCtx {
            stream: stream.try_clone()?,
            in_flight: in_flight.clone(),
            broken: broken.clone(),
            outstanding: outstanding.clone(),
            ledger: self.ledger.clone(),
            v2: self.config.v2,
        };
        let receiver = std::thread::Builder::new()
            .name("mc-tcp-recv".into())
            .spawn(move || rx.run())?;
        Ok(Connection {
            stream,
            in_flight,
            broken,
            exclusive: Mutex::new(()),
            outstanding,
            receiver: Mutex::new(Some(receiver)),
        })
    }

    fn send_batch(&self, conn: &Connection, batch: Vec<Slice>) {
        let v2 = self.config.v2;
        let _exclusive = conn.exclusive.lock();
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
            conn.outstanding.fetch_add(1, Ordering::SeqCst);
            if let Err(slice) = conn.in_flight.push(slice) {
                conn.outstanding.fetch_sub(1, Ordering::SeqCst);
                self.ledger.send_again(slice, false);
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
    outstanding: Arc<AtomicUsize>,
    ledger: Ledger,
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
            let outcome = self.receive(&mut reader, &slice);
            self.outstanding.fetch_sub(1, Ordering::SeqCst);
            match outcome {
                Outcome::Done => self.ledger.settle(slice, true),
                Outcome::Rejected => {
                    log_rejected(&slice);
                    self.ledger.settle(slice, false);
                    // The slices behind it are not at fault: the peer closes after a
                    // rejection, so they go again without spending a retry (each
                    // rejection fails its own slice, so this always makes progress).
                    self.break_connection(false);
                }
                Outcome::Broken(e) => {
                    log::debug!("tcp data connection broke: {e}");
                    // Marked broken before the slice goes again, so the sender retries
                    // it on a fresh connection rather than on this one.
                    self.break_connection(true);
                    self.ledger.send_again(slice, true);
                }
            }
        }
    }

    /// Closes the connection and re-queues everything still in flight on it.
    fn break_connection(&self, charge_retries: bool) {
        self.broken.store(true, Ordering::SeqCst);
        let _ = self.stream.shutdown(Shutdown::Both);
        for slice in self.in_flight.close() {
            self.ledger.send_again(slice, charge_retries);
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

#[cfg(test)]
mod tests {
    use super::super::wire::{encode_status, STATUS_REJECTED};
    use super::*;
    use crate::te::batch::TaskStatus;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::mpsc;

    /// What the fake peer does with the next request it reads.
    #[derive(Clone, Copy)]
    enum Answer {
        Ok,
        /// Answers once the test releases the gate.
        OkWhenReleased,
        Reject,
        Hangup,
    }

    /// A v2 target that answers requests per the script, one connection at a time,
    /// and reports every write payload it received.
    fn fake_peer(script: Vec<Answer>) -> (u16, mpsc::Receiver<Vec<u8>>, mpsc::Sender<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let (tx, rx) = mpsc::channel();
        let (release, gate) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            let mut script = script.into_iter();
            'conns: for conn in l.incoming() {
                let Ok(mut s) = conn else { return };
                loop {
                    let mut h = [0u8; HEADER_LEN];
                    if s.read_exact(&mut h).is_err() {
                        continue 'conns;
                    }
                    let header = Header::decode(&h);
                    let mut payload = vec![0u8; header.size as usize];
                    if header.op == Op::Write && s.read_exact(&mut payload).is_err() {
                        continue 'conns;
                    }
                    let answer = script.next().unwrap_or(Answer::Ok);
                    let _ = tx.send(payload.clone());
                    match answer {
                        Answer::Ok | Answer::OkWhenReleased => {
                            if let Answer::OkWhenReleased = answer {
                                let _ = gate.recv();
                            }
                            let mut reply = encode_status(STATUS_OK).to_vec();
                            if header.op == Op::Read {
                                reply.extend((0..header.size).map(|i| i as u8));
                            }
                            let _ = s.write_all(&reply);
                        }
                        Answer::Reject => {
                            let _ = s.write_all(&encode_status(STATUS_REJECTED));
                            continue 'conns;
                        }
                        Answer::Hangup => continue 'conns,
                    }
                }
            }
        });
        (port, rx, release)
    }

    /// A lane whose inline exchanges wait `inline_wait` for a reply: long where a test
    /// needs the reply read inline, short where it holds the reply back on purpose.
    fn lane_to(port: u16, inline_wait: Duration) -> Lane {
        Lane::start(LaneConfig {
            host: "127.0.0.1".into(),
            port,
            v2: true,
            connect_timeout: Duration::from_secs(5),
            io_timeout: Duration::from_secs(30),
            inline_wait,
        })
        .unwrap()
    }

    /// Long enough that a reply the fake peer sends at once is always read inline.
    const PATIENT: Duration = Duration::from_secs(30);

    /// Moves `slices` inline, retrying while the lane declines them: right after the
    /// lane's own threads finished a slice, the sender may still hold the connection
    /// for a moment.
    fn inline(lane: &Lane, mut slices: Vec<Slice>) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            slices = lane.try_inline(slices);
            if slices.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "the lane kept declining");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn slice(op: Op, buf: &mut [u8]) -> (Slice, Arc<Task>) {
        let task = Task::new(buf.len() as u64, 1, None);
        let s = Slice {
            op,
            local: buf.as_mut_ptr() as u64,
            remote: 0x1000,
            len: buf.len() as u64,
            task: task.clone(),
            retries_left: 1,
        };
        (s, task)
    }

    fn wait_terminal(task: &Task) -> TaskStatus {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let status = task.status().0;
            if status.is_terminal() || Instant::now() > deadline {
                return status;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Connects the lane through the normal path and waits until it is idle.
    fn warm_up(lane: &Lane) {
        let mut buf = [7u8; 16];
        let (s, task) = slice(Op::Write, &mut buf);
        lane.submit(s);
        assert_eq!(wait_terminal(&task), TaskStatus::Completed);
        let deadline = Instant::now() + Duration::from_secs(10);
        while lane.load() != 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn inline_write_and_read_complete_before_returning() {
        let (port, payloads, _) = fake_peer(vec![]);
        let lane = lane_to(port, PATIENT);
        let mut buf = [1u8; 8];
        let (s, _) = slice(Op::Write, &mut buf);
        assert_eq!(
            lane.try_inline(vec![s]).len(),
            1,
            "not connected yet: declined"
        );
        warm_up(&lane);
        payloads.recv().unwrap();

        let mut data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
        let (s, task) = slice(Op::Write, &mut data);
        inline(&lane, vec![s]);
        assert_eq!(task.status().0, TaskStatus::Completed);
        assert_eq!(payloads.recv().unwrap(), data);

        let mut out = vec![0u8; 1000];
        let (s, task) = slice(Op::Read, &mut out);
        inline(&lane, vec![s]);
        assert_eq!(task.status(), (TaskStatus::Completed, 1000));
        assert!(out.iter().enumerate().all(|(i, b)| *b == i as u8));

        let mut big = vec![0u8; INLINE_MAX_BYTES as usize + 1];
        let (s, _) = slice(Op::Read, &mut big);
        assert_eq!(lane.try_inline(vec![s]).len(), 1, "too large: declined");
    }

    #[test]
    fn slow_reply_is_handed_to_the_receiver_thread() {
        let (port, _payloads, release) = fake_peer(vec![Answer::Ok, Answer::OkWhenReleased]);
        let lane = lane_to(port, Duration::from_millis(20));
        warm_up(&lane);
        let mut out = vec![0u8; 512];
        let (s, task) = slice(Op::Read, &mut out);
        inline(&lane, vec![s]);
        assert_eq!(task.status().0, TaskStatus::Waiting, "left in flight");
        release.send(()).unwrap();
        assert_eq!(wait_terminal(&task), TaskStatus::Completed);
        assert!(out.iter().enumerate().all(|(i, b)| *b == i as u8));
        // The lane is usable inline again afterwards.
        let mut buf = [3u8; 64];
        let (s, task) = slice(Op::Write, &mut buf);
        inline(&lane, vec![s]);
        assert_eq!(wait_terminal(&task), TaskStatus::Completed);
    }

    #[test]
    fn a_run_of_slices_is_read_inline_until_a_reply_is_slow() {
        let (port, payloads, release) = fake_peer(vec![
            Answer::Ok,
            Answer::Ok,
            Answer::OkWhenReleased,
            Answer::Ok,
        ]);
        // Patient enough for the first reply, which the peer sends at once; the second
        // is held back until after the call, so it is always handed over.
        let lane = lane_to(port, Duration::from_secs(3));
        warm_up(&lane);
        payloads.recv().unwrap();
        let mut a = vec![1u8; 300];
        let mut b = vec![0u8; 200];
        let mut c = vec![0u8; 100];
        let (sa, ta) = slice(Op::Write, &mut a);
        let (sb, tb) = slice(Op::Read, &mut b);
        let (sc, tc) = slice(Op::Read, &mut c);
        inline(&lane, vec![sa, sb, sc]);
        assert_eq!(
            ta.status().0,
            TaskStatus::Completed,
            "first reply read inline"
        );
        assert_eq!(tb.status().0, TaskStatus::Waiting, "second left in flight");
        release.send(()).unwrap();
        assert_eq!(wait_terminal(&tb), TaskStatus::Completed);
        assert_eq!(wait_terminal(&tc), TaskStatus::Completed);
        assert!(b.iter().enumerate().all(|(i, x)| *x == i as u8));
        assert!(c.iter().enumerate().all(|(i, x)| *x == i as u8));
        assert_eq!(payloads.recv().unwrap(), a);
    }

    #[test]
    fn a_slice_the_peer_hung_up_on_is_retried_on_a_fresh_connection() {
        const ROUNDS: usize = 200;
        let mut script = vec![Answer::Ok];
        (0..ROUNDS).for_each(|_| script.extend([Answer::Hangup, Answer::Ok]));
        let (port, _payloads, _) = fake_peer(script);
        let lane = lane_to(port, PATIENT);
        warm_up(&lane);
        // Each slice meets a hang-up on the connection the last one used; its one retry
        // must not be spent on that connection again.
        for round in 0..ROUNDS {
            let mut buf = [round as u8; 32];
            let (s, task) = slice(Op::Write, &mut buf);
            lane.submit(s);
            assert_eq!(wait_terminal(&task), TaskStatus::Completed, "round {round}");
        }
    }

    #[test]
    fn rejection_fails_only_that_slice_and_a_hangup_is_retried() {
        let (port, _payloads, _) =
            fake_peer(vec![Answer::Ok, Answer::Reject, Answer::Ok, Answer::Hangup]);
        let lane = lane_to(port, PATIENT);
        warm_up(&lane);
        let mut buf = [5u8; 100];
        let (s, task) = slice(Op::Write, &mut buf);
        inline(&lane, vec![s]);
        assert_eq!(wait_terminal(&task), TaskStatus::Failed);

        // The next slice goes through the lane (reconnect), then inline; the peer
        // hangs up on it and the retry on a fresh connection succeeds.
        warm_up(&lane);
        let (s, task) = slice(Op::Write, &mut buf);
        inline(&lane, vec![s]);
        assert_eq!(wait_terminal(&task), TaskStatus::Completed);
        assert_eq!(lane.load(), 0);
    }
}
