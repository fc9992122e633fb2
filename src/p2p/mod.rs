//! The P2P Store: a client-only object store with no master, for spreading large
//! objects (checkpoints, model weights) from a few nodes to many. Every node is equal:
//! one registers an object from its memory, others fetch it shard by shard from every
//! node that has a copy, several shards at once, and each shard that lands is
//! published as a new source at once, so a wave of receivers feeds itself instead of
//! crowding the first node. The metadata (one JSON payload per object, changed with
//! compare-and-swap) is upstream's Go P2P store's, so Go nodes and ours share objects.
//!
//! * `payload.rs` the metadata value; `meta.rs` reading and changing it;
//! * `layout.rs` where shards land in a receiver's buffers; `choose.rs` which shard
//!   next and from where; `fetch.rs` the workers and the publisher;
//! * `memory.rs` counted registrations; `store.rs` [`P2pStore`], `vocab.rs` the words
//!   of its API; `config.rs`;
//! * `agent.rs` the HTTP endpoint through which other nodes ask this one to fetch a
//!   copy (`replicate_to`).

pub mod agent;
pub mod choose;
pub mod config;
pub mod error;
pub mod fetch;
pub mod layout;
pub mod memory;
pub mod meta;
pub mod payload;
pub mod store;
pub mod vocab;

pub use agent::Agent;
pub use config::P2pConfig;
pub use error::{P2pError, P2pResult};
pub use store::{Fetched, GetOptions, ObjectInfo, P2pStore};
