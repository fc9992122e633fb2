//! A memory replica of an object ([`Replica`], 32 bytes with its buffer's fields
//! inline) and an object's replica list ([`Replicas`]: one inline, more in a vector).
//! A replica's buffer is exactly as long as its object's value, so its length is the
//! object's and is not stored per replica: the methods that need it take it.

use super::segments::{Buffer, SegRef};
use crate::wire::master_api::{ReplicaDescriptor, ReplicaLocation, ReplicaStatus};

/// One memory replica: its buffer's fields are inline so that a replica is 32 bytes
/// (its length is its object's size).
#[derive(Debug, Clone)]
pub(crate) struct Replica {
    /// Global replica id.
    pub id: u64,
    /// The mount its buffer lives in.
    pub seg: SegRef,
    /// Buffer address.
    pub addr: u64,
    /// The allocator's block index of the buffer.
    pub block: u32,
    /// PROCESSING or COMPLETE.
    pub status: ReplicaStatus,
}

impl Replica {
    /// A replica on `buf`, a buffer of its object's size.
    pub fn new(id: u64, status: ReplicaStatus, buf: Buffer) -> Replica {
        Replica {
            id,
            seg: buf.seg,
            addr: buf.addr,
            block: buf.block,
            status,
        }
    }

    /// Whether it can be read: complete, its segment still mounted and its owner
    /// reachable.
    pub fn is_readable(&self) -> bool {
        self.status == ReplicaStatus::Complete && self.seg.is_usable()
    }

    /// The wire descriptor of this replica of an object of `size` bytes.
    pub fn descriptor(&self, size: u64) -> ReplicaDescriptor {
        ReplicaDescriptor {
            id: self.id,
            location: ReplicaLocation::Memory(self.seg.descriptor(self.addr, size)),
            status: self.status,
        }
    }

    /// A handle to its buffer (of its object's `size`).
    pub fn buffer(&self, size: u64) -> Buffer {
        Buffer {
            seg: self.seg.clone(),
            addr: self.addr,
            size,
            block: self.block,
        }
    }

    /// Its buffer (of its object's `size`).
    pub fn into_buffer(self, size: u64) -> Buffer {
        Buffer {
            seg: self.seg,
            addr: self.addr,
            size,
            block: self.block,
        }
    }
}

/// An object's replicas, a slice of [`Replica`]: a single replica (the common case) is
/// stored inline, more on the heap.
#[derive(Debug, Clone)]
pub(crate) struct Replicas(ReplicasRepr);

#[derive(Debug, Clone)]
enum ReplicasRepr {
    One(Replica),
    Many(Vec<Replica>),
}

impl Default for Replicas {
    fn default() -> Replicas {
        Replicas(ReplicasRepr::Many(Vec::new()))
    }
}

impl Replicas {
    fn from_vec(mut v: Vec<Replica>) -> Replicas {
        match v.len() {
            0 => Replicas::default(),
            1 => Replicas(ReplicasRepr::One(v.pop().expect("one replica"))),
            _ => Replicas(ReplicasRepr::Many(v)),
        }
    }

    /// Appends `r` after the others.
    pub fn push(&mut self, r: Replica) {
        match &mut self.0 {
            ReplicasRepr::Many(v) if v.is_empty() => *self = Replicas(ReplicasRepr::One(r)),
            ReplicasRepr::Many(v) => v.push(r),
            ReplicasRepr::One(first) => {
                let first = first.clone();
                *self = Replicas(ReplicasRepr::Many(vec![first, r]));
            }
        }
    }

    /// Keeps the replicas for which `keep` returns true, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&Replica) -> bool) {
        match &mut self.0 {
            ReplicasRepr::One(r) => {
                if !keep(r) {
                    *self = Replicas::default();
                }
            }
            ReplicasRepr::Many(v) => {
                v.retain(|r| keep(r));
                if v.len() <= 1 {
                    *self = Replicas::from_vec(std::mem::take(v));
                }
            }
        }
    }
}

impl std::ops::Deref for Replicas {
    type Target = [Replica];

    fn deref(&self) -> &[Replica] {
        match &self.0 {
            ReplicasRepr::One(r) => std::slice::from_ref(r),
            ReplicasRepr::Many(v) => v,
        }
    }
}

impl std::ops::DerefMut for Replicas {
    fn deref_mut(&mut self) -> &mut [Replica] {
        match &mut self.0 {
            ReplicasRepr::One(r) => std::slice::from_mut(r),
            ReplicasRepr::Many(v) => v,
        }
    }
}

impl FromIterator<Replica> for Replicas {
    fn from_iter<I: IntoIterator<Item = Replica>>(iter: I) -> Replicas {
        Replicas::from_vec(iter.into_iter().collect())
    }
}

impl IntoIterator for Replicas {
    type Item = Replica;
    type IntoIter = std::iter::Chain<std::option::IntoIter<Replica>, std::vec::IntoIter<Replica>>;

    fn into_iter(self) -> Self::IntoIter {
        match self.0 {
            ReplicasRepr::One(r) => Some(r).into_iter().chain(Vec::new()),
            ReplicasRepr::Many(v) => None.into_iter().chain(v),
        }
    }
}

#[cfg(test)]
#[path = "replica_tests.rs"]
mod tests;
