//! Redis metadata (spec §2.1): `SET`, `GET` and `DEL` of upstream's keys and values over
//! a small blocking RESP client. `MC_REDIS_USERNAME` / `MC_REDIS_PASSWORD` authenticate
//! (`AUTH`) and `MC_REDIS_DB_INDEX` selects the database, as upstream; a lost connection
//! is re-established once per command.
//!
//! As a [`VersionedStore`](super::versioned::VersionedStore) ([`super::versioned`]) the value of a key stays where a plain
//! `GET` finds it, `<key>`, a string of the raw bytes, and its version beside it, in
//! `<key>\0version` (the key, a NUL byte, `version`), numbered by one counter for the
//! database, `\0mooncake\0versions`, that every versioned write increments (the first
//! is 1). Upstream's clients write keys from C strings, which cannot hold the NUL these
//! names do, so neither collides with theirs; keys given to the versioned calls must not
//! hold a NUL either. Each operation is one Lua script (`EVAL`), so atomic. A value with
//! no version beside it (written by a plain `SET`) reads at version 0; plain writes do
//! not move versions, so keys updated with compare-and-swap should be written only
//! through the versioned calls. A list `SCAN`s for the prefix (glob characters escaped),
//! then reads each key's value and version in one script per key; keys that are not
//! strings are left out.
//!
//! By job: `auth.rs` the `MC_REDIS_*` settings; `resp.rs` the protocol (commands out,
//! replies in); `connection.rs` the connection and its one retry; `store.rs` the store
//! and its plain operations; `scripts.rs` the Lua scripts; `owner.rs` the HA election's
//! lease on a key; `versioned.rs` the versioned
//! operations; `scan.rs` the listing by prefix.

mod auth;
mod connection;
mod owner;
mod resp;
mod scan;
mod scripts;
mod store;
mod versioned;

pub use auth::RedisAuth;
pub(crate) use resp::read_reply;
pub use store::RedisMetadataStore;
