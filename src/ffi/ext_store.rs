//! `mooncake_store_*` extensions that upstream's `store_c.h` lacks (declared in
//! `mooncake_ext.h`), used by the Python package: puts with upstream's full
//! `ReplicateConfig`, upsert, puts and gets of objects scattered over several
//! buffers, whole-object gets into library memory, batch remove and size, and
//! replica descriptors as JSON; ranged reads (`ranges`) and replica clearing
//! (`clear`).
//!
//! Conventions are those of `store_c.h`: -1 for shim failures (bad handle, NULL
//! arrays or keys, NULL buffers with a non-zero size, a malformed config, a panic),
//! -600 when the handle is not set up, otherwise upstream's codes. Batch functions
//! return 0 and write one result per key.
//!
//! A config is a JSON object with the fields of upstream's Python `ReplicateConfig`,
//! each optional: `replica_num` (1), `soft_pin_action` (0 PRESERVE, 1 ENABLE,
//! 2 DISABLE), `soft_pin_ttl_ms` (null: the master's default), `with_hard_pin`,
//! `preferred_segments`, `preferred_segment`, `prefer_alloc_in_same_node`,
//! `group_ids` (null, or one group id per key), `nof_replica_num`,
//! `dfs_replica_num`, `preferred_nof_segments`, `data_type`; the legacy
//! `with_soft_pin` (true means ENABLE) is accepted too. Unknown fields are ignored.
//! NULL means upstream's defaults.
//!
//! One file per job: `write` (puts and upserts), `read` (multi-buffer and whole-object
//! reads, library-owned `buffers`), `query` (batch remove and size, replica
//! descriptors), `ranges`, `clear`, `dummy` clients, `setup` (offload, shared
//! engine), `segments` (mounted at run time), copy and move `tasks`; `support` reads the JSON config and writes the JSON answers.

mod buffers;
pub mod clear;
pub mod dummy;
pub mod query;
pub mod ranges;
pub mod read;
pub mod segments;
pub mod sessions;
pub mod setup;
mod support;
pub mod tasks;
pub mod write;
