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
//! Versions, an extension upstream's clients never see (they send none of its headers
//! and no `prefix`, and get the answers above): every write of a key takes the next
//! number of a table-wide counter (the first write is 1; a delete takes none), the key's
//! version, written as the entity tag `"<version>"`.
//!
//! * Every 200 on a key answers `ETag: "<version>"`: a `GET` the version read, a `PUT`
//!   the version stored (or found unchanged), a `DELETE` the version removed.
//! * `PUT` and `DELETE` honour `If-Match: "<version>"` (or a list of tags, or `*`:
//!   any version) and `If-None-Match: *` (or a list of tags), checked before anything
//!   else: 412 `Precondition Failed` when `If-Match` names no current version (the key
//!   is absent or has another) or `If-None-Match` names one (`*`: the key exists). Weak
//!   or malformed tags never match. A `GET` ignores both.
//! * `GET /metadata?prefix=<url-encoded prefix>` (no `key` parameter) lists the keys
//!   that start with the prefix (an empty one lists all) as a JSON array in key order,
//!   each `{"key": "<key>", "value": "<base64 of the bytes>", "version": <n>}`.
//!
//! The HTTP/1.1 layer is [`crate::runtime::http_server`].

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::RwLock;
use percent_encoding::percent_decode;
use serde_json::{json, Value};

use super::versioned::{Versioned, VersionedMap};
use crate::codec::base64;
use crate::error::Result;
pub use crate::runtime::http_server::{
    HeadedReply, HttpReply, MAX_BODY_BYTES, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER,
    MAX_HEAD_BYTES,
};
use crate::runtime::http_server::{HttpHandler, HttpServer};

/// What [`MetadataTable::put`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The value was stored (new key, or an overwrite allowed by the rules) at this
    /// version.
    Stored(u64),
    /// The key contains `rpc_meta`, already existed at this version, and the body was
    /// identical.
    Unchanged(u64),
    /// The key contains `rpc_meta`, already existed, and the body differed; nothing changed.
    DuplicateRpcMeta,
    /// A precondition failed; nothing changed.
    PreconditionFailed,
}

/// What [`MetadataTable::remove_if`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoveOutcome {
    /// The key was removed; the version it had.
    Removed(u64),
    /// The key did not exist (and no precondition asked for it).
    NotFound,
    /// A precondition failed; nothing changed.
    PreconditionFailed,
}

/// The entity tags of one `If-Match` or `If-None-Match` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tags {
    /// `*`: any current version.
    Any,
    /// These versions (`"<n>"` each); weak and malformed tags are left out, since they
    /// never match under the strong comparison these conditions use.
    Versions(Vec<u64>),
}

impl Tags {
    /// Parses a field value: `*`, or a comma-separated list of entity tags.
    pub fn parse(value: &str) -> Tags {
        let mut versions = Vec::new();
        for tag in value.split(',').map(str::trim) {
            if tag == "*" {
                return Tags::Any;
            }
            let digits = tag.strip_prefix('"').and_then(|t| t.strip_suffix('"'));
            let version = digits
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u64>().ok());
            versions.extend(version);
        }
        Tags::Versions(versions)
    }

    /// Whether a key at `current` (`None`: absent) matches.
    pub fn matches(&self, current: Option<u64>) -> bool {
        match self {
            Tags::Any => current.is_some(),
            Tags::Versions(versions) => current.is_some_and(|c| versions.contains(&c)),
        }
    }
}

/// The preconditions of a `PUT` or `DELETE` (RFC 9110 §13.1.1-2, over the versions).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// `If-Match`: the key must exist at one of these.
    pub if_match: Option<Tags>,
    /// `If-None-Match`: the key must not exist at one of these (`*`: must not exist).
    pub if_none_match: Option<Tags>,
}

impl Preconditions {
    /// Reads `If-Match` and `If-None-Match` from request header fields (names in any
    /// case; a field sent twice counts as one list).
    pub fn from_headers(headers: &[(String, String)]) -> Preconditions {
        let field = |name: &str| {
            let values: Vec<&str> = headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
                .collect();
            (!values.is_empty()).then(|| Tags::parse(&values.join(",")))
        };
        Preconditions {
            if_match: field("if-match"),
            if_none_match: field("if-none-match"),
        }
    }

    /// Whether they hold for a key at `current` (`None`: absent).
    pub fn hold(&self, current: Option<u64>) -> bool {
        let matched = self.if_match.as_ref().map_or(true, |t| t.matches(current));
        let none_matched = self
            .if_none_match
            .as_ref()
            .map_or(true, |t| !t.matches(current));
        matched && none_matched
    }
}

/// The in-memory key-value table behind the metadata server, shareable with other services
/// (e.g. an embedding master) through an `Arc`. Every key carries a version (see the
/// module's documentation).
#[derive(Debug, Default)]
pub struct MetadataTable {
    map: RwLock<VersionedMap>,
}

impl MetadataTable {
    /// Creates an empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns a copy of the value stored under `key`.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.map.read().get(key).map(|v| v.value.clone())
    }

    /// Returns a copy of the value stored under `key` with its version.
    pub fn get_versioned(&self, key: &str) -> Option<Versioned> {
        self.map.read().get(key).cloned()
    }

    /// Stores `value` under `key` with upstream's rule: an existing key containing
    /// `rpc_meta` may only be re-put with a byte-identical body.
    pub fn put(&self, key: &str, value: Vec<u8>) -> PutOutcome {
        self.put_if(key, value, &Preconditions::default())
    }

    /// [`put`](Self::put) if `pre` holds for `key` (checked first, under the same lock).
    pub fn put_if(&self, key: &str, value: Vec<u8>, pre: &Preconditions) -> PutOutcome {
        let mut map = self.map.write();
        if !pre.hold(map.version_of(key)) {
            return PutOutcome::PreconditionFailed;
        }
        if key.contains("rpc_meta") {
            if let Some(old) = map.get(key) {
                return if old.value == value {
                    PutOutcome::Unchanged(old.version)
                } else {
                    PutOutcome::DuplicateRpcMeta
                };
            }
        }
        PutOutcome::Stored(map.insert(key, value))
    }

    /// Removes `key`; returns whether it existed.
    pub fn remove(&self, key: &str) -> bool {
        matches!(
            self.remove_if(key, &Preconditions::default()),
            RemoveOutcome::Removed(_)
        )
    }

    /// Removes `key` if `pre` holds for it (checked first, under the same lock).
    pub fn remove_if(&self, key: &str, pre: &Preconditions) -> RemoveOutcome {
        let mut map = self.map.write();
        if !pre.hold(map.version_of(key)) {
            RemoveOutcome::PreconditionFailed
        } else {
            map.remove(key).map_or(RemoveOutcome::NotFound, |v| {
                RemoveOutcome::Removed(v.version)
            })
        }
    }

    /// Every key that starts with `prefix`, with value and version, in key order.
    pub fn list(&self, prefix: &str) -> Vec<(String, Versioned)> {
        self.map.read().list(prefix)
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
        self.map.read().keys()
    }
}

/// Routes one request against `table`: `method` is the HTTP method as sent, `target` the
/// request target (`/metadata?key=...`, or absolute-form), `body` the request body. The
/// request has no header fields, so no precondition, and the reply's `ETag` is dropped.
pub fn handle_request(table: &MetadataTable, method: &str, target: &str, body: &[u8]) -> HttpReply {
    handle_request_with_headers(table, method, target, &[], body).reply
}

/// Routes one request with its header fields against `table` (see the module's
/// documentation for the routes, the versions and the preconditions).
pub fn handle_request_with_headers(
    table: &MetadataTable,
    method: &str,
    target: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> HeadedReply {
    let (path, query) = split_target(target);
    match path {
        "/health" if method == "GET" => HttpReply::text(200, "OK").into(),
        "/health" => HttpReply::text(405, "Method not allowed").into(),
        "/metadata" => metadata_route(table, method, query, headers, body),
        _ => HttpReply::text(404, "Not found").into(),
    }
}

/// `/metadata`: one key by `key`, or (GET without `key`) a listing by `prefix`.
fn metadata_route(
    table: &MetadataTable,
    method: &str,
    query: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> HeadedReply {
    if !matches!(method, "GET" | "PUT" | "DELETE") {
        return HttpReply::text(405, "Method not allowed").into();
    }
    let key = match query_param(query, "key") {
        Some(Ok(k)) if !k.is_empty() => k,
        Some(Err(())) => return HttpReply::text(400, "Invalid key parameter").into(),
        None if method == "GET" => match query_param(query, "prefix") {
            Some(Ok(prefix)) => return list_prefix(table, &prefix).into(),
            Some(Err(())) => return HttpReply::text(400, "Invalid prefix parameter").into(),
            None => return HttpReply::text(400, "Missing key parameter").into(),
        },
        _ => return HttpReply::text(400, "Missing key parameter").into(),
    };
    let pre = Preconditions::from_headers(headers);
    match method {
        "GET" => get_key(table, &key),
        "PUT" => put_key(table, &key, body, &pre),
        _ => delete_key(table, &key, &pre),
    }
}

/// `reply` with `ETag: "<version>"`.
fn tagged(reply: HttpReply, version: u64) -> HeadedReply {
    HeadedReply {
        reply,
        headers: vec![("ETag", format!("\"{version}\""))],
    }
}

/// 412, for a precondition that failed.
fn precondition_failed() -> HeadedReply {
    HttpReply::text(412, "Precondition Failed").into()
}

/// `GET` of a key: its value, with its version as the `ETag`.
fn get_key(table: &MetadataTable, key: &str) -> HeadedReply {
    match table.get_versioned(key) {
        Some(Versioned { value, version }) => tagged(
            HttpReply {
                status: 200,
                content_type: "application/json",
                body: value,
            },
            version,
        ),
        None => HttpReply::text(404, "metadata not found").into(),
    }
}

/// `PUT` of a key under upstream's `rpc_meta` rule and the preconditions.
fn put_key(table: &MetadataTable, key: &str, body: &[u8], pre: &Preconditions) -> HeadedReply {
    match table.put_if(key, body.to_vec(), pre) {
        PutOutcome::Stored(v) => tagged(HttpReply::text(200, "metadata updated"), v),
        PutOutcome::Unchanged(v) => tagged(HttpReply::text(200, "metadata unchanged"), v),
        PutOutcome::DuplicateRpcMeta => {
            HttpReply::text(400, "Duplicate rpc_meta key not allowed").into()
        }
        PutOutcome::PreconditionFailed => precondition_failed(),
    }
}

/// `DELETE` of a key under the preconditions.
fn delete_key(table: &MetadataTable, key: &str, pre: &Preconditions) -> HeadedReply {
    match table.remove_if(key, pre) {
        RemoveOutcome::Removed(v) => tagged(HttpReply::text(200, "metadata deleted"), v),
        RemoveOutcome::NotFound => HttpReply::text(404, "metadata not found").into(),
        RemoveOutcome::PreconditionFailed => precondition_failed(),
    }
}

/// The keys that start with `prefix` as a JSON array (see the module's documentation).
fn list_prefix(table: &MetadataTable, prefix: &str) -> HttpReply {
    let entries: Vec<Value> = table
        .list(prefix)
        .into_iter()
        .map(
            |(key, v)| json!({"key": key, "value": base64::encode(&v.value), "version": v.version}),
        )
        .collect();
    HttpReply {
        status: 200,
        content_type: "application/json",
        body: Value::Array(entries).to_string().into_bytes(),
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

    fn handle_with_headers(
        &self,
        method: &str,
        target: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> HeadedReply {
        handle_request_with_headers(&self.0, method, target, headers, body)
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

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    fn call(
        tb: &MetadataTable,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> HeadedReply {
        handle_request_with_headers(tb, method, target, &h(headers), body)
    }

    fn etag(reply: &HeadedReply) -> Option<&str> {
        reply
            .headers
            .iter()
            .find(|(n, _)| *n == "ETag")
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn the_plain_protocol_is_unchanged_and_gets_etags() {
        let tb = t();
        let k = "/metadata?key=mooncake%2Fram%2Fx";
        for (method, body, status, text) in [
            ("GET", &b""[..], 404, &b"metadata not found"[..]),
            ("PUT", b"v1", 200, b"metadata updated"),
            ("GET", b"", 200, b"v1"),
            ("PUT", b"v2", 200, b"metadata updated"),
            ("DELETE", b"", 200, b"metadata deleted"),
            ("DELETE", b"", 404, b"metadata not found"),
        ] {
            // Without headers (as upstream's clients send) and through the plain entry.
            let r = call(&tb, method, k, &[("Host", "x")], body);
            assert_eq!(
                (r.reply.status, r.reply.body.as_slice()),
                (status, text),
                "{method}"
            );
            if method == "GET" && status == 200 {
                assert_eq!(r.reply.content_type, "application/json");
            }
            assert_eq!(etag(&r).is_some(), status == 200, "{method}");
            if method == "PUT" {
                // The plain entry answers the same.
                let plain = handle_request(&tb, method, k, body);
                assert_eq!((plain.status, plain.body.as_slice()), (status, text));
            }
        }
        // A prefix is no key to a PUT or DELETE.
        assert_eq!(
            handle_request(&tb, "PUT", "/metadata?prefix=a", b"x").status,
            400
        );
        assert_eq!(
            handle_request(&tb, "DELETE", "/metadata?prefix=a", b"").status,
            400
        );
        assert_eq!(
            handle_request(&tb, "GET", "/metadata?key=&prefix=a", b"").status,
            400
        );
    }

    #[test]
    fn versions_come_from_one_counter_and_show_in_etags() {
        let tb = t();
        let a = call(&tb, "PUT", "/metadata?key=a", &[], b"1");
        let b = call(&tb, "PUT", "/metadata?key=b", &[], b"2");
        assert_eq!((etag(&a), etag(&b)), (Some("\"1\""), Some("\"2\"")));
        assert_eq!(
            etag(&call(&tb, "GET", "/metadata?key=a", &[], b"")),
            Some("\"1\"")
        );
        call(&tb, "DELETE", "/metadata?key=a", &[], b"");
        let again = call(&tb, "PUT", "/metadata?key=a", &[], b"3");
        assert_eq!(
            etag(&again),
            Some("\"3\""),
            "a re-created key's version still grows"
        );
        assert_eq!(tb.get_versioned("a").unwrap().version, 3);
        // rpc_meta's identical re-put is no write: same version.
        let m = "/metadata?key=x%2Frpc_meta%2Fy";
        let first = call(&tb, "PUT", m, &[], b"m");
        let same = call(&tb, "PUT", m, &[], b"m");
        assert_eq!(same.reply.body, b"metadata unchanged");
        assert_eq!(etag(&first), etag(&same));
    }

    #[test]
    fn preconditions_answer_412() {
        let tb = t();
        let k = "/metadata?key=k";
        let create = [("If-None-Match", "*")];
        assert_eq!(call(&tb, "PUT", k, &create, b"a").reply.status, 200);
        let r = call(&tb, "PUT", k, &create, b"b");
        assert_eq!(
            (r.reply.status, r.reply.body.as_slice()),
            (412, &b"Precondition Failed"[..])
        );
        assert_eq!(tb.get("k").unwrap(), b"a");
        let v = tb.get_versioned("k").unwrap().version;
        let now = format!("\"{v}\"");
        let stale = format!("\"{}\"", v + 7);
        for (method, tag, status) in [
            ("PUT", stale.as_str(), 412),
            ("DELETE", stale.as_str(), 412),
            ("PUT", "W/\"1\"", 412),
            ("PUT", "1", 412),
            ("PUT", "garbage", 412),
            ("PUT", now.as_str(), 200),
            // The version moved on.
            ("PUT", now.as_str(), 412),
            ("DELETE", now.as_str(), 412),
        ] {
            let r = call(&tb, method, k, &[("if-match", tag)], b"c");
            assert_eq!(r.reply.status, status, "{method} If-Match {tag}");
        }
        let v2 = tb.get_versioned("k").unwrap().version;
        assert!(v2 > v);
        // A list of tags, one of them current; then `*`.
        let list = format!("\"{v}\", \"{v2}\"");
        assert_eq!(
            call(&tb, "PUT", k, &[("If-Match", &list)], b"d")
                .reply
                .status,
            200
        );
        assert_eq!(
            call(&tb, "DELETE", k, &[("If-Match", "*")], b"")
                .reply
                .status,
            200
        );
        // Gone: If-Match fails with 412, not 404; If-None-Match creates.
        assert_eq!(
            call(&tb, "DELETE", k, &[("If-Match", "*")], b"")
                .reply
                .status,
            412
        );
        assert_eq!(
            call(&tb, "PUT", k, &[("If-Match", &now)], b"e")
                .reply
                .status,
            412
        );
        assert_eq!(tb.get("k"), None);
        assert_eq!(call(&tb, "DELETE", k, &[], b"").reply.status, 404);
        // GET ignores preconditions.
        call(&tb, "PUT", k, &[], b"f");
        assert_eq!(
            call(&tb, "GET", k, &[("If-Match", "\"0\"")], b"")
                .reply
                .status,
            200
        );
        assert_eq!(
            call(&tb, "GET", k, &[("If-None-Match", "*")], b"")
                .reply
                .status,
            200
        );
    }

    #[test]
    fn tags_parse_strictly() {
        assert_eq!(Tags::parse("*"), Tags::Any);
        assert_eq!(Tags::parse(" \"1\", *"), Tags::Any);
        assert_eq!(
            Tags::parse("\"12\",W/\"3\", \"x\", \"\", 4"),
            Tags::Versions(vec![12])
        );
        assert_eq!(
            Tags::parse("\"99999999999999999999999\""),
            Tags::Versions(vec![])
        );
        assert!(!Tags::Any.matches(None));
        let pre = Preconditions::from_headers(&h(&[("If-Match", "\"1\""), ("IF-MATCH", "\"2\"")]));
        assert_eq!(pre.if_match, Some(Tags::Versions(vec![1, 2])));
        assert!(pre.hold(Some(2)) && !pre.hold(Some(3)) && !pre.hold(None));
        assert!(Preconditions::default().hold(None));
    }

    #[test]
    fn lists_by_prefix_in_key_order() {
        let tb = t();
        for key in ["p/b", "p/a", "q/a", "p", "p/a/x"] {
            tb.put(key, key.as_bytes().to_vec());
        }
        tb.put("p/bin", vec![0, 255]);
        let list = |target: &str| -> Vec<Value> {
            let r = call(&tb, "GET", target, &[], b"");
            assert_eq!(r.reply.status, 200, "{target}");
            assert_eq!(r.reply.content_type, "application/json");
            serde_json::from_slice::<Vec<Value>>(&r.reply.body).unwrap()
        };
        let got = list("/metadata?prefix=p%2F");
        let keys: Vec<&str> = got.iter().map(|e| e["key"].as_str().unwrap()).collect();
        assert_eq!(keys, ["p/a", "p/a/x", "p/b", "p/bin"]);
        assert_eq!(got[0]["value"], base64::encode(b"p/a"));
        assert_eq!(got[3]["value"], "AP8=");
        assert_eq!(got[3]["version"], 6);
        assert_eq!(got[0]["version"], tb.get_versioned("p/a").unwrap().version);
        assert_eq!(list("/metadata?prefix=").len(), 6);
        assert!(list("/metadata?prefix=zz").is_empty());
        assert_eq!(
            call(&tb, "GET", "/metadata?prefix=%FF", &[], b"")
                .reply
                .status,
            400
        );
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
