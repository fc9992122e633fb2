//! The store under a realistic cache workload, with real processes: the
//! `mooncake_master` binary (default cache flags) and `store_bench --mode=pressure`
//! clients, each mounting a 96 MiB segment and looping over its own 3,000 keys of
//! 64 KiB-1 MiB (about 8x the pool), 45 % put / 45 % get / 10 % remove, every read
//! checked byte for byte.
//!
//! 1. The pool is a cache: puts make room by eviction instead of failing
//!    (NO_AVAILABLE_HANDLE), for `put`, `put_from` and `batch_put_from`.
//! 2. A third segment owner is SIGKILLed while the others run: its segment stops
//!    taking allocations at once (the master sees its connections drop), failed puts
//!    are retried elsewhere, and its objects read as misses, not as transfer errors.
//!
//! The bounds are rates over whole runs (failed puts < 1 %, corrupt reads 0); nothing
//! depends on how fast the machine is.

#[path = "store_support/cluster.rs"]
mod cluster;

use cluster::{Master, Proc, DEADLINE};
use std::collections::HashMap;
use std::process::Command;

/// Seconds each workload process runs.
const RUN_SECS: u64 = 4;

/// The counters of one `PRESSURE` (or `INTERVAL`) line.
#[derive(Debug, Default)]
struct Tally(HashMap<String, String>);

impl Tally {
    fn parse(line: &str) -> Tally {
        Tally(
            line.split_whitespace()
                .skip(1)
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn num(&self, key: &str) -> u64 {
        self.0
            .get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {:?}", self.0))
    }
}

/// A `store_bench --mode=pressure` child against `master` with extra flags.
fn pressure(master: &Master, what: &str, flags: &[&str]) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_store_bench"));
    cmd.args([
        "--mode=pressure".to_string(),
        format!("--master_server_addr={}", master.addr()),
        format!("--key_prefix={what}"),
    ]);
    cmd.args(flags);
    Proc::spawn(cmd, what, &[], true)
}

/// Reads the child's stdout up to its `PRESSURE` line; also returns the `INTERVAL`
/// lines before it.
fn finish(p: &mut Proc) -> (Tally, Vec<Tally>) {
    let mut intervals = Vec::new();
    loop {
        let line = p.line(DEADLINE, "store_bench pressure");
        if line.starts_with("INTERVAL ") {
            intervals.push(Tally::parse(&line));
        } else if line.starts_with("PRESSURE ") {
            return (Tally::parse(&line), intervals);
        }
    }
}

/// Every read was right, and under 1 % of the puts failed.
fn assert_healthy(what: &str, t: &Tally) {
    let puts = t.num("puts");
    assert!(puts >= 50, "{what}: only {puts} puts ran: {t:?}");
    assert_eq!(t.num("corrupt"), 0, "{what}: corrupt reads: {t:?}");
    assert!(
        t.num("put_failed") * 100 < puts,
        "{what}: {} of {puts} puts failed: {t:?}",
        t.num("put_failed")
    );
}

#[test]
fn oversubscribed_pool_puts_evict_instead_of_failing() {
    let master = Master::start(10);
    let duration = format!("--duration={RUN_SECS}");
    for pair in [["put", "put"], ["put_from", "batch_put_from"]] {
        let mut procs: Vec<(String, Proc)> = pair
            .iter()
            .enumerate()
            .map(|(i, op)| {
                let what = format!("{op}{i}");
                let flag = format!("--put_op={op}");
                let p = pressure(&master, &what, &[&duration, &flag]);
                (what, p)
            })
            .collect();
        for (what, p) in &mut procs {
            let (t, _) = finish(p);
            println!("{what}: {t:?}");
            assert_healthy(what, &t);
            assert!(
                t.num("hits") > 0,
                "{what}: nothing was ever read back: {t:?}"
            );
        }
    }
}

#[test]
fn a_killed_segment_owner_stops_taking_puts_at_once() {
    let master = Master::start(10);
    let mut doomed = pressure(
        &master,
        "doomed",
        &[
            "--global_segment_size=128MiB",
            "--keys=100",
            "--mix=100,0,0",
            "--duration=600",
        ],
    );
    let secs = format!("--duration={}", 2 * RUN_SECS);
    let mut procs: Vec<Proc> = ["a", "b"]
        .iter()
        .map(|w| pressure(&master, w, &[&secs, "--report_every=1"]))
        .collect();
    // Both are running (a first interval is in) when the third owner dies.
    let firsts: Vec<String> = procs
        .iter_mut()
        .map(|p| p.line(DEADLINE, "first interval"))
        .collect();
    doomed.kill();
    for (p, first) in procs.iter_mut().zip(firsts) {
        assert!(first.starts_with("INTERVAL "), "{first}");
        let (t, intervals) = finish(p);
        println!("{}: {t:?}", p.what);
        assert_healthy(&p.what, &t);
        // Reads of objects that were on the dead segment are misses (-704), not
        // errors (-800) that go on after the kill.
        let late_errors: u64 = intervals.iter().skip(2).map(|i| i.num("get_errors")).sum();
        assert_eq!(
            late_errors, 0,
            "{}: reads kept failing: {intervals:?}",
            p.what
        );
    }
}
