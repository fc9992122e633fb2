//! `store_node` children (`examples/store_node.rs`): store clients with a mounted
//! segment, driven over stdin, for tests that kill, freeze or restart processes.
#![allow(dead_code)]

use super::cluster::{profile_dir, Master, Proc, DEADLINE};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// `examples/store_node`, built with the cargo running this test when it is missing or
/// older than this test executable (cargo does not build examples for `--test`).
fn node_exe() -> PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let exe = profile_dir().join("examples/store_node");
        let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let me = std::env::current_exe().ok().and_then(|p| mtime(&p));
        let stale = match (mtime(&exe), me) {
            (Some(example), Some(me)) => example < me,
            (Some(_), None) => false,
            (None, _) => true,
        };
        if stale {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
                .args(["build", "--example", "store_node"]);
            if profile_dir().file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let ok = cmd.status().is_ok_and(|s| s.success());
            assert!(
                ok || exe.is_file(),
                "cargo build --example store_node failed"
            );
            if !ok {
                eprintln!("warning: rebuilding store_node failed; using the existing binary");
            }
        }
        exe
    })
    .clone()
}

/// A `store_node` child: a client with a mounted segment, driven over stdin.
pub struct Node {
    pub proc: Proc,
    /// Its segment's name.
    pub hostname: String,
    /// Its Transfer Engine endpoint.
    pub te: String,
}

/// Spawns `store_node --commands` against `master` and the metadata server `metadata`.
pub fn spawn_node(master: &Master, metadata: &str, segment_mib: u64, env: &[(&str, &str)]) -> Proc {
    let mut cmd = Command::new(node_exe());
    cmd.args([
        format!("--master={}", master.addr()),
        format!("--metadata={metadata}"),
        "--hostname=127.0.0.1".into(),
        format!("--segment_mib={segment_mib}"),
        "--local_buffer_mib=8".into(),
        "--commands".into(),
    ]);
    Proc::spawn(cmd, "store-node", env, true)
}

impl Node {
    /// A node against `master` and its metadata server, if any (else P2P handshake).
    pub fn start(master: &Master, segment_mib: u64, env: &[(&str, &str)]) -> Node {
        Node::start_with_metadata(master, &master.metadata(), segment_mib, env)
    }

    /// A node against `master` and the metadata server `metadata`.
    pub fn start_with_metadata(
        master: &Master,
        metadata: &str,
        segment_mib: u64,
        env: &[(&str, &str)],
    ) -> Node {
        let mut proc = spawn_node(master, metadata, segment_mib, env);
        let line = proc.line(DEADLINE, "store_node startup");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["store_node", "serving", "segment", host, "te_endpoint", te] => Node {
                hostname: host.to_string(),
                te: te.to_string(),
                proc,
            },
            _ => panic!("store_node did not start: {line}\n{}", proc.log_tail()),
        }
    }

    /// Sends one command and returns its answer (fails after `limit`).
    pub fn cmd(&mut self, line: &str, limit: Duration) -> String {
        let stdin = self.proc.stdin.as_mut().expect("node stdin");
        writeln!(stdin, "{line}").expect("writing to store_node");
        stdin.flush().expect("flushing store_node stdin");
        self.proc.line(limit, line)
    }

    /// Sends one line that gets no answer.
    pub fn cmd_no_reply(&mut self, line: &str) {
        let stdin = self.proc.stdin.as_mut().expect("node stdin");
        writeln!(stdin, "{line}").expect("writing to store_node");
        stdin.flush().expect("flushing store_node stdin");
    }

    /// The numeric code of a one-value answer (`put 0`, `exist 1`, `health 2`, `get N -`).
    pub fn code(&mut self, line: &str, limit: Duration) -> i64 {
        let reply = self.cmd(line, limit);
        reply
            .split_whitespace()
            .nth(1)
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("{line}: unexpected answer {reply:?}"))
    }
}
