//! The answers of `/metadata`: one key's `GET`, `PUT` or `DELETE` as an HTTP reply with
//! the version in `ETag` (412 for a failed precondition), and a prefix's listing as
//! JSON.

use serde_json::{json, Value};

use super::preconditions::Preconditions;
use super::table::{MetadataTable, PutOutcome, RemoveOutcome};
use crate::codec::base64;
use crate::metadata::versioned::Versioned;
use crate::runtime::http_server::{HeadedReply, HttpReply};

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
pub(super) fn get_key(table: &MetadataTable, key: &str) -> HeadedReply {
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
pub(super) fn put_key(
    table: &MetadataTable,
    key: &str,
    body: &[u8],
    pre: &Preconditions,
) -> HeadedReply {
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
pub(super) fn delete_key(table: &MetadataTable, key: &str, pre: &Preconditions) -> HeadedReply {
    match table.remove_if(key, pre) {
        RemoveOutcome::Removed(v) => tagged(HttpReply::text(200, "metadata deleted"), v),
        RemoveOutcome::NotFound => HttpReply::text(404, "metadata not found").into(),
        RemoveOutcome::PreconditionFailed => precondition_failed(),
    }
}

/// The keys that start with `prefix` as a JSON array of `{"key", "value" (base64),
/// "version"}`, in key order.
pub(super) fn list_prefix(table: &MetadataTable, prefix: &str) -> HttpReply {
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
