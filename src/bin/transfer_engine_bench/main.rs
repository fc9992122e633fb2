//! `transfer_engine_bench`: a drop-in for upstream's `transfer_engine_bench`
//! (spec §9), driving the safe [`TransferEngine`] API.
//!
//! Modes:
//! * `--mode=target`: registers one buffer and serves it until SIGINT/SIGTERM.
//! * `--mode=initiator` (default): opens `--segment_id`, then `--threads` threads
//!   each submit batches of `--batch_size` requests of `--block_size` bytes for
//!   `--duration` seconds and report the throughput.
//! * `--mode=loopback` (this crate only): a target engine and an initiator engine
//!   in one process, talking over real TCP sockets in P2PHANDSHAKE mode.
//!
//! Flags are gflags-style: `--flag=value`, `--flag value`, `-flag=value`; booleans
//! also as `--flag`, `--noflag` and `--flag=true|false`. Unknown flags are warned
//! about and ignored. The last line on stderr of an initiator run is
//! `Test completed: duration D, batch count N, throughput X <unit>/s`.
//!
//! `--protocol=tcp` or `rdma` (upstream's default): for RDMA the NICs come from
//! `--nic_priority_matrix` (a topology file) or else `--device_name`, as upstream.

mod run;
mod settings;
#[cfg(test)]
mod tests;

use std::process::ExitCode;

use mooncake::config::flags::{exit_status, run_or_exit};
use mooncake::host::logger;
use mooncake::runtime::signals;
use run::{drive, Node};
use settings::{check_protocol, parse_flags, Fatal, Mode, Settings, USAGE};

fn run_target(s: &Settings) -> Result<(), String> {
    let node = Node::start(s, &s.local_server_name)?;
    node.announce(s);
    signals::wait_for_stop();
    log::info!("target stopping");
    node.stop();
    Ok(())
}

fn run_initiator(s: &Settings) -> Result<(), String> {
    let node = Node::start(s, &s.local_server_name)?;
    let line = drive(&node, s, &s.segment_id)?;
    eprintln!("{line}");
    node.stop();
    Ok(())
}

fn run_loopback(s: &Settings) -> Result<(), String> {
    let p2p = s.metadata_server.trim() == "P2PHANDSHAKE";
    let target = Node::start(s, &s.local_server_name)?;
    target.announce(s);
    // Outside P2P mode both engines need distinct names in the metadata store.
    let initiator_name = if p2p {
        s.local_server_name.clone()
    } else {
        format!("{}-initiator", s.local_server_name)
    };
    let initiator = Node::start(s, &initiator_name)?;
    let line = drive(&initiator, s, target.engine.segment_name())?;
    initiator.stop();
    target.stop();
    eprintln!("{line}");
    Ok(())
}

fn main() -> ExitCode {
    logger::install();
    let refusal = |e: &str| format!("error: {e}\nRun with --help for the list of flags.");
    let (raw, mut warnings) =
        match run_or_exit(parse_flags(std::env::args().skip(1)), USAGE, refusal) {
            Ok(run) => run,
            Err(code) => return code,
        };
    let settings = raw
        .validate(&mut warnings)
        .and_then(|s| check_protocol(&s).map(|()| s));
    for w in &warnings {
        log::warn!("{w}");
    }
    let settings = match settings {
        Ok(s) => s,
        Err(Fatal(msg, code)) => {
            eprintln!("error: {msg}");
            return ExitCode::from(code);
        }
    };
    signals::install_stop_handlers();
    let result = match settings.mode {
        Mode::Target => run_target(&settings),
        Mode::Initiator => run_initiator(&settings),
        Mode::Loopback => run_loopback(&settings),
    };
    exit_status(result, "error")
}
