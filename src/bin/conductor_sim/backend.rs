//! The conductor as the simulator reaches it: its HTTP API, over one keep-alive
//! connection.

use serde_json::{json, Value};
use std::time::Duration;

use mooncake::conductor::api::Api;
use mooncake::conductor::{Conductor, ConductorConfig};
use mooncake::runtime::http_server::HttpServer;
use std::net::SocketAddr;
use std::sync::Arc;

/// What the conductor answered to a schedule call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Placed.
    Placed {
        /// Prefill instance.
        prefill: String,
        /// Decode instance.
        decode: String,
        /// Blocks to pull before the prefill, and from where.
        transfer: Option<(String, u64)>,
        /// Blocks the conductor expects not to be recomputed.
        prefix_blocks: u64,
    },
    /// Refused (HTTP 429).
    Rejected,
}

/// A conductor's HTTP API.
pub struct Http {
    agent: ureq::Agent,
    base: String,
    /// Calls made.
    pub calls: u64,
}

impl Http {
    /// A client of the conductor at `base` (`http://host:port`).
    pub fn new(base: &str) -> Http {
        Http {
            agent: ureq::AgentBuilder::new()
                .timeout(Duration::from_secs(60))
                .max_idle_connections_per_host(4)
                .build(),
            base: base.trim_end_matches('/').to_string(),
            calls: 0,
        }
    }

    /// POSTs `body` to `path`: the status and the parsed reply.
    fn post(&mut self, path: &str, body: &Value) -> Result<(u16, Value), String> {
        self.calls += 1;
        let url = format!("{}{path}", self.base);
        let result = self
            .agent
            .post(&url)
            .set("Content-Type", "application/json")
            .send_string(&body.to_string());
        let response = match result {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => return Err(format!("POST {url}: {e}")),
        };
        let status = response.status();
        let text = response
            .into_string()
            .map_err(|e| format!("POST {url}: reading the reply: {e}"))?;
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok((status, value))
    }

    fn expect_ok(&mut self, path: &str, body: &Value) -> Result<Value, String> {
        match self.post(path, body)? {
            (200 | 201, v) => Ok(v),
            (status, v) => Err(format!("POST {path}: HTTP {status}: {v}")),
        }
    }

    /// Registers an instance.
    pub fn register(
        &mut self,
        id: &str,
        role: &str,
        kv_blocks: u64,
        max_batch: u64,
    ) -> Result<(), String> {
        let body = json!({"id": id, "role": role, "kv_capacity_blocks": kv_blocks, "max_batch": max_batch});
        self.expect_ok("/v1/instances", &body).map(|_| ())
    }

    /// Removes an instance.
    pub fn unregister(&mut self, id: &str) -> Result<(), String> {
        self.calls += 1;
        let url = format!("{}/v1/instances/{id}", self.base);
        match self.agent.delete(&url).call() {
            Ok(_) => Ok(()),
            Err(e) => Err(format!("DELETE {url}: {e}")),
        }
    }

    /// Reports blocks an instance stored and dropped.
    pub fn events(
        &mut self,
        instance: &str,
        stored: &[u64],
        removed: &[u64],
    ) -> Result<(), String> {
        let body = json!({"instance": instance, "stored": stored, "removed": removed});
        self.expect_ok("/v1/events", &body).map(|_| ())
    }

    /// Asks where a request goes.
    pub fn schedule(&mut self, body: &Value) -> Result<Decision, String> {
        match self.post("/v1/schedule", body)? {
            (200, v) => {
                let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let number = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
                let transfer = v
                    .get("transfer_from")
                    .and_then(Value::as_str)
                    .map(|from| (from.to_string(), number("transfer_blocks")));
                Ok(Decision::Placed {
                    prefill: text("prefill"),
                    decode: text("decode"),
                    transfer,
                    prefix_blocks: number("prefix_blocks"),
                })
            }
            (429, _) => Ok(Decision::Rejected),
            (status, v) => Err(format!("POST /v1/schedule: HTTP {status}: {v}")),
        }
    }

    /// Reports what happened to a request; `false` when the conductor had forgotten
    /// it (its assignment expired).
    pub fn complete(&mut self, body: &Value) -> Result<bool, String> {
        match self.post("/v1/complete", body)? {
            (200, _) => Ok(true),
            (404, _) => Ok(false),
            (status, v) => Err(format!("POST /v1/complete: HTTP {status}: {v}")),
        }
    }

    /// The conductor's `/v1/stats`.
    pub fn stats(&mut self) -> Result<Value, String> {
        self.calls += 1;
        let url = format!("{}/v1/stats", self.base);
        let r = self
            .agent
            .get(&url)
            .call()
            .map_err(|e| format!("GET {url}: {e}"))?;
        let text = r.into_string().map_err(|e| e.to_string())?;
        serde_json::from_str(&text).map_err(|e| format!("GET {url}: {e}"))
    }
}

/// A conductor in this process, serving HTTP on a free port.
pub(crate) fn start_conductor(config: ConductorConfig) -> Result<(HttpServer, String), String> {
    let conductor = Conductor::new(config);
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("literal address");
    let server = HttpServer::start(addr, "conductor", Arc::new(Api(conductor)))
        .map_err(|e| e.to_string())?;
    let base = format!("http://{}", server.local_addr());
    Ok((server, base))
}
