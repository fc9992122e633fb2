//! etcd metadata (spec §2.1): plain put, get and delete of upstream's keys and values
//! through etcd's v3 JSON gateway (`POST /v3/kv/range|put|deleterange`, keys and
//! values base64), over the blocking HTTP client, so no async runtime runs inside the
//! library. Upstream's Go client and this one see the same data. Every operation has
//! upstream's 5 s deadline and moves on to the next endpoint when one does not answer.

use super::store::MetadataStore;
use crate::codec::base64;
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

#[cfg(test)]
mod tests {
    use super::*;

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
