//! The words of the P2P Store's API: what `list` reports, how a `get_replica` runs,
//! and what it moved.

use super::fetch::Progress;

/// An object in the metadata, as `list` reports it (upstream's `PayloadInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Its name.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its shard size.
    pub max_shard_size: u64,
    /// The sizes of the buffers it was registered from.
    pub size_list: Vec<u64>,
    /// The nodes holding a copy of any of its shards, sorted.
    pub holders: Vec<String>,
}

/// How a `get_replica` runs.
#[derive(Default, Clone, Copy)]
pub struct GetOptions<'a> {
    /// Shards whose bytes already in the buffers match their CRC-32C are kept, not
    /// fetched (a receiver restarted over the same file-backed buffers resumes).
    pub resume_by_checksum: bool,
    /// Told of the bytes landed so far and the object's size.
    pub progress: Option<Progress<'a>>,
    /// Ask only these nodes (segment names).
    pub only: Option<&'a [String]>,
}

/// What a successful `get_replica` moved.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fetched {
    /// Bytes that were already in the buffers (an earlier attempt's, or matching
    /// their CRC-32C) and were kept.
    pub kept: u64,
    /// Bytes fetched from other nodes.
    pub fetched: u64,
    /// Bytes fetched from each node, most first.
    pub by_source: Vec<(String, u64)>,
}
