//! The client HTTP server (upstream's `setup(..., enable_client_http_server=True,
//! client_http_port=P)`): `GET /health`, `/metrics` (Prometheus text) and
//! `/metrics/summary` of one client.

use super::metrics::ClientMetrics;
use crate::runtime::http_server::{HttpHandler, HttpReply};
use std::sync::Arc;

/// What a client's HTTP server answers from.
pub(crate) struct ClientHttp {
    /// The client's metrics.
    pub metrics: Arc<ClientMetrics>,
    /// The client's health code (`Health`: 0 healthy), asked per request.
    pub health: Arc<dyn Fn() -> i32 + Send + Sync>,
}

impl HttpHandler for ClientHttp {
    fn handle(&self, method: &str, target: &str, _body: &[u8]) -> HttpReply {
        let path = target.split_once('?').map_or(target, |(p, _)| p);
        if method != "GET" {
            return HttpReply::text(405, "Method not allowed");
        }
        match path {
            "/health" => {
                let code = (self.health)();
                let (status, word) = if code == 0 {
                    (200, "healthy")
                } else {
                    (503, "unhealthy")
                };
                HttpReply {
                    status,
                    content_type: "application/json",
                    body: format!(r#"{{"status":"{word}","code":{code}}}"#).into_bytes(),
                }
            }
            "/metrics" => HttpReply {
                status: 200,
                content_type: "text/plain; version=0.0.4",
                body: self.metrics.prometheus().into_bytes(),
            },
            "/metrics/summary" => HttpReply::text(200, &self.metrics.summary()),
            _ => HttpReply::text(404, "Not found"),
        }
    }
}
