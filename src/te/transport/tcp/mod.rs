//! The TCP transport (spec §4): a target that serves registered memory, and an
//! initiator that keeps persistent, pipelined lanes per peer and splits large
//! requests across them.

pub mod io;
pub mod lane;
pub mod lane_state;
pub mod reader;
mod receiver;
mod seam;
mod sender;
pub mod target;
pub mod wire;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::host::idle::IdleClock;
use crate::sys::cuda::Gpu;
use crate::te::batch::{CompletionSignal, Task};
use crate::te::memory::MemoryRegistry;
use crate::te::transport::request::PeerRequest;
use lane::Lane;
pub use lane::INLINE_MAX_BYTES;
use lane_state::{LaneConfig, Slice};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use target::TcpTarget;

/// How often one slice may go again after its connection broke. A peer that closes the
/// connection after rejecting one request (upstream does) can reset it before the
/// replies of the requests ahead of the rejected one are read, so those go again
/// although nothing was wrong with them, once per rejection in the batch; a slice
/// whose peer keeps dropping it fails after this many tries.
const BROKEN_CONNECTION_RETRIES: u8 = 3;

/// Requests at least this long are split across a peer's lanes.
const SPLIT_THRESHOLD: u64 = 512 << 10;
/// Smallest piece a split request is cut into.
const MIN_SPLIT_PIECE: u64 = 256 << 10;

/// A peer's data endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// Host or IP of the data listener.
    pub host: String,
    /// Data port.
    pub port: u16,
    /// Whether to use v2 framing.
    pub v2: bool,
}

/// Bytes a lane may have queued before new slices go to the least loaded lane: small
/// requests stay together on one lane and leave in one `sendmsg`, large ones spread.
const STICKY_LANE_BYTES: u64 = 256 << 10;

/// One peer's lanes. Lane 0 starts with the peer; each other lane (its connection and
/// threads) starts the first time a slice finds every started lane busy, so a peer
/// with little traffic costs one connection and two threads, not `lanes_per_peer`.
struct Peer {
    /// Lane slots; a slot whose lane could not be started stays `None`.
    lanes: Box<[OnceLock<Option<Lane>>]>,
    config: LaneConfig,
    current: AtomicUsize,
    /// When it was last used ([`IdleClock::now_ms`]).
    last_used_ms: AtomicU64,
}

impl Peer {
    /// A peer with `lanes` slots and its first lane started.
    fn start(config: LaneConfig, lanes: usize, now_ms: u64) -> std::io::Result<Peer> {
        let slots: Box<[OnceLock<Option<Lane>>]> =
            (0..lanes.max(1)).map(|_| OnceLock::new()).collect();
        let first = Lane::start(config.clone())?;
        let _ = slots[0].set(Some(first));
        Ok(Peer {
            lanes: slots,
            config,
            current: AtomicUsize::new(0),
            last_used_ms: AtomicU64::new(now_ms),
        })
    }

    /// The lane in slot `index`, if it was started.
    fn started(&self, index: usize) -> Option<&Lane> {
        self.lanes[index].get()?.as_ref()
    }

    /// The lane in slot `index`, started now if it was not (`None` if it cannot be).
    fn start_lane(&self, index: usize) -> Option<&Lane> {
        self.lanes[index]
            .get_or_init(|| match Lane::start(self.config.clone()) {
                Ok(lane) => Some(lane),
                Err(e) => {
                    log::warn!("tcp: cannot start another lane to a peer: {e}");
                    None
                }
            })
            .as_ref()
    }

    /// Whether it was unused long enough at `now_ms` and has nothing in flight.
    fn is_idle(&self, clock: &IdleClock, now_ms: u64) -> bool {
        clock.is_idle(self.last_used_ms.load(Ordering::Relaxed), now_ms)
            && (0..self.lanes.len()).all(|i| self.started(i).map_or(true, |l| l.load() == 0))
    }

    /// The lane for the next slice: the current one while it is lightly loaded, else
    /// the least loaded started one, or a lane not started yet when every started lane
    /// is busy (the chosen one becomes current).
    fn pick(&self) -> &Lane {
        let current = self.current.load(Ordering::Relaxed) % self.lanes.len();
        if let Some(lane) = self.started(current) {
            if lane.load() < STICKY_LANE_BYTES {
                return lane;
            }
        }
        let mut best: Option<(usize, &Lane)> = None;
        let mut unstarted = None;
        for (index, slot) in self.lanes.iter().enumerate() {
            match slot.get() {
                Some(Some(lane)) => {
                    if best.map_or(true, |(_, b)| lane.load() < b.load()) {
                        best = Some((index, lane));
                    }
                }
                Some(None) => {}
                None => {
                    unstarted.get_or_insert(index);
                }
            }
        }
        let (mut index, mut lane) = best.expect("lane 0 starts with the peer");
        if lane.load() > 0 {
            if let Some(fresh) = unstarted.and_then(|i| self.start_lane(i).map(|l| (i, l))) {
                (index, lane) = fresh;
            }
        }
        self.current.store(index, Ordering::Relaxed);
        lane
    }
}

/// A request whose local memory is on a GPU, to be moved over TCP through host memory.
pub struct GpuRequest<'a> {
    /// The peer.
    pub endpoint: &'a Endpoint,
    /// The request; its local memory is on `gpu`.
    pub req: &'a PeerRequest,
    /// Raised when it completes.
    pub signal: Option<Arc<CompletionSignal>>,
    /// The GPU runtime holding the local memory.
    pub gpu: Arc<dyn Gpu>,
}

/// Where TCP sends requests whose local memory is on a GPU: through host memory (the
/// engine's staging threads).
pub trait GpuStaging: Send + Sync {
    /// Starts `job` over `tcp` through host memory; the returned task completes like a
    /// direct one.
    fn stage(&self, tcp: Arc<TcpTransport>, job: GpuRequest<'_>) -> Arc<Task>;
}

/// The installed TCP transport of one engine.
pub struct TcpTransport {
    target: parking_lot::Mutex<TcpTarget>,
    /// Registered memory, published as the buffers of a `tcp` descriptor.
    memory: Arc<MemoryRegistry>,
    /// Host published as `tcp_data_host`.
    host: String,
    peers: RwLock<HashMap<Endpoint, Arc<Peer>>>,
    /// A peer nothing was sent to for `MC_PEER_IDLE_SEC` has its lanes (connections
    /// and threads) closed; it may be gone for good (a restarted peer listens on a new
    /// port). Using it again opens new lanes.
    idle: IdleClock,
    lanes_per_peer: usize,
    connect_timeout: Duration,
    io_timeout: Duration,
    /// Where requests from GPU memory go.
    stager: Arc<dyn GpuStaging>,
    /// Whether the v1 framing is forced (`MC_TCP_FORCE_V1`).
    force_v1: bool,
    /// This host's loopback address, where the own segment is reached.
    loopback: &'static str,
}

impl TcpTransport {
    /// Binds the data listener (random port in the RPC range) and starts serving
    /// `memory`; `host` is published as where the listener is reached; requests from
    /// GPU memory go through `stager`.
    pub fn install(
        config: &Config,
        memory: Arc<MemoryRegistry>,
        host: String,
        stager: Arc<dyn GpuStaging>,
    ) -> Result<TcpTransport> {
        let listener = crate::host::net::bind_in_range(
            config.min_rpc_port,
            config.max_rpc_port,
            config.use_ipv6,
        )?;
        let target = TcpTarget::start(listener, memory.clone(), config)
            .map_err(|e| Error::socket("starting the tcp data listener", e))?;
        Ok(TcpTransport {
            target: parking_lot::Mutex::new(target),
            memory,
            host,
            peers: RwLock::new(HashMap::new()),
            idle: IdleClock::new(Duration::from_secs(config.peer_idle_secs)),
            lanes_per_peer: config.tcp_lanes_per_peer,
            connect_timeout: Duration::from_secs(config.handshake_connect_timeout_secs),
            io_timeout: Duration::from_secs(
                config
                    .tcp_status_timeout_secs
                    .max(config.tcp_progress_timeout_secs),
            ),
            stager,
            force_v1: config.tcp_force_v1,
            loopback: if config.use_ipv6 { "::1" } else { "127.0.0.1" },
        })
    }

    /// The data port published as `tcp_data_port`.
    pub fn port(&self) -> u16 {
        self.target.lock().port()
    }

    /// Stops the data listener and every lane.
    pub fn shutdown(&self) {
        self.target.lock().stop();
        self.peers.write().clear();
    }

    fn peer(&self, endpoint: &Endpoint) -> Result<Arc<Peer>> {
        let now_ms = self.idle.now_ms();
        if self.idle.sweep_due(now_ms) {
            self.close_idle_peers(now_ms);
        }
        if let Some(p) = self.peers.read().get(endpoint) {
            p.last_used_ms.store(now_ms, Ordering::Relaxed);
            return Ok(p.clone());
        }
        let mut peers = self.peers.write();
        if let Some(p) = peers.get(endpoint) {
            p.last_used_ms.store(now_ms, Ordering::Relaxed);
            return Ok(p.clone());
        }
        let config = LaneConfig {
            host: endpoint.host.clone(),
            port: endpoint.port,
            v2: endpoint.v2,
            connect_timeout: self.connect_timeout,
            io_timeout: self.io_timeout,
            inline_wait: lane::INLINE_WAIT,
        };
        let peer = Arc::new(
            Peer::start(config, self.lanes_per_peer, now_ms)
                .map_err(|e| Error::socket("starting a tcp lane", e))?,
        );
        peers.insert(endpoint.clone(), peer.clone());
        Ok(peer)
    }

    /// Closes the lanes of every peer idle at `now_ms` (and not in use right now); they
    /// are joined after the table's lock is released.
    fn close_idle_peers(&self, now_ms: u64) {
        let closed: Vec<Arc<Peer>> = {
            let mut peers = self.peers.write();
            let gone: Vec<Endpoint> = peers
                .iter()
                .filter(|(_, p)| Arc::strong_count(p) == 1 && p.is_idle(&self.idle, now_ms))
                .map(|(e, _)| e.clone())
                .collect();
            gone.iter().filter_map(|e| peers.remove(e)).collect()
        };
        if !closed.is_empty() {
            log::debug!("tcp: closed the lanes of {} idle peers", closed.len());
        }
    }

    /// Starts moving one request; `task` completes when every slice finished.
    /// Returns the task (already failed if the peer could not be set up). With
    /// `alone` (the request is a whole submission) a small request may be moved on
    /// the calling thread ([`Lane::try_inline`]), so the task can be complete on return.
    pub fn submit(
        &self,
        endpoint: &Endpoint,
        req: &PeerRequest,
        signal: Option<Arc<CompletionSignal>>,
        alone: bool,
    ) -> Arc<Task> {
        if req.len == 0 {
            return Task::new(0, 0, signal);
        }
        let peer = match self.peer(endpoint) {
            Ok(p) => p,
            Err(e) => {
                log::warn!("tcp peer {}:{}: {e}", endpoint.host, endpoint.port);
                return Task::failed(req.len);
            }
        };
        let pieces = split(req.len, peer.lanes.len());
        let task = Task::new(req.len, pieces.len() as u32, signal);
        let inline = alone && pieces.len() == 1;
        for (offset, len) in pieces {
            let lane = peer.pick();
            let slice = Slice {
                op: req.op,
                local: req.local + offset,
                remote: req.remote + offset,
                len,
                task: task.clone(),
                retries_left: BROKEN_CONNECTION_RETRIES,
                resent: false,
            };
            if inline {
                lane.try_inline(vec![slice])
                    .into_iter()
                    .for_each(|s| lane.submit(s));
            } else {
                lane.submit(slice);
            }
        }
        task
    }

    /// Starts a whole submission of small requests (at most [`INLINE_MAX_BYTES`] in
    /// all) to one peer as one pipelined run on one lane, moved on the calling thread
    /// when that lane is idle ([`Lane::try_inline`]). One task per request, in order.
    pub fn submit_small_batch(
        &self,
        endpoint: &Endpoint,
        reqs: &[PeerRequest],
        signal: &Arc<CompletionSignal>,
    ) -> Vec<Arc<Task>> {
        let peer = match self.peer(endpoint) {
            Ok(p) => p,
            Err(e) => {
                log::warn!("tcp peer {}:{}: {e}", endpoint.host, endpoint.port);
                return reqs.iter().map(|r| Task::failed(r.len)).collect();
            }
        };
        let mut tasks = Vec::with_capacity(reqs.len());
        let mut slices = Vec::with_capacity(reqs.len());
        for r in reqs {
            if r.len == 0 {
                tasks.push(Task::new(0, 0, Some(signal.clone())));
                continue;
            }
            let task = Task::new(r.len, 1, Some(signal.clone()));
            slices.push(Slice {
                op: r.op,
                local: r.local,
                remote: r.remote,
                len: r.len,
                task: task.clone(),
                retries_left: BROKEN_CONNECTION_RETRIES,
                resent: false,
            });
            tasks.push(task);
        }
        let lane = peer.pick();
        lane.try_inline(slices)
            .into_iter()
            .for_each(|s| lane.submit(s));
        tasks
    }
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Cuts `len` bytes into (offset, length) pieces, one per lane for large requests.
fn split(len: u64, lanes: usize) -> Vec<(u64, u64)> {
    if len < SPLIT_THRESHOLD || lanes <= 1 {
        return vec![(0, len)];
    }
    let piece = len
        .div_ceil(lanes as u64)
        .max(MIN_SPLIT_PIECE)
        .next_multiple_of(4096);
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < len {
        let l = piece.min(len - offset);
        out.push((offset, l));
        offset += l;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_covers_exactly() {
        assert_eq!(split(100, 4), vec![(0, 100)]);
        let s = split(1 << 20, 4);
        assert_eq!(s.len(), 4);
        assert_eq!(s.iter().map(|p| p.1).sum::<u64>(), 1 << 20);
        let s = split((1 << 20) + 7, 4);
        assert_eq!(s.iter().map(|p| p.1).sum::<u64>(), (1 << 20) + 7);
        assert!(s.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
    }

    /// Staging that is never used (host memory only).
    struct NoStaging;

    impl GpuStaging for NoStaging {
        fn stage(&self, _: Arc<TcpTransport>, job: GpuRequest<'_>) -> Arc<Task> {
            Task::failed(job.req.len)
        }
    }

    #[test]
    fn idle_peers_lose_their_lanes_and_come_back_on_use() {
        let config = |idle| Config {
            disable_same_host: true,
            peer_idle_secs: idle,
            ..Config::default()
        };
        let install = |idle| {
            TcpTransport::install(
                &config(idle),
                Arc::new(MemoryRegistry::default()),
                "127.0.0.1".into(),
                Arc::new(NoStaging),
            )
            .unwrap()
        };
        let endpoint = |port| Endpoint {
            host: "127.0.0.1".into(),
            port,
            v2: true,
        };
        // Not idle long enough: kept.
        let patient = install(3600);
        drop(patient.peer(&endpoint(2)).unwrap());
        patient.close_idle_peers(patient.idle.now_ms());
        assert_eq!(patient.peers.read().len(), 1);
        patient.shutdown();
        let t = install(0);
        let held = t.peer(&endpoint(1)).unwrap();
        drop(t.peer(&endpoint(2)).unwrap());
        assert_eq!(t.peers.read().len(), 2);
        // Idle, but one is in use right now: only the other goes.
        t.close_idle_peers(t.idle.now_ms());
        assert_eq!(t.peers.read().len(), 1);
        drop(held);
        t.close_idle_peers(t.idle.now_ms());
        assert_eq!(t.peers.read().len(), 0);
        t.peer(&endpoint(2)).unwrap();
        assert_eq!(t.peers.read().len(), 1);
        t.shutdown();
    }

    #[test]
    fn a_peer_starts_one_lane_and_an_idle_one_is_picked_again() {
        let config = LaneConfig {
            host: "127.0.0.1".into(),
            port: 1,
            v2: true,
            connect_timeout: Duration::from_secs(1),
            io_timeout: Duration::from_secs(1),
            inline_wait: lane::INLINE_WAIT,
        };
        let peer = Peer::start(config, 8, 0).unwrap();
        let started = |p: &Peer| {
            (0..p.lanes.len())
                .filter(|&i| p.started(i).is_some())
                .count()
        };
        assert_eq!(started(&peer), 1);
        let first: *const Lane = peer.pick();
        for _ in 0..10 {
            assert!(std::ptr::eq(peer.pick(), first));
        }
        assert_eq!(started(&peer), 1);
        assert!(std::ptr::eq(
            peer.start_lane(3).unwrap(),
            peer.started(3).unwrap()
        ));
        assert_eq!(started(&peer), 2);
    }
}
