//! A client's own SSD tier (spec tiers-events-conductor.md §1.2-§1.8): the objects its
//! master asks it to keep on its local disk, written to bucket files ([`backend`]),
//! configured from upstream's `MOONCAKE_OFFLOAD_*` environment ([`config`]).

pub(crate) mod backend;
pub mod config;
