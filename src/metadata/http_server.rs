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
//!
//! By job: `table.rs` the table ([`MetadataTable`]); `preconditions.rs` `If-Match` and
//! `If-None-Match` ([`Preconditions`]); `query.rs` the target's path and parameters;
//! `answers.rs` each key's reply with its `ETag`, and the listing; `routes.rs` the
//! routing ([`handle_request_with_headers`]); this file the server
//! ([`HttpMetadataServer`]).

mod answers;
mod preconditions;
mod query;
mod routes;
mod table;

use std::net::SocketAddr;
use std::sync::Arc;

use crate::error::Result;
pub use crate::runtime::http_server::{
    HeadedReply, HttpReply, MAX_BODY_BYTES, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER,
    MAX_HEAD_BYTES,
};
use crate::runtime::http_server::{HttpHandler, HttpServer};
pub use preconditions::{Preconditions, Tags};
pub use routes::{handle_request, handle_request_with_headers};
pub use table::{MetadataTable, PutOutcome, RemoveOutcome};

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
