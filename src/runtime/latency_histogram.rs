//! A lock-free latency histogram in microseconds with upstream Mooncake's client
//! buckets (50 us to 20 s), written as Prometheus text the way upstream's client
//! writes it.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in microseconds (a last bucket takes the rest).
pub const BOUNDS_US: [u64; 27] = [
    50, 75, 125, 150, 200, 250, 300, 400, 500, 750, 1_000, 1_500, 2_000, 3_000, 5_000, 7_000,
    15_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000,
    20_000_000,
];

/// Counts of samples per bucket, their sum and number.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    buckets: [AtomicU64; BOUNDS_US.len() + 1],
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl LatencyHistogram {
    /// Records one sample.
    pub fn record(&self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let bucket = BOUNDS_US.partition_point(|&bound| bound < us);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Sum of the samples, in microseconds.
    pub fn sum_us(&self) -> u64 {
        self.sum_us.load(Ordering::Relaxed)
    }

    /// The smallest bucket bound at or under which `fraction` of the samples lie
    /// (`None` without samples; `u64::MAX` for the last, unbounded bucket).
    pub fn bound_for(&self, fraction: f64) -> Option<u64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let wanted = (fraction * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Ordering::Relaxed);
            if seen >= wanted {
                return Some(BOUNDS_US.get(i).copied().unwrap_or(u64::MAX));
            }
        }
        Some(u64::MAX)
    }

    /// Writes the histogram's series: cumulative `name_bucket{labels,le=..}` lines,
    /// then `name_sum` and `name_count` with `sum_labels` (upstream writes the sum and
    /// count of its unlabelled histograms without labels).
    pub fn write(&self, out: &mut String, name: &str, labels: &str, sum_labels: &str) {
        let mut cumulative = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Ordering::Relaxed);
            let le = BOUNDS_US
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |bound| format!("{bound}.000000"));
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
        let braces = |l: &str| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{{{l}}}")
            }
        };
        let _ = writeln!(out, "{name}_sum{} {}", braces(sum_labels), self.sum_us());
        let _ = writeln!(out, "{name}_count{} {}", braces(sum_labels), self.count());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_land_in_their_buckets_and_are_written_cumulatively() {
        let h = LatencyHistogram::default();
        assert_eq!(h.bound_for(0.95), None);
        h.record(Duration::from_micros(40));
        h.record(Duration::from_micros(50));
        h.record(Duration::from_micros(60));
        h.record(Duration::from_secs(60));
        assert_eq!((h.count(), h.sum_us()), (4, 60_000_150));
        assert_eq!(h.bound_for(0.5), Some(50));
        assert_eq!(h.bound_for(0.75), Some(75));
        assert_eq!(h.bound_for(1.0), Some(u64::MAX));
        let mut out = String::new();
        h.write(&mut out, "x", "m=\"a\"", "");
        assert!(out.starts_with(
            "x_bucket{m=\"a\",le=\"50.000000\"} 2\nx_bucket{m=\"a\",le=\"75.000000\"} 3\n"
        ));
        assert!(out.contains(
            "x_bucket{m=\"a\",le=\"20000000.000000\"} 3\nx_bucket{m=\"a\",le=\"+Inf\"} 4\n"
        ));
        assert!(out.ends_with("x_sum 60000150\nx_count 4\n"));
    }
}
