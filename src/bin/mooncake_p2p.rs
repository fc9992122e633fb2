//! `mooncake_p2p`: one node of the P2P Store from the command line: publish a file,
//! fetch one (resuming a partial file), list objects, ask a peer to fetch a copy, or
//! just serve with an agent. Files are mapped, not read into memory: a published file
//! is read by peers straight from its pages, a fetched one is written in place.

use mooncake::config::flags::{kind_in, parse_byte_size, run_main, FlagKind, Flags};
use mooncake::host::mapping::Mapping;
use mooncake::p2p::{Agent, GetOptions, P2pConfig, P2pError, P2pStore};
use mooncake::runtime::signals;
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

const USAGE: &str = "\
Usage: mooncake_p2p [flags] <command> [arguments]

A node of the Mooncake P2P Store (objects shared between nodes with no master).

Commands:
  serve                 serve this node's agent until SIGINT or SIGTERM
  put FILE NAME         publish FILE as object NAME and serve it until SIGINT or SIGTERM
                        (the file is mapped, never changed)
  get NAME FILE         fetch object NAME into FILE, from every node that has it; a FILE
                        of the object's size is resumed (shards whose CRC-32C match are
                        kept); with --serve it then serves its copy until SIGINT/SIGTERM
  list [PREFIX]         the objects (name, size, shard size, buffer sizes, the nodes
                        holding copies)
  replicate NAME PEER   ask node PEER (its agent) to fetch a copy of NAME

Flags:
  --metadata 127.0.0.1:2379      where payloads live: an etcd host:port (or
                                 etcd://h:p;h:p), http://host:port/metadata (our HTTP
                                 metadata server) or redis://host:port
  --local_server_name HOST[:PORT]
                                 this node's name (default: the first interface's IP,
                                 any free port)
  --nic_priority_matrix JSON     move data over RDMA with this NIC priority matrix
                                 (default: TCP)
  --shard_size 16MB              shard size of put (MC_P2P_SHARD_SIZE)
  --concurrency 8                shards fetched at once (MC_P2P_CONCURRENCY)
  --agent_port 0                 the agent's port (serve, put, get --serve); 0: any
  --serve                        get: keep serving the fetched copy
  --quiet                        no progress on stderr
  -h, --help";

const FLAGS: &[(&str, bool)] = &[
    ("metadata", false),
    ("local_server_name", false),
    ("nic_priority_matrix", false),
    ("shard_size", false),
    ("concurrency", false),
    ("agent_port", false),
    ("serve", true),
    ("quiet", true),
    ("help", true),
    ("h", true),
];

fn kind_of(name: &str) -> Option<FlagKind> {
    kind_in(FLAGS, name)
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Command {
    Serve,
    Put { file: String, name: String },
    Get { name: String, file: String },
    List { prefix: String },
    Replicate { name: String, peer: String },
}

/// The command line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Settings {
    command: Command,
    metadata: String,
    local_server_name: String,
    nic_priority_matrix: Option<String>,
    config: P2pConfig,
    agent_port: u16,
    serve: bool,
    quiet: bool,
}

fn settings(flags: &Flags) -> Result<Settings, String> {
    let args: Vec<&str> = flags.positional.iter().map(String::as_str).collect();
    let command = match args.as_slice() {
        ["serve"] => Command::Serve,
        ["put", file, name] => Command::Put {
            file: file.to_string(),
            name: name.to_string(),
        },
        ["get", name, file] => Command::Get {
            name: name.to_string(),
            file: file.to_string(),
        },
        ["list"] => Command::List {
            prefix: String::new(),
        },
        ["list", prefix] => Command::List {
            prefix: prefix.to_string(),
        },
        ["replicate", name, peer] => Command::Replicate {
            name: name.to_string(),
            peer: peer.to_string(),
        },
        [] => return Err("no command given".into()),
        other => return Err(format!("not a command: {}", other.join(" "))),
    };
    let mut config = P2pConfig::from_env();
    if let Some(v) = flags.get("shard_size") {
        config.shard_size = parse_byte_size("shard_size", v)?;
        if config.shard_size == 0 {
            return Err("--shard_size: must be above 0".into());
        }
    }
    config.concurrency = flags.number("concurrency", config.concurrency)?;
    if config.concurrency == 0 {
        return Err("--concurrency: must be above 0".into());
    }
    let host = match flags.get("local_server_name") {
        Some(name) => name.to_string(),
        None => {
            mooncake::host::net::first_interface_ip(false).unwrap_or_else(|| "127.0.0.1".into())
        }
    };
    let local_server_name = unique_name(&host)?;
    Ok(Settings {
        command,
        metadata: flags
            .get("metadata")
            .unwrap_or("127.0.0.1:2379")
            .to_string(),
        local_server_name,
        nic_priority_matrix: flags
            .get("nic_priority_matrix")
            .filter(|m| !m.is_empty())
            .map(str::to_string),
        config,
        agent_port: flags.number("agent_port", 0u16)?,
        serve: flags.get("serve") == Some("true"),
        quiet: flags.get("quiet") == Some("true"),
    })
}

/// `host` as a node name no other node of the host has: as given when it has a port,
/// else with a port no process listens on now (a metadata server names segments by
/// it; in P2PHANDSHAKE mode the engine picks its own port anyway).
fn unique_name(host: &str) -> Result<String, String> {
    let (_, port) = mooncake::host::addr::parse_host_port(host, 0);
    if port != 0 {
        return Ok(host.to_string());
    }
    let free = std::net::TcpListener::bind("0.0.0.0:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("picking a port for the node's name: {e}"))?
        .port();
    Ok(match host.contains(':') {
        true => format!("[{host}]:{free}"),
        false => format!("{host}:{free}"),
    })
}

/// A node as the settings describe it.
fn node(s: &Settings) -> Result<Arc<P2pStore>, P2pError> {
    let store = P2pStore::new_with(
        &s.metadata,
        &s.local_server_name,
        s.nic_priority_matrix.as_deref(),
        s.config.clone(),
    )?;
    Ok(Arc::new(store))
}

/// Serves `store` (with its agent) until SIGINT or SIGTERM.
fn serve(store: &Arc<P2pStore>, s: &Settings) -> Result<(), P2pError> {
    signals::install_stop_handlers();
    let agent = Agent::start(
        store.clone(),
        SocketAddr::from(([0, 0, 0, 0], s.agent_port)),
    )?;
    eprintln!(
        "mooncake_p2p: node {} serving (agent at {})",
        store.local_server_name(),
        agent.address()
    );
    signals::wait_for_stop();
    eprintln!("mooncake_p2p: stopping");
    drop(agent);
    store.close();
    Ok(())
}

/// The file `path` mapped (at least one byte): `writable` when fetching into it,
/// created or resized to `len`; else as it is.
fn map_file(path: &str, len: Option<u64>) -> Result<(Mapping, bool), P2pError> {
    let io = |doing: &str, e: std::io::Error| P2pError::Io(format!("{doing} {path}: {e}"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(len.is_some())
        .create(len.is_some())
        .truncate(false)
        .open(path)
        .map_err(|e| io("opening", e))?;
    let on_disk = file.metadata().map_err(|e| io("reading", e))?.len();
    let (size, resume) = match len {
        None => (on_disk, false),
        Some(len) if on_disk == len => (len, true),
        Some(len) => {
            file.set_len(len).map_err(|e| io("sizing", e))?;
            (len, false)
        }
    };
    if size == 0 {
        return Err(P2pError::InvalidArgument(format!("{path} is empty")));
    }
    let mapping = Mapping::of_file(&file, size, len.is_some()).map_err(|e| io("mapping", e))?;
    Ok((mapping, resume))
}

fn put(store: &Arc<P2pStore>, s: &Settings, file: &str, name: &str) -> Result<(), P2pError> {
    let (mapping, _) = map_file(file, None)?;
    let buffers = [(mapping.addr(), mapping.len())];
    // SAFETY: the mapping is private (never changed by anyone else) and outlives the
    // registration: the store is closed before it is unmapped.
    unsafe { store.register(name, &buffers, s.config.shard_size, "cpu:0", false) }?;
    eprintln!(
        "mooncake_p2p: published {file} as '{name}' ({} bytes)",
        mapping.len()
    );
    let served = serve(store, s);
    drop(mapping);
    served
}

fn get(store: &Arc<P2pStore>, s: &Settings, name: &str, file: &str) -> Result<(), P2pError> {
    let size = store.size_of(name)?;
    let (mapping, resume) = map_file(file, Some(size))?;
    let buffers = [(mapping.addr(), mapping.len())];
    let started = Instant::now();
    let quiet = s.quiet;
    let last = parking_lot::Mutex::new(Instant::now());
    let progress = |landed: u64, total: u64| {
        let mut last = last.lock();
        if quiet || (landed < total && last.elapsed().as_millis() < 500) {
            return;
        }
        *last = Instant::now();
        let secs = started.elapsed().as_secs_f64().max(1e-3);
        eprint!(
            "\rmooncake_p2p: '{name}' {:5.1}% ({} of {} MiB, {:.0} MiB/s)",
            landed as f64 * 100.0 / total.max(1) as f64,
            landed >> 20,
            total >> 20,
            landed as f64 / secs / (1 << 20) as f64
        );
        let _ = std::io::stderr().flush();
    };
    let options = GetOptions {
        resume_by_checksum: resume,
        progress: Some(&progress),
        only: None,
    };
    // SAFETY: the mapping is this process's alone and outlives the replica: it is
    // withdrawn (the store closed) before the file is unmapped.
    let fetched = unsafe { store.get_replica_with(name, &buffers, options) };
    if !quiet {
        eprintln!();
    }
    let fetched = fetched?;
    mapping
        .sync()
        .map_err(|e| P2pError::Io(format!("writing {file}: {e}")))?;
    let sources: Vec<String> = fetched
        .by_source
        .iter()
        .map(|(node, bytes)| format!("{node} {} MiB", bytes >> 20))
        .collect();
    eprintln!(
        "mooncake_p2p: fetched '{name}' into {file}: {} bytes fetched, {} bytes kept \
         from an earlier run, in {:.3} s (from {})",
        fetched.fetched,
        fetched.kept,
        started.elapsed().as_secs_f64(),
        sources.join(", ")
    );
    let served = match s.serve {
        true => serve(store, s),
        false => Ok(()),
    };
    store.close();
    drop(mapping);
    served
}

fn list(store: &P2pStore, prefix: &str) -> Result<(), P2pError> {
    for o in store.list(prefix)? {
        println!(
            "{}\t{} bytes\tshard {} bytes\tbuffers {:?}\tnodes {}",
            o.name,
            o.size,
            o.max_shard_size,
            o.size_list,
            o.holders.join(",")
        );
    }
    Ok(())
}

fn run(s: Settings) -> Result<(), P2pError> {
    let store = node(&s)?;
    match &s.command {
        Command::Serve => serve(&store, &s),
        Command::Put { file, name } => put(&store, &s, file, name),
        Command::Get { name, file } => get(&store, &s, name, file),
        Command::List { prefix } => list(&store, prefix),
        Command::Replicate { name, peer } => mooncake::p2p::agent::replicate_to(&store, name, peer),
    }
}

fn main() -> ExitCode {
    run_main("mooncake_p2p", USAGE, kind_of, settings, run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mooncake::config::flags::settings_from;

    #[test]
    fn commands_and_flags() {
        let parse = |args: &[&str]| settings_from(args, kind_of, settings);
        let s = parse(&[
            "--metadata=http://h:8080/metadata",
            "get",
            "ckpt",
            "/tmp/x",
            "--serve",
        ])
        .unwrap();
        assert_eq!(
            s.command,
            Command::Get {
                name: "ckpt".into(),
                file: "/tmp/x".into()
            }
        );
        assert_eq!(s.metadata, "http://h:8080/metadata");
        assert!(s.serve && !s.quiet);
        let s = parse(&["--shard_size", "1 MB", "--concurrency=8", "put", "f", "n"]).unwrap();
        assert_eq!((s.config.shard_size, s.config.concurrency), (1 << 20, 8));
        assert_eq!(
            parse(&["list"]).unwrap().command,
            Command::List {
                prefix: String::new()
            }
        );
        assert_eq!(parse(&["serve"]).unwrap().metadata, "127.0.0.1:2379");
        for bad in [
            &["put", "f"][..],
            &["fetch", "x"],
            &[],
            &["--concurrency=0", "serve"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
