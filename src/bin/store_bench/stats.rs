//! Latency samples, percentiles, and the report (aligned table + `ROW` lines).

use std::time::Duration;

/// Latency samples of one benchmark row, in nanoseconds.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    nanos: Vec<u64>,
}

impl Samples {
    /// Records one call's latency.
    pub fn push(&mut self, d: Duration) {
        self.nanos.push(d.as_nanos().min(u64::MAX as u128) as u64);
    }

    /// Appends another set of samples.
    pub fn extend(&mut self, other: Samples) {
        self.nanos.extend(other.nanos);
    }

    /// The `p` quantile (0..=1) in microseconds (nearest rank), 0 when empty.
    pub fn percentile_us(&mut self, p: f64) -> f64 {
        if self.nanos.is_empty() {
            return 0.0;
        }
        self.nanos.sort_unstable();
        let rank = (p * self.nanos.len() as f64).ceil() as usize;
        let i = rank.clamp(1, self.nanos.len()) - 1;
        self.nanos[i] as f64 / 1e3
    }
}

/// One reported row.
#[derive(Debug, Clone)]
pub struct Row {
    /// Operation name.
    pub op: String,
    /// Bytes per item (0 for metadata-only operations).
    pub size: u64,
    /// Items per second.
    pub ops_per_sec: f64,
    /// Calls per item latency samples (a batch call is one sample).
    pub p50_us: f64,
    /// 99th percentile latency.
    pub p99_us: f64,
    /// Failed items.
    pub errors: u64,
}

impl Row {
    /// A row from an ops/s figure and latency samples.
    pub fn new(op: &str, size: u64, ops_per_sec: f64, samples: &mut Samples, errors: u64) -> Row {
        Row {
            op: op.to_string(),
            size,
            ops_per_sec,
            p50_us: samples.percentile_us(0.50),
            p99_us: samples.percentile_us(0.99),
            errors,
        }
    }

    /// Decimal megabytes per second.
    pub fn mbps(&self) -> f64 {
        self.ops_per_sec * self.size as f64 / 1e6
    }

    /// The machine-readable line.
    pub fn row_line(&self) -> String {
        format!(
            "ROW op={} size={} ops={:.1} mbps={:.2} p50={:.1} p99={:.1} errors={}",
            self.op,
            self.size,
            self.ops_per_sec,
            self.mbps(),
            self.p50_us,
            self.p99_us,
            self.errors
        )
    }
}

/// The median of `v` (0 when empty).
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Prints `title`, the aligned table, then one `ROW` line per row, on stdout.
pub fn report(title: &str, rows: &[Row]) {
    println!("{title}");
    println!(
        "{:<18} {:>9} {:>12} {:>10} {:>10} {:>10} {:>7}",
        "op", "size", "ops/s", "MB/s", "p50 us", "p99 us", "errors"
    );
    for r in rows {
        println!(
            "{:<18} {:>9} {:>12.1} {:>10.2} {:>10.1} {:>10.1} {:>7}",
            r.op,
            r.size,
            r.ops_per_sec,
            r.mbps(),
            r.p50_us,
            r.p99_us,
            r.errors
        );
    }
    for r in rows {
        println!("{}", r.row_line());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_median() {
        let mut s = Samples::default();
        assert_eq!(s.percentile_us(0.5), 0.0);
        for us in 1..=100u64 {
            s.push(Duration::from_micros(us));
        }
        assert_eq!(s.percentile_us(0.5), 50.0);
        assert_eq!(s.percentile_us(0.99), 99.0);
        assert_eq!(s.percentile_us(1.0), 100.0);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        let mut one = Samples::default();
        one.push(Duration::from_micros(7));
        let r = Row::new("put", 1_000_000, 10.0, &mut one, 0);
        assert_eq!(
            r.row_line(),
            "ROW op=put size=1000000 ops=10.0 mbps=10.00 p50=7.0 p99=7.0 errors=0"
        );
    }
}
