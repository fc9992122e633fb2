//! The installed transports of one engine, by name, in installation order: what
//! the descriptor is built from, what memory is registered with, and what shuts down.

use crate::metadata::SegmentDesc;
use crate::te::transport::seam::Transport;
use parking_lot::RwLock;
use std::any::Any;
use std::sync::Arc;

/// The transports installed in one engine.
#[derive(Default)]
pub struct Registry {
    installed: RwLock<Vec<Arc<dyn Transport>>>,
}

impl Registry {
    /// Adds `transport` (the caller checked none of its name is installed).
    pub fn add(&self, transport: Arc<dyn Transport>) {
        self.installed.write().push(transport);
    }

    /// Removes the transport of that name, returning it.
    pub fn remove(&self, name: &str) -> Option<Arc<dyn Transport>> {
        let mut installed = self.installed.write();
        let index = installed.iter().position(|t| t.name() == name)?;
        Some(installed.remove(index))
    }

    /// Removes and returns every transport, in installation order.
    pub fn take_all(&self) -> Vec<Arc<dyn Transport>> {
        std::mem::take(&mut *self.installed.write())
    }

    /// Whether a transport of that name is installed.
    pub fn has(&self, name: &str) -> bool {
        self.installed.read().iter().any(|t| t.name() == name)
    }

    /// The installed transport of type `T`, if any.
    pub fn get<T: Transport>(&self) -> Option<Arc<T>> {
        self.installed.read().iter().find_map(|t| {
            let any: Arc<dyn Any + Send + Sync> = t.clone();
            any.downcast::<T>().ok()
        })
    }

    /// Every installed transport, in installation order.
    pub fn all(&self) -> Vec<Arc<dyn Transport>> {
        self.installed.read().clone()
    }

    /// The descriptor of segment `name`: each transport's part over an empty one;
    /// `None` while no installed transport makes the segment reachable (sets a
    /// protocol).
    pub fn descriptor(&self, name: &str) -> Option<SegmentDesc> {
        let mut desc = SegmentDesc {
            name: name.to_string(),
            protocol: String::new(),
            tcp_data_port: 0,
            tcp_proto_version: 1,
            tcp_data_host: None,
            rdma_server_name: None,
            buffers: Vec::new(),
            rdma: None,
            same_host: None,
        };
        for transport in self.installed.read().iter() {
            transport.describe(&mut desc);
        }
        (!desc.protocol.is_empty()).then_some(desc)
    }
}
