//! The master calls this process made as a client (upstream's
//! `mooncake_client_rpc_count` and `mooncake_client_rpc_latency`): per method, a
//! latency histogram whose count is the number of calls, answered or not.

use super::coro_rpc::Method;
use crate::runtime::latency_histogram::LatencyHistogram;
use std::sync::OnceLock;
use std::time::Duration;

/// One histogram per [`Method`], in [`Method::ALL`] order.
pub struct RpcMetrics(Vec<LatencyHistogram>);

impl RpcMetrics {
    /// The process's calls.
    pub fn global() -> &'static RpcMetrics {
        static METRICS: OnceLock<RpcMetrics> = OnceLock::new();
        METRICS.get_or_init(|| {
            RpcMetrics(
                Method::ALL
                    .iter()
                    .map(|_| LatencyHistogram::default())
                    .collect(),
            )
        })
    }

    /// Records one call of `method` that took `latency`.
    pub fn record(&self, method: Method, latency: Duration) {
        if let Some(h) = self.0.get(method as usize) {
            h.record(latency);
        }
    }

    /// Every method called at least once, with its histogram.
    pub fn called(&self) -> impl Iterator<Item = (Method, &LatencyHistogram)> {
        Method::ALL
            .iter()
            .zip(&self.0)
            .filter(|(_, h)| h.count() > 0)
            .map(|(m, h)| (*m, h))
    }
}
