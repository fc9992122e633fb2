//! What one engine holds: [`TransferEngine`] and the state its threads share.

use super::own_segment::LocalSegment;
use crate::config::Config;
use crate::metadata::{KeyLayout, MetadataStore};
use crate::te::batch::BatchTable;
use crate::te::rpc::{RpcClient, RpcServer};
use crate::te::segment::SegmentCache;
use crate::te::transport::staging::Stager;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The state an engine shares with its RPC daemon, refresher and transports.
pub(super) struct Inner {
    pub(super) config: Config,
    pub(super) p2p: bool,
    pub(super) rpc_host: String,
    pub(super) rpc_port: u16,
    pub(super) store: Option<Box<dyn MetadataStore>>,
    pub(super) keys: KeyLayout,
    pub(super) local: Arc<LocalSegment>,
    pub(super) segments: SegmentCache,
    pub(super) batches: BatchTable,
    pub(super) rpc_server: Mutex<Option<RpcServer>>,
    pub(super) rpc_client: RpcClient,
    pub(super) rpc_meta_cache: Mutex<HashMap<String, (String, u16)>>,
    pub(super) rpc_meta_created: AtomicBool,
    pub(super) descriptor_published: AtomicBool,
    pub(super) publish_lock: Mutex<()>,
    /// Serializes installing transports (one of each name).
    pub(super) install_lock: Mutex<()>,
    pub(super) stopping: AtomicBool,
    /// The staging threads TCP sends GPU memory through.
    pub(super) stager: Arc<Stager>,
}

/// A Transfer Engine instance.
pub struct TransferEngine {
    pub(super) inner: Arc<Inner>,
    pub(super) refresher: Option<std::thread::JoinHandle<()>>,
}
