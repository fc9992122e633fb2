//! The data line's router: each request of a submission goes to the own segment
//! (a validated copy), a same-host peer, RDMA or TCP, in that order of preference,
//! and the router owns the fallback (same host to TCP); requests that can move
//! together start together.

use super::request::TransferRequest;
use super::state::{Inner, TransferEngine};
use crate::error::{Error, Result};
use crate::metadata::SegmentDesc;
use crate::te::batch::{CompletionSignal, Task};
use crate::te::segment::LOCAL_SEGMENT_ID;
use crate::te::transport::local;
use crate::te::transport::rdma::RdmaTransport;
use crate::te::transport::request::PeerRequest;
use crate::te::transport::same_host::transport::SameHostTransport;
use crate::te::transport::same_host::SameHostError;
use crate::te::transport::tcp::{Endpoint, TcpTransport, INLINE_MAX_BYTES};
use std::sync::Arc;

impl TransferEngine {
    /// Submits requests into a batch; tasks accumulate in submission order.
    pub fn submit(&self, batch_id: u64, requests: &[TransferRequest]) -> Result<()> {
        let batch = self.inner.batches.get(batch_id)?;
        let router = Router::new(&self.inner);
        let routes = requests
            .iter()
            .map(|r| router.route(r))
            .collect::<Result<Vec<_>>>()?;
        let mut reservation = batch.reserve(requests.len())?;
        let signal = batch.signal();
        let together = router
            .start_same_host_batch(requests, &routes, &signal)
            .or_else(|| router.start_small_batch(requests, &routes, &signal));
        if let Some(tasks) = together {
            tasks.into_iter().for_each(|t| reservation.push(t));
            return Ok(());
        }
        let alone = requests.len() == 1;
        for (req, route) in requests.iter().zip(routes) {
            reservation.push(router.start(req, route, &signal, alone));
        }
        Ok(())
    }
}

/// Where one request goes.
enum Route {
    Local,
    Tcp(Endpoint),
    /// A peer on this host: its same-host socket, and its TCP endpoint to fall back to.
    SameHost(String, Endpoint),
    Rdma(String, Arc<SegmentDesc>),
}

/// The transports installed when a submission started, and the engine they route
/// for: looked up once per submission, not per request.
struct Router<'a> {
    inner: &'a Inner,
    tcp: Option<Arc<TcpTransport>>,
    rdma: Option<Arc<RdmaTransport>>,
    same_host: Option<Arc<SameHostTransport>>,
}

impl<'a> Router<'a> {
    fn new(inner: &'a Inner) -> Router<'a> {
        let transports = &inner.local.transports;
        Router {
            inner,
            tcp: transports.get(),
            rdma: transports.get(),
            same_host: transports.get(),
        }
    }

    fn route(&self, req: &TransferRequest) -> Result<Route> {
        if req.length > 0 && req.source == 0 {
            return Err(Error::InvalidArgument("request source is NULL".into()));
        }
        let inner = self.inner;
        if req.target_id == LOCAL_SEGMENT_ID && !inner.config.disable_local_copy {
            return Ok(Route::Local);
        }
        let tcp_installed = self.tcp.is_some();
        let rdma_installed = self.rdma.is_some();
        if req.target_id == LOCAL_SEGMENT_ID && rdma_installed && !tcp_installed {
            let desc = inner.local.descriptor().ok_or_else(|| {
                Error::NotSupportedTransport("no transport installed for the local segment".into())
            })?;
            return Ok(Route::Rdma(inner.local.name.clone(), Arc::new(desc)));
        }
        if req.target_id == LOCAL_SEGMENT_ID {
            let port = self.tcp.as_ref().map(|t| t.port()).ok_or_else(|| {
                Error::NotSupportedTransport("no transport installed for the local segment".into())
            })?;
            let host = if inner.config.use_ipv6 {
                "::1"
            } else {
                "127.0.0.1"
            };
            return Ok(Route::Tcp(Endpoint {
                host: host.into(),
                port,
                v2: !inner.config.tcp_force_v1,
            }));
        }
        let (name, desc) = inner.segment(req.target_id)?;
        let desc = if inner.config.disable_metacache {
            let fresh = Arc::new(inner.fetch_descriptor(&name)?);
            inner.segments.replace(&name, fresh.clone());
            fresh
        } else {
            desc
        };
        if desc.protocol == "rdma" && rdma_installed {
            return Ok(Route::Rdma(name, desc));
        }
        // An RDMA peer of this library also publishes its TCP port.
        let tcp_reachable = desc.protocol == "tcp" || desc.tcp_data_port != 0;
        if !tcp_reachable || !tcp_installed {
            return Err(Error::NotSupportedTransport(format!(
                "segment '{name}' uses protocol '{}', which is not installed here",
                desc.protocol
            )));
        }
        let host = match &desc.tcp_data_host {
            Some(h) => h.clone(),
            None => inner.rpc_address(&desc.name)?.0,
        };
        let v2 = desc.tcp_proto_version >= 2 && !inner.config.tcp_force_v1;
        let endpoint = Endpoint {
            host,
            port: desc.tcp_data_port,
            v2,
        };
        let same_host = desc
            .same_host
            .as_ref()
            .and_then(|sh| self.same_host.as_ref()?.peer(sh));
        Ok(match same_host {
            Some(socket) if !inner.config.disable_same_host => Route::SameHost(socket, endpoint),
            _ => Route::Tcp(endpoint),
        })
    }

    /// The GPU runtime when `addr` is GPU memory (registered as such, or so the
    /// runtime says); `None` for host memory and on hosts without a GPU runtime.
    fn gpu_of(&self, addr: u64) -> Option<Arc<dyn crate::sys::cuda::Gpu>> {
        let gpu = crate::sys::cuda::system()?;
        let device = match self.inner.local.memory.find(addr, 1) {
            Some(region) => region.device,
            None => gpu.device_of(addr),
        };
        device.map(|_| gpu)
    }

    /// Starts several requests that all go to one TCP peer and are small enough to be
    /// moved together on the calling thread; `None` when they are not.
    fn start_small_batch(
        &self,
        requests: &[TransferRequest],
        routes: &[Route],
        signal: &Arc<CompletionSignal>,
    ) -> Option<Vec<Arc<Task>>> {
        let Some(Route::Tcp(endpoint)) = routes.first() else {
            return None;
        };
        let total: u64 = requests.iter().map(|r| r.length).sum();
        if requests.len() < 2
            || total > INLINE_MAX_BYTES
            || routes
                .iter()
                .any(|r| !matches!(r, Route::Tcp(e) if e == endpoint))
        {
            return None;
        }
        if requests.iter().any(|r| self.gpu_of(r.source).is_some()) {
            return None;
        }
        let tcp = self.tcp.as_ref()?;
        let batch: Vec<PeerRequest> = requests.iter().map(PeerRequest::from).collect();
        Some(tcp.submit_small_batch(endpoint, &batch, signal))
    }

    /// Moves requests to one same-host peer on the calling thread, all at once; those
    /// the path cannot take (no permission) go to the peer's TCP `endpoint`. One
    /// task per request, in order.
    fn start_same_host(
        &self,
        socket: &str,
        endpoint: &Endpoint,
        requests: &[&TransferRequest],
        signal: &Arc<CompletionSignal>,
    ) -> Vec<Arc<Task>> {
        let Some(same_host) = &self.same_host else {
            return requests.iter().map(|r| Task::failed(r.length)).collect();
        };
        let peer: Vec<PeerRequest> = requests.iter().map(|r| PeerRequest::from(*r)).collect();
        let results = same_host.transfer(socket, &peer);
        let alone = requests.len() == 1;
        requests
            .iter()
            .zip(results)
            .map(|(req, result)| match result {
                Ok(()) => {
                    let task = Task::new(req.length, 1, None);
                    task.finish_slice(true);
                    task
                }
                Err(SameHostError::Unavailable(_) | SameHostError::UseTcp) => {
                    self.start(req, Route::Tcp(endpoint.clone()), signal, alone)
                }
                Err(e) => {
                    log::warn!("same-host transfer failed: {e:?}");
                    Task::failed(req.length)
                }
            })
            .collect()
    }

    /// Starts a whole submission whose requests all go to one same-host peer from
    /// host memory as one pipelined exchange; `None` when they do not.
    fn start_same_host_batch(
        &self,
        requests: &[TransferRequest],
        routes: &[Route],
        signal: &Arc<CompletionSignal>,
    ) -> Option<Vec<Arc<Task>>> {
        let Some(Route::SameHost(socket, endpoint)) = routes.first() else {
            return None;
        };
        let same_peer = routes
            .iter()
            .all(|r| matches!(r, Route::SameHost(s, _) if s == socket));
        if requests.len() < 2
            || !same_peer
            || requests
                .iter()
                .any(|r| r.length == 0 || self.gpu_of(r.source).is_some())
        {
            return None;
        }
        let refs: Vec<&TransferRequest> = requests.iter().collect();
        Some(self.start_same_host(socket, endpoint, &refs, signal))
    }

    /// Starts one request on its route; `alone`: it is the whole submission.
    fn start(
        &self,
        req: &TransferRequest,
        route: Route,
        signal: &Arc<CompletionSignal>,
        alone: bool,
    ) -> Arc<Task> {
        match route {
            Route::Local => {
                let done = local::copy(
                    &self.inner.local.memory,
                    req.op,
                    req.source,
                    req.target_offset,
                    req.length,
                );
                match done {
                    Ok(()) => {
                        let task = Task::new(req.length, 1, None);
                        task.finish_slice(true);
                        task
                    }
                    Err(e) => {
                        log::warn!("local transfer failed: {e}");
                        Task::failed(req.length)
                    }
                }
            }
            Route::Rdma(segment, desc) => {
                let Some(rdma) = &self.rdma else {
                    return Task::failed(req.length);
                };
                let request = PeerRequest::from(req);
                rdma.submit(&segment, &desc, &request, Some(signal.clone()))
            }
            Route::SameHost(socket, endpoint) => {
                if req.length == 0 || self.gpu_of(req.source).is_some() {
                    return self.start(req, Route::Tcp(endpoint), signal, alone);
                }
                let tasks = self.start_same_host(&socket, &endpoint, &[req], signal);
                tasks
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| Task::failed(req.length))
            }
            Route::Tcp(endpoint) => {
                let Some(tcp) = &self.tcp else {
                    return Task::failed(req.length);
                };
                let request = PeerRequest::from(req);
                if let Some(gpu) = self.gpu_of(req.source) {
                    return self.inner.stager.submit(
                        tcp.clone(),
                        &endpoint,
                        &request,
                        Some(signal.clone()),
                        gpu,
                    );
                }
                tcp.submit(&endpoint, &request, Some(signal.clone()), alone)
            }
        }
    }
}
