//! [`MasterRpcClient`]: the [`MasterApi`] over coro_rpc/TCP to a master (ours or
//! upstream's).
//!
//! A small pool of persistent connections ("lanes"). Calls on a lane are pipelined and
//! there is no reader thread: the first waiting caller becomes the lane's reader, reads
//! replies (busy-polling briefly, as a reply usually comes within microseconds), hands
//! each one to the caller it belongs to, and passes the reader role on to another
//! waiting caller once its own reply is in. A lone caller thus reads its own reply and
//! no thread is ever woken just to relay it. Every call has a deadline (`rpc_timeout`,
//! like `MC_RPC_TIMEOUT_MS`): past it the call returns `RPC_TIMEOUT` (-901) and the
//! lane is closed, as upstream's client does. Connect and I/O failures and
//! undecodable or transport-error replies are `RPC_FAIL` (-900), "function not
//! registered" (a method the master does not have) is `NOT_SUPPORTED` (-1012). A dead lane, or one
//! the master closed while idle, is reconnected by the next call that picks it.

use super::codec::{self, rpc, Expected, Rpc};
use super::coro_rpc;
use super::disk_tier_api::*;
use super::master_api::*;
use super::master_rpcs::{both_apis, master_rpcs};
use super::rpc_metrics::RpcMetrics;
use super::struct_pack;
use super::wire_arg::WireArg;
use crate::host::busy_poll;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::cell::Cell;
use std::collections::HashMap;
use std::io::{self, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connections per client unless told otherwise (upstream's client keeps two).
pub const DEFAULT_POOL_SIZE: usize = 2;

/// A reply: transport `err_code` and body.
type Reply = (u8, Vec<u8>);

thread_local! {
    /// When this thread last began writing a request to a master.
    static LAST_SENT: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// When the calling thread last began sending a request to a master (any
/// [`MasterRpcClient`]): for a call just returned, the send of the attempt that was
/// answered, after any resends to a new leader. A lease the master granted in that
/// answer began no earlier, so a deadline counted from here is never late; counted
/// from before the call, it would expire early by however long a stopped leader held
/// the first attempt.
pub fn last_sent_on_this_thread() -> Option<Instant> {
    LAST_SENT.with(Cell::get)
}

/// A call waiting on a lane: its reply once some reader has delivered it.
struct Waiter {
    reply: Mutex<Option<Result<Reply, ErrorCode>>>,
    wake: Condvar,
}

impl Waiter {
    fn new() -> Arc<Waiter> {
        Arc::new(Waiter {
            reply: Mutex::new(None),
            wake: Condvar::new(),
        })
    }

    fn deliver(&self, reply: Result<Reply, ErrorCode>) {
        *self.reply.lock() = Some(reply);
        self.wake.notify_one();
    }

    /// Wakes the waiter without a reply, so it tries to become the reader.
    fn nudge(&self) {
        let _guard = self.reply.lock();
        self.wake.notify_one();
    }
}

/// One persistent connection.
struct Lane {
    writer: Mutex<TcpStream>,
    reader: Mutex<BufReader<TcpStream>>,
    control: TcpStream,
    pending: Mutex<HashMap<u32, Arc<Waiter>>>,
    dead: AtomicBool,
    next_seq: AtomicU32,
    max_frame: usize,
}

impl Lane {
    fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Marks the lane dead, fails every waiting caller and closes the socket.
    fn kill(&self) {
        let waiters: Vec<Arc<Waiter>> = {
            let mut p = self.pending.lock();
            self.dead.store(true, Ordering::SeqCst);
            p.drain().map(|(_, w)| w).collect()
        };
        for w in waiters {
            w.deliver(Err(ErrorCode::RPC_FAIL));
        }
        let _ = self.control.shutdown(Shutdown::Both);
    }

    /// Whether an idle lane was closed by the master: with nothing in flight the
    /// master sends nothing, so anything readable is EOF or an error.
    fn closed_while_idle(&self) -> bool {
        if !self.pending.lock().is_empty() {
            return false;
        }
        let Some(reader) = self.reader.try_lock() else {
            return false;
        };
        reader.buffer().is_empty()
            && busy_poll::wait_readable(
                reader.get_ref().as_raw_fd(),
                Duration::ZERO,
                Some(Instant::now()),
            )
            .unwrap_or(true)
    }

    /// Waits for the reply to `seq`, reading the connection itself whenever no other
    /// caller is.
    fn await_reply(
        &self,
        seq: u32,
        me: &Waiter,
        deadline: Option<Instant>,
    ) -> Result<Reply, ErrorCode> {
        loop {
            let mut slot = me.reply.lock();
            if let Some(reply) = slot.take() {
                return reply;
            }
            if let Some(reader) = self.reader.try_lock() {
                drop(slot);
                let got = self.lead(reader, seq, me, deadline);
                self.pass_reader_role();
                return got;
            }
            let timed_out = match deadline {
                None => {
                    me.wake.wait(&mut slot);
                    false
                }
                Some(d) => me.wake.wait_until(&mut slot, d).timed_out(),
            };
            if timed_out && slot.is_none() {
                drop(slot);
                self.pending.lock().remove(&seq);
                return Err(ErrorCode::RPC_TIMEOUT);
            }
        }
    }

    /// Reads replies, delivering other callers', until `seq`'s arrives.
    fn lead(
        &self,
        mut reader: MutexGuard<'_, BufReader<TcpStream>>,
        seq: u32,
        me: &Waiter,
        deadline: Option<Instant>,
    ) -> Result<Reply, ErrorCode> {
        let spin = crate::config::Config::global().busy_poll_budget();
        loop {
            if let Some(reply) = me.reply.lock().take() {
                return reply;
            }
            if reader.buffer().is_empty() {
                let fd = reader.get_ref().as_raw_fd();
                match busy_poll::wait_readable(fd, spin, deadline) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.pending.lock().remove(&seq);
                        return Err(ErrorCode::RPC_TIMEOUT);
                    }
                    Err(e) => {
                        log::debug!("master rpc: poll failed: {e}");
                        self.kill();
                        return Err(ErrorCode::RPC_FAIL);
                    }
                }
            }
            match coro_rpc::read_response(&mut *reader, self.max_frame) {
                Ok(Some((h, body))) => {
                    let waiter = self.pending.lock().remove(&h.seq);
                    if h.seq == seq {
                        return Ok((h.err_code, body));
                    }
                    if let Some(w) = waiter {
                        w.deliver(Ok((h.err_code, body)));
                    }
                }
                Ok(None) => {
                    log::debug!("master rpc: connection closed by the master");
                    self.kill();
                    return Err(ErrorCode::RPC_FAIL);
                }
                Err(e) => {
                    log::debug!("master rpc: connection lost: {e}");
                    self.kill();
                    return Err(ErrorCode::RPC_FAIL);
                }
            }
        }
    }

    /// After a reader is done: another waiting caller takes over reading.
    fn pass_reader_role(&self) {
        let next = self.pending.lock().values().next().cloned();
        if let Some(w) = next {
            w.nudge();
        }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        let _ = self.control.shutdown(Shutdown::Both);
    }
}

/// Time left before `deadline` (`None`: no deadline); `Err` once it has passed.
fn remaining(deadline: Option<Instant>) -> Result<Option<Duration>, ErrorCode> {
    match deadline {
        None => Ok(None),
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                Err(ErrorCode::RPC_TIMEOUT)
            } else {
                Ok(Some(left))
            }
        }
    }
}

/// A [`MasterApi`] that calls a master over coro_rpc.
pub struct MasterRpcClient {
    addr: String,
    rpc_timeout: Duration,
    connect_timeout: Duration,
    max_frame: usize,
    lanes: Vec<Mutex<Option<Arc<Lane>>>>,
    next_lane: AtomicUsize,
    /// Given up ([`MasterRpcClient::close`]): every call fails.
    closed: AtomicBool,
}

impl std::fmt::Debug for MasterRpcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterRpcClient")
            .field("addr", &self.addr)
            .field("rpc_timeout", &self.rpc_timeout)
            .finish_non_exhaustive()
    }
}

impl MasterRpcClient {
    /// Connects to the master at `addr` (`host:port`) with [`DEFAULT_POOL_SIZE`]
    /// connections, and checks `ServiceReady` returns `"2.0.0"` (else
    /// `INVALID_VERSION`, -300). `rpc_timeout` bounds every call (a `Duration` too large
    /// to add to now means no deadline); `connect_timeout` bounds each connect.
    pub fn connect(
        addr: &str,
        rpc_timeout: Duration,
        connect_timeout: Duration,
    ) -> MasterResult<MasterRpcClient> {
        Self::connect_with_pool(addr, rpc_timeout, connect_timeout, DEFAULT_POOL_SIZE)
    }

    /// [`connect`](Self::connect) with `pool_size` connections (at least 1).
    pub fn connect_with_pool(
        addr: &str,
        rpc_timeout: Duration,
        connect_timeout: Duration,
        pool_size: usize,
    ) -> MasterResult<MasterRpcClient> {
        let client = Self::new_unchecked(addr, rpc_timeout, connect_timeout, pool_size);
        let version = client.service_ready()?;
        if version != SERVICE_VERSION {
            log::error!("master {addr} has version {version:?}, need {SERVICE_VERSION:?}");
            return Err(ErrorCode::INVALID_VERSION);
        }
        Ok(client)
    }

    /// A client that has not talked to the master yet (connections open lazily; no
    /// version check).
    pub fn new_unchecked(
        addr: &str,
        rpc_timeout: Duration,
        connect_timeout: Duration,
        pool_size: usize,
    ) -> MasterRpcClient {
        MasterRpcClient {
            addr: addr.to_string(),
            rpc_timeout,
            connect_timeout,
            max_frame: coro_rpc::MAX_RESPONSE,
            lanes: (0..pool_size.max(1)).map(|_| Mutex::new(None)).collect(),
            next_lane: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        }
    }

    /// The master's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Gives the master up: closes every connection, failing the calls waiting on
    /// them with `RPC_FAIL` at once (a stopped master would keep them waiting until
    /// their deadline), and every later call too.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.disconnect();
    }

    /// Closes every connection (the next call reconnects).
    pub fn disconnect(&self) {
        for slot in &self.lanes {
            if let Some(lane) = slot.lock().take() {
                lane.kill();
            }
        }
    }

    fn open(&self, deadline: Option<Instant>) -> Result<Arc<Lane>, ErrorCode> {
        let addrs: Vec<SocketAddr> = match self.addr.to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => {
                log::warn!("master rpc: cannot resolve {}: {e}", self.addr);
                return Err(ErrorCode::RPC_FAIL);
            }
        };
        let mut last = None;
        for a in addrs {
            let left = remaining(deadline)?;
            let limited = left.is_some_and(|l| l < self.connect_timeout);
            let t = left.map_or(self.connect_timeout, |l| l.min(self.connect_timeout));
            match TcpStream::connect_timeout(&a, t.max(Duration::from_millis(1))) {
                Ok(s) => return self.start_lane(s),
                Err(e) => {
                    let timed_out = matches!(
                        e.kind(),
                        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                    );
                    last = Some(if limited && timed_out {
                        ErrorCode::RPC_TIMEOUT
                    } else {
                        ErrorCode::RPC_FAIL
                    });
                    log::debug!("master rpc: connect {a}: {e}");
                }
            }
        }
        Err(last.unwrap_or(ErrorCode::RPC_FAIL))
    }

    /// The socket write timeout: the RPC timeout, or none when it is zero (calls time
    /// out before writing) or too large to be a deadline.
    fn write_timeout(&self) -> Option<Duration> {
        let t = self.rpc_timeout;
        (!t.is_zero() && Instant::now().checked_add(t).is_some()).then_some(t)
    }

    fn start_lane(&self, s: TcpStream) -> Result<Arc<Lane>, ErrorCode> {
        let _ = s.set_nodelay(true);
        // One timeout for the connection's life (a syscall per call would cost more
        // than it buys): a write, or the rest of a reply that has started to arrive,
        // stalled for a whole RPC timeout is a failure.
        let io_timeout = self.write_timeout();
        if s.set_write_timeout(io_timeout).is_err() || s.set_read_timeout(io_timeout).is_err() {
            return Err(ErrorCode::RPC_FAIL);
        }
        let (control, read) = match (s.try_clone(), s.try_clone()) {
            (Ok(c), Ok(r)) => (c, r),
            _ => return Err(ErrorCode::RPC_FAIL),
        };
        Ok(Arc::new(Lane {
            writer: Mutex::new(s),
            reader: Mutex::new(BufReader::with_capacity(64 << 10, read)),
            control,
            pending: Mutex::new(HashMap::new()),
            dead: AtomicBool::new(false),
            next_seq: AtomicU32::new(0),
            max_frame: self.max_frame,
        }))
    }

    /// A live lane and whether it was just opened.
    fn lane(&self, deadline: Option<Instant>) -> Result<(Arc<Lane>, bool), ErrorCode> {
        let i = self.next_lane.fetch_add(1, Ordering::Relaxed) % self.lanes.len();
        let mut slot = match deadline {
            None => self.lanes[i].lock(),
            Some(d) => self.lanes[i]
                .try_lock_until(d)
                .ok_or(ErrorCode::RPC_TIMEOUT)?,
        };
        if self.closed.load(Ordering::SeqCst) {
            return Err(ErrorCode::RPC_FAIL);
        }
        if let Some(l) = slot.as_ref() {
            if !l.is_dead() && !l.closed_while_idle() {
                return Ok((l.clone(), false));
            }
            l.kill();
        }
        let lane = self.open(deadline)?;
        *slot = Some(lane.clone());
        Ok((lane, true))
    }

    /// Sends one request and waits for its reply.
    fn call(&self, function_id: u32, body: &[u8]) -> Result<Reply, ErrorCode> {
        let deadline = Instant::now().checked_add(self.rpc_timeout);
        let mut retried = false;
        loop {
            let (lane, fresh) = self.lane(deadline)?;
            let seq = lane.next_seq.fetch_add(1, Ordering::Relaxed);
            let me = Waiter::new();
            {
                let mut p = lane.pending.lock();
                if lane.is_dead() {
                    drop(p);
                    if fresh || retried {
                        return Err(ErrorCode::RPC_FAIL);
                    }
                    retried = true;
                    continue;
                }
                p.insert(seq, me.clone());
            }
            if let Err(e) = self.send(&lane, seq, function_id, body, deadline) {
                lane.kill();
                // A reused connection may have died idle (master restarted): the request
                // never left, so one retry on a fresh connection is safe.
                if e == ErrorCode::RPC_FAIL && !fresh && !retried {
                    retried = true;
                    continue;
                }
                return Err(e);
            }
            let got = lane.await_reply(seq, &me, deadline);
            match got {
                Err(ErrorCode::RPC_TIMEOUT) => {
                    log::warn!(
                        "master rpc: call {function_id:#010x} to {} timed out",
                        self.addr
                    );
                    lane.kill();
                }
                Err(_) => lane.kill(),
                Ok(_) => {}
            }
            return got;
        }
    }

    fn send(
        &self,
        lane: &Lane,
        seq: u32,
        function_id: u32,
        body: &[u8],
        deadline: Option<Instant>,
    ) -> Result<(), ErrorCode> {
        let frame = coro_rpc::encode_request(seq, function_id, body);
        let mut w = match deadline {
            None => lane.writer.lock(),
            Some(d) => lane
                .writer
                .try_lock_until(d)
                .ok_or(ErrorCode::RPC_TIMEOUT)?,
        };
        remaining(deadline)?;
        LAST_SENT.with(|sent| sent.set(Some(Instant::now())));
        w.write_all(&frame).map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ErrorCode::RPC_TIMEOUT,
            _ => ErrorCode::RPC_FAIL,
        })
    }

    /// Calls `R` and decodes its reply.
    fn invoke<R: Rpc>(&self, args: &R::Args) -> Result<R::Ret, ErrorCode> {
        let body = codec::encode_args(args);
        let started = Instant::now();
        let called = self.call(R::METHOD.id(), &body);
        RpcMetrics::global().record(R::METHOD, started.elapsed());
        let (err, reply) = called?;
        if err == coro_rpc::ERR_FUNCTION_NOT_REGISTERED {
            log::debug!("master rpc: the master has no {}", R::METHOD.name());
            return Err(ErrorCode::NOT_SUPPORTED);
        }
        if err != coro_rpc::ERR_OK {
            log::warn!(
                "master rpc: {} failed: err_code {err}: {}",
                R::METHOD.name(),
                coro_rpc::error_message(&reply)
            );
            return Err(ErrorCode::RPC_FAIL);
        }
        struct_pack::deserialize::<R::Ret>(&reply).map_err(|e| {
            log::warn!("master rpc: {} reply: {e}", R::METHOD.name());
            ErrorCode::RPC_FAIL
        })
    }

    /// Calls an `expected<T>` RPC.
    fn expect<R, T>(&self, args: &R::Args) -> MasterResult<T>
    where
        R: Rpc<Ret = Expected<T>>,
    {
        self.invoke::<R>(args)?
    }

    /// Calls a batch RPC; a reply with another count than `n` inputs is `RPC_FAIL`.
    fn batch<R, T>(&self, n: usize, args: &R::Args) -> MasterResult<Vec<MasterResult<T>>>
    where
        R: Rpc<Ret = Vec<Expected<T>>>,
    {
        let v = self.invoke::<R>(args)?;
        if v.len() != n {
            log::warn!(
                "master rpc: {} returned {} results for {n}",
                R::METHOD.name(),
                v.len()
            );
            return Err(ErrorCode::RPC_FAIL);
        }
        Ok(v)
    }
}

impl Drop for MasterRpcClient {
    fn drop(&mut self) {
        self.disconnect();
    }
}

/// One row of the RPC table as a client stub: encode the arguments, call, decode.
macro_rules! client_stub {
    ({ $(#[$doc:meta])* $m:ident: $args:ty => $wret:ty;
       [$kind:ident $($count:ident)? $(, $default:ident)?]
       fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; }) => {
        fn $name(&self $(, $arg: $ty)*) -> $ret {
            client_stub!(@$kind self, $m, [$($count)?], ($(WireArg::to_wire($arg),)*))
        }
    };
    (@one $self:ident, $m:ident, [], $args:expr) => {
        $self.expect::<rpc::$m, _>(&$args)
    };
    (@batch $self:ident, $m:ident, [$count:ident], $args:expr) => {
        $self.batch::<rpc::$m, _>($count.len(), &$args)
    };
    // A bare `long` on the wire: a negative count (an error code from the master) is
    // returned as `Ok`, as upstream's client does.
    (@long $self:ident, $m:ident, [], $args:expr) => {
        $self.invoke::<rpc::$m>(&$args)
    };
    (@map $self:ident, $m:ident, [], $args:expr) => {
        $self.expect::<rpc::$m, _>(&$args).map(|m| m.0)
    };
}

// The client's half of the RPC table: both traits as stubs.
master_rpcs!(both_apis MasterRpcClient, client_stub, {});
