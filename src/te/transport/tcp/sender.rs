//! The sender thread of a TCP lane: batches queued slices, connects, and sends them
//! pipelined (header and payload in one `sendmsg`), handing each connection's
//! replies to its receiver thread.

use super::io::send_all;
use super::lane_state::{Again, Connection, InFlight, LaneConfig, Ledger, Slice};
use super::receiver::ReceiverCtx;
use super::wire::{Header, HEADER_LEN};
use crate::te::transport::request::Op;
use crossbeam_channel::Receiver;
use parking_lot::Mutex;
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The sender thread of a lane: pipelines queued slices onto the current
/// connection, connecting (and reconnecting) as needed.
pub(super) struct SenderCtx {
    pub(super) config: LaneConfig,
    pub(super) current: Arc<Mutex<Option<Arc<Connection>>>>,
    pub(super) queue: Receiver<Slice>,
    /// Disconnected when the lane stops (nothing is ever sent on it).
    pub(super) stopped: Receiver<()>,
    pub(super) ledger: Ledger,
}

const MAX_PIPELINED_PER_SEND: usize = 32;

impl SenderCtx {
    /// Runs until the lane stops.
    pub(super) fn run(self) {
        let mut conn: Option<Arc<Connection>> = None;
        // A resent slice met while gathering a batch: it goes next, alone.
        let mut held: Option<Slice> = None;
        loop {
            let first = match held.take() {
                Some(s) => s,
                None => crossbeam_channel::select! {
                    recv(self.queue) -> slice => match slice {
                        Ok(s) => s,
                        Err(_) => break,
                    },
                    recv(self.stopped) -> _ => break,
                },
            };
            if self.ledger.stopping.load(Ordering::SeqCst) {
                self.fail(first);
                continue;
            }
            if first.task.cancel_requested() {
                self.ledger.skip(first);
                continue;
            }
            let alone = first.resent;
            let mut batch = vec![first];
            while !alone && batch.len() < MAX_PIPELINED_PER_SEND {
                match self.queue.try_recv() {
                    Ok(s) if s.task.cancel_requested() => self.ledger.skip(s),
                    Ok(s) if s.resent => {
                        held = Some(s);
                        break;
                    }
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
                if alone {
                    self.wait_answered(c);
                }
            }
        }
        if let Some(c) = conn.take() {
            self.retire(&c);
        }
        for s in held.into_iter().chain(self.queue.try_iter()) {
            self.fail(s);
        }
    }

    /// Waits until everything sent on `conn` is answered, the connection breaks, the
    /// lane stops, or the I/O timeout passes (the receiver then fails the rest).
    fn wait_answered(&self, conn: &Connection) {
        let deadline = std::time::Instant::now() + self.config.io_timeout;
        while conn.outstanding.load(Ordering::SeqCst) > 0
            && !conn.broken.load(Ordering::SeqCst)
            && !self.ledger.stopping.load(Ordering::SeqCst)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_micros(50));
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
                self.ledger.send_again(slice, Again::Free);
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
