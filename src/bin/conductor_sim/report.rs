//! The report's table: its header, one row per replay, and verdicts against the
//! targets.

use crate::sim::RunResult;

pub(crate) fn header() {
    println!("| policy | early rejection | avg TTFT (s) | p90 TTFT (s) | p90 TBT (ms) | cache hit rate | refused | effective (TTFT <= SLO, TBT <= SLO) | accepted missing an SLO | TTFT prediction error (median after warm-up) | replay |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
}

pub(crate) fn row(policy: &str, rejection: bool, r: &RunResult) {
    println!(
        "| {policy} | {} | {:.2} | {:.2} | {:.1} | {:.1} % | {} | {} ({:.1} %) | {:.1} % | {} | {:.1} s, {:.0} calls/s |",
        if rejection { "on" } else { "off" },
        r.ttft_mean / 1e3,
        r.ttft_p90 / 1e3,
        r.tbt_p90,
        100.0 * r.hit_rate,
        r.rejected,
        r.effective,
        100.0 * r.effective as f64 / r.requests.max(1) as f64,
        100.0 * r.accepted_missed_fraction(),
        r.prediction_error
            .map_or("-".into(), |e| format!("{:.1} %", 100.0 * e)),
        r.wall_s,
        r.calls as f64 / r.wall_s.max(1e-9),
    );
    eprintln!(
        "ROW policy={policy} rejection={rejection} ttft_mean_ms={:.1} ttft_p90_ms={:.1} tbt_p90_ms={:.2} hit_rate={:.4} rejected={} effective={} requests={} accepted_missed={} prediction_error={} forgotten={}",
        r.ttft_mean,
        r.ttft_p90,
        r.tbt_p90,
        r.hit_rate,
        r.rejected,
        r.effective,
        r.requests,
        r.accepted_missed,
        r.prediction_error.unwrap_or(-1.0),
        r.forgotten
    );
}

pub(crate) fn verdict(what: &str, met: bool) {
    println!("- {what}: {}", if met { "met" } else { "MISSED" });
}
