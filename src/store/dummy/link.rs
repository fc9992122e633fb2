//! A dummy's link to its real client: connections to its abstract Unix socket (kept
//! idle between calls, all in one session named by a token), calls and their
//! replies, and the memory both sides map, mapped again when the real client starts
//! a fresh session.

use super::shared_memory::SharedMemory;
use super::wire::{self, Op};
use crate::store::error::{from_codes, StoreError, StoreResult};
use crate::store::memory::Mapping;
use crate::store::ErrorCode;
use crate::wire::struct_pack::Pack;
use parking_lot::Mutex;
use std::io;
use std::os::fd::OwnedFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::time::Duration;

/// The connections to one real client, and the memory shared with it.
pub(super) struct Link {
    /// The real client's abstract socket name.
    socket: String,
    /// Names this process's session at the real client.
    token: u64,
    /// Deadline of one call (`MC_RPC_TIMEOUT_MS`).
    timeout: Duration,
    /// Idle connections.
    idle: Mutex<Vec<UnixStream>>,
    /// What this process shares with the real client.
    memory: SharedMemory,
}

/// A failed exchange with the real client: -901 when it timed out, else -900, because
/// of `doing` and `e`.
fn io_error(doing: impl std::fmt::Display, e: &io::Error) -> StoreError {
    let code = match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ErrorCode::RPC_TIMEOUT,
        _ => ErrorCode::RPC_FAIL,
    };
    StoreError::new(code, format!("dummy client: {doing}: {e}"))
}

impl Link {
    /// A link to the real client at `@socket`, not connected yet.
    pub(super) fn new(socket: String, token: u64, timeout: Duration, memory: SharedMemory) -> Link {
        Link {
            socket,
            token,
            timeout,
            idle: Mutex::new(Vec::new()),
            memory,
        }
    }

    /// The real client's abstract socket name.
    pub(super) fn socket(&self) -> &str {
        &self.socket
    }

    /// The memory shared with the real client.
    pub(super) fn memory(&self) -> &SharedMemory {
        &self.memory
    }

    /// A new connection that has joined this process's session; the real client's
    /// hostname. A fresh session (the real client restarted) gets every mapped range
    /// again before the connection is used.
    pub(super) fn connect(&self) -> io::Result<(UnixStream, String)> {
        let stream = UnixStream::connect_addr(&SocketAddr::from_abstract_name(&self.socket)?)?;
        stream.set_read_timeout(Some(self.timeout))?;
        stream.set_write_timeout(Some(self.timeout))?;
        wire::send_request(&stream, Op::Hello, &(wire::VERSION, self.token), None)?;
        let reply = wire::decode::<Result<(String, bool), ErrorCode>>(&wire::read_reply(&stream)?)?;
        let (hostname, fresh) = reply.map_err(|e| {
            io::Error::new(io::ErrorKind::PermissionDenied, format!("refused ({e})"))
        })?;
        if fresh {
            self.map_segments(&stream)?;
            for (addr, len) in self.memory.mapped_ranges() {
                let Some((file, offset)) = self.memory.file_of(addr) else {
                    continue;
                };
                wire::send_request(&stream, Op::Map, &(addr, len, offset), Some(&file))?;
                let r = wire::decode::<Result<(), ErrorCode>>(&wire::read_reply(&stream)?)?;
                if let Err(e) = r {
                    log::warn!(
                        "dummy client: re-mapping [{addr:#x}, +{len}) at the real client: {e}"
                    );
                }
            }
        }
        Ok((stream, hostname))
    }

    /// Keeps `conn` for later calls.
    pub(super) fn keep(&self, conn: UnixStream) {
        self.idle.lock().push(conn);
    }

    /// Maps the real client's segments (objects there are then copied by this process
    /// straight from them), replacing any mapped before.
    fn map_segments(&self, stream: &UnixStream) -> io::Result<()> {
        wire::send_request(stream, Op::Segments, &false, None)?;
        let (body, files) = wire::read_reply_with_files(stream)?;
        let ranges = wire::decode::<Vec<(u64, u64)>>(&body)?;
        let offered = ranges.len();
        let mut mapped = Vec::new();
        for ((base, len), file) in ranges.into_iter().zip(files) {
            match Mapping::from_shared_file(file, len) {
                Ok(m) => mapped.push((base, len, m)),
                Err(e) => log::warn!("dummy client: mapping a real client segment: {e}"),
            }
        }
        let all = offered > 0 && mapped.len() == offered;
        self.memory.set_segments(mapped);
        if all {
            wire::send_request(stream, Op::Segments, &true, None)?;
            wire::decode::<Vec<(u64, u64)>>(&wire::read_reply(stream)?)?;
        }
        Ok(())
    }

    /// One call: request, reply, decoded. A connection that fails is dropped.
    pub(super) fn call<T: Pack + 'static, R: Pack + 'static>(
        &self,
        op: Op,
        args: &T,
        file: Option<&OwnedFd>,
    ) -> StoreResult<R> {
        let conn = self.connection()?;
        let r = Self::exchange(&conn, op, args, file)?;
        self.keep(conn);
        Ok(r)
    }

    /// An idle or new connection; -900 (or -901) when the real client is unreachable.
    pub(super) fn connection(&self) -> StoreResult<UnixStream> {
        if let Some(c) = self.idle_connection() {
            return Ok(c);
        }
        self.connect().map(|(c, _)| c).map_err(|e| {
            // A real client that is gone must not be kept in memory by its segments
            // mapped here; a new one shares its own.
            self.memory.set_segments(Vec::new());
            io_error(
                format_args!("the real client at @{} is unreachable", self.socket),
                &e,
            )
        })
    }

    /// Request and reply on `conn`, decoded.
    pub(super) fn exchange<T: Pack + 'static, R: Pack + 'static>(
        conn: &UnixStream,
        op: Op,
        args: &T,
        file: Option<&OwnedFd>,
    ) -> StoreResult<R> {
        wire::send_request(conn, op, args, file)
            .and_then(|()| wire::read_reply(conn))
            .and_then(|body| wire::decode::<R>(&body))
            .map_err(|e| io_error(format_args!("{op:?} to the real client failed"), &e))
    }

    /// An idle connection the real client has not closed (one it closed, e.g. across
    /// a restart, is readable or hung up while no request is outstanding).
    fn idle_connection(&self) -> Option<UnixStream> {
        use std::os::fd::AsRawFd;
        loop {
            let conn = self.idle.lock().pop()?;
            let mut pfd = libc::pollfd {
                fd: conn.as_raw_fd(),
                events: libc::POLLIN | libc::POLLRDHUP,
                revents: 0,
            };
            // SAFETY: one valid pollfd, no waiting.
            if unsafe { libc::poll(&mut pfd, 1, 0) } == 0 {
                return Some(conn);
            }
        }
    }

    /// A batch call whose transport failure fails every key.
    pub(super) fn call_batch<T: Pack + 'static, V: Pack + 'static>(
        &self,
        op: Op,
        args: &T,
        n: usize,
    ) -> Vec<StoreResult<V>> {
        match self.call::<T, Vec<Result<V, ErrorCode>>>(op, args, None) {
            Ok(v) if v.len() == n => from_codes(v),
            Ok(v) => {
                let cause = format!("{op:?}: the real client answered {} of {n} keys", v.len());
                (0..n)
                    .map(|_| Err(StoreError::internal(cause.clone())))
                    .collect()
            }
            Err(e) => (0..n).map(|_| Err(e.clone())).collect(),
        }
    }

    /// Has the real client map `[addr, addr + len)` of `holder`'s file.
    pub(super) fn map(&self, addr: u64, len: u64, holder: &Mapping) -> StoreResult<()> {
        let file = holder.shared_file().ok_or_else(|| {
            StoreError::invalid(format!("[{addr:#x}, +{len}) is not in a shared file"))
        })?;
        let offset = addr - holder.addr();
        self.call::<_, Result<(), ErrorCode>>(Op::Map, &(addr, len, offset), Some(file))??;
        self.memory.add_mapped(addr, len);
        Ok(())
    }
}
