//! JSON bodies and replies shared by the conductor's HTTP API ([`super::api`]) and its
//! indexer API ([`super::indexer`]): the reply shapes, body parsing (a handler gets its body parsed), the handlers'
//! early-refusal result and the request size bound.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::runtime::http_server::HttpReply;

/// Most block hashes in one request or report.
pub const MAX_HASHES: usize = 1 << 20;

/// A JSON reply.
pub fn json_reply<T: Serialize + ?Sized>(status: u16, value: &T) -> HttpReply {
    HttpReply {
        status,
        content_type: "application/json",
        body: serde_json::to_vec(value).unwrap_or_default(),
    }
}

/// An error reply: `{"error": message}`.
pub fn error(status: u16, message: &str) -> HttpReply {
    json_reply(status, &json!({ "error": message }))
}

/// Parses a JSON body, or the 400 that says why it cannot be.
pub fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, HttpReply> {
    serde_json::from_slice(body).map_err(|e| error(400, &format!("bad request body: {e}")))
}

/// What a handler answers: `Err` is a refusal that ended it early (a bad body, a value
/// out of range), `Ok` what it did; either is sent as it is.
pub type Answer = Result<HttpReply, HttpReply>;

/// The reply an [`Answer`] sends.
pub fn send(answer: Answer) -> HttpReply {
    answer.unwrap_or_else(|refusal| refusal)
}

/// The reply to a request with a JSON body: what `handler` answers to the body, or the
/// 400 of a body that does not [`parse`].
pub fn answer<'a, T: Deserialize<'a>>(
    body: &'a [u8],
    handler: impl FnOnce(T) -> Answer,
) -> HttpReply {
    send(parse(body).and_then(handler))
}
