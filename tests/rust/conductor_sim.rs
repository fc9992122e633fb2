//! `conductor_sim` end to end on the first 600 requests of the FAST'25 conversation
//! trace (shipped in `data/fast25/`): every policy is replayed against a conductor
//! over HTTP, the early-rejection comparison runs, and the figures behave as the
//! policies should: cache-aware placement reuses more of the prefix cache than
//! load balancing, the global policy pulls prefixes, early rejection refuses requests
//! at an overload, and every request is accounted for.

use std::collections::HashMap;
use std::process::Command;

/// `ROW key=value ...` lines of the simulator's stderr, by policy and rejection.
fn rows(stderr: &str) -> HashMap<(String, bool), HashMap<String, f64>> {
    let mut out = HashMap::new();
    for line in stderr.lines().filter_map(|l| l.strip_prefix("ROW policy=")) {
        let mut words = line.split_whitespace();
        let policy = words.next().unwrap().to_string();
        let fields: HashMap<String, String> = words
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let rejection = fields["rejection"] == "true";
        let numbers = fields
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.parse::<f64>().ok()?)))
            .collect();
        out.insert((policy, rejection), numbers);
    }
    out
}

#[test]
fn replays_every_policy_and_the_rejection_comparison() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(env!("CARGO_BIN_EXE_conductor_sim"))
        .current_dir(root)
        .args([
            "--trace=data/fast25/conversation_trace.jsonl",
            "--limit=600",
            "--overload_speedup=4",
            "--bench_calls=2000",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for policy in [
        "random",
        "round_robin",
        "least_loaded",
        "local_cache_aware",
        "global_cache_aware",
    ] {
        assert!(stdout.contains(&format!("| {policy} | off |")), "{stdout}");
    }
    assert!(stdout.contains("### Scheduling rate"), "{stdout}");
    let rows = rows(&stderr);
    let get = |p: &str, r: bool, k: &str| rows[&(p.to_string(), r)][k];
    for ((policy, _), row) in &rows {
        assert_eq!(row["requests"], 600.0, "{policy}");
        assert_eq!(row["forgotten"], 0.0, "{policy}");
        assert!(row["effective"] + row["accepted_missed"] + row["rejected"] == 600.0);
    }
    assert!(get("global_cache_aware", false, "hit_rate") > get("least_loaded", false, "hit_rate"));
    assert!(get("local_cache_aware", false, "hit_rate") > get("random", false, "hit_rate"));
    assert_eq!(get("least_loaded", false, "rejected"), 0.0);
    // At four times the load the guarded conductor refuses some requests.
    assert!(get("global_cache_aware", true, "rejected") > 0.0);
    // Every rate was measured (the per-CPU ones from the server's connection thread's
    // clock ticks: 2,000 calls take well over one tick).
    let bench = stderr
        .lines()
        .find_map(|l| l.strip_prefix("ROW bench "))
        .unwrap_or_else(|| panic!("no bench row:\n{stderr}"));
    for field in bench.split_whitespace() {
        let (name, value) = field.split_once('=').unwrap();
        assert!(value.parse::<f64>().unwrap() > 0.0, "{name} in {bench}");
    }
}
