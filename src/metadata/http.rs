//! HTTP metadata client (spec §2.4).
//!
//! Speaks upstream's libcurl protocol: `GET|PUT|DELETE <prefix>?key=<escaped key>`, where
//! the key is escaped like `curl_easy_escape` (everything but `ALPHA DIGIT - . _ ~` becomes
//! `%XX`). Only HTTP 200 counts as success; a GET answered 404 means "no such key".
//!
//! As a [`VersionedStore`] it speaks our server's extension of that protocol
//! ([`super::http_server`]): versions in `ETag`, conditional writes with `If-Match` and
//! `If-None-Match` (412 when they fail), listings with `?prefix=`. A server that answers
//! a key without an `ETag` does not keep versions (upstream's): every versioned call
//! then fails, and a conditional write it answered 200 may have been applied
//! unconditionally, which the error says.

use std::io::Read;
use std::time::Duration;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::Value;

use super::store::MetadataStore;
use super::versioned::{Versioned, VersionedStore};
use crate::codec::base64;
use crate::codec::debug_by_field::debug_by_field;
use crate::error::{Error, Result};

/// Characters `curl_easy_escape` escapes: everything except the RFC 3986 unreserved set.
const CURL_ESCAPE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Whole-request timeout (upstream `CURLOPT_TIMEOUT_MS`).
const TOTAL_TIMEOUT: Duration = Duration::from_millis(3000);
/// Connect timeout (upstream `CURLOPT_CONNECTTIMEOUT_MS`).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(1500);
/// Largest response body accepted from the server.
pub const MAX_RESPONSE_BYTES: u64 = 64 << 20;
/// How much of an error response's body is quoted in an error message.
const ERROR_BODY_SNIPPET: u64 = 256;

/// Percent-encodes a metadata key the way `curl_easy_escape` does, e.g.
/// `mooncake/rpc_meta/127.0.0.1:12345` becomes `mooncake%2Frpc_meta%2F127.0.0.1%3A12345`.
pub fn escape_key(key: &str) -> String {
    utf8_percent_encode(key, CURL_ESCAPE).to_string()
}

/// A [`MetadataStore`] backed by an HTTP metadata server (upstream's `http://` backend).
///
/// One keep-alive [`ureq::Agent`] is shared by every call on this store.
pub struct HttpMetadataStore {
    prefix: String,
    agent: ureq::Agent,
}

debug_by_field!(HttpMetadataStore, prefix);

impl HttpMetadataStore {
    /// Creates a client for the URL prefix `url_prefix` (the whole connection string, e.g.
    /// `http://127.0.0.1:8080/metadata`).
    ///
    /// `https://` is rejected with [`Error::NotImplemented`] because this build has no TLS;
    /// any other scheme, or a URL that does not parse, is [`Error::InvalidArgument`].
    pub fn new(url_prefix: &str) -> Result<Self> {
        let prefix = url_prefix.trim();
        let lower = prefix.to_ascii_lowercase();
        if lower.starts_with("https://") {
            return Err(Error::NotImplemented(format!(
                "HTTP metadata server '{prefix}': https:// needs TLS, which this build does \
                 not include; use an http:// metadata server"
            )));
        }
        if !lower.starts_with("http://") {
            return Err(Error::InvalidArgument(format!(
                "HTTP metadata server URL '{prefix}' must start with http://"
            )));
        }
        let agent = ureq::AgentBuilder::new()
            .timeout(TOTAL_TIMEOUT)
            .timeout_connect(CONNECT_TIMEOUT)
            .redirects(0)
            .build();
        // Validate the prefix up front so a typo fails at open time, not on first use.
        if let Err(e) = agent.get(prefix).request_url() {
            return Err(Error::InvalidArgument(format!(
                "HTTP metadata server URL '{prefix}' is invalid: {e}"
            )));
        }
        Ok(HttpMetadataStore {
            prefix: prefix.to_string(),
            agent,
        })
    }

    /// The URL prefix this store talks to.
    pub fn url_prefix(&self) -> &str {
        &self.prefix
    }

    /// The full request URL for `key`.
    fn url_for(&self, key: &str) -> String {
        self.url_with("key", key)
    }

    /// The full request URL with the query parameter `name=value`.
    fn url_with(&self, name: &str, value: &str) -> String {
        let sep = if self.prefix.contains('?') { '&' } else { '?' };
        format!("{}{}{name}={}", self.prefix, sep, escape_key(value))
    }

    /// Runs one request on `key` and returns the response whatever its status.
    fn call(&self, method: &str, key: &str, body: Option<&[u8]>) -> Result<ureq::Response> {
        self.call_with(method, key, &[], body)
    }

    /// [`call`](Self::call) with extra request header fields.
    fn call_with(
        &self,
        method: &str,
        key: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<ureq::Response> {
        let url = self.url_for(key);
        self.send(method, &url, &format!("key '{key}'"), headers, body)
    }

    /// Runs one request to `url` (about `subject`, for errors) and returns the response
    /// whatever its status; only transport failures (connect, timeout, I/O) are errors.
    fn send(
        &self,
        method: &str,
        url: &str,
        subject: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<ureq::Response> {
        let mut req = self.agent.request(method, url);
        for (name, value) in headers {
            req = req.set(name, value);
        }
        let res = match body {
            Some(b) => req.set("Content-Type", "application/json").send_bytes(b),
            None => req.call(),
        };
        match res {
            Ok(resp) => Ok(resp),
            Err(ureq::Error::Status(_, resp)) => Ok(resp),
            Err(ureq::Error::Transport(t)) => Err(Error::Metadata(format!(
                "HTTP metadata {method} of {subject} at {url} failed: {t}"
            ))),
        }
    }

    /// Builds the error for a non-200 answer to a request on `key`.
    fn status_error(method: &str, key: &str, resp: ureq::Response) -> Error {
        Self::status_error_of(method, &format!("key '{key}'"), resp)
    }

    /// Builds the error for a non-200 answer to a request about `subject`, quoting the
    /// start of the server's body.
    fn status_error_of(method: &str, subject: &str, resp: ureq::Response) -> Error {
        let status = resp.status();
        let status_text = resp.status_text().to_string();
        let url = resp.get_url().to_string();
        let mut snippet = Vec::new();
        // Best effort: the body is only decoration for the message.
        let _ = resp
            .into_reader()
            .take(ERROR_BODY_SNIPPET)
            .read_to_end(&mut snippet);
        let body = String::from_utf8_lossy(&snippet);
        let body = body.trim();
        let detail = if body.is_empty() {
            String::new()
        } else {
            format!(": {body}")
        };
        Error::Metadata(format!(
            "HTTP metadata {method} of {subject} at {url} returned {status} \
             {status_text}{detail}"
        ))
    }
}

/// Reads a response body, refusing more than [`MAX_RESPONSE_BYTES`].
fn read_capped(resp: ureq::Response, key: &str) -> Result<Vec<u8>> {
    read_capped_of(resp, &format!("key '{key}'"))
}

/// [`read_capped`] for a request about `subject`.
fn read_capped_of(resp: ureq::Response, subject: &str) -> Result<Vec<u8>> {
    let url = resp.get_url().to_string();
    let mut buf = Vec::new();
    resp.into_reader()
        .take(MAX_RESPONSE_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| {
            Error::Metadata(format!(
                "HTTP metadata GET of {subject} at {url}: reading the body failed: {e}"
            ))
        })?;
    if buf.len() as u64 > MAX_RESPONSE_BYTES {
        return Err(Error::Metadata(format!(
            "HTTP metadata GET of {subject} at {url}: body exceeds {MAX_RESPONSE_BYTES} bytes"
        )));
    }
    Ok(buf)
}

/// Reads and discards a (small) success body so the connection can go back to the pool.
fn drain(resp: ureq::Response) {
    let _ = std::io::copy(
        &mut resp.into_reader().take(MAX_RESPONSE_BYTES),
        &mut std::io::sink(),
    );
}

impl MetadataStore for HttpMetadataStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let resp = self.call("GET", key, None)?;
        match resp.status() {
            200 => read_capped(resp, key).map(Some),
            404 => {
                drain(resp);
                Ok(None)
            }
            _ => Err(Self::status_error("GET", key, resp)),
        }
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        let resp = self.call("PUT", key, Some(value))?;
        if resp.status() == 200 {
            drain(resp);
            Ok(())
        } else {
            Err(Self::status_error("PUT", key, resp))
        }
    }

    fn remove(&self, key: &str) -> Result<()> {
        let resp = self.call("DELETE", key, None)?;
        if resp.status() == 200 {
            drain(resp);
            Ok(())
        } else {
            Err(Self::status_error("DELETE", key, resp))
        }
    }
}

/// The version an `ETag` field value names (`"<digits>"`); `None` for anything else.
fn etag_version(tag: &str) -> Option<u64> {
    let digits = tag.trim().strip_prefix('"')?.strip_suffix('"')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The version in a response's `ETag`; an error naming `method`, `key` and the server
/// when there is none (a server that keeps no versions, e.g. upstream's). `applied`
/// says the request was a write such a server may have applied unconditionally.
fn version_of(resp: &ureq::Response, method: &str, key: &str, applied: bool) -> Result<u64> {
    if let Some(version) = resp.header("ETag").and_then(etag_version) {
        return Ok(version);
    }
    let warning = if applied {
        "; it ignores preconditions, so this write may have been applied unconditionally"
    } else {
        ""
    };
    Err(Error::Metadata(format!(
        "HTTP metadata {method} of key '{key}' at {}: the server answered without an ETag: \
         it keeps no versions (upstream's metadata server?){warning}",
        resp.get_url()
    )))
}

/// One entry of a `?prefix=` listing: `{"key", "value" (base64), "version"}`.
fn listed_entry(entry: &Value) -> Option<(String, Versioned)> {
    let key = entry.get("key")?.as_str()?.to_string();
    let value = base64::decode(entry.get("value")?.as_str()?)?;
    let version = entry.get("version")?.as_u64()?;
    Some((key, Versioned { value, version }))
}

/// A `?prefix=` listing's body: entries that start with `prefix`, in key order.
fn parse_listing(body: &[u8], prefix: &str) -> Result<Vec<(String, Versioned)>> {
    let bad = |why: String| {
        Error::Metadata(format!(
            "HTTP metadata list of prefix '{prefix}': bad listing: {why}"
        ))
    };
    let entries: Vec<Value> = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    let mut out = entries
        .iter()
        .map(|e| listed_entry(e).ok_or_else(|| bad(format!("entry {e}"))))
        .collect::<Result<Vec<_>>>()?;
    if let Some((key, _)) = out.iter().find(|(k, _)| !k.starts_with(prefix)) {
        return Err(bad(format!("'{key}' is outside the prefix")));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

impl HttpMetadataStore {
    /// A write with a precondition: `true` when the server applied it (200, with the
    /// `ETag` that shows it honoured the precondition), `false` on 412 (or 404).
    fn conditional(
        &self,
        method: &str,
        key: &str,
        condition: (&str, &str),
        body: Option<&[u8]>,
    ) -> Result<bool> {
        let resp = self.call_with(method, key, &[condition], body)?;
        match resp.status() {
            200 => {
                version_of(&resp, method, key, true)?;
                drain(resp);
                Ok(true)
            }
            412 | 404 => {
                drain(resp);
                Ok(false)
            }
            _ => Err(Self::status_error(method, key, resp)),
        }
    }
}

impl VersionedStore for HttpMetadataStore {
    fn get_versioned(&self, key: &str) -> Result<Option<Versioned>> {
        let resp = self.call("GET", key, None)?;
        match resp.status() {
            200 => {
                let version = version_of(&resp, "GET", key, false)?;
                let value = read_capped(resp, key)?;
                Ok(Some(Versioned { value, version }))
            }
            404 => {
                drain(resp);
                Ok(None)
            }
            _ => Err(Self::status_error("GET", key, resp)),
        }
    }

    fn create(&self, key: &str, value: &[u8]) -> Result<bool> {
        self.conditional("PUT", key, ("If-None-Match", "*"), Some(value))
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<()> {
        self.set(key, value)
    }

    fn compare_and_swap(&self, key: &str, version: u64, value: Option<&[u8]>) -> Result<bool> {
        let tag = format!("\"{version}\"");
        let method = if value.is_some() { "PUT" } else { "DELETE" };
        self.conditional(method, key, ("If-Match", &tag), value)
    }

    fn list(&self, prefix: &str) -> Result<Vec<(String, Versioned)>> {
        let url = self.url_with("prefix", prefix);
        let subject = format!("prefix '{prefix}'");
        let resp = self.send("GET", &url, &subject, &[], None)?;
        if resp.status() != 200 {
            return Err(Self::status_error_of("GET", &subject, resp));
        }
        parse_listing(&read_capped_of(resp, &subject)?, prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_and_listings_decode_defensively() {
        assert_eq!(etag_version("\"42\""), Some(42));
        for bad in [
            "42",
            "W/\"42\"",
            "\"\"",
            "\"-1\"",
            "\"4 2\"",
            "\"99999999999999999999\"",
        ] {
            assert_eq!(etag_version(bad), None, "{bad}");
        }
        let body =
            br#"[{"key":"p/b","value":"AP8=","version":3},{"key":"p/a","value":"","version":9}]"#;
        assert_eq!(
            parse_listing(body, "p/").unwrap(),
            vec![
                (
                    "p/a".to_string(),
                    Versioned {
                        value: vec![],
                        version: 9
                    }
                ),
                (
                    "p/b".to_string(),
                    Versioned {
                        value: vec![0, 255],
                        version: 3
                    }
                ),
            ]
        );
        assert!(parse_listing(b"[]", "x").unwrap().is_empty());
        for bad in [
            &br#"{"key":"p"}"#[..],
            br#"[{"key":"p","value":"!","version":1}]"#,
            br#"[{"key":"p","value":"","version":-1}]"#,
            br#"[{"key":1,"value":"","version":1}]"#,
            br#"[{"key":"q","value":"","version":1}]"#,
            b"not json",
        ] {
            assert!(
                parse_listing(bad, "p").is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn escapes_like_curl() {
        assert_eq!(
            escape_key("mooncake/rpc_meta/127.0.0.1:12345"),
            "mooncake%2Frpc_meta%2F127.0.0.1%3A12345"
        );
        assert_eq!(escape_key("a-b.c_d~e"), "a-b.c_d~e");
        assert_eq!(
            escape_key("host name:123?x=1&y=2+z"),
            "host%20name%3A123%3Fx%3D1%26y%3D2%2Bz"
        );
        assert_eq!(escape_key("é"), "%C3%A9");
    }

    #[test]
    fn builds_urls() {
        let s = HttpMetadataStore::new("http://127.0.0.1:8080/metadata").unwrap();
        assert_eq!(
            s.url_for("mooncake/ram/a:1"),
            "http://127.0.0.1:8080/metadata?key=mooncake%2Fram%2Fa%3A1"
        );
        let s = HttpMetadataStore::new("http://h:1/metadata?token=x").unwrap();
        assert_eq!(s.url_for("k"), "http://h:1/metadata?token=x&key=k");
        assert_eq!(
            s.url_with("prefix", "a/b c"),
            "http://h:1/metadata?token=x&prefix=a%2Fb%20c"
        );
    }

    #[test]
    fn rejects_https_and_other_schemes() {
        match HttpMetadataStore::new("https://h:1/metadata") {
            Err(Error::NotImplemented(m)) => assert!(m.contains("TLS"), "{m}"),
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            HttpMetadataStore::new("ftp://h/metadata"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            HttpMetadataStore::new("http://"),
            Err(Error::InvalidArgument(_))
        ));
    }
}
