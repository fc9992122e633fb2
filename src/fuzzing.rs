//! Entry points for the fuzz targets (`fuzz/`) into decoders that are private to their
//! modules. Each function runs the real parser over a byte slice, as its socket reader
//! would; none duplicates parser code. Not part of the supported API.

use std::io::{BufRead, Cursor};

use serde_json::Value;

use crate::codec::zmtp::session::{self as zmtp, Filters};
use crate::metadata::{etcd, redis};
use crate::runtime::http_server::{self, ReadFail};

/// One HTTP request as the server's parser read it: method, target and body.
pub type HttpRequest = (String, String, Vec<u8>);

/// Parses `bytes` as the HTTP/1.1 server does on one connection: request after request
/// while the connection stays open. Each item is a request, or the status of the error
/// reply that ended the connection; a clean end of input ends the list.
pub fn http_requests(bytes: &[u8]) -> Vec<Result<HttpRequest, u16>> {
    let mut reader = Cursor::new(bytes);
    let mut sink = Vec::new();
    let mut out = Vec::new();
    while reader.fill_buf().is_ok_and(|b| !b.is_empty()) {
        let read = http_server::read_head(&mut reader).and_then(|head| {
            let body = http_server::read_body(&mut reader, &mut sink, &head)?;
            Ok((head, body))
        });
        match read {
            Ok((head, body)) => {
                let keep_alive = head.keep_alive;
                out.push(Ok((head.method, head.target, body)));
                if !keep_alive {
                    break;
                }
            }
            Err(ReadFail::Reply(status, _)) => {
                out.push(Err(status));
                break;
            }
            Err(ReadFail::Closed) => break,
        }
    }
    out
}

/// Reads Redis (RESP) replies from `bytes` as the metadata client does, until one fails
/// or the input ends; each as its debug text, the failure as its error message.
pub fn resp_replies(bytes: &[u8]) -> Vec<Result<String, String>> {
    let mut reader = Cursor::new(bytes);
    let mut out = Vec::new();
    while reader.fill_buf().is_ok_and(|b| !b.is_empty()) {
        match redis::read_reply(&mut reader) {
            Ok(reply) => out.push(Ok(format!("{reply:?}"))),
            Err(e) => {
                out.push(Err(e.to_string()));
                break;
            }
        }
    }
    out
}

/// Interprets `bytes` as a reply of the etcd JSON gateway to each request the metadata
/// store and the HA election send (lease grant, keep-alive, transaction, range read);
/// `None` when it is not JSON (the client's "bad reply").
pub fn etcd_reply(bytes: &[u8]) -> Option<String> {
    let reply: Value = serde_json::from_slice(bytes).ok()?;
    Some(format!(
        "{:?} {:?} {:?} {:?}",
        etcd::lease_granted(&reply),
        etcd::lease_kept(&reply),
        etcd::txn_revision(&reply),
        etcd::range_value("key", &reply),
    ))
}

/// Runs `bytes` through the subscriber side of the KV-event PUB socket as a
/// connection's reader does: the handshake, then frame after frame until the input
/// fails, ends or breaks the protocol. Returns how that went (the handshake's result,
/// the end, the prefixes held and the PONGs answered), as text.
pub fn zmtp_subscriber(bytes: &[u8]) -> String {
    let mut reader = Cursor::new(bytes);
    let mut sent = Vec::new();
    if let Err(e) = zmtp::handshake(&mut reader, &mut sent) {
        return format!("handshake: {e}");
    }
    let filters = parking_lot::Mutex::new(Filters::default());
    let mut pongs = 0usize;
    let end = zmtp::serve_requests(&mut reader, &filters, |_| {
        pongs += 1;
        Ok(())
    });
    let held = filters.lock().prefixes();
    let end = match end {
        Ok(()) => "closed".to_string(),
        Err(e) => format!("{:?}", e.kind()),
    };
    format!("end: {end}, prefixes: {held}, pongs: {pongs}")
}
