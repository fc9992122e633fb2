//! `store_bench --mode=null_master`, the ceiling `bench/master_load.sh` measures both
//! masters against: it answers the load's calls without any work and passes every
//! other call to the real master behind it, so a whole `master_load` run through it
//! succeeds.

#[path = "store_support/cluster.rs"]
mod cluster;

use cluster::{Master, Proc, DEADLINE};
use mooncake::wire::master_api::{MasterApi, DEFAULT_TENANT};
use mooncake::wire::rpc_client::MasterRpcClient;
use std::process::Command;
use std::time::Duration;

/// A null master in front of `master`; returns it and its address.
fn null_master(master: &Master) -> (Proc, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_store_bench"));
    cmd.args([
        "--mode=null_master".to_string(),
        format!("--master_server_addr={}", master.addr()),
        "--listen=127.0.0.1:0".to_string(),
    ]);
    let mut p = Proc::spawn(cmd, "null_master", &[], true);
    let line = p.line(DEADLINE, "null master");
    let addr = line
        .strip_prefix("NULL_MASTER listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_string();
    (p, addr)
}

/// The `key=value` fields of a `ROW` line.
fn field<'a>(row: &'a str, key: &str) -> &'a str {
    row.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {key} in {row}"))
}

#[test]
fn a_master_load_run_through_the_null_master_succeeds() {
    let master = Master::start(10);
    let (_null, addr) = null_master(&master);
    for pipeline in ["4", "1"] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_store_bench"));
        cmd.args([
            "--mode=master_load".to_string(),
            format!("--master_server_addr={addr}"),
            "--threads=2".to_string(),
            "--duration=1".to_string(),
            format!("--pipeline={pipeline}"),
            "--prefill=100".to_string(),
        ]);
        let mut load = Proc::spawn(cmd, "master_load", &[], true);
        let mut rows = Vec::new();
        while rows.len() < 4 {
            let line = load.line(DEADLINE, "master_load");
            if line.starts_with("ROW ") {
                rows.push(line);
            }
        }
        for row in &rows {
            assert_eq!(field(row, "errors"), "0", "pipeline {pipeline}: {row}");
            let ops: f64 = field(row, "ops").parse().expect("ops");
            assert!(ops > 0.0, "pipeline {pipeline}: {row}");
        }
        assert!(load.wait_exit(DEADLINE, "master_load").success());
    }
}

#[test]
fn reads_are_answered_without_the_master_and_the_rest_goes_through() {
    let master = Master::start(10);
    let (_null, addr) = null_master(&master);
    let t = Duration::from_secs(5);
    let null = MasterRpcClient::connect(&addr, t, t).expect("connecting to the null master");
    // No work: a key nobody put exists for the null master, not for the real one.
    assert_eq!(null.exist_key("never-put", DEFAULT_TENANT), Ok(true));
    assert_eq!(
        master.rpc().exist_key("never-put", DEFAULT_TENANT),
        Ok(false)
    );
    // Before any PutStart there are no replicas to answer with: GetReplicaList goes
    // to the real master, which has no such key.
    let via_null = null
        .get_replica_list("never-put", DEFAULT_TENANT)
        .map(|_| ());
    let direct = master
        .rpc()
        .get_replica_list("never-put", DEFAULT_TENANT)
        .map(|_| ());
    assert!(direct.is_err(), "{direct:?}");
    assert_eq!(via_null, direct);
}
