//! The agent: a small HTTP endpoint beside a node through which another node asks it
//! to fetch a copy of an object (`replicate_to`), so copies can be pushed ahead of
//! demand without logging into the node.
//!
//! A node that runs an agent publishes its address under
//! `mooncake/p2p/agent/<segment name>` as `{"address": "host:port"}` and removes it when
//! the agent stops. The agent answers:
//! * `POST /replicate?name=<url-encoded>`: fetches the object into memory the node keeps
//!   (it then serves it as a replica) and answers 200 `{"name":..,"size":..}`; 200 too
//!   when the node holds it already; 404 when the object is unknown; 500 with the
//!   reason otherwise;
//! * `GET /objects`: the objects the node holds, as a JSON array of names.

use super::error::{P2pError, P2pResult};
use super::store::P2pStore;
use crate::runtime::http_server::{HttpHandler, HttpReply, HttpServer};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Where agents publish their addresses.
pub const AGENT_KEY_PREFIX: &str = "mooncake/p2p/agent/";

/// How long `replicate_to` waits for the peer to have fetched the object.
const REPLICATE_TIMEOUT: Duration = Duration::from_secs(3600);

/// A running agent; stops (and unpublishes its address) when dropped.
pub struct Agent {
    store: Arc<P2pStore>,
    server: Option<HttpServer>,
    address: String,
}

impl Agent {
    /// Serves `store`'s agent on `bind` and publishes the address other nodes reach it
    /// at (this node's host with the bound port).
    pub fn start(store: Arc<P2pStore>, bind: SocketAddr) -> P2pResult<Agent> {
        let handler = Arc::new(Handler {
            store: store.clone(),
        });
        let server = HttpServer::start(bind, "p2p agent", handler)
            .map_err(|e| P2pError::Io(format!("serving the agent on {bind}: {e}")))?;
        let own = store.local_server_name();
        let host = crate::host::addr::parse_host_port(own, 0).0;
        let address = format!("{host}:{}", server.local_addr().port());
        let value = json!({ "address": address }).to_string();
        store
            .meta()
            .put_raw(&agent_key(own), value.as_bytes())
            .map_err(|e| P2pError::Metadata(format!("publishing the agent of {own}: {e}")))?;
        Ok(Agent {
            store,
            server: Some(server),
            address,
        })
    }

    /// The address the agent is published at.
    pub fn address(&self) -> &str {
        &self.address
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let own = self.store.local_server_name();
        if let Err(e) = self.store.meta().remove_raw(&agent_key(own)) {
            log::warn!("p2p: unpublishing the agent of {own}: {e}");
        }
        if let Some(server) = self.server.take() {
            server.stop();
        }
    }
}

/// The metadata key of the agent of node `segment`.
pub fn agent_key(segment: &str) -> String {
    format!("{AGENT_KEY_PREFIX}{segment}")
}

struct Handler {
    store: Arc<P2pStore>,
}

impl HttpHandler for Handler {
    fn handle(&self, method: &str, target: &str, _body: &[u8]) -> HttpReply {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        match (method, path) {
            ("POST", "/replicate") => match query_name(query) {
                Some(name) => self.replicate(&name),
                None => HttpReply::text(400, "name=<object> is required"),
            },
            ("GET", "/objects") => json_reply(200, json!(self.store.held_names())),
            _ => HttpReply::text(404, "not found"),
        }
    }
}

impl Handler {
    fn replicate(&self, name: &str) -> HttpReply {
        match self.store.get_kept(name) {
            Ok(size) => json_reply(200, json!({ "name": name, "size": size })),
            Err(e @ P2pError::NotFound(_)) => HttpReply::text(404, &e.to_string()),
            Err(e) => HttpReply::text(500, &e.to_string()),
        }
    }
}

fn json_reply(status: u16, value: serde_json::Value) -> HttpReply {
    HttpReply {
        status,
        content_type: "application/json",
        body: value.to_string().into_bytes(),
    }
}

/// The `name` parameter of a query string, decoded.
fn query_name(query: &str) -> Option<String> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("name="))
        .and_then(|v| {
            let v = v.replace('+', " ");
            percent_encoding::percent_decode_str(&v)
                .decode_utf8()
                .ok()
                .map(|s| s.into_owned())
        })
        .filter(|n| !n.is_empty())
}

/// Asks node `peer`'s agent to fetch a copy of `name`; returns once it has it.
pub fn replicate_to(store: &P2pStore, name: &str, peer: &str) -> P2pResult<()> {
    store.check_open()?;
    let raw = store
        .meta()
        .get_raw(&agent_key(peer))
        .map_err(|e| P2pError::Metadata(format!("looking up the agent of {peer}: {e}")))?
        .ok_or_else(|| {
            P2pError::InvalidArgument(format!("{peer} runs no agent (nothing published)"))
        })?;
    let address = serde_json::from_slice::<serde_json::Value>(&raw)
        .ok()
        .and_then(|v| v.get("address")?.as_str().map(str::to_string))
        .ok_or_else(|| P2pError::Corrupt {
            name: agent_key(peer),
            why: "not {\"address\": \"host:port\"}".into(),
        })?;
    let encoded =
        percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC).to_string();
    let url = format!("http://{address}/replicate?name={encoded}");
    let agent = ureq::AgentBuilder::new().timeout(REPLICATE_TIMEOUT).build();
    match agent.post(&url).call() {
        Ok(_) => Ok(()),
        Err(ureq::Error::Status(404, _)) => Err(P2pError::NotFound(name.to_string())),
        Err(ureq::Error::Status(code, reply)) => Err(P2pError::Engine(format!(
            "{peer} could not fetch '{name}' ({code}): {}",
            reply.into_string().unwrap_or_default()
        ))),
        Err(e) => Err(P2pError::Io(format!(
            "asking the agent of {peer} at {address}: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_from_the_query() {
        assert_eq!(query_name("name=a%2Fb+c").as_deref(), Some("a/b c"));
        assert_eq!(query_name("x=1&name=ckpt").as_deref(), Some("ckpt"));
        assert_eq!(query_name("name="), None);
        assert_eq!(query_name("name=%FF"), None);
        assert_eq!(query_name(""), None);
    }
}
