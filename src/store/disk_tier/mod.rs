//! A client's own SSD tier (spec tiers-events-conductor.md §1.2-§1.8): the objects its
//! master asks it to keep on its local disk, written to bucket files ([`backend`]) by
//! its disk-tier thread ([`worker`]), served to readers through its offload RPC port
//! ([`server`]), configured from upstream's `MOONCAKE_OFFLOAD_*` environment
//! ([`config`]).

pub(crate) mod backend;
pub mod config;
pub(crate) mod server;
pub(crate) mod worker;

use super::error::{Doing, StoreError, StoreResult};
use super::state::SharedState;
use crate::host::addr::join_host_port;
use crate::runtime::stoppable::StoppableThread;
use crate::wire::master_api::ErrorCode;
use backend::DiskStore;
use config::DiskTierConfig;
use parking_lot::RwLock;
use server::{OffloadServer, ReadService};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use worker::WorkerContext;

/// How often the mailbox is polled within a heartbeat interval of the last offload
/// work: puts waiting for room get it as soon as the disk has their objects, not a
/// heartbeat later.
const ACTIVE_POLL: Duration = Duration::from_millis(10);
/// Longest the mailbox goes unpolled: objects queued for offload are pinned in memory
/// until their copy lands, so a burst of puts is not left waiting a whole (default
/// 10 s) heartbeat interval.
const IDLE_POLL: Duration = Duration::from_secs(1);

/// A running disk tier: the offload port and the disk-tier thread, which polls its
/// offload mailbox at least every [`IDLE_POLL`] and every [`ACTIVE_POLL`] while work
/// keeps coming, and does the rest once per heartbeat interval. Stopped (both
/// joined) by [`DiskTier::stop`] or on drop; its disk copies stay registered at the
/// master (a restarted owner registers them again).
pub(crate) struct DiskTier {
    server: Option<OffloadServer>,
    thread: StoppableThread,
    /// Set once the disk was unmounted at run time: the thread then does nothing
    /// (in particular, it does not mount the disk again).
    draining: Arc<AtomicBool>,
    /// Held by the thread for each round, so a drain never overlaps one.
    round: Arc<parking_lot::Mutex<()>>,
}

impl DiskTier {
    /// Opens the disk at `cfg.path`, registers the staging arena with the client's
    /// Transfer Engine, starts the offload port (any port, all interfaces; readers are
    /// told `host:port`), mounts the disk at the master (which must run with
    /// `--enable_offload`), registers what the disk already holds, and starts the
    /// thread. The code of a failure is the master's, or -600 for a bad path.
    pub fn start(state: &SharedState, cfg: DiskTierConfig, host: &str) -> StoreResult<DiskTier> {
        Self::start_in(state, cfg, host).map_err(|e| e.context("setup: SSD offload"))
    }

    /// [`DiskTier::start`], the cause of a failure not yet saying where it was.
    fn start_in(state: &SharedState, cfg: DiskTierConfig, host: &str) -> StoreResult<DiskTier> {
        cfg.check_path()?;
        let store = DiskStore::open(&cfg.path)
            .map_err(|e| StoreError::invalid(format!("opening {}: {e}", cfg.path.display())))?;
        let store = Arc::new(RwLock::new(store));
        let arena = {
            let mut guard = state.write();
            let inner = guard.as_mut().ok_or(ErrorCode::INVALID_PARAMS)?;
            inner.add_offload_arena(cfg.staging_bytes)?
        };
        let guard = state.read();
        let inner = guard.as_ref().ok_or(ErrorCode::INVALID_PARAMS)?;
        let service = Arc::new(ReadService::new(
            store.clone(),
            arena,
            inner.te_name().to_string(),
            cfg.gc_ttl,
        ));
        let server = OffloadServer::start(([0, 0, 0, 0], 0).into(), service.clone())
            .map_err(|e| StoreError::internal(format!("starting the offload RPC server: {e}")))?;
        let endpoint = join_host_port(host, server.port());
        log::info!(
            "offload: RPC server on {endpoint}; disk {}",
            cfg.path.display()
        );
        let interval = cfg.heartbeat_interval;
        let ctx = WorkerContext {
            cfg,
            store,
            service,
            endpoint,
        };
        worker::mount(inner, &ctx).doing(
            "mounting the local disk at the master (is the master running with \
             --enable_offload?)",
        )?;
        drop(guard);
        let state = state.clone();
        let draining = Arc::new(AtomicBool::new(false));
        let round = Arc::new(parking_lot::Mutex::new(()));
        let (thread_draining, thread_round) = (draining.clone(), round.clone());
        let thread = StoppableThread::spawn("mc-disk-tier", move |signal| {
            let mut last_busy: Option<Instant> = None;
            let mut last_housekeeping = Instant::now();
            loop {
                let wait = match last_busy {
                    Some(t) if t.elapsed() < interval => ACTIVE_POLL,
                    _ => interval.min(IDLE_POLL),
                };
                if !signal.wait(wait) {
                    return;
                }
                let _round = thread_round.lock();
                if thread_draining.load(Ordering::SeqCst) {
                    continue;
                }
                let guard = state.read();
                let Some(inner) = guard.as_ref() else { return };
                if worker::drain(inner, &ctx) {
                    last_busy = Some(Instant::now());
                }
                if last_housekeeping.elapsed() >= interval {
                    worker::housekeeping(inner, &ctx);
                    last_housekeeping = Instant::now();
                }
            }
        })
        .map_err(|e| StoreError::internal(format!("starting its thread: {e}")))?;
        Ok(DiskTier {
            server: Some(server),
            thread,
            draining,
            round,
        })
    }

    /// Unmounts the disk at the master (its copies stop being read from there and no
    /// more objects are offloaded to it) and stops the disk-tier rounds, waiting for
    /// one in progress; the disk's files stay (upstream's
    /// `unmount_local_disk_segment`). The master's code on failure (the rounds then
    /// go on).
    pub fn drain(&self, state: &SharedState) -> StoreResult<()> {
        // The round first, then the state: the order the thread takes them in.
        let _round = self.round.lock();
        if self.draining.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let guard = state.read();
        let Some(inner) = guard.as_ref() else {
            self.draining.store(false, Ordering::SeqCst);
            return Err(StoreError::invalid("the client is closed"));
        };
        let result = inner
            .master()
            .disk_tier()
            .ok_or(ErrorCode::NOT_SUPPORTED)
            .and_then(|api| api.unmount_local_disk_segment(inner.client_id()));
        if let Err(e) = result {
            self.draining.store(false, Ordering::SeqCst);
            return Err(StoreError::new(
                e,
                "unmounting the local disk at the master",
            ));
        }
        log::info!("offload: local disk unmounted at run time");
        Ok(())
    }

    /// Stops the thread (a tick in progress finishes) and the offload port.
    pub fn stop(&mut self) {
        self.thread.stop();
        self.server.take();
    }
}

impl Drop for DiskTier {
    fn drop(&mut self) {
        self.stop();
    }
}
