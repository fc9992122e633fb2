//! `mooncake_client`: a standalone real store client (upstream's binary of the same
//! name and flags). It owns a mounted segment, the Transfer Engine and the master
//! connection, and serves dummy clients of this host (`setup_dummy`) on the abstract
//! Unix socket `@mooncake_client_<port>.sock`, moving their data through shared memory.
//! Runs until SIGINT or SIGTERM.

use mooncake::config::flags::{kind_in, parse_byte_size, run_main, FlagKind, Flags};
use mooncake::runtime::http_server::{HttpHandler, HttpReply, HttpServer};
use mooncake::runtime::signals;
use mooncake::store::{Client, DummyServer, SetupConfig, StoreApi};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

const USAGE: &str = "\
Usage: mooncake_client [flags]

A Mooncake Store real client that dummy clients of this host forward to
(MooncakeDistributedStore.setup_dummy(mem_pool_size, local_buffer_size, \"<host>:<port>\")).

Flags (upstream's names and defaults):
  --host 0.0.0.0                    this client's name (host, or host:port for the
                                    Transfer Engine's port)
  --port 50052                      dummy clients reach @mooncake_client_<port>.sock
  --metadata_server http://127.0.0.1:8080/metadata
                                    Transfer Engine metadata (P2PHANDSHAKE, http://,
                                    etcd://, redis://)
  --master_server_address 127.0.0.1:50051
                                    the master (or etcd://ep1;ep2 to follow the leader)
  --global_segment_size \"4 GB\"      memory contributed to the store
  --local_buffer_size 0             the real client's own staging buffer
  --protocol tcp                    tcp or rdma
  --device_names \"\"                 RDMA devices (comma-separated)
  --tenant_id default               only the default tenant is served
  --threads 1                       accepted (each dummy connection has its own thread)
  --enable_http_server false        serve GET /health and /metrics on --http_port
  --http_port 9300
  --enable_offload false            keep objects the master offloads on the local disk
                                    (MOONCAKE_OFFLOAD_FILE_STORAGE_PATH and the other
                                    MOONCAKE_OFFLOAD_* variables; the master needs
                                    --enable_offload)
  --start_offload_rpc_server true   accepted; with --enable_offload the offload RPC
                                    server always runs (readers of the disk need it)
  -h, --help";

/// Known flags and whether each is boolean.
const FLAGS: &[(&str, bool)] = &[
    ("host", false),
    ("port", false),
    ("metadata_server", false),
    ("master_server_address", false),
    ("global_segment_size", false),
    ("local_buffer_size", false),
    ("protocol", false),
    ("device_names", false),
    ("tenant_id", false),
    ("threads", false),
    ("enable_http_server", true),
    ("http_port", false),
    ("enable_offload", true),
    ("start_offload_rpc_server", true),
    ("help", true),
    ("h", true),
];

fn kind_of(name: &str) -> Option<FlagKind> {
    kind_in(FLAGS, name)
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
struct Settings {
    setup: SetupConfig,
    port: u16,
    http: Option<SocketAddr>,
}

fn settings(flags: &Flags) -> Result<Settings, String> {
    let get = |name: &str, default: &str| flags.get(name).unwrap_or(default).to_string();
    let port: u16 = get("port", "50052")
        .parse()
        .map_err(|_| format!("--port: '{}' is not a port", get("port", "")))?;
    let tenant = get("tenant_id", "default");
    if tenant != "default" {
        return Err(format!(
            "--tenant_id={tenant}: only the default tenant is served"
        ));
    }
    let http = if flags.get("enable_http_server") == Some("true") {
        let p: u16 = get("http_port", "9300")
            .parse()
            .map_err(|_| "--http_port: not a port".to_string())?;
        Some(SocketAddr::from(([0, 0, 0, 0], p)))
    } else {
        None
    };
    Ok(Settings {
        setup: SetupConfig {
            local_hostname: get("host", "0.0.0.0"),
            metadata_server: get("metadata_server", "http://127.0.0.1:8080/metadata"),
            global_segment_size: parse_byte_size(
                "global_segment_size",
                &get("global_segment_size", "4 GB"),
            )?,
            local_buffer_size: parse_byte_size(
                "local_buffer_size",
                &get("local_buffer_size", "0"),
            )?,
            protocol: get("protocol", "tcp"),
            device_name: get("device_names", ""),
            master_server_addr: get("master_server_address", "127.0.0.1:50051"),
            enable_ssd_offload: flags.get("enable_offload") == Some("true"),
            ..SetupConfig::default()
        },
        port,
        http,
    })
}

/// `GET /health` (200 when healthy, 503 otherwise) and `GET /metrics`.
struct ClientHttp {
    client: Arc<Client>,
    server: Arc<DummyServer>,
}

impl HttpHandler for ClientHttp {
    fn handle(&self, method: &str, target: &str, _body: &[u8]) -> HttpReply {
        let path = target.split('?').next().unwrap_or("");
        match (method, path) {
            ("GET", "/health") => match StoreApi::health(&*self.client) as i32 {
                0 => HttpReply::text(200, "OK"),
                code => HttpReply::text(503, &format!("unhealthy ({code})")),
            },
            ("GET", "/metrics") | ("GET", "/metrics/summary") => HttpReply::text(
                200,
                &format!(
                    "mooncake_client_health {}\nmooncake_client_dummy_sessions {}\n",
                    StoreApi::health(&*self.client) as i32,
                    self.server.sessions()
                ),
            ),
            _ => HttpReply::text(404, "not found"),
        }
    }
}

fn run(s: Settings) -> Result<(), String> {
    let client = Arc::new(
        Client::setup(&s.setup).map_err(|e| format!("setting up the client failed: {e}"))?,
    );
    let server = Arc::new(DummyServer::start(client.clone(), s.port).map_err(|e| {
        format!(
            "serving @{}: {e}",
            mooncake::store::dummy::address::socket_name(s.port)
        )
    })?);
    let _http = match s.http {
        Some(addr) => Some(
            HttpServer::start(
                addr,
                "client HTTP",
                Arc::new(ClientHttp {
                    client: client.clone(),
                    server: server.clone(),
                }),
            )
            .map_err(|e| e.to_string())?,
        ),
        None => None,
    };
    eprintln!(
        "mooncake_client '{}' serving dummy clients on @{}",
        client.hostname(),
        server.socket_name()
    );
    signals::install_stop_handlers();
    signals::wait_for_stop();
    eprintln!("mooncake_client shutting down");
    drop(_http);
    drop(server);
    client.close();
    Ok(())
}

fn main() -> ExitCode {
    run_main("mooncake_client", USAGE, kind_of, settings, run)
}

#[cfg(test)]
mod tests {
    use super::*;

    use mooncake::config::flags::settings_from;

    fn parse(args: &[&str]) -> Result<Settings, String> {
        settings_from(args, kind_of, settings).map_err(|e| e.to_string())
    }

    #[test]
    fn upstream_defaults_and_overrides() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.port, 50052);
        assert_eq!(s.setup.local_hostname, "0.0.0.0");
        assert_eq!(s.setup.global_segment_size, 4 << 30);
        assert_eq!(s.setup.local_buffer_size, 0);
        assert_eq!(s.setup.master_server_addr, "127.0.0.1:50051");
        assert_eq!(s.setup.metadata_server, "http://127.0.0.1:8080/metadata");
        assert_eq!(s.http, None);
        let s = parse(&[
            "--global_segment_size=512MB",
            "--port",
            "6000",
            "--host=127.0.0.1",
            "--enable_http_server",
            "--http_port=9400",
            "--threads=4",
        ])
        .unwrap();
        assert_eq!(s.setup.global_segment_size, 512 << 20);
        assert_eq!(s.port, 6000);
        assert_eq!(s.http, Some("0.0.0.0:9400".parse().unwrap()));
        assert!(parse(&["--port=x"]).is_err());
        assert!(
            parse(&["--enable_offload"])
                .unwrap()
                .setup
                .enable_ssd_offload
        );
        assert!(!s.setup.enable_ssd_offload);
        assert!(parse(&["--tenant_id=t1"]).is_err());
        assert!(parse(&["--global_segment_size=4 XB"]).is_err());
    }
}
