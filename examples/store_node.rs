//! `store_node`: a Mooncake Store segment owner (a store "server" process) for tests
//! and demos.
//!
//! Sets up a [`Client`] that mounts `--segment_mib` MiB on the master, prints one line
//!
//! ```text
//! store_node serving segment <hostname> te_endpoint <te segment name>
//! ```
//!
//! on stdout, then serves until SIGTERM/SIGINT. If setup fails it prints
//! `store_node setup failed <code>` and exits with status 1.
//!
//! With `--commands` it also reads one command per line on stdin, answers each with
//! one line on stdout, and exits when stdin closes (so it never outlives a parent that
//! pipes its stdin). Commands (values are a deterministic pattern of `seed`):
//!
//! * `put <key> <len> <seed> [segment]` → `put <code>` (0 or a negative error code);
//!   the value goes to `segment` first when given.
//! * `get <key> <len> <seed>` → `get <bytes|code> <match|mismatch|->`.
//! * `exist <key>` → `exist <1|0|code>`.
//! * `health` → `health <0|1|2>`.
//! * `quit` → exits.
//!
//! The RPC deadlines come from `MC_RPC_TIMEOUT_MS` / `MC_RPC_CONNECT_TIMEOUT_MS`, as
//! for every store client.
//!
//! Usage: `cargo run --example store_node -- [--master=127.0.0.1:50051]
//! [--hostname=127.0.0.1] [--metadata=P2PHANDSHAKE] [--segment_mib=64]
//! [--local_buffer_mib=16] [--commands]`

use mooncake::host::logger;
use mooncake::runtime::signals;
use mooncake::store::{Client, ReplicateConfig, SetupConfig};
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

const USAGE: &str = "\
Usage: store_node [--master=HOST:PORT] [--hostname=HOST[:PORT]] [--metadata=P2PHANDSHAKE|URL]
                  [--segment_mib=64] [--local_buffer_mib=16] [--commands]";

/// Command-line settings.
#[derive(Debug)]
struct Args {
    master: String,
    hostname: String,
    metadata: String,
    segment_mib: u64,
    local_buffer_mib: u64,
    commands: bool,
}

fn parse_args(it: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut a = Args {
        master: "127.0.0.1:50051".into(),
        hostname: "127.0.0.1".into(),
        metadata: "P2PHANDSHAKE".into(),
        segment_mib: 64,
        local_buffer_mib: 16,
        commands: false,
    };
    for arg in it {
        let flag = arg.trim_start_matches('-');
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (flag, None),
        };
        let num = |v: Option<&str>| -> Result<u64, String> {
            v.ok_or(format!("--{name} needs a value"))?
                .parse()
                .map_err(|_| format!("--{name}: not a number"))
        };
        let text = |v: Option<&str>| -> Result<String, String> {
            v.map(str::to_string)
                .ok_or(format!("--{name} needs a value"))
        };
        match name {
            "help" | "h" => return Ok(None),
            "master" => a.master = text(value)?,
            "hostname" => a.hostname = text(value)?,
            "metadata" => a.metadata = text(value)?,
            "segment_mib" => a.segment_mib = num(value)?,
            "local_buffer_mib" => a.local_buffer_mib = num(value)?,
            "commands" => a.commands = true,
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    Ok(Some(a))
}

/// Byte `i` of the value of `seed` (the tests compute the same pattern).
fn pattern_byte(i: usize, seed: u8) -> u8 {
    (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 11) as u8
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| pattern_byte(i, seed)).collect()
}

/// Runs one command line; `None` for `quit`.
fn command(client: &Client, line: &str) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let num = |i: usize| words.get(i).and_then(|w| w.parse::<u64>().ok());
    let reply = match words.as_slice() {
        ["quit"] => return None,
        ["health"] => format!("health {}", client.health() as i32),
        ["exist", key] => match client.is_exist(key) {
            Ok(b) => format!("exist {}", b as i32),
            Err(e) => format!("exist {}", e.code.0),
        },
        ["put", key, _, _] | ["put", key, _, _, _] => match (num(2), num(3)) {
            (Some(len), Some(seed)) => {
                let config = ReplicateConfig {
                    preferred_segments: words.get(4).map(|s| s.to_string()).into_iter().collect(),
                    ..ReplicateConfig::default()
                };
                let code = match client.put(key, &pattern(len as usize, seed as u8), &config) {
                    Ok(()) => 0,
                    Err(e) => e.code.0,
                };
                format!("put {code}")
            }
            _ => format!("error bad arguments: {line}"),
        },
        ["get", key, _, _] => match (num(2), num(3)) {
            (Some(len), Some(seed)) => {
                let mut buf = vec![0u8; len as usize];
                match client.get_into(key, &mut buf) {
                    Ok(n) => {
                        let ok = n == len && buf == pattern(len as usize, seed as u8);
                        format!("get {n} {}", if ok { "match" } else { "mismatch" })
                    }
                    Err(e) => format!("get {} -", e.code.0),
                }
            }
            _ => format!("error bad arguments: {line}"),
        },
        _ => format!("error unknown command: {line}"),
    };
    Some(reply)
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn main() -> ExitCode {
    logger::install();
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let cfg = SetupConfig {
        local_hostname: args.hostname.clone(),
        metadata_server: args.metadata.clone(),
        global_segment_size: args.segment_mib << 20,
        local_buffer_size: args.local_buffer_mib << 20,
        protocol: "tcp".into(),
        device_name: String::new(),
        master_server_addr: args.master.clone(),
        ..SetupConfig::default()
    };
    signals::install_stop_handlers();
    let client = match Client::setup(&cfg) {
        Ok(c) => c,
        Err(e) => {
            say(&format!("store_node setup failed {}", e.code.0));
            eprintln!("store_node: setup against {} failed: {e}", args.master);
            return ExitCode::from(1);
        }
    };
    say(&format!(
        "store_node serving segment {} te_endpoint {}",
        client.hostname(),
        client.te_segment_name().unwrap_or_default()
    ));
    let (tx, lines) = mpsc::channel::<Option<String>>();
    if args.commands {
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                match line {
                    Ok(l) => {
                        if tx.send(Some(l)).is_err() {
                            return;
                        }
                    }
                    Err(_) => break,
                }
            }
            let _ = tx.send(None);
        });
    } else {
        // Keeps the channel open: only a signal ends the loop.
        std::mem::forget(tx);
    }
    while !signals::stop_requested() {
        match lines.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(line)) if line.trim().is_empty() => {}
            Ok(Some(line)) => match command(&client, line.trim()) {
                Some(reply) => say(&reply),
                None => break,
            },
            Ok(None) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
    eprintln!("store_node: shutting down");
    client.close();
    ExitCode::SUCCESS
}
