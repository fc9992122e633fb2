//! `mooncake_master`: the Mooncake Store master (metadata and allocation service) with
//! upstream's flags, the coro_rpc service, the admin/metrics HTTP service and,
//! optionally, the embedded HTTP metadata server.
//!
//! * `flags`: the usage text and which flags exist.
//! * `settings`: the flags resolved into [`settings::Settings`].

mod flags;
mod settings;

use mooncake::config::flags::run_main;
use mooncake::config::Config;
use mooncake::host::net;
use mooncake::master::admin::AdminHandler;
use mooncake::master::ha::{self, snapshot, HaAdminHandler, HaSettings, HaStatus};
use mooncake::master::kv_events::{KvEventConfig, KvEvents};
use mooncake::master::metadata_cleanup::MetadataCleanup;
use mooncake::master::rpc_server::RpcServer;
use mooncake::master::MasterService;
use mooncake::metadata::http_server::HttpMetadataServer;
use mooncake::runtime::http_server::HttpServer;
use mooncake::runtime::signals;
use settings::{CleanupTarget, Settings};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

/// Starts the KV-event publisher (disabled when off, or when it cannot bind).
fn start_kv_events(config: &KvEventConfig) -> Arc<KvEvents> {
    let events = KvEvents::start(config, |name| {
        net::named_interface_ip(name, false).and_then(|ip| ip.parse().ok())
    });
    if let Some(addr) = events.local_addr() {
        eprintln!("KV events published on {addr}");
    }
    Arc::new(events)
}

/// Runs an HA master (see `mooncake::master::ha`) until a stop signal.
fn run_ha(s: Settings, ha: HaSettings) -> Result<(), String> {
    let metadata = start_metadata_server(s.metadata)?;
    let cleanup = metadata_cleanup(s.metadata_cleanup.as_ref(), metadata.as_ref());
    let status = Arc::new(HaStatus::default());
    let kv_events = start_kv_events(&s.kv_events);
    let _admin = HttpServer::start(
        s.metrics,
        "admin HTTP",
        Arc::new(HaAdminHandler(status.clone(), kv_events.clone())),
    )
    .map_err(|e| format!("admin HTTP on {}: {e}", s.metrics))?;
    let initial = match &s.snapshot {
        Some(plan) => {
            snapshot::load(&plan.dir).map_err(|e| format!("{}: {e}", plan.dir.display()))?
        }
        None => Default::default(),
    };
    eprintln!(
        "mooncake_master (HA, cluster {}, election in {}) will serve on {} when leader, metrics on {}",
        ha.cluster_id, ha.backend, ha.rpc_advertised, s.metrics
    );
    signals::install_stop_handlers();
    let result = ha::run(
        &ha,
        &s.master,
        &kv_events,
        &status,
        initial,
        cleanup.as_ref(),
        &signals::stop_requested,
    );
    eprintln!("mooncake_master shutting down");
    kv_events.shutdown();
    result.map_err(|e| e.to_string())
}

fn start_metadata_server(addr: Option<SocketAddr>) -> Result<Option<HttpMetadataServer>, String> {
    let server = addr
        .map(|addr| {
            HttpMetadataServer::start(addr)
                .map_err(|e| format!("HTTP metadata server on {addr}: {e}"))
        })
        .transpose()?;
    if let Some(m) = &server {
        eprintln!("HTTP metadata server listening on {}", m.local_addr());
    }
    Ok(server)
}

/// The cleanup of expired clients' metadata the settings ask for (`None` when off,
/// or when the remote server's address is not one this build speaks).
fn metadata_cleanup(
    target: Option<&CleanupTarget>,
    colocated: Option<&HttpMetadataServer>,
) -> Option<Arc<MetadataCleanup>> {
    let cluster = Config::global().cluster_id.clone();
    let cleanup = match (target?, colocated) {
        (CleanupTarget::Colocated, Some(server)) => {
            MetadataCleanup::in_process(server.table().clone(), cluster.as_deref())
        }
        (CleanupTarget::Colocated, None) => return None,
        (CleanupTarget::Remote(url), _) => match MetadataCleanup::remote(url, cluster.as_deref()) {
            Ok(cleanup) => cleanup,
            Err(e) => {
                log::warn!(
                    "--enable_metadata_cleanup_on_timeout: {e}; metadata cleanup on \
                         timeout is off"
                );
                return None;
            }
        },
    };
    eprintln!("expired clients' metadata is removed ({cleanup:?})");
    Some(Arc::new(cleanup))
}

fn run(mut s: Settings) -> Result<(), String> {
    if let Some(ha) = s.ha.take() {
        return run_ha(s, ha);
    }
    let kv_events = start_kv_events(&s.kv_events);
    let master = MasterService::with_kv_events(s.master, kv_events.clone());
    let _snapshot = match &s.snapshot {
        Some(plan) => {
            let dir = &plan.dir;
            let state = snapshot::load(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let n = master.restore(&state);
            if n > 0 || !state.segments.is_empty() {
                eprintln!(
                    "restored {n} objects and {} segments from {}",
                    state.segments.len(),
                    dir.display()
                );
            }
            Some(
                snapshot::SnapshotWriter::start(plan, &master)
                    .map_err(|e| format!("snapshot in {}: {e}", dir.display()))?,
            )
        }
        None => None,
    };
    let metadata = start_metadata_server(s.metadata)?;
    if let Some(cleanup) = metadata_cleanup(s.metadata_cleanup.as_ref(), metadata.as_ref()) {
        master.set_metadata_cleanup(cleanup);
    }
    let _admin = HttpServer::start(
        s.metrics,
        "admin HTTP",
        Arc::new(AdminHandler(master.clone())),
    )
    .map_err(|e| format!("admin HTTP on {}: {e}", s.metrics))?;
    let rpc =
        RpcServer::start_with_events(s.rpc, master.clone(), Some(master.clone()), s.rpc_limits)
            .map_err(|e| format!("master RPC on {}: {e}", s.rpc))?;
    eprintln!(
        "mooncake_master listening on {} (rpc), metrics on {}",
        rpc.local_addr(),
        s.metrics
    );
    signals::install_stop_handlers();
    signals::wait_for_stop();
    eprintln!("mooncake_master shutting down");
    drop(rpc);
    master.shutdown();
    kv_events.shutdown();
    Ok(())
}

fn main() -> ExitCode {
    run_main(
        "mooncake_master",
        flags::USAGE,
        flags::kind_of,
        settings::settings,
        run,
    )
}
