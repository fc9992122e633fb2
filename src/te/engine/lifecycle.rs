//! Creating an engine (RPC daemon, identity, first transports, refresher) and
//! tearing it down again.

use super::own_segment::{LocalRpcHandler, LocalSegment};
use super::state::{Inner, TransferEngine};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::host::addr::{join_host_port, parse_host_port};
use crate::host::idle::IdleClock;
use crate::metadata::{KeyLayout, MetadataSource};
use crate::te::batch::BatchTable;
use crate::te::memory::MemoryRegistry;
use crate::te::rpc::{RpcClient, RpcServer};
use crate::te::segment::SegmentCache;
use crate::te::transport::local::LocalCopy;
use crate::te::transport::registry::Registry;
use crate::te::transport::staging::Stager;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

impl TransferEngine {
    /// Creates an engine (upstream `createTransferEngine` + `init`), reading the
    /// process configuration from the environment.
    pub fn new(metadata: &str, local_server_name: &str, auto_discover: bool) -> Result<Self> {
        Self::with_config(
            Config::global().clone(),
            metadata,
            local_server_name,
            auto_discover,
        )
    }

    /// Creates an engine with an explicit configuration.
    pub fn with_config(
        config: Config,
        metadata: &str,
        local_server_name: &str,
        auto_discover: bool,
    ) -> Result<Self> {
        let source = MetadataSource::parse(metadata)?;
        let p2p = source == MetadataSource::P2p;
        let store = source.open()?;
        let (name_host, name_port) = parse_host_port(local_server_name, config.handshake_port);
        if local_server_name.is_empty() {
            return Err(Error::InvalidArgument("local server name is empty".into()));
        }
        let listener = if config.legacy_rpc_port_binding && !p2p {
            crate::host::net::bind_port(name_port, config.use_ipv6)
                .map_err(|e| Error::socket(format!("binding rpc port {name_port}"), e))?
        } else {
            crate::host::net::bind_in_range(
                config.min_rpc_port,
                config.max_rpc_port,
                config.use_ipv6,
            )?
        };
        // Re-listening on a bound socket only updates its backlog (MC_HANDSHAKE_LISTEN_BACKLOG).
        // SAFETY: the fd belongs to `listener`, which is open.
        unsafe {
            libc::listen(
                std::os::fd::AsRawFd::as_raw_fd(&listener),
                config.handshake_listen_backlog,
            )
        };
        let rpc_port = listener
            .local_addr()
            .map_err(|e| Error::socket("rpc listener address", e))?
            .port();
        let (rpc_host, name) = if p2p {
            (name_host.clone(), join_host_port(&name_host, rpc_port))
        } else if config.legacy_rpc_port_binding {
            (name_host.clone(), local_server_name.to_string())
        } else {
            let ip = config
                .advertised_ip
                .clone()
                .or_else(|| crate::host::net::first_interface_ip(config.use_ipv6))
                .unwrap_or_else(|| {
                    log::warn!("no non-loopback interface is up; advertising 127.0.0.1");
                    "127.0.0.1".into()
                });
            (ip, local_server_name.to_string())
        };
        let local = Arc::new(LocalSegment {
            name,
            host: rpc_host.clone(),
            memory: Arc::new(MemoryRegistry::default()),
            transports: Registry::default(),
            notifies: Mutex::new(VecDeque::new()),
        });
        if !config.disable_local_copy {
            let local_copy = LocalCopy::new(local.memory.clone());
            local.transports.add(Arc::new(local_copy));
        }
        let handler = Arc::new(LocalRpcHandler(local.clone()));
        let server = RpcServer::start(
            listener,
            handler,
            config.handshake_max_length,
            config.inbound_limits(),
        )?;
        let rpc_client = RpcClient::new(
            Duration::from_secs(config.handshake_connect_timeout_secs),
            config.handshake_max_length,
        );
        let inner = Arc::new(Inner {
            keys: KeyLayout::new(config.cluster_id.as_deref()),
            p2p,
            rpc_host,
            rpc_port,
            store,
            local,
            segments: SegmentCache::new(IdleClock::new(Duration::from_secs(config.peer_idle_secs))),
            batches: BatchTable::new(),
            rpc_server: Mutex::new(Some(server)),
            rpc_client,
            rpc_meta_cache: Mutex::new(HashMap::new()),
            rpc_meta_created: AtomicBool::new(false),
            descriptor_published: AtomicBool::new(false),
            publish_lock: Mutex::new(()),
            install_lock: Mutex::new(()),
            stopping: AtomicBool::new(false),
            stager: Arc::new(Stager::default()),
            config,
        });
        let mut engine = TransferEngine {
            inner,
            refresher: None,
        };
        engine.inner.publish_rpc_meta()?;
        if engine.inner.config.force_tcp {
            engine.install_transport("tcp")?;
        } else if auto_discover {
            engine.auto_install()?;
        }
        let interval = engine.inner.config.metadata_refresh_interval_secs;
        if interval > 0 && !engine.inner.config.disable_metacache {
            engine.refresher = Some(spawn_refresher(Arc::downgrade(&engine.inner), interval));
        }
        Ok(engine)
    }

    /// The segment name peers open this engine by.
    pub fn segment_name(&self) -> &str {
        &self.inner.local.name
    }

    /// `ip:port` of the RPC daemon; in P2P mode this is the segment name.
    pub fn local_ip_and_port(&self) -> String {
        if self.inner.p2p {
            return self.inner.local.name.clone();
        }
        format!("{}:{}", self.inner.rpc_host, self.inner.rpc_port)
    }

    /// The RPC daemon's port.
    pub fn rpc_port(&self) -> u16 {
        self.inner.rpc_port
    }

    /// Probes a peer's RPC daemon by segment name.
    pub fn probe(&self, segment: &str) -> Result<()> {
        let (host, port) = self.inner.rpc_address(segment)?;
        self.inner.rpc_client.probe(&host, port)
    }
}

impl Drop for TransferEngine {
    fn drop(&mut self) {
        let inner = &self.inner;
        inner.stopping.store(true, Ordering::SeqCst);
        if let Some(mut server) = inner.rpc_server.lock().take() {
            server.stop();
        }
        for transport in inner.local.transports.take_all() {
            transport.shutdown();
        }
        inner.stager.shutdown();
        if let Some(refresher) = self.refresher.take() {
            refresher.thread().unpark();
            let _ = refresher.join();
        }
        if let Some(store) = &inner.store {
            let name = &inner.local.name;
            if inner.rpc_meta_created.load(Ordering::SeqCst) {
                if let Err(e) = store.remove(&inner.keys.rpc_meta(name)) {
                    log::warn!("removing rpc_meta of {name}: {e}");
                }
            }
            if inner.descriptor_published.load(Ordering::SeqCst) {
                if let Err(e) = store.remove(&inner.keys.segment(name)) {
                    log::warn!("removing descriptor of {name}: {e}");
                }
            }
        }
    }
}

fn spawn_refresher(inner: Weak<Inner>, secs: u64) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || loop {
        std::thread::park_timeout(Duration::from_secs(secs));
        match inner.upgrade() {
            Some(i) if !i.stopping.load(Ordering::SeqCst) => i.sync_all(),
            _ => return,
        }
    })
}
