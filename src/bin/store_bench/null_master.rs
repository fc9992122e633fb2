//! `null_master`: the ceiling any master can reach on this host with a given load. It
//! speaks coro_rpc like a master and is served like ours (one thread per connection,
//! blocking reads, the replies to a pipelined run of calls in one write), but does no
//! work for the calls of `master_load`'s phases: the first `PutStart` and `PutEnd` are
//! forwarded to the real master at `--master_server_addr` and their replies kept, and
//! every later one gets the kept reply (with its own sequence number); the reads of
//! existing keys are answered as a master that holds every key would, `ExistKey` with
//! true and `GetReplicaList` with the replicas of the kept `PutStart` reply. Every
//! other call (mounts, pings, the prefill's batches) goes to the real master. What is left is
//! the load generator, the kernel's loopback TCP and the thread wake-ups: the figure
//! `bench/master_load.sh` compares both masters' rates with.
//!
//! Prints `NULL_MASTER listening on <addr>` on stdout, then serves until SIGINT/SIGTERM.

use crate::settings::Settings;
use mooncake::runtime::signals;
use mooncake::wire::codec::{rpc, Rpc};
use mooncake::wire::coro_rpc::{self, Method, ResponseHeader};
use mooncake::wire::master_api::GetReplicaListResponse;
use mooncake::wire::struct_pack;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::io::{self, BufReader, BufWriter, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// How often the accept loop looks for a stop signal.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// Serves until a stop signal; each connection on its own thread.
pub fn run(s: &Settings) -> Result<(), String> {
    let listener = TcpListener::bind(&s.listen).map_err(|e| format!("bind {}: {e}", s.listen))?;
    let addr = listener.local_addr().map_err(|e| format!("bind: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("listener: {e}"))?;
    println!("NULL_MASTER listening on {addr}");
    let _ = io::stdout().flush();
    let replies = Arc::new(Replies {
        master: s.master_server_addr.clone(),
        timeout: s.rpc_timeout,
        kept: RwLock::new(HashMap::new()),
    });
    while !signals::stop_requested() {
        match listener.accept() {
            Ok((conn, peer)) => {
                let replies = replies.clone();
                thread::spawn(move || {
                    if let Err(e) = serve(conn, &replies) {
                        log::debug!("null master: connection from {peer}: {e}");
                    }
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Nothing to accept: wait for a client or the stop signal.
                let fd = std::os::fd::AsRawFd::as_raw_fd(&listener);
                let _ = mooncake::host::busy_poll::wait_readable(
                    fd,
                    Duration::ZERO,
                    Some(std::time::Instant::now() + STOP_CHECK),
                );
            }
            Err(e) => return Err(format!("accept: {e}")),
        }
    }
    Ok(())
}

/// A method's reply: the error code and body.
type Kept = (u8, Vec<u8>);

/// The replies every connection gives, by function id.
struct Replies {
    master: String,
    timeout: Duration,
    kept: RwLock<HashMap<u32, Arc<Kept>>>,
}

impl Replies {
    /// The reply to a call of `function_id` with `body`; calls that need the real
    /// master reach it through this connection's `forward`.
    fn reply(
        &self,
        function_id: u32,
        body: &[u8],
        forward: &mut Option<Forward>,
    ) -> io::Result<Arc<Kept>> {
        if let Some(kept) = self.kept.read().get(&function_id) {
            return Ok(kept.clone());
        }
        let method = Method::from_id(function_id);
        let made = match method {
            Some(Method::ExistKey) => {
                let exists: <rpc::ExistKey as Rpc>::Ret = Ok(true);
                Some((coro_rpc::ERR_OK, struct_pack::serialize(&exists)))
            }
            Some(Method::GetReplicaList) => self.replica_list(),
            _ => None,
        };
        let reply = match made {
            Some(reply) => reply,
            None => {
                let f = match forward {
                    Some(f) => f,
                    None => forward.insert(Forward::connect(&self.master, self.timeout)?),
                };
                let reply = f.call(function_id, body)?;
                // Only the load's own calls are answered without work; the rest
                // (mounts, pings, batches) always go to the real master, and
                // GetReplicaList does until a PutStart's replicas can answer it.
                if !matches!(method, Some(Method::PutStart | Method::PutEnd)) {
                    return Ok(Arc::new(reply));
                }
                reply
            }
        };
        Ok(self
            .kept
            .write()
            .entry(function_id)
            .or_insert_with(|| Arc::new(reply))
            .clone())
    }

    /// A `GetReplicaList` reply listing the replicas of the kept `PutStart` reply.
    fn replica_list(&self) -> Option<Kept> {
        let put = self.kept.read().get(&Method::PutStart.id())?.clone();
        let started: <rpc::PutStart as Rpc>::Ret = struct_pack::deserialize(&put.1).ok()?;
        let list: <rpc::GetReplicaList as Rpc>::Ret = Ok(GetReplicaListResponse {
            replicas: started.ok()?,
            lease_ttl_ms: 5000,
            checksum: None,
        });
        Some((coro_rpc::ERR_OK, struct_pack::serialize(&list)))
    }
}

/// Serves one connection until it closes.
fn serve(conn: TcpStream, replies: &Replies) -> io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_nodelay(true)?;
    let mut reader = BufReader::with_capacity(64 << 10, conn.try_clone()?);
    let mut writer = BufWriter::with_capacity(64 << 10, conn);
    let mut forward: Option<Forward> = None;
    let mut body = Vec::new();
    while let Some(h) = coro_rpc::read_request_into(&mut reader, coro_rpc::MAX_FRAME, &mut body)? {
        let kept = replies.reply(h.function_id, &body, &mut forward)?;
        let (err, reply) = &*kept;
        let len = u32::try_from(reply.len()).map_err(|_| io::Error::other("reply over 4G"))?;
        writer.write_all(&ResponseHeader::new(h.seq, *err, len).to_bytes())?;
        writer.write_all(reply)?;
        if !coro_rpc::whole_request_at_front(reader.buffer()) {
            writer.flush()?;
        }
    }
    writer.flush()
}

/// A connection to the real master for the calls it answers.
struct Forward {
    conn: TcpStream,
    reader: BufReader<TcpStream>,
    seq: u32,
}

impl Forward {
    fn connect(master: &str, timeout: Duration) -> io::Result<Forward> {
        let addr = master
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::other(format!("{master} resolved to nothing")))?;
        let conn = TcpStream::connect_timeout(&addr, timeout)?;
        conn.set_read_timeout(Some(timeout))?;
        conn.set_nodelay(true)?;
        let reader = BufReader::new(conn.try_clone()?);
        Ok(Forward {
            conn,
            reader,
            seq: 0,
        })
    }

    /// Makes one call and returns its reply's error code and body.
    fn call(&mut self, function_id: u32, body: &[u8]) -> io::Result<Kept> {
        self.seq = self.seq.wrapping_add(1);
        self.conn
            .write_all(&coro_rpc::encode_request(self.seq, function_id, body))?;
        let (h, reply) = coro_rpc::read_response(&mut self.reader, coro_rpc::MAX_RESPONSE)?
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        if h.seq != self.seq {
            return Err(io::Error::other("the master answered out of order"));
        }
        Ok((h.err_code, reply))
    }
}
