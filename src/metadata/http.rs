//! HTTP metadata client (spec §2.4).
//!
//! Speaks upstream's libcurl protocol: `GET|PUT|DELETE <prefix>?key=<escaped key>`, where
//! the key is escaped like `curl_easy_escape` (everything but `ALPHA DIGIT - . _ ~` becomes
//! `%XX`). Only HTTP 200 counts as success; a GET answered 404 means "no such key".

use std::io::Read;
use std::time::Duration;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::store::MetadataStore;
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
        let sep = if self.prefix.contains('?') { '&' } else { '?' };
        format!("{}{}key={}", self.prefix, sep, escape_key(key))
    }

    /// Runs one request and returns the response whatever its status; only transport
    /// failures (connect, timeout, I/O) are errors.
    fn call(&self, method: &str, key: &str, body: Option<&[u8]>) -> Result<ureq::Response> {
        let url = self.url_for(key);
        let req = self.agent.request(method, &url);
        let res = match body {
            Some(b) => req.set("Content-Type", "application/json").send_bytes(b),
            None => req.call(),
        };
        match res {
            Ok(resp) => Ok(resp),
            Err(ureq::Error::Status(_, resp)) => Ok(resp),
            Err(ureq::Error::Transport(t)) => Err(Error::Metadata(format!(
                "HTTP metadata {method} of key '{key}' at {url} failed: {t}"
            ))),
        }
    }

    /// Builds the error for a non-200 answer, quoting the start of the server's body.
    fn status_error(method: &str, key: &str, resp: ureq::Response) -> Error {
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
            "HTTP metadata {method} of key '{key}' at {url} returned {status} \
             {status_text}{detail}"
        ))
    }
}

/// Reads a response body, refusing more than [`MAX_RESPONSE_BYTES`].
fn read_capped(resp: ureq::Response, key: &str) -> Result<Vec<u8>> {
    let url = resp.get_url().to_string();
    let mut buf = Vec::new();
    resp.into_reader()
        .take(MAX_RESPONSE_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| {
            Error::Metadata(format!(
                "HTTP metadata GET of key '{key}' at {url}: reading the body failed: {e}"
            ))
        })?;
    if buf.len() as u64 > MAX_RESPONSE_BYTES {
        return Err(Error::Metadata(format!(
            "HTTP metadata GET of key '{key}' at {url}: body exceeds {MAX_RESPONSE_BYTES} bytes"
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

#[cfg(test)]
mod tests {
    use super::*;

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
