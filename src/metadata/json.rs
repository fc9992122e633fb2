//! The JSON decoding steps metadata documents share: parse, then insist on an object,
//! each failure an [`Error::MalformedJson`] naming the document.

use crate::error::{Error, Result};
use serde_json::{Map, Value};

/// Parses `bytes` as JSON; a syntax error reads `"{what}: {error}"`.
pub(crate) fn parse(bytes: &[u8], what: &str) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| Error::MalformedJson(format!("{what}: {e}")))
}

/// The object `value` holds; anything else reads `"{what} is not an object"`.
pub(crate) fn object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>> {
    value
        .as_object()
        .ok_or_else(|| Error::MalformedJson(format!("{what} is not an object")))
}
