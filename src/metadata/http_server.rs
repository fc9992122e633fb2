//! Blocking HTTP metadata server with the semantics of upstream
//! `mooncake_master --enable_http_metadata_server` (spec §2.4).
//!
//! Routes:
//!
//! * `GET|PUT|DELETE /metadata?key=<url-encoded key>`: read, write or delete one key. A
//!   missing or empty `key` gets 400, a GET or DELETE of a missing key gets 404
//!   `metadata not found`, and a PUT of an existing key containing `rpc_meta` gets 400
//!   `Duplicate rpc_meta key not allowed` unless the body is byte-identical (then 200
//!   `metadata unchanged`). Other methods get 405.
//! * `GET /health`: 200 `OK`.
//! * anything else: 404.
//!
//! The HTTP/1.1 layer is [`crate::runtime::http_server`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::RwLock;
use percent_encoding::percent_decode;

use crate::error::Result;
use crate::runtime::http_server::{HttpHandler, HttpServer};
pub use crate::runtime::http_server::{
    HttpReply, MAX_BODY_BYTES, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER, MAX_HEAD_BYTES,
};

/// What [`MetadataTable::put`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The value was stored (new key, or an overwrite allowed by the rules).
    Stored,
    /// The key contains `rpc_meta`, already existed, and the body was identical.
    Unchanged,
    /// The key contains `rpc_meta`, already existed, and the body differed; nothing changed.
    DuplicateRpcMeta,
}

/// The in-memory key-value table behind the metadata server, shareable with other services
/// (e.g. an embedding master) through an `Arc`.
#[derive(Debug, Default)]
pub struct MetadataTable {
    map: RwLock<HashMap<String, Vec<u8>>>,
}

impl MetadataTable {
    /// Creates an empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns a copy of the value stored under `key`.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.map.read().get(key).cloned()
    }

    /// Stores `value` under `key` with upstream's rule: an existing key containing
    /// `rpc_meta` may only be re-put with a byte-identical body.
    pub fn put(&self, key: &str, value: Vec<u8>) -> PutOutcome {
        let mut map = self.map.write();
        if key.contains("rpc_meta") {
            if let Some(old) = map.get(key) {
                return if *old == value {
                    PutOutcome::Unchanged
                } else {
                    PutOutcome::DuplicateRpcMeta
                };
            }
        }
        map.insert(key.to_string(), value);
        PutOutcome::Stored
    }

    /// Removes `key`; returns whether it existed.
    pub fn remove(&self, key: &str) -> bool {
        self.map.write().remove(key).is_some()
    }

    /// Number of keys stored.
    pub fn len(&self) -> usize {
        self.map.read().len()
    }

    /// Whether the table holds no keys.
    pub fn is_empty(&self) -> bool {
        self.map.read().is_empty()
    }

    /// All keys, sorted (for diagnostics).
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.map.read().keys().cloned().collect();
        keys.sort();
        keys
    }
}

/// Routes one request against `table`: `method` is the HTTP method as sent, `target` the
/// request target (`/metadata?key=...`, or absolute-form), `body` the request body.
pub fn handle_request(table: &MetadataTable, method: &str, target: &str, body: &[u8]) -> HttpReply {
    let (path, query) = split_target(target);
    match path {
        "/health" => {
            if method == "GET" {
                HttpReply::text(200, "OK")
            } else {
                HttpReply::text(405, "Method not allowed")
            }
        }
        "/metadata" => {
            if !matches!(method, "GET" | "PUT" | "DELETE") {
                return HttpReply::text(405, "Method not allowed");
            }
            let key = match query_param(query, "key") {
                Some(Ok(k)) if !k.is_empty() => k,
                Some(Err(())) => return HttpReply::text(400, "Invalid key parameter"),
                _ => return HttpReply::text(400, "Missing key parameter"),
            };
            match method {
                "GET" => match table.get(&key) {
                    Some(value) => HttpReply {
                        status: 200,
                        content_type: "application/json",
                        body: value,
                    },
                    None => HttpReply::text(404, "metadata not found"),
                },
                "PUT" => match table.put(&key, body.to_vec()) {
                    PutOutcome::Stored => HttpReply::text(200, "metadata updated"),
                    PutOutcome::Unchanged => HttpReply::text(200, "metadata unchanged"),
                    PutOutcome::DuplicateRpcMeta => {
                        HttpReply::text(400, "Duplicate rpc_meta key not allowed")
                    }
                },
                _ => {
                    if table.remove(&key) {
                        HttpReply::text(200, "metadata deleted")
                    } else {
                        HttpReply::text(404, "metadata not found")
                    }
                }
            }
        }
        _ => HttpReply::text(404, "Not found"),
    }
}

/// Splits a request target into path and query, accepting absolute-form
/// (`http://host/path?q`) as well as origin-form (`/path?q`).
fn split_target(target: &str) -> (&str, &str) {
    let mut t = target;
    if let Some(rest) = t
        .strip_prefix("http://")
        .or_else(|| t.strip_prefix("https://"))
    {
        t = rest.find('/').map_or("/", |i| &rest[i..]);
    }
    let t = t.split('#').next().unwrap_or("");
    match t.split_once('?') {
        Some((p, q)) => (p, q),
        None => (t, ""),
    }
}

/// Finds the first `name` parameter in an `application/x-www-form-urlencoded` query and
/// decodes it (`+` is a space, `%XX` a byte). `Err` when the value is not UTF-8.
fn query_param(query: &str, name: &str) -> Option<std::result::Result<String, ()>> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if form_decode(k).ok()? != name {
            return None;
        }
        Some(form_decode(v))
    })
}

fn form_decode(s: &str) -> std::result::Result<String, ()> {
    let plus = s.replace('+', " ");
    let bytes: Vec<u8> = percent_decode(plus.as_bytes()).collect();
    String::from_utf8(bytes).map_err(|_| ())
}

/// Serves a [`MetadataTable`] over HTTP.
struct MetadataHandler(Arc<MetadataTable>);

impl HttpHandler for MetadataHandler {
    fn handle(&self, method: &str, target: &str, body: &[u8]) -> HttpReply {
        handle_request(&self.0, method, target, body)
    }
}

/// A running HTTP metadata server. Dropping it (or calling [`stop`](Self::stop)) stops
/// accepting, closes every connection and joins every thread.
#[derive(Debug)]
pub struct HttpMetadataServer {
    server: HttpServer,
    table: Arc<MetadataTable>,
}

impl HttpMetadataServer {
    /// Binds `bind` (port 0 picks a free port) and starts serving a fresh, empty table.
    pub fn start(bind: SocketAddr) -> Result<HttpMetadataServer> {
        Self::start_with_table(bind, Arc::new(MetadataTable::new()))
    }

    /// Binds `bind` and starts serving `table`, which the caller may keep using directly.
    pub fn start_with_table(
        bind: SocketAddr,
        table: Arc<MetadataTable>,
    ) -> Result<HttpMetadataServer> {
        let handler = Arc::new(MetadataHandler(table.clone()));
        let server = HttpServer::start(bind, "HTTP metadata server", handler)?;
        Ok(HttpMetadataServer { server, table })
    }

    /// The address actually bound (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The table being served.
    pub fn table(&self) -> &Arc<MetadataTable> {
        &self.table
    }

    /// Stops the server and joins its threads (same as dropping it).
    pub fn stop(self) {
        self.server.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> MetadataTable {
        MetadataTable::new()
    }

    #[test]
    fn routes_and_semantics() {
        let tb = t();
        let k = "/metadata?key=mooncake%2Frpc_meta%2F127.0.0.1%3A12345";
        assert_eq!(handle_request(&tb, "GET", k, b"").status, 404);
        assert_eq!(handle_request(&tb, "PUT", k, b"{\"a\":1}").status, 200);
        assert_eq!(
            tb.get("mooncake/rpc_meta/127.0.0.1:12345").as_deref(),
            Some(&b"{\"a\":1}"[..])
        );
        let r = handle_request(&tb, "PUT", k, b"{\"a\":1}");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"metadata unchanged"[..])
        );
        let r = handle_request(&tb, "PUT", k, b"{\"a\":2}");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (400, &b"Duplicate rpc_meta key not allowed"[..])
        );
        let r = handle_request(&tb, "GET", k, b"");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{\"a\":1}"[..]));
        assert_eq!(r.content_type, "application/json");
        assert_eq!(handle_request(&tb, "DELETE", k, b"").status, 200);
        assert_eq!(handle_request(&tb, "DELETE", k, b"").status, 404);
        // Non-rpc_meta keys overwrite freely.
        let r = "/metadata?key=mooncake%2Fram%2Fx";
        assert_eq!(handle_request(&tb, "PUT", r, b"1").status, 200);
        assert_eq!(handle_request(&tb, "PUT", r, b"2").status, 200);
        assert_eq!(tb.get("mooncake/ram/x").as_deref(), Some(&b"2"[..]));
    }

    #[test]
    fn errors() {
        let tb = t();
        for (method, target, status) in [
            ("GET", "/metadata", 400),
            ("GET", "/metadata?key=", 400),
            ("GET", "/metadata?x=1", 400),
            ("GET", "/metadata?key=%FF", 400),
            ("POST", "/metadata?key=a", 405),
            ("GET", "/other?key=a", 404),
            ("GET", "/metadata/?key=a", 404),
            ("GET", "/health", 200),
            ("GET", "*", 404),
        ] {
            let got = handle_request(&tb, method, target, b"").status;
            assert_eq!(got, status, "{method} {target}");
        }
    }

    #[test]
    fn decodes_queries() {
        assert_eq!(split_target("/a?b=c"), ("/a", "b=c"));
        assert_eq!(split_target("http://h:1/a?b"), ("/a", "b"));
        assert_eq!(split_target("http://h:1"), ("/", ""));
        assert_eq!(
            query_param("x=1&key=host%20name%3A1+2&key=z", "key"),
            Some(Ok("host name:1 2".to_string()))
        );
        assert_eq!(query_param("key", "key"), Some(Ok(String::new())));
        assert_eq!(query_param("a=b", "key"), None);
    }
}
