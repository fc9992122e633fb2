//! The P2P Store as users run it: `mooncake_p2p` processes on 127.0.0.1 sharing a
//! file over real etcd and over our HTTP metadata server. A seed publishes the file;
//! a helper fetches a copy and serves it; several receivers fetch at once while the
//! helper is SIGKILLed, and every receiver still ends with the file's exact bytes; a
//! receiver killed mid-fetch and started again over its partial file keeps what it
//! had; an agent fetches a copy on request.

mod interop_common;
mod kv_servers;

use interop_common::ChildGuard;
use kv_servers::Etcd;
use mooncake::metadata::http_server::HttpMetadataServer;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Only reached when something hangs; nothing asserts on timing.
const DEADLINE: Duration = Duration::from_secs(180);
const SHARD: usize = 256 << 10;
const SIZE: usize = 24 << 20;

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_mooncake_p2p")
}

fn command(metadata: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(binary());
    cmd.args([
        &format!("--metadata={metadata}"),
        "--local_server_name=127.0.0.1",
        "--quiet",
        "--shard_size=256KB",
        "--concurrency=2",
    ])
    .args(args)
    .env("MC_P2P_NO_SOURCE_RETRIES", "3");
    cmd
}

fn spawn(metadata: &str, args: &[&str], what: &str) -> ChildGuard {
    ChildGuard::spawn(command(metadata, args), what, false)
}

/// Runs a command to the end; its stdout, or a panic with its stderr.
fn run(metadata: &str, args: &[&str]) -> String {
    let out = command(metadata, args)
        .output()
        .expect("running mooncake_p2p");
    assert!(
        out.status.success(),
        "mooncake_p2p {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn data() -> Vec<u8> {
    (0..SIZE)
        .map(|i| (i as u8).wrapping_mul(13) ^ (i >> 11) as u8 ^ (i >> 19) as u8)
        .collect()
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mooncake-p2p-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Waits until `guard`'s log says `text`.
fn wait_for(what: &str, guard: &mut ChildGuard, text: &str) {
    let deadline = Instant::now() + DEADLINE;
    while !log_says(guard, text) {
        if let Some(status) = guard.exited() {
            panic!("{what}: exited ({status})\n{}", guard.log_tail());
        }
        assert!(Instant::now() < deadline, "{what}\n{}", guard.log_tail());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn log_says(guard: &ChildGuard, text: &str) -> bool {
    std::fs::read_to_string(&guard.log).is_ok_and(|l| l.contains(text))
}

fn finish(mut guard: ChildGuard) -> String {
    let status = guard.wait_until(Instant::now() + DEADLINE);
    assert!(
        status.is_some_and(|s| s.success()),
        "{} ended {status:?}\n{}",
        guard.what,
        guard.log_tail()
    );
    std::fs::read_to_string(&guard.log).unwrap_or_default()
}

fn same_file(path: &Path, data: &[u8]) -> bool {
    std::fs::read(path).is_ok_and(|got| got == data)
}

/// One shard of `path` already equal to the data (some fetch has landed there).
fn some_shard_landed(path: &Path, data: &[u8]) -> bool {
    let Ok(got) = std::fs::read(path) else {
        return false;
    };
    got.len() == data.len()
        && got
            .chunks(SHARD)
            .zip(data.chunks(SHARD))
            .any(|(a, b)| a == b && a.iter().any(|&x| x != 0))
}

fn scenario(metadata: &str, tag: &str) {
    let dir = scratch(tag);
    let data = data();
    let source = dir.join("model.bin");
    std::fs::write(&source, &data).unwrap();
    let name = format!("ckpt/{tag}");

    let mut seed = spawn(
        metadata,
        &["put", source.to_str().unwrap(), &name],
        "p2p-seed",
    );
    wait_for("the seed publishes", &mut seed, "published");
    let listed = run(metadata, &["list", "ckpt/"]);
    assert!(
        listed.contains(&name) && listed.contains(&SIZE.to_string()),
        "{listed}"
    );

    // A helper with a full copy, serving it.
    let helper_file = dir.join("helper.bin");
    let mut helper = spawn(
        metadata,
        &["--serve", "get", &name, helper_file.to_str().unwrap()],
        "p2p-helper",
    );
    wait_for("the helper fetches", &mut helper, "serving");
    assert!(same_file(&helper_file, &data));

    // Receivers start; the helper dies under them.
    let receivers: Vec<(ChildGuard, PathBuf)> = (0..3)
        .map(|i| {
            let file = dir.join(format!("r{i}.bin"));
            let g = spawn(
                metadata,
                &["get", &name, file.to_str().unwrap()],
                "p2p-receiver",
            );
            (g, file)
        })
        .collect();
    drop(helper); // SIGKILL
    for (guard, file) in receivers {
        finish(guard);
        assert!(same_file(&file, &data), "{} differs", file.display());
    }

    // A receiver killed mid-fetch resumes over its partial file.
    let partial = dir.join("partial.bin");
    let mut first = spawn(
        metadata,
        &["--concurrency=1", "get", &name, partial.to_str().unwrap()],
        "p2p-interrupted",
    );
    let deadline = Instant::now() + DEADLINE;
    while !some_shard_landed(&partial, &data) && first.exited().is_none() {
        assert!(Instant::now() < deadline, "{}", first.log_tail());
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(first); // SIGKILL
    let again = spawn(
        metadata,
        &["get", &name, partial.to_str().unwrap()],
        "p2p-resumed",
    );
    let log = finish(again);
    assert!(same_file(&partial, &data));
    let kept = log
        .split("bytes fetched, ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no summary line:\n{log}"));
    assert!(
        kept >= SHARD as u64,
        "the restarted receiver kept {kept} bytes\n{log}"
    );

    // An agent fetches a copy when asked.
    let mut node = spawn(metadata, &["--agent_port=0", "serve"], "p2p-agent");
    wait_for("the agent starts", &mut node, "serving");
    let log = std::fs::read_to_string(&node.log).unwrap();
    let peer = log
        .split("node ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .expect("the node's name in its log")
        .to_string();
    run(metadata, &["replicate", &name, &peer]);
    let listed = run(metadata, &["list", &name]);
    assert!(listed.contains(&peer), "{peer} holds a copy: {listed}");
    drop(node);
    drop(seed);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn receivers_complete_over_etcd_while_a_source_dies() {
    let Some(etcd) = Etcd::start("receivers_complete_over_etcd_while_a_source_dies") else {
        return;
    };
    scenario(&format!("127.0.0.1:{}", etcd.port), "etcd");
}

#[test]
fn receivers_complete_over_the_http_metadata_server_while_a_source_dies() {
    let server = HttpMetadataServer::start("127.0.0.1:0".parse().unwrap()).expect("server");
    let url = format!("http://{}/metadata", server.local_addr());
    scenario(&url, "http");
    server.stop();
}
