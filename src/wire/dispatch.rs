//! The server side of the master's coro_rpc protocol: decode a request body, call a
//! [`MasterApi`], encode the reply ([`handle_request`]); and a blocking per-connection
//! loop ([`serve_stream`]) the master runs on one thread per client connection.
//!
//! Transport-level failures follow upstream: an unknown function id is `err_code` 11
//! and an undecodable argument tuple `err_code` 4, each with a struct_pack string
//! message. Batch methods return one result per input, so a whole-call failure of the
//! service is repeated for every input; `RemoveAll` returns a bare `long`, so its
//! failure is the (negative) error code itself.

use super::codec::{self, rpc, Rpc};
use super::coro_rpc::{self, Method, ResponseHeader, RESP_HEADER_LEN};
use super::master_api::{MasterApi, MasterResult};
use super::master_rpcs::master_rpcs;
use super::struct_pack::{self, Map};
use super::wire_arg::WireArg;
use crate::host::busy_poll;
use std::io::{self, BufReader, BufWriter, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Handles one request: returns the response `err_code` and body. Never panics (a
/// panicking service is reported as `err_code` 10, "rpc throw exception").
pub fn handle_request(api: &dyn MasterApi, function_id: u32, body: &[u8]) -> (u8, Vec<u8>) {
    let mut out = Vec::new();
    let err = handle_request_into(api, function_id, body, &mut out);
    (err, out)
}

/// [`handle_request`], appending the response body to `out`; returns the `err_code`.
/// Should the encoder itself panic, the bytes `out` held before may come back as zeros
/// (the reply header placeholder they are in the server loop).
pub fn handle_request_into(
    api: &dyn MasterApi,
    function_id: u32,
    body: &[u8],
    out: &mut Vec<u8>,
) -> u8 {
    let Some(method) = Method::from_id(function_id) else {
        log::debug!("master rpc: unknown function id {function_id:#010x}");
        out.extend_from_slice(&coro_rpc::error_body(coro_rpc::MSG_FUNCTION_NOT_REGISTERED));
        return coro_rpc::ERR_FUNCTION_NOT_REGISTERED;
    };
    let start = out.len();
    match catch_unwind(AssertUnwindSafe(|| dispatch(api, method, body, &mut *out))) {
        Ok(err) => err,
        Err(_) => {
            log::error!("master rpc: {} panicked", method.name());
            // The encoder may have been holding `out`'s bytes when it panicked.
            out.resize(start, 0);
            out.extend_from_slice(&coro_rpc::error_body("rpc throw exception"));
            coro_rpc::ERR_THROW_EXCEPTION
        }
    }
}

/// Decodes `R`'s arguments, calls `f`, appends its encoded result to `out`.
fn call<R: Rpc>(body: &[u8], out: &mut Vec<u8>, f: impl FnOnce(R::Args) -> R::Ret) -> u8 {
    match codec::decode_args::<R::Args>(body) {
        Ok(args) => {
            struct_pack::serialize_into(&f(args), out);
            coro_rpc::ERR_OK
        }
        Err(e) => {
            log::debug!("master rpc: {}: {e}", R::METHOD.name());
            out.extend_from_slice(&coro_rpc::error_body(coro_rpc::MSG_INVALID_ARGUMENTS));
            coro_rpc::ERR_INVALID_ARGUMENTS
        }
    }
}

fn not_registered(m: Method, out: &mut Vec<u8>) -> u8 {
    log::debug!("master rpc: {} is not served here", m.name());
    out.extend_from_slice(&coro_rpc::error_body(coro_rpc::MSG_FUNCTION_NOT_REGISTERED));
    coro_rpc::ERR_FUNCTION_NOT_REGISTERED
}

/// A batch result; a failure of the whole call becomes one error per input.
fn per_input<T>(n: usize, r: MasterResult<Vec<MasterResult<T>>>) -> Vec<MasterResult<T>> {
    r.unwrap_or_else(|e| (0..n).map(|_| Err(e)).collect())
}

/// One row of the RPC table as a dispatch arm's call: borrow the decoded arguments,
/// call the API, shape the result for the wire.
macro_rules! serve_row {
    ($api:ident, { $(#[$doc:meta])* $m:ident: $args:ty => $wret:ty;
       [$kind:ident $($count:ident)? $(, $default:ident)?]
       fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; }) => {
        |($($arg,)*)| serve_row!(@$kind [$($count)?], $api.$name($(WireArg::from_wire(&$arg)),*))
    };
    (@one [], $result:expr) => {
        $result
    };
    (@batch [$count:ident], $result:expr) => {
        per_input($count.len(), $result)
    };
    (@long [], $result:expr) => {
        $result.unwrap_or_else(|e| i64::from(e.0))
    };
    (@map [], $result:expr) => {
        $result.map(Map)
    };
}

/// The server's half of the RPC table: one arm per RPC; a disk-tier RPC goes to the
/// API's disk tier, or is "function not registered" without one.
macro_rules! dispatch_arms {
    (all [$($all:tt)*]
     master [$({ $(#[$mdoc:meta])* $mm:ident: $($mrow:tt)* })*]
     tier [$({ $(#[$tdoc:meta])* $tm:ident: $($trow:tt)* })*]) => {
        fn dispatch(api: &dyn MasterApi, m: Method, b: &[u8], out: &mut Vec<u8>) -> u8 {
            match m {
                $(Method::$mm => call::<rpc::$mm>(b, out, serve_row!(api, { $mm: $($mrow)* })),)*
                $(Method::$tm => match api.disk_tier() {
                    Some(tier) => call::<rpc::$tm>(b, out, serve_row!(tier, { $tm: $($trow)* })),
                    None => not_registered(m, out),
                },)*
            }
        }
    };
}

master_rpcs!(dispatch_arms);

/// Serves one client connection until it closes: reads request frames, handles them
/// in order, writes the responses (pipelined requests simply queue). A bad header or a
/// body or attachment over `max_body` ends this connection with an `InvalidData`
/// error; a clean close by the peer is `Ok(())`. The socket is shut down on return.
pub fn serve_stream(stream: TcpStream, api: &dyn MasterApi, max_body: usize) -> io::Result<()> {
    serve_stream_observed(stream, api, max_body, &mut |_, _| {})
}

/// [`serve_stream`], calling `observe` with the function id and body of every request
/// before it is handled (the master learns from it which clients a connection carries).
pub fn serve_stream_observed(
    stream: TcpStream,
    api: &dyn MasterApi,
    max_body: usize,
    observe: &mut dyn FnMut(u32, &[u8]),
) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    let control = stream.try_clone()?;
    let r = serve_loop(stream, api, max_body, observe);
    // Close even if the caller keeps clones of this socket.
    let _ = control.shutdown(Shutdown::Both);
    r
}

fn serve_loop(
    stream: TcpStream,
    api: &dyn MasterApi,
    max_body: usize,
    observe: &mut dyn FnMut(u32, &[u8]),
) -> io::Result<()> {
    let fd = stream.as_raw_fd();
    let mut reader = BufReader::with_capacity(64 << 10, stream.try_clone()?);
    let mut writer = BufWriter::with_capacity(64 << 10, stream);
    // One request body and one reply reused for every call of the connection.
    let mut body = Vec::new();
    let mut reply = Vec::new();
    let mut serving = Serving::start();
    loop {
        if reader.buffer().is_empty() {
            serving.await_request(fd);
        }
        let Some(h) = coro_rpc::read_request_into(&mut reader, max_body, &mut body)? else {
            break;
        };
        serving.resume();
        observe(h.function_id, &body);
        reply.clear();
        reply.resize(RESP_HEADER_LEN, 0);
        let mut err = if api.serving() {
            handle_request_into(api, h.function_id, &body, &mut reply)
        } else {
            reply.extend_from_slice(&coro_rpc::error_body(MSG_NOT_SERVING));
            coro_rpc::ERR_OPERATION_CANCELED
        };
        let body_len = u32::try_from(reply.len() - RESP_HEADER_LEN).unwrap_or_else(|_| {
            err = 14; // message_too_large
            reply.truncate(RESP_HEADER_LEN);
            reply.extend_from_slice(&coro_rpc::error_body("body larger than 4G"));
            (reply.len() - RESP_HEADER_LEN) as u32
        });
        reply[..RESP_HEADER_LEN]
            .copy_from_slice(&ResponseHeader::new(h.seq, err, body_len).to_bytes());
        // No reply leaves before the API allows it (`before_reply`): not through a
        // full buffer either.
        if writer.buffer().len() + reply.len() > writer.capacity() {
            release_replies(api, &mut writer)?;
        }
        writer.write_all(&reply)?;
        // Coalesce replies while another whole request is already buffered; flush
        // before anything could block on the socket.
        if !coro_rpc::whole_request_at_front(reader.buffer()) {
            release_replies(api, &mut writer)?;
        }
        shrink_if_large(&mut body);
        shrink_if_large(&mut reply);
    }
    release_replies(api, &mut writer)
}

/// Connection threads of this process handling a request now (not waiting for one).
static SERVING: AtomicUsize = AtomicUsize::new(0);

/// One connection thread's place in [`SERVING`]. A thread about to wait for its next
/// request busy-polls for it first (`MC_BUSY_POLL_US`, within [`busy_poll`]'s cap on
/// spinning threads) only while no other connection is being served: a lone client
/// calling one request after another then gets its answer without the master's thread
/// being put to sleep and woken for every call, and under load, where a spinning
/// thread would take a CPU from the threads with work, every thread sleeps at once
/// (and a spinning thread stops as soon as another starts serving).
struct Serving {
    counted: bool,
}

impl Serving {
    fn start() -> Serving {
        SERVING.fetch_add(1, Ordering::AcqRel);
        Serving { counted: true }
    }

    /// Leaves the count and, when no other connection is being served, busy-polls
    /// `fd` until it is readable or the budget is spent. The read that follows blocks
    /// as before (with the socket's idle timeout).
    fn await_request(&mut self, fd: std::os::fd::RawFd) {
        if self.counted {
            self.counted = false;
            if SERVING.fetch_sub(1, Ordering::AcqRel) == 1 {
                let spin = crate::config::Config::global().busy_poll_budget();
                // A poll error is the read's to report.
                let _ = busy_poll::spin_until_readable_while(fd, spin, None, || {
                    SERVING.load(Ordering::Relaxed) == 0
                });
            }
        }
    }

    /// Counts the thread again once a request has arrived.
    fn resume(&mut self) {
        if !self.counted {
            self.counted = true;
            SERVING.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if self.counted {
            SERVING.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Gives back a reused buffer's memory after an exceptionally large message.
fn shrink_if_large(buf: &mut Vec<u8>) {
    const KEEP: usize = 1 << 20;
    if buf.capacity() > KEEP {
        *buf = Vec::new();
    }
}

/// The message of a request refused by a master that may not answer now.
const MSG_NOT_SERVING: &str = "this master is not serving (not the leader, or its lease lapsed)";

/// Sends the buffered replies once the API allows it (`before_reply`). A master that
/// stopped serving meanwhile (its lease lapsed while a change waited for standbys)
/// sends none of them: they are dropped and the connection ends, so its client asks
/// the next leader instead of taking an acknowledgement the next leader may not hold.
fn release_replies(api: &dyn MasterApi, writer: &mut BufWriter<TcpStream>) -> io::Result<()> {
    api.before_reply();
    if !api.serving() {
        // Shut first: the buffered replies cannot leave when the writer is dropped.
        let _ = writer.get_ref().shutdown(Shutdown::Both);
        return Err(io::Error::other("stopped serving; replies withheld"));
    }
    writer.flush()
}
