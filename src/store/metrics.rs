//! A client's metrics as upstream's client reports them (`ClientMetric`): bytes read
//! and written, the latency of single and batch gets and puts, and per interface
//! (`put`, `get_into`, `batch_put_from`, ...) the operations, their bytes and latency;
//! with the master calls of the process ([`RpcMetrics`]), written as Prometheus text
//! (`/metrics` of the client HTTP server) and as upstream's summary
//! (`/metrics/summary`).

use crate::runtime::latency_histogram::LatencyHistogram;
use crate::wire::rpc_metrics::RpcMetrics;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One interface's operations: how many (the histogram's count), bytes, latency.
#[derive(Debug, Default)]
struct OpStats {
    bytes: AtomicU64,
    latency: LatencyHistogram,
}

/// Whether an operation read or wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A get.
    Read,
    /// A put.
    Write,
}

/// The metrics of one client.
#[derive(Debug)]
pub struct ClientMetrics {
    started: Instant,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    get: LatencyHistogram,
    put: LatencyHistogram,
    batch_get: LatencyHistogram,
    batch_put: LatencyHistogram,
    reads: RwLock<BTreeMap<&'static str, Arc<OpStats>>>,
    writes: RwLock<BTreeMap<&'static str, Arc<OpStats>>>,
}

impl Default for ClientMetrics {
    fn default() -> Self {
        ClientMetrics {
            started: Instant::now(),
            read_bytes: AtomicU64::new(0),
            write_bytes: AtomicU64::new(0),
            get: LatencyHistogram::default(),
            put: LatencyHistogram::default(),
            batch_get: LatencyHistogram::default(),
            batch_put: LatencyHistogram::default(),
            reads: RwLock::new(BTreeMap::new()),
            writes: RwLock::new(BTreeMap::new()),
        }
    }
}

/// The label every series carries (a dummy client's metrics are its real client's).
const LABELS: &str = "client_mode=\"real\"";

impl ClientMetrics {
    /// Records one call of interface `op` over `keys` objects that moved `bytes` in
    /// `latency` (the whole call's).
    pub fn record(
        &self,
        dir: Direction,
        op: &'static str,
        keys: usize,
        bytes: u64,
        latency: Duration,
    ) {
        let (total, single, batch, table) = match dir {
            Direction::Read => (&self.read_bytes, &self.get, &self.batch_get, &self.reads),
            Direction::Write => (&self.write_bytes, &self.put, &self.batch_put, &self.writes),
        };
        total.fetch_add(bytes, Ordering::Relaxed);
        if keys > 1 { batch } else { single }.record(latency);
        let known = table.read().get(op).cloned();
        let stats = known.unwrap_or_else(|| table.write().entry(op).or_default().clone());
        stats.bytes.fetch_add(bytes, Ordering::Relaxed);
        stats.latency.record(latency);
    }

    /// The Prometheus text of upstream's client families.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        for (name, help, value) in [
            (
                "mooncake_transfer_read_bytes",
                "Total bytes read",
                &self.read_bytes,
            ),
            (
                "mooncake_transfer_write_bytes",
                "Total bytes written",
                &self.write_bytes,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            let _ = writeln!(out, "{name}{{{LABELS}}} {}", value.load(Ordering::Relaxed));
        }
        for (name, help, h) in [
            (
                "mooncake_transfer_get_latency",
                "Get transfer latency (us)",
                &self.get,
            ),
            (
                "mooncake_transfer_put_latency",
                "Put transfer latency (us)",
                &self.put,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
            h.write(&mut out, name, LABELS, "");
        }
        let rpcs: Vec<_> = RpcMetrics::global().called().collect();
        let name = "mooncake_client_rpc_count";
        let _ = writeln!(
            out,
            "# HELP {name} Total number of RPC calls made by the client\n# TYPE {name} counter"
        );
        for (m, h) in &rpcs {
            let _ = writeln!(
                out,
                "{name}{{{LABELS},rpc_name=\"{}\"}} {}",
                m.name(),
                h.count()
            );
        }
        let name = "mooncake_client_rpc_latency";
        let _ = writeln!(
            out,
            "# HELP {name} Latency of RPC calls made by the client (in us)\n# TYPE {name} histogram"
        );
        for (m, h) in &rpcs {
            let labels = format!("{LABELS},rpc_name=\"{}\"", m.name());
            h.write(&mut out, name, &labels, &labels);
        }
        for (kind, what, table) in [
            ("read", "Read", &self.reads),
            ("write", "Write", &self.writes),
        ] {
            let ops: Vec<(&'static str, Arc<OpStats>)> =
                table.read().iter().map(|(k, v)| (*k, v.clone())).collect();
            let base = format!("mooncake_transfer_{kind}_operation");
            let _ = writeln!(
                out,
                "# HELP {base}_count Total {kind} operations by interface type\n# TYPE {base}_count counter"
            );
            for (op, s) in &ops {
                let _ = writeln!(
                    out,
                    "{base}_count{{{LABELS},op_name=\"{op}\"}} {}",
                    s.latency.count()
                );
            }
            let _ = writeln!(
                out,
                "# HELP {base}_bytes Total {kind} bytes by interface type\n# TYPE {base}_bytes counter"
            );
            for (op, s) in &ops {
                let bytes = s.bytes.load(Ordering::Relaxed);
                let _ = writeln!(out, "{base}_bytes{{{LABELS},op_name=\"{op}\"}} {bytes}");
            }
            let _ = writeln!(
                out,
                "# HELP {base}_latency {what} operation latency by interface type (us)\n# TYPE {base}_latency histogram"
            );
            for (op, s) in &ops {
                let labels = format!("{LABELS},op_name=\"{op}\"");
                s.latency
                    .write(&mut out, &format!("{base}_latency"), &labels, &labels);
            }
        }
        out
    }

    /// Upstream's human summary (`/metrics/summary`).
    pub fn summary(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let (read, written) = (
            self.read_bytes.load(Ordering::Relaxed),
            self.write_bytes.load(Ordering::Relaxed),
        );
        let mut out = String::from("Client Metrics Summary\n=== Transfer Metrics Summary ===\n");
        let _ = writeln!(out, "Total Read: {}", bytes(read));
        let _ = writeln!(out, "Total Write: {}", bytes(written));
        let _ = writeln!(
            out,
            "Average Read Throughput: {:.2} B/s",
            read as f64 / secs
        );
        let _ = writeln!(
            out,
            "Average Write Throughput: {:.2} B/s",
            written as f64 / secs
        );
        out.push_str("\n=== Latency Summary (microseconds) ===\n");
        for (name, h) in [
            ("Get", &self.get),
            ("Put", &self.put),
            ("Batch Get", &self.batch_get),
            ("Batch Put", &self.batch_put),
        ] {
            let _ = writeln!(out, "{name}: {}", latency_line(h));
        }
        out.push_str("\n=== RPC Metrics Summary ===\n");
        for (m, h) in RpcMetrics::global().called() {
            let _ = writeln!(out, "{}: {}", m.name(), latency_line(h));
        }
        out.push_str("\n=== Interface Operation Metrics Summary ===\n");
        for (title, table) in [
            ("Read Interfaces:", &self.reads),
            ("Write Interfaces:", &self.writes),
        ] {
            let _ = writeln!(out, "{title}");
            for (op, s) in table.read().iter() {
                let _ = writeln!(
                    out,
                    "{op}: count={}, bytes={}, {}",
                    s.latency.count(),
                    bytes(s.bytes.load(Ordering::Relaxed)),
                    percentiles(&s.latency)
                );
            }
            out.push('\n');
        }
        out
    }
}

/// `count=N, p95<X μs, max<Y μs`, or `No data`.
fn latency_line(h: &LatencyHistogram) -> String {
    if h.count() == 0 {
        return "No data".into();
    }
    format!("count={}, {}", h.count(), percentiles(h))
}

/// `p95<Xμs, max<Yμs` from the bucket bounds.
fn percentiles(h: &LatencyHistogram) -> String {
    let bound = |f: f64| match h.bound_for(f) {
        Some(u64::MAX) => ">20000000μs".to_string(),
        Some(b) => format!("<{b}μs"),
        None => "-".to_string(),
    };
    format!("p95{}, max{}", bound(0.95), bound(1.0))
}

/// `100 B`, `1.50 KB`, `2.00 MB`, ...
fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_counted_per_interface_and_direction() {
        let m = ClientMetrics::default();
        m.record(Direction::Write, "put", 1, 100, Duration::from_micros(60));
        m.record(Direction::Read, "get", 1, 100, Duration::from_micros(40));
        m.record(
            Direction::Read,
            "batch_get_into",
            16,
            1600,
            Duration::from_micros(300),
        );
        let text = m.prometheus();
        for line in [
            "mooncake_transfer_read_bytes{client_mode=\"real\"} 1700",
            "mooncake_transfer_write_bytes{client_mode=\"real\"} 100",
            "mooncake_transfer_get_latency_count 1",
            "mooncake_transfer_put_latency_count 1",
            "mooncake_transfer_read_operation_count{client_mode=\"real\",op_name=\"batch_get_into\"} 1",
            "mooncake_transfer_read_operation_bytes{client_mode=\"real\",op_name=\"get\"} 100",
            "mooncake_transfer_write_operation_latency_count{client_mode=\"real\",op_name=\"put\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        let summary = m.summary();
        assert!(summary.contains("Total Read: 1.66 KB"), "{summary}");
        assert!(
            summary.contains("Batch Get: count=1, p95<300μs, max<300μs"),
            "{summary}"
        );
        assert!(summary.contains("Batch Put: No data"), "{summary}");
        assert!(
            summary.contains("put: count=1, bytes=100 B, p95<75μs"),
            "{summary}"
        );
    }
}
