//! What the master's object gauges count (upstream's `master_soft_pin_key_count`,
//! `mem_cache_nums_`, `file_cache_nums_`): for each object, the classes it is in
//! ([`Census`]); for the table, how many objects are in each ([`CensusCounts`]),
//! moved by the difference every change makes (see `objects`).

use std::sync::atomic::{AtomicI64, Ordering};

use super::object::Object;

/// The classes one object is in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Census {
    /// A soft pin is set (expired or not, as upstream counts it).
    pub soft_pinned: bool,
    /// Some memory replica is COMPLETE.
    pub in_memory: bool,
    /// Some copy is on a disk tier.
    pub on_disk: bool,
}

impl Census {
    /// The classes `o` is in.
    pub fn of(o: &Object) -> Census {
        Census {
            soft_pinned: o.soft_pin().is_some(),
            in_memory: o.has_complete_memory(),
            on_disk: !o.disk_replicas().is_empty(),
        }
    }
}

/// Objects per class, over a whole table.
#[derive(Debug, Default)]
pub(crate) struct CensusCounts {
    soft_pinned: AtomicI64,
    in_memory: AtomicI64,
    on_disk: AtomicI64,
}

/// A reading of [`CensusCounts`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CensusSnapshot {
    /// Objects with a soft pin set.
    pub soft_pinned: u64,
    /// Objects with a COMPLETE memory replica.
    pub in_memory: u64,
    /// Objects with a copy on a disk tier.
    pub on_disk: u64,
}

impl CensusCounts {
    /// Moves the counts by an object going from `before` to `after` (an insertion is
    /// from the default, a removal to it).
    pub fn apply(&self, before: Census, after: Census) {
        if before == after {
            return;
        }
        let step = |counter: &AtomicI64, was: bool, is: bool| {
            if was != is {
                counter.fetch_add(if is { 1 } else { -1 }, Ordering::Relaxed);
            }
        };
        step(&self.soft_pinned, before.soft_pinned, after.soft_pinned);
        step(&self.in_memory, before.in_memory, after.in_memory);
        step(&self.on_disk, before.on_disk, after.on_disk);
    }

    /// The counts now.
    pub fn snapshot(&self) -> CensusSnapshot {
        let read = |c: &AtomicI64| u64::try_from(c.load(Ordering::Relaxed)).unwrap_or(0);
        CensusSnapshot {
            soft_pinned: read(&self.soft_pinned),
            in_memory: read(&self.in_memory),
            on_disk: read(&self.on_disk),
        }
    }
}
