//! Installing transports into an engine by name (`auto_discover`, `install`), and
//! what the engine says about what it has installed.

use super::state::{Inner, TransferEngine};
use crate::error::{Error, Result};
use crate::te::batch::Task;
use crate::te::transport::same_host::transport::SameHostTransport;
use crate::te::transport::seam::Transport;
use crate::te::transport::staging::Stager;
use crate::te::transport::tcp::{GpuRequest, GpuStaging, TcpTransport};
use std::sync::Arc;

impl TransferEngine {
    /// What `auto_discover` installs, as upstream: TCP with `MC_FORCE_TCP`, else RDMA
    /// when a NIC is usable (or `MC_FORCE_HCA` is set, then failing without one), else
    /// TCP.
    pub(super) fn auto_install(&self) -> Result<()> {
        self.auto_install_with(&[])
    }

    /// [`TransferEngine::auto_install`] with discovery limited to `devices` (the
    /// Python API's `device_name`).
    pub fn auto_install_with(&self, devices: &[String]) -> Result<()> {
        if self.inner.config.force_tcp {
            return self.install_transport("tcp").map(|_| ());
        }
        match self.install_rdma(None, None, devices) {
            Ok(_) => Ok(()),
            Err(e) if !self.inner.config.rdma.force_hca => {
                log::info!("no RDMA ({e}); using TCP");
                self.install_transport("tcp").map(|_| ())
            }
            Err(e) => Err(e),
        }
    }

    /// Installs a transport by protocol name (`tcp`, `rdma`); the same one again
    /// returns it as is. `topology`: upstream's `installTransport` `args[0]` (a NIC
    /// priority matrix; RDMA only).
    pub fn install(&self, proto: &str, topology: Option<&str>) -> Result<()> {
        match proto {
            "tcp" => self.install_transport("tcp").map(|_| ()),
            "rdma" if self.forces_tcp() => self.tcp_instead_of_rdma().map(|_| ()),
            "rdma" => self.install_rdma(None, topology, &[]).map(|_| ()),
            other => Err(Error::NotSupportedTransport(format!(
                "transport '{other}' is not available in this build (tcp, rdma)"
            ))),
        }
    }

    /// Installs the TCP transport, and beside it the same-host one (unless disabled
    /// or unavailable); installing it again returns it as is.
    pub fn install_transport(&self, proto: &str) -> Result<Arc<TcpTransport>> {
        if proto != "tcp" {
            return Err(Error::NotSupportedTransport(format!(
                "install_transport installs tcp only (not '{proto}'); use install"
            )));
        }
        let inner = &self.inner;
        let transports = &inner.local.transports;
        let _serial = inner.install_lock.lock();
        if let Some(tcp) = inner.installed_already::<TcpTransport>() {
            return Ok(tcp);
        }
        let memory = &inner.local.memory;
        let tcp = Arc::new(TcpTransport::install(
            &inner.config,
            memory.clone(),
            inner.local.host.clone(),
            inner.stager.clone(),
        )?);
        transports.add(tcp.clone());
        let mut added = vec![tcp.name()];
        if let Some(same_host) = SameHostTransport::install(&inner.config, memory.clone()) {
            added.push(same_host.name());
            transports.add(Arc::new(same_host));
        }
        inner.publish_or_uninstall(&added)?;
        Ok(tcp)
    }

    /// Whether `MC_FORCE_TCP` is set: TCP is the only transport, even where RDMA is
    /// asked for by name (upstream: "TCP as the active transport regardless whether
    /// RDMA devices are installed"), so programs that always install RDMA, such as
    /// upstream's P2P store example, run over TCP for testing.
    pub fn forces_tcp(&self) -> bool {
        self.inner.config.force_tcp
    }

    /// TCP, installed where RDMA was asked for under `MC_FORCE_TCP`.
    pub fn tcp_instead_of_rdma(&self) -> Result<Arc<TcpTransport>> {
        log::warn!("MC_FORCE_TCP is set: installing TCP where RDMA was asked for");
        self.install_transport("tcp")
    }

    /// Whether a transport of that name is installed.
    pub fn has_transport(&self, proto: &str) -> bool {
        self.inner.local.transports.has(proto)
    }

    /// Whether a transfer to a remote segment may go over a transport that sends only
    /// from registered local memory (RDMA): callers then bounce unregistered buffers
    /// through registered ones.
    pub fn needs_registered_buffers(&self) -> bool {
        self.inner.local.transports.has("rdma")
    }

    /// Bytes this engine moved as an initiator over the same-host path (diagnostics:
    /// 0 when every peer is reached over the network).
    pub fn same_host_bytes(&self) -> u64 {
        let same_host = self.inner.local.transports.get::<SameHostTransport>();
        same_host.map_or(0, |t| t.bytes_moved())
    }

    /// Of [`TransferEngine::same_host_bytes`], those copied through peers' shared
    /// regions mapped into this process (see [`TransferEngine::share_memory`]).
    pub fn same_host_mapped_bytes(&self) -> u64 {
        let same_host = self.inner.local.transports.get::<SameHostTransport>();
        same_host.map_or(0, |t| t.bytes_moved_mapped())
    }

    /// Bytes of peers' shared regions whose pages this engine mapped ahead of the
    /// copies, in the background, because the peer already backed them (diagnostics).
    pub fn same_host_premapped_bytes(&self) -> u64 {
        let same_host = self.inner.local.transports.get::<SameHostTransport>();
        same_host.map_or(0, |t| t.bytes_premapped())
    }

    /// Of [`TransferEngine::same_host_bytes`], those copied into and out of peers'
    /// registered memory they leased to this process (no round trip per batch).
    pub fn same_host_leased_bytes(&self) -> u64 {
        let same_host = self.inner.local.transports.get::<SameHostTransport>();
        same_host.map_or(0, |t| t.bytes_moved_leased())
    }
}

impl Inner {
    /// The installed transport of type `T`, which installing it again returns as is
    /// (logged); the caller holds `install_lock`.
    pub(super) fn installed_already<T: Transport>(&self) -> Option<Arc<T>> {
        let installed = self.local.transports.get::<T>()?;
        log::warn!("transport {} is already installed", installed.name());
        Some(installed)
    }

    /// Publishes the descriptor with the transports `added` just installed; when that
    /// fails they are removed and shut down again.
    pub(super) fn publish_or_uninstall(&self, added: &[&str]) -> Result<()> {
        self.publish_descriptor().inspect_err(|_| {
            for name in added {
                if let Some(t) = self.local.transports.remove(name) {
                    t.shutdown();
                }
            }
        })
    }
}

/// The engine's staging threads are where TCP sends requests from GPU memory.
impl GpuStaging for Stager {
    fn stage(&self, tcp: Arc<TcpTransport>, job: GpuRequest<'_>) -> Arc<Task> {
        self.submit(tcp, job.endpoint, job.req, job.signal, job.gpu)
    }
}
