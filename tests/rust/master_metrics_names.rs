//! The master's `/metrics` against upstream 0.3.13's: every metric family upstream's
//! `mooncake_master` exposes (`tests/data/upstream_master_metrics.txt`, name and type,
//! taken from a run of the 0.3.13 wheel's binary) is exported by ours with the same
//! type, or is listed in [`ABSENT`] with the reason (README "The master's metrics").
//! A family in [`ABSENT`] that ours exports fails too, so the list only shrinks.
//!
//! And upstream's Grafana dashboard against ours: every metric name its panels query
//! (`tests/data/upstream_dashboard_metrics.txt`) is exported by ours, or is upstream
//! 0.3.13's and absent for a reason in [`ABSENT`], or is newer than 0.3.13 and listed
//! in [`DASHBOARD_ABSENT`] with its reason.

use mooncake::master::admin::AdminHandler;
use mooncake::master::{MasterConfig, MasterService};
use mooncake::runtime::http_server::HttpServer;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Upstream's list of refused promotions retried later (candidates): not built.
const PROMOTION_CANDIDATES: &str = "no promotion candidate list in this master";
/// Upstream's etcd oplog: HA here streams from the leader, there is no oplog.
const HA_OPLOG: &str = "no etcd oplog in this master";
/// NVMe-oF and shared-file-system tiers are refused at start.
const REFUSED_TIERS: &str = "the tier is refused by this master";

/// Upstream's families ours does not export, and why.
const ABSENT: &[(&str, &str)] = &[
    ("ha_oplog_applied_sequence_id", HA_OPLOG),
    ("ha_oplog_last_sequence_id", HA_OPLOG),
    ("ha_oplog_pending_entries", HA_OPLOG),
    ("ha_oplog_standby_lag", HA_OPLOG),
    ("ha_pending_mutation_queue_size", HA_OPLOG),
    ("ha_standby_state", HA_OPLOG),
    ("master_allocated_file_size_bytes", REFUSED_TIERS),
    ("master_nof_allocated_bytes", REFUSED_TIERS),
    (
        "master_promotion_candidate_admission_rejected_total",
        PROMOTION_CANDIDATES,
    ),
    (
        "master_promotion_candidate_admitted_total",
        PROMOTION_CANDIDATES,
    ),
    (
        "master_promotion_candidate_dropped_limit_total",
        PROMOTION_CANDIDATES,
    ),
    (
        "master_promotion_candidate_expired_evaluated_total",
        PROMOTION_CANDIDATES,
    ),
    (
        "master_promotion_candidate_expired_unevaluated_total",
        PROMOTION_CANDIDATES,
    ),
    (
        "master_promotion_candidate_recorded_total",
        PROMOTION_CANDIDATES,
    ),
    ("master_total_file_capacity_bytes", REFUSED_TIERS),
    ("master_total_nof_capacity_bytes", REFUSED_TIERS),
];

/// Upstream's NVMe-oF tier (after 0.3.13): refused here.
const NOF: &str = "the NVMe-oF tier is refused by this master";
/// Upstream's metadata snapshots (after 0.3.13): HA here replicates from the leader.
const SNAPSHOTS: &str = "no metadata snapshots in this master";

/// Names the dashboard queries that neither upstream 0.3.13's master nor ours
/// exports, and why ours does not.
const DASHBOARD_ABSENT: &[(&str, &str)] = &[
    ("master_attempted_evictions_nof", NOF),
    ("master_evicted_key_count_nof", NOF),
    ("master_evicted_size_bytes_nof", NOF),
    ("master_successful_evictions_nof", NOF),
    ("master_mount_nof_segment_requests_total", NOF),
    ("master_remount_nof_segment_requests_total", NOF),
    ("master_unmount_nof_segment_requests_total", NOF),
    ("master_nof_heartbeat_failure_total", NOF),
    ("master_nof_heartbeat_probe_latency_ms_bucket", NOF),
    ("master_nof_heartbeat_success_total", NOF),
    ("master_nof_heartbeat_timeout_total", NOF),
    ("master_nof_segments_unmounted_by_heartbeat_total", NOF),
    ("master_snapshot_duration_ms_bucket", SNAPSHOTS),
    ("master_snapshot_fail", SNAPSHOTS),
    ("master_snapshot_success", SNAPSHOTS),
];

/// A file of `tests/data`.
fn data(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name),
    )
    .expect("test data")
}

/// Our master's metric families and their types, from its `/metrics`.
fn our_families() -> BTreeMap<String, String> {
    let master = MasterService::new(MasterConfig::default());
    let server = HttpServer::start(
        "127.0.0.1:0".parse().unwrap(),
        "admin HTTP",
        Arc::new(AdminHandler(master.clone())),
    )
    .expect("admin server");
    let url = format!("http://{}/metrics", server.local_addr());
    let body = ureq::get(&url)
        .call()
        .expect("GET /metrics")
        .into_string()
        .unwrap();
    families(&body)
}

/// `# TYPE name type` lines of a Prometheus exposition.
fn families(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            Some((words.next()?.to_string(), words.next()?.to_string()))
        })
        .collect()
}

#[test]
fn every_upstream_family_is_exported_or_explained() {
    let ours = our_families();
    let upstream = data("upstream_master_metrics.txt");
    let mut problems = Vec::new();
    let mut count = 0;
    for line in upstream.lines().filter(|l| !l.trim().is_empty()) {
        count += 1;
        let (name, kind) = line.split_once(' ').expect("name type");
        let absent = ABSENT.iter().find(|(n, _)| *n == name);
        match (ours.get(name), absent) {
            (Some(k), None) if k == kind => {}
            (Some(k), None) => problems.push(format!("{name}: ours is a {k}, upstream's a {kind}")),
            (Some(_), Some(_)) => problems.push(format!("{name} is exported: drop it from ABSENT")),
            (None, None) => problems.push(format!("{name} ({kind}) is missing")),
            (None, Some(_)) => {}
        }
    }
    assert_eq!(count, 133, "upstream 0.3.13's master exposes 133 families");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    for (name, _) in ABSENT {
        assert!(
            upstream.lines().any(|l| l.split(' ').next() == Some(name)),
            "{name} in ABSENT is not one of upstream's"
        );
    }
}

#[test]
fn every_name_the_dashboard_queries_is_exported_or_explained() {
    let ours = our_families();
    let upstream = data("upstream_master_metrics.txt");
    let upstream: Vec<&str> = upstream
        .lines()
        .filter_map(|l| l.split(' ').next())
        .collect();
    let dashboard = data("upstream_dashboard_metrics.txt");
    let names: Vec<&str> = dashboard
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    assert_eq!(names.len(), 109, "the dashboard queries 109 names");
    let mut problems = Vec::new();
    for name in &names {
        // A histogram is queried through its `_bucket` series.
        let family = name.strip_suffix("_bucket").unwrap_or(name);
        let exported =
            ours.contains_key(*name) || ours.get(family).is_some_and(|k| k == "histogram");
        let explained = ABSENT.iter().any(|(n, _)| n == name)
            || DASHBOARD_ABSENT
                .iter()
                .any(|(n, _)| n == name && !upstream.contains(&family));
        match (exported, explained) {
            (true, false) | (false, true) => {}
            (true, true) => {
                problems.push(format!("{name} is exported: drop it from the absent lists"))
            }
            (false, false) => {
                problems.push(format!("{name} is queried by the dashboard and missing"))
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    for (name, _) in DASHBOARD_ABSENT {
        assert!(
            names.contains(name),
            "{name} in DASHBOARD_ABSENT is not queried"
        );
    }
}
