//! Standalone HTTP metadata server, wire-compatible with upstream's
//! `mooncake_http_metadata_server` / `mooncake_master --enable_http_metadata_server`.
//!
//! Usage: `mooncake_http_metadata_server [--host 0.0.0.0] [--port 8080]`.
//! Runs until SIGINT or SIGTERM.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

use mooncake::config::flags::{run_or_exit, Parsed};
use mooncake::metadata::http_server::HttpMetadataServer;
use mooncake::runtime::signals;

const USAGE: &str = "\
Usage: mooncake_http_metadata_server [--host ADDR] [--port PORT]

Serves Mooncake segment metadata over HTTP (GET/PUT/DELETE /metadata?key=..., GET /health).

Options:
  --host ADDR   address to bind (default 0.0.0.0)
  --port PORT   TCP port to listen on (default 8080; 0 picks a free port)
  -h, --help    print this help
Flags accept both --flag=value and --flag value.";

struct Args {
    host: String,
    port: u16,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Parsed<Args>, String> {
    let mut args = Args {
        host: "0.0.0.0".to_string(),
        port: 8080,
    };
    while let Some(arg) = it.next() {
        if arg == "-h" || arg == "--help" || arg == "-help" {
            return Ok(Parsed::Help);
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (arg.clone(), None),
        };
        // Accept gflags-style single-dash flags too (upstream binaries use gflags).
        let flag = name.trim_start_matches('-');
        if flag == name || !matches!(flag, "host" | "port") {
            return Err(format!("unknown argument '{arg}'"));
        }
        let value = match inline {
            Some(v) => v,
            None => it
                .next()
                .ok_or_else(|| format!("missing value for --{flag}"))?,
        };
        match flag {
            "host" => args.host = value,
            _ => {
                args.port = value
                    .parse()
                    .map_err(|_| format!("invalid --port '{value}' (expected 0-65535)"))?
            }
        }
    }
    Ok(Parsed::Run(args))
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    let trimmed = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = trimmed.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    use std::net::ToSocketAddrs;
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve host '{host}': {e}"))?
        .next()
        .ok_or_else(|| format!("host '{host}' resolved to no address"))
}

fn main() -> ExitCode {
    let refusal = |e: &str| format!("error: {e}\n\n{USAGE}");
    let args = match run_or_exit(parse_args(std::env::args().skip(1)), USAGE, refusal) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let bind = match resolve(&args.host, args.port) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    signals::install_stop_handlers();
    let server = match HttpMetadataServer::start(bind) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("listening on {}", server.local_addr());
    signals::wait_for_stop();
    eprintln!("shutting down");
    server.stop();
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Parsed<Args>, String> {
        parse_args(v.iter().map(|s| s.to_string()))
    }

    /// The run `v` asks for (it must ask for one).
    fn run_args(v: &[&str]) -> Args {
        match parse(v) {
            Ok(Parsed::Run(a)) => a,
            _ => panic!("{v:?} does not ask for a run"),
        }
    }

    #[test]
    fn parses_flags() {
        let a = run_args(&[]);
        assert_eq!((a.host.as_str(), a.port), ("0.0.0.0", 8080));
        let a = run_args(&["--port=9000", "--host", "127.0.0.1"]);
        assert_eq!((a.host.as_str(), a.port), ("127.0.0.1", 9000));
        assert_eq!(run_args(&["-port", "1"]).port, 1);
        assert!(matches!(parse(&["--help"]), Ok(Parsed::Help)));
        for bad in ["--port", "--port=x", "--port=70000", "--bogus=1", "port"] {
            assert!(parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn resolves_hosts() {
        assert_eq!(
            resolve("127.0.0.1", 5).unwrap(),
            "127.0.0.1:5".parse().unwrap()
        );
        assert_eq!(resolve("[::1]", 5).unwrap(), "[::1]:5".parse().unwrap());
    }
}
