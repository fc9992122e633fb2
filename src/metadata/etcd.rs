//! etcd metadata (spec §2.1): plain put, get and delete of upstream's keys and values
//! through etcd's v3 JSON gateway (`POST /v3/kv/range|put|deleterange`, keys and
//! values base64), over the blocking HTTP client, so no async runtime runs inside the
//! library. Upstream's Go client and this one see the same data. Every operation has
//! upstream's 5 s deadline and moves on to the next endpoint when one does not answer.
//!
//! As a [`VersionedStore`] a key's version is its `mod_revision`, and the conditional
//! writes are the transactions upstream's Go P2P store sends through the official Go
//! client: create compares the key's `VERSION` with 0, compare-and-swap its `MOD`
//! revision with the version read; a list is the range from the prefix to the prefix
//! followed by the byte `0xFF`, as upstream's `List`. Keys and values are the same raw
//! bytes either way, so each side sees the other's writes.

use super::store::MetadataStore;
use super::versioned::{Swapped, Versioned, VersionedStore};
use crate::codec::base64;
use crate::codec::debug_by_field::debug_by_field;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::io::Read;
use std::time::Duration;

/// Upstream's per-operation timeout.
const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// Connect timeout per endpoint (within the operation's deadline).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(1500);
/// Largest response accepted.
const MAX_RESPONSE_BYTES: u64 = 64 << 20;

/// An etcd cluster reached through its endpoints.
pub struct EtcdMetadataStore {
    endpoints: Vec<String>,
    /// The endpoint that answered last (tried first).
    current: Mutex<usize>,
    agent: ureq::Agent,
}

debug_by_field!(EtcdMetadataStore, endpoints);

/// Splits an etcd endpoint list (`h1:2379,h2:2379`, `;` also separates; an optional
/// `etcd://` prefix, and `http://` per endpoint) into `http://host:port` base URLs.
pub fn parse_endpoints(list: &str) -> Result<Vec<String>> {
    let list = list.trim();
    let list = list.strip_prefix("etcd://").unwrap_or(list);
    let endpoints: Vec<String> = list
        .split([',', ';'])
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let bare = e.strip_prefix("http://").unwrap_or(e).trim_end_matches('/');
            if bare.starts_with("https://") {
                return Err(Error::NotImplemented(format!(
                    "etcd endpoint '{e}': https needs TLS, which this build does not include"
                )));
            }
            if bare.is_empty() || bare.contains('/') {
                return Err(Error::InvalidArgument(format!(
                    "malformed etcd endpoint '{e}'"
                )));
            }
            Ok(format!("http://{bare}"))
        })
        .collect::<Result<_>>()?;
    if endpoints.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "no etcd endpoint in '{list}'"
        )));
    }
    Ok(endpoints)
}

impl EtcdMetadataStore {
    /// A client of the cluster at `list` (see [`parse_endpoints`]); nothing is
    /// contacted until the first operation.
    pub fn new(list: &str) -> Result<EtcdMetadataStore> {
        Ok(EtcdMetadataStore {
            endpoints: parse_endpoints(list)?,
            current: Mutex::new(0),
            agent: ureq::AgentBuilder::new()
                .timeout(OP_TIMEOUT)
                .timeout_connect(CONNECT_TIMEOUT)
                .redirects(0)
                .build(),
        })
    }

    /// The endpoints, as base URLs.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// POSTs `body` to `path` on the current endpoint, then the others; the reply JSON.
    fn call(&self, path: &str, body: &Value) -> Result<Value> {
        let start = *self.current.lock();
        let mut failures = Vec::new();
        for i in 0..self.endpoints.len() {
            let at = (start + i) % self.endpoints.len();
            let url = format!("{}{path}", self.endpoints[at]);
            let request = self
                .agent
                .post(&url)
                .set("Content-Type", "application/json");
            match request.send_string(&body.to_string()) {
                Ok(resp) => {
                    *self.current.lock() = at;
                    let mut text = String::new();
                    resp.into_reader()
                        .take(MAX_RESPONSE_BYTES)
                        .read_to_string(&mut text)
                        .map_err(|e| Error::Metadata(format!("etcd {url}: reading: {e}")))?;
                    return serde_json::from_str(&text)
                        .map_err(|e| Error::Metadata(format!("etcd {url}: bad reply: {e}")));
                }
                Err(ureq::Error::Status(code, resp)) if code >= 500 => {
                    // A member without a leader, or overloaded: try another.
                    failures.push(format!("{url}: HTTP {code} ({})", resp.status_text()));
                }
                Err(ureq::Error::Status(code, resp)) => {
                    // The server answered: the request itself is at fault.
                    let mut text = String::new();
                    let _ = resp.into_reader().take(512).read_to_string(&mut text);
                    return Err(Error::Metadata(format!(
                        "etcd {url}: HTTP {code}: {}",
                        text.trim()
                    )));
                }
                Err(e) => failures.push(format!("{url}: {e}")),
            }
        }
        Err(Error::Metadata(format!(
            "no etcd endpoint answered: {}",
            failures.join("; ")
        )))
    }
}

/// An etcd number, which the JSON gateway writes as a string.
fn number(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

/// What a lease keep-alive found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseState {
    /// The lease lives, with this many seconds left.
    Alive(i64),
    /// The lease expired or was revoked.
    Gone,
}

impl EtcdMetadataStore {
    /// Grants a lease of `ttl_secs`; its id.
    pub fn grant_lease(&self, ttl_secs: i64) -> Result<i64> {
        lease_granted(&self.call("/v3/lease/grant", &json!({ "TTL": ttl_secs }))?)
    }

    /// Renews lease `id` once.
    pub fn keep_alive(&self, id: i64) -> Result<LeaseState> {
        lease_kept(&self.call("/v3/lease/keepalive", &json!({ "ID": id.to_string() }))?)
    }

    /// Revokes lease `id` (deleting its keys).
    pub fn revoke_lease(&self, id: i64) -> Result<()> {
        self.call("/v3/lease/revoke", &json!({ "ID": id.to_string() }))
            .map(drop)
    }

    /// Puts every `(key, value)` under lease `lease` if `guard` does not exist, in one
    /// transaction; the revision it happened at, or `None` when `guard` exists.
    pub fn create_with_lease(
        &self,
        guard: &str,
        puts: &[(&str, &[u8])],
        lease: i64,
    ) -> Result<Option<i64>> {
        let success: Vec<Value> = puts
            .iter()
            .map(|(k, v)| {
                json!({"request_put": {
                    "key": base64::encode(k.as_bytes()),
                    "value": base64::encode(v),
                    "lease": lease.to_string(),
                }})
            })
            .collect();
        let reply = self.call(
            "/v3/kv/txn",
            &json!({
                "compare": [{
                    "key": base64::encode(guard.as_bytes()),
                    "result": "EQUAL",
                    "target": "CREATE",
                    "create_revision": "0",
                }],
                "success": success,
            }),
        )?;
        Ok(txn_revision(&reply))
    }
}

/// The lease id in a `/v3/lease/grant` reply; an error when there is none.
pub(crate) fn lease_granted(reply: &Value) -> Result<i64> {
    number(reply.get("ID"))
        .filter(|id| *id != 0)
        .ok_or_else(|| Error::Metadata(format!("etcd: lease grant refused: {reply}")))
}

/// What a `/v3/lease/keepalive` reply says of the lease.
pub(crate) fn lease_kept(reply: &Value) -> Result<LeaseState> {
    if let Some(err) = reply.get("error") {
        let message = err.get("message").and_then(Value::as_str).unwrap_or("");
        if message.contains("not found") {
            return Ok(LeaseState::Gone);
        }
        return Err(Error::Metadata(format!("etcd: keep-alive: {err}")));
    }
    let ttl = number(reply.get("result").and_then(|r| r.get("TTL"))).unwrap_or(0);
    Ok(if ttl > 0 {
        LeaseState::Alive(ttl)
    } else {
        LeaseState::Gone
    })
}

/// The revision of a `/v3/kv/txn` reply whose transaction succeeded; `None` when it
/// did not.
pub(crate) fn txn_revision(reply: &Value) -> Option<i64> {
    let succeeded = reply.get("succeeded").and_then(Value::as_bool) == Some(true);
    succeeded.then(|| number(reply.get("header").and_then(|h| h.get("revision"))).unwrap_or(0))
}

/// The first value in a `/v3/kv/range` reply for `key`; `None` when there is none.
pub(crate) fn range_value(key: &str, reply: &Value) -> Result<Option<Vec<u8>>> {
    let Some(kv) = reply
        .get("kvs")
        .and_then(Value::as_array)
        .and_then(|kvs| kvs.first())
    else {
        return Ok(None);
    };
    // An empty value is omitted from the JSON.
    let value = kv.get("value").and_then(Value::as_str).unwrap_or("");
    base64::decode(value)
        .map(Some)
        .ok_or_else(|| Error::Metadata(format!("etcd: value of '{key}' is not base64")))
}

impl MetadataStore for EtcdMetadataStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let reply = self.call(
            "/v3/kv/range",
            &json!({"key": base64::encode(key.as_bytes())}),
        )?;
        range_value(key, &reply)
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        self.call(
            "/v3/kv/put",
            &json!({"key": base64::encode(key.as_bytes()), "value": base64::encode(value)}),
        )
        .map(drop)
    }

    fn remove(&self, key: &str) -> Result<()> {
        self.call(
            "/v3/kv/deleterange",
            &json!({"key": base64::encode(key.as_bytes())}),
        )
        .map(drop)
    }
}

/// `bytes` as the gateway's base64 JSON string.
fn b64(bytes: &[u8]) -> Value {
    Value::String(base64::encode(bytes))
}

/// The range end that makes a range from `prefix` cover every key starting with it:
/// `prefix` then the byte `0xFF` (upstream's `List`; no UTF-8 key holds that byte), or
/// for the empty prefix the whole key space (`\0` to `\0`, etcd's "from the key on").
fn prefix_range(prefix: &str) -> (Vec<u8>, Vec<u8>) {
    if prefix.is_empty() {
        return (vec![0], vec![0]);
    }
    let mut end = prefix.as_bytes().to_vec();
    end.push(0xFF);
    (prefix.as_bytes().to_vec(), end)
}

/// One key-value of a `/v3/kv/range` reply: its key as bytes and its value with its
/// `mod_revision` as the version. `what` names the request in errors.
fn decode_kv(kv: &Value, what: &str) -> Result<(Vec<u8>, Versioned)> {
    let field = |name: &str| kv.get(name).and_then(Value::as_str).unwrap_or("");
    let bad = |part: &str| Error::Metadata(format!("etcd: {what}: {part} in reply: {kv}"));
    let key = base64::decode(field("key")).ok_or_else(|| bad("a key that is not base64"))?;
    // An empty value is omitted from the JSON.
    let value = base64::decode(field("value")).ok_or_else(|| bad("a value that is not base64"))?;
    let version = number(kv.get("mod_revision"))
        .and_then(|r| u64::try_from(r).ok())
        .filter(|&r| r > 0)
        .ok_or_else(|| bad("no mod_revision"))?;
    Ok((key, Versioned { value, version }))
}

/// The key-values of a `/v3/kv/range` reply (none when `kvs` is omitted, as the
/// gateway does for an empty range); an error when the reply is no range reply.
fn range_kvs<'r>(reply: &'r Value, what: &str) -> Result<&'r [Value]> {
    if !reply.get("header").is_some_and(Value::is_object) {
        return Err(Error::Metadata(format!(
            "etcd: {what}: not a range reply: {reply}"
        )));
    }
    match reply.get("kvs") {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(kvs)) => Ok(kvs),
        Some(other) => Err(Error::Metadata(format!("etcd: {what}: kvs is {other}"))),
    }
}

/// Whether the transaction of a `/v3/kv/txn` reply succeeded (the gateway omits a
/// false `succeeded`); an error when the reply is no transaction reply.
pub(crate) fn txn_succeeded(reply: &Value, what: &str) -> Result<bool> {
    if !reply.get("header").is_some_and(Value::is_object) {
        return Err(Error::Metadata(format!(
            "etcd: {what}: not a transaction reply: {reply}"
        )));
    }
    Ok(reply.get("succeeded").and_then(Value::as_bool) == Some(true))
}

/// What a swap's `/v3/kv/txn` reply says: written (with the revision of a put, which is
/// the key's new mod revision), or lost with the key as its failure branch read it.
pub(crate) fn swap_outcome(key: &str, put: bool, reply: &Value) -> Result<Swapped> {
    let what = format!("compare-and-swap of '{key}'");
    if txn_succeeded(reply, &what)? {
        let revision = number(reply.get("header").and_then(|h| h.get("revision")))
            .and_then(|r| u64::try_from(r).ok())
            .filter(|&r| r > 0);
        return Ok(Swapped::Written(revision.filter(|_| put)));
    }
    let range = reply
        .get("responses")
        .and_then(Value::as_array)
        .and_then(|responses| responses.first())
        .and_then(|response| response.get("response_range"))
        .ok_or_else(|| Error::Metadata(format!("etcd {what}: no read in the reply: {reply}")))?;
    Ok(Swapped::Lost(range_versioned(key, range)?))
}

/// `key`'s value and version in a `/v3/kv/range` reply for it.
pub(crate) fn range_versioned(key: &str, reply: &Value) -> Result<Option<Versioned>> {
    let what = format!("get of '{key}'");
    match range_kvs(reply, &what)?.first() {
        None => Ok(None),
        Some(kv) => decode_kv(kv, &what).map(|(_, v)| Some(v)),
    }
}

/// The keys of a `/v3/kv/range` reply for `prefix`, in key order; a key that is not
/// UTF-8 (another client's) is left out with a warning.
pub(crate) fn range_list(prefix: &str, reply: &Value) -> Result<Vec<(String, Versioned)>> {
    let what = format!("list of prefix '{prefix}'");
    let mut out = Vec::new();
    for kv in range_kvs(reply, &what)? {
        let (key, versioned) = decode_kv(kv, &what)?;
        match String::from_utf8(key) {
            Ok(key) if key.starts_with(prefix) => out.push((key, versioned)),
            Ok(key) => log::warn!("etcd {what}: '{key}' is outside the prefix; left out"),
            Err(e) => log::warn!(
                "etcd {what}: a key that is not UTF-8 left out: {:?}",
                String::from_utf8_lossy(e.as_bytes())
            ),
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

impl EtcdMetadataStore {
    /// Runs a transaction of one comparison on `key` and one request; whether the
    /// comparison held. `what` names the operation in errors.
    fn txn_one(&self, key: &str, mut compare: Value, request: Value, what: &str) -> Result<bool> {
        compare["key"] = b64(key.as_bytes());
        compare["result"] = json!("EQUAL");
        let body = json!({"compare": [compare], "success": [request]});
        let reply = self
            .call("/v3/kv/txn", &body)
            .map_err(|e| Error::Metadata(format!("etcd {what} of '{key}': {e}")))?;
        txn_succeeded(&reply, &format!("{what} of '{key}'"))
    }

    /// The request of a swap: a `request_put` of `value`, or a delete of `key` (`None`).
    fn swap_request(key: &str, value: Option<&[u8]>) -> Value {
        match value {
            Some(value) => Self::put_request(key, value),
            None => json!({"request_delete_range": {"key": b64(key.as_bytes())}}),
        }
    }

    /// A `request_put` of `key = value`.
    fn put_request(key: &str, value: &[u8]) -> Value {
        json!({"request_put": {"key": b64(key.as_bytes()), "value": b64(value)}})
    }
}

impl VersionedStore for EtcdMetadataStore {
    fn get_versioned(&self, key: &str) -> Result<Option<Versioned>> {
        let reply = self
            .call("/v3/kv/range", &json!({"key": b64(key.as_bytes())}))
            .map_err(|e| Error::Metadata(format!("etcd get of '{key}': {e}")))?;
        range_versioned(key, &reply)
    }

    fn create(&self, key: &str, value: &[u8]) -> Result<bool> {
        let compare = json!({"target": "VERSION", "version": "0"});
        self.txn_one(key, compare, Self::put_request(key, value), "create")
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<()> {
        self.set(key, value)
            .map_err(|e| Error::Metadata(format!("etcd put of '{key}': {e}")))
    }

    fn compare_and_swap(&self, key: &str, version: u64, value: Option<&[u8]>) -> Result<bool> {
        // etcd's revisions are int64: a larger version was never read from it.
        if i64::try_from(version).is_err() {
            return Ok(false);
        }
        let compare = json!({"target": "MOD", "mod_revision": version.to_string()});
        self.txn_one(
            key,
            compare,
            Self::swap_request(key, value),
            "compare-and-swap",
        )
    }

    fn swap(&self, key: &str, version: u64, value: Option<&[u8]>) -> Result<Swapped> {
        if i64::try_from(version).is_err() {
            return Ok(Swapped::Lost(self.get_versioned(key)?));
        }
        let body = json!({
            "compare": [{
                "key": b64(key.as_bytes()),
                "result": "EQUAL",
                "target": "MOD",
                "mod_revision": version.to_string(),
            }],
            "success": [Self::swap_request(key, value)],
            "failure": [{"request_range": {"key": b64(key.as_bytes())}}],
        });
        let what = format!("compare-and-swap of '{key}'");
        let reply = self
            .call("/v3/kv/txn", &body)
            .map_err(|e| Error::Metadata(format!("etcd {what}: {e}")))?;
        swap_outcome(key, value.is_some(), &reply)
    }

    fn list(&self, prefix: &str) -> Result<Vec<(String, Versioned)>> {
        let (start, end) = prefix_range(prefix);
        let body = json!({"key": b64(&start), "range_end": b64(&end)});
        let reply = self
            .call("/v3/kv/range", &body)
            .map_err(|e| Error::Metadata(format!("etcd list of prefix '{prefix}': {e}")))?;
        range_list(prefix, &reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ranges_end_in_ff_as_upstream() {
        assert_eq!(
            prefix_range("mooncake/checkpoint/"),
            (
                b"mooncake/checkpoint/".to_vec(),
                b"mooncake/checkpoint/\xFF".to_vec()
            )
        );
        assert_eq!(prefix_range(""), (vec![0], vec![0]));
    }

    #[test]
    fn versioned_replies_decode_defensively() {
        let range = json!({"header": {"revision": "12"}, "kvs": [
            {"key": "Yg==", "mod_revision": "9", "value": "dg=="},
            {"key": "YQ==", "mod_revision": "12"},
            {"key": "/w==", "mod_revision": "3", "value": ""},
        ]});
        assert_eq!(
            range_list("", &range).unwrap(),
            vec![
                (
                    "a".to_string(),
                    Versioned {
                        value: vec![],
                        version: 12
                    }
                ),
                (
                    "b".to_string(),
                    Versioned {
                        value: b"v".to_vec(),
                        version: 9
                    }
                ),
            ]
        );
        assert_eq!(
            range_versioned("b", &range).unwrap(),
            Some(Versioned {
                value: b"v".to_vec(),
                version: 9
            })
        );
        assert_eq!(range_versioned("x", &json!({"header": {}})).unwrap(), None);
        for bad in [
            json!({"kvs": []}),
            json!({"header": {}, "kvs": 3}),
            json!({"header": {}, "kvs": [{"key": "YQ=="}]}),
            json!({"header": {}, "kvs": [{"key": "YQ==", "mod_revision": "-1"}]}),
            json!({"header": {}, "kvs": [{"key": "!", "mod_revision": "1"}]}),
            json!({"header": {}, "kvs": [{"key": "YQ==", "mod_revision": "1", "value": "!"}]}),
        ] {
            assert!(range_list("", &bad).is_err(), "{bad}");
        }
        assert!(txn_succeeded(&json!({"header": {}, "succeeded": true}), "t").unwrap());
        assert!(!txn_succeeded(&json!({"header": {}}), "t").unwrap());
        assert!(txn_succeeded(&json!({"error": "x"}), "t").is_err());
    }

    #[test]
    fn swap_replies_say_written_or_lost_with_the_key_as_it_stands() {
        let written = json!({"header": {"revision": "3"}, "succeeded": true});
        assert_eq!(
            swap_outcome("k", true, &written).unwrap(),
            Swapped::Written(Some(3))
        );
        assert_eq!(
            swap_outcome("k", false, &written).unwrap(),
            Swapped::Written(None)
        );
        let lost = json!({"header": {"revision": "4"}, "responses": [{"response_range": {
            "header": {"revision": "4"},
            "kvs": [{"key": "aw==", "mod_revision": "4", "value": "djE="}],
        }}]});
        assert_eq!(
            swap_outcome("k", true, &lost).unwrap(),
            Swapped::Lost(Some(Versioned {
                value: b"v1".to_vec(),
                version: 4
            }))
        );
        let gone = json!({"header": {}, "responses": [{"response_range": {"header": {}}}]});
        assert_eq!(swap_outcome("k", true, &gone).unwrap(), Swapped::Lost(None));
        for bad in [
            json!({"header": {}}),
            json!({"header": {}, "responses": [{}]}),
        ] {
            assert!(swap_outcome("k", true, &bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn endpoint_lists() {
        assert_eq!(
            parse_endpoints("etcd://h1:2379,h2:2379").unwrap(),
            vec!["http://h1:2379", "http://h2:2379"]
        );
        assert_eq!(
            parse_endpoints("h1:2379; http://h2:2380/").unwrap(),
            vec!["http://h1:2379", "http://h2:2380"]
        );
        assert!(parse_endpoints("etcd://").is_err());
        assert!(parse_endpoints("h1:2379/x").is_err());
        assert!(matches!(
            parse_endpoints("https://h:2379"),
            Err(Error::NotImplemented(_))
        ));
    }
}
