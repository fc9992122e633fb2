//! Installing the RDMA transport into an engine, and the channel it reaches peers'
//! RPC daemons through.

use super::state::{Inner, TransferEngine};
use crate::error::{Error, Result};
use crate::metadata::SegmentDesc;
use crate::sys::verbs::Verbs;
use crate::te::transport::rdma::topology::Topology;
use crate::te::transport::rdma::{HandshakeChannel, InstallArgs, RdmaTransport};
use crate::te::transport::seam::Transport;
use serde_json::Value;
use std::sync::{Arc, Weak};

impl TransferEngine {
    /// Installs the RDMA transport: the NICs of `topology` (JSON, as upstream's
    /// `installTransport` `args[0]`), else of `MC_CUSTOM_TOPO_JSON`, else discovered
    /// (limited to `devices` when not empty). `verbs` replaces the system's libibverbs
    /// (tests use [`crate::sys::verbs::fake`]). Regions registered so far are
    /// registered with the NICs. Installing twice returns the installed transport.
    pub fn install_rdma(
        &self,
        verbs: Option<Arc<dyn Verbs>>,
        topology: Option<&str>,
        devices: &[String],
    ) -> Result<Arc<RdmaTransport>> {
        let inner = &self.inner;
        let transports = &inner.local.transports;
        let _serial = inner.install_lock.lock();
        if let Some(rdma) = inner.installed_already::<RdmaTransport>() {
            return Ok(rdma);
        }
        let verbs = match verbs {
            Some(v) => v,
            None => crate::sys::verbs::system()
                .map_err(|e| Error::NotSupportedTransport(format!("rdma: {e}")))?,
        };
        let topology = match topology {
            Some(json) => Some(Topology::parse(json)?),
            None => match &inner.config.rdma.custom_topology {
                Some(path) => {
                    let text = std::fs::read_to_string(path).map_err(|e| {
                        Error::InvalidArgument(format!("MC_CUSTOM_TOPO_JSON {path}: {e}"))
                    })?;
                    Some(Topology::parse(&text)?)
                }
                None => None,
            },
        };
        let channel: Arc<dyn HandshakeChannel> = Arc::new(EngineChannel(Arc::downgrade(inner)));
        let rdma = RdmaTransport::install(
            verbs,
            InstallArgs {
                cfg: &inner.config.rdma,
                segment: &inner.local.name,
                topology,
                devices,
                channel,
            },
        )?;
        for region in inner.local.memory.regions() {
            rdma.register(
                region.addr,
                region.len,
                (&region.location, region.device),
                region.remote_accessible,
            )?;
        }
        transports.add(rdma.clone());
        inner.publish_or_uninstall(&[rdma.name()])?;
        Ok(rdma)
    }

    /// The installed RDMA transport, if any.
    pub fn rdma(&self) -> Option<Arc<RdmaTransport>> {
        self.inner.local.transports.get::<RdmaTransport>()
    }
}

/// The engine as the RDMA transport's way to peers (holds no strong reference).
struct EngineChannel(Weak<Inner>);

impl EngineChannel {
    fn inner(&self) -> Result<Arc<Inner>> {
        self.0
            .upgrade()
            .ok_or_else(|| Error::NotSupportedTransport("the engine is gone".into()))
    }
}

impl HandshakeChannel for EngineChannel {
    fn exchange(&self, segment: &str, msg: &Value) -> Result<Value> {
        let inner = self.inner()?;
        let (host, port) = inner.rpc_address(segment)?;
        let timeout = inner.config.rdma.handshake_timeout;
        inner.rpc_client.handshake(&host, port, msg, timeout)
    }

    fn peer_device(&self, segment: &str, device: &str) -> Option<(String, u16)> {
        let inner = self.inner().ok()?;
        let desc: SegmentDesc = inner.fetch_descriptor(segment).ok()?;
        let rdma = desc.rdma?;
        let d = rdma.devices.into_iter().find(|d| d.name == device)?;
        Some((d.gid, d.lid))
    }
}
