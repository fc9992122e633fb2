//! The installed transports of one engine, by name, in installation order: what
//! the descriptor is built from, what memory is registered with, and what shuts down;
//! and, ranked once per change, the order in which the router asks them.

use crate::metadata::SegmentDesc;
use crate::te::transport::seam::{SegmentKind, Transport};
use parking_lot::RwLock;
use std::any::Any;
use std::cmp::Reverse;
use std::sync::Arc;

/// The transports installed in one engine.
#[derive(Default)]
pub struct Registry {
    installed: RwLock<Arc<Installed>>,
}

/// One state of the registry: the transports in installation order and, for each kind
/// of segment, by rank (best first). Built when a transport comes or goes, so a
/// submission takes it with one reference count, not a sort.
#[derive(Default)]
pub struct Installed {
    order: Vec<Arc<dyn Transport>>,
    own: Vec<Arc<dyn Transport>>,
    peer: Vec<Arc<dyn Transport>>,
}

impl Installed {
    fn new(order: Vec<Arc<dyn Transport>>) -> Installed {
        let ranked = |kind| {
            let mut ranked = order.clone();
            ranked.sort_by_key(|t| Reverse(t.rank(kind)));
            ranked
        };
        Installed {
            own: ranked(SegmentKind::Own),
            peer: ranked(SegmentKind::Peer),
            order,
        }
    }

    /// The transports for segments of `kind`, best first.
    pub fn ranked(&self, kind: SegmentKind) -> &[Arc<dyn Transport>] {
        match kind {
            SegmentKind::Own => &self.own,
            SegmentKind::Peer => &self.peer,
        }
    }
}

impl Registry {
    /// Replaces the installed list by what `change` makes of a copy of it.
    fn change<R>(&self, change: impl FnOnce(&mut Vec<Arc<dyn Transport>>) -> R) -> R {
        let mut installed = self.installed.write();
        let mut order = installed.order.clone();
        let result = change(&mut order);
        *installed = Arc::new(Installed::new(order));
        result
    }

    /// Adds `transport` (the caller checked none of its name is installed).
    pub fn add(&self, transport: Arc<dyn Transport>) {
        self.change(|order| order.push(transport));
    }

    /// Removes the transport of that name, returning it.
    pub fn remove(&self, name: &str) -> Option<Arc<dyn Transport>> {
        self.change(|order| {
            let index = order.iter().position(|t| t.name() == name)?;
            Some(order.remove(index))
        })
    }

    /// Removes and returns every transport, in installation order.
    pub fn take_all(&self) -> Vec<Arc<dyn Transport>> {
        self.change(std::mem::take)
    }

    /// Whether a transport of that name is installed.
    pub fn has(&self, name: &str) -> bool {
        self.installed.read().order.iter().any(|t| t.name() == name)
    }

    /// The installed transport of type `T`, if any.
    pub fn get<T: Transport>(&self) -> Option<Arc<T>> {
        self.installed.read().order.iter().find_map(|t| {
            let any: Arc<dyn Any + Send + Sync> = t.clone();
            any.downcast::<T>().ok()
        })
    }

    /// Every installed transport, in installation order.
    pub fn all(&self) -> Vec<Arc<dyn Transport>> {
        self.installed.read().order.clone()
    }

    /// The installed transports as they are now, ranked for the router.
    pub fn ranked(&self) -> Arc<Installed> {
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
        for transport in self.installed.read().order.iter() {
            transport.describe(&mut desc);
        }
        (!desc.protocol.is_empty()).then_some(desc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Result;
    use crate::te::transport::seam::{Destination, Group, Rank, Started, Target};

    /// A transport that only has a name and a rank.
    struct Ranked(&'static str, Rank, Rank);

    impl Transport for Ranked {
        fn name(&self) -> &'static str {
            self.0
        }
        fn describe(&self, _desc: &mut SegmentDesc) {}
        fn shutdown(&self) {}
        fn rank(&self, kind: SegmentKind) -> Rank {
            match kind {
                SegmentKind::Own => self.1,
                SegmentKind::Peer => self.2,
            }
        }
        fn reach(&self, _target: &Target<'_>) -> Result<Option<Destination>> {
            Ok(None)
        }
        fn start(self: Arc<Self>, _group: &Group<'_>, _out: &mut Vec<Started>) {}
    }

    fn names(list: &[Arc<dyn Transport>]) -> Vec<&'static str> {
        list.iter().map(|t| t.name()).collect()
    }

    #[test]
    fn the_ranking_follows_every_install_and_removal() {
        let registry = Registry::default();
        registry.add(Arc::new(Ranked("tcp", Rank::Tcp, Rank::Tcp)));
        registry.add(Arc::new(Ranked("rdma", Rank::LastResort, Rank::Rdma)));
        let before = registry.ranked();
        registry.add(Arc::new(Ranked(
            "local",
            Rank::OwnSegment,
            Rank::LastResort,
        )));
        let now = registry.ranked();
        assert_eq!(names(&registry.all()), ["tcp", "rdma", "local"]);
        assert_eq!(
            names(now.ranked(SegmentKind::Own)),
            ["local", "tcp", "rdma"]
        );
        assert_eq!(
            names(now.ranked(SegmentKind::Peer)),
            ["rdma", "tcp", "local"]
        );
        assert_eq!(
            names(before.ranked(SegmentKind::Peer)),
            ["rdma", "tcp"],
            "a submission keeps the state it started with"
        );
        assert!(registry.remove("rdma").is_some());
        assert_eq!(
            names(registry.ranked().ranked(SegmentKind::Peer)),
            ["tcp", "local"]
        );
        assert_eq!(names(&registry.take_all()), ["tcp", "local"]);
        assert!(registry.ranked().ranked(SegmentKind::Own).is_empty());
    }
}
