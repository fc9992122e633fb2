//! The types of the master's RPCs (spec store.md §3.1, §3.3): the argument and result
//! structs in upstream's field order, upstream's `ErrorCode`, and the constants both
//! sides share. Field order here is the wire order.

use crate::codec::code_enum::code_enum;
use std::fmt;
use std::time::Duration;

/// Upstream's `ErrorCode` (`types.h`), an i32 on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub i32);

#[allow(missing_docs)]
impl ErrorCode {
    pub const OK: ErrorCode = ErrorCode(0);
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(-1);
    pub const BUFFER_OVERFLOW: ErrorCode = ErrorCode(-10);
    pub const SEGMENT_NOT_FOUND: ErrorCode = ErrorCode(-101);
    pub const SEGMENT_ALREADY_EXISTS: ErrorCode = ErrorCode(-102);
    pub const CLIENT_NOT_FOUND: ErrorCode = ErrorCode(-103);
    pub const NO_AVAILABLE_HANDLE: ErrorCode = ErrorCode(-200);
    pub const INVALID_VERSION: ErrorCode = ErrorCode(-300);
    pub const INVALID_KEY: ErrorCode = ErrorCode(-400);
    pub const WRITE_FAIL: ErrorCode = ErrorCode(-500);
    pub const INVALID_PARAMS: ErrorCode = ErrorCode(-600);
    pub const ILLEGAL_CLIENT: ErrorCode = ErrorCode(-601);
    pub const INVALID_WRITE: ErrorCode = ErrorCode(-700);
    pub const INVALID_READ: ErrorCode = ErrorCode(-701);
    pub const INVALID_REPLICA: ErrorCode = ErrorCode(-702);
    pub const REPLICA_IS_NOT_READY: ErrorCode = ErrorCode(-703);
    pub const OBJECT_NOT_FOUND: ErrorCode = ErrorCode(-704);
    pub const OBJECT_ALREADY_EXISTS: ErrorCode = ErrorCode(-705);
    pub const OBJECT_HAS_LEASE: ErrorCode = ErrorCode(-706);
    pub const LEASE_EXPIRED: ErrorCode = ErrorCode(-707);
    pub const OBJECT_HAS_REPLICATION_TASK: ErrorCode = ErrorCode(-708);
    pub const OBJECT_NO_REPLICATION_TASK: ErrorCode = ErrorCode(-709);
    pub const REPLICA_NOT_FOUND: ErrorCode = ErrorCode(-710);
    pub const REPLICA_IS_GONE: ErrorCode = ErrorCode(-712);
    pub const REPLICA_NOT_IN_LOCAL_MEMORY: ErrorCode = ErrorCode(-713);
    pub const TRANSFER_FAIL: ErrorCode = ErrorCode(-800);
    pub const CHECKSUM_MISMATCH: ErrorCode = ErrorCode(-801);
    pub const RPC_FAIL: ErrorCode = ErrorCode(-900);
    pub const RPC_TIMEOUT: ErrorCode = ErrorCode(-901);
    pub const UNAVAILABLE_IN_CURRENT_STATUS: ErrorCode = ErrorCode(-1010);
    pub const NOT_SUPPORTED: ErrorCode = ErrorCode(-1012);
    pub const UNABLE_OFFLOAD: ErrorCode = ErrorCode(-1300);
    pub const UNABLE_OFFLOADING: ErrorCode = ErrorCode(-1301);
    pub const TASK_NOT_FOUND: ErrorCode = ErrorCode(-1400);
    pub const TASK_PENDING_LIMIT_EXCEEDED: ErrorCode = ErrorCode(-1401);

    /// Upstream's name of the code (`toString(ErrorCode)`), `"ERROR"` for codes this
    /// crate does not name.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "OK",
            -1 => "INTERNAL_ERROR",
            -10 => "BUFFER_OVERFLOW",
            -101 => "SEGMENT_NOT_FOUND",
            -102 => "SEGMENT_ALREADY_EXISTS",
            -103 => "CLIENT_NOT_FOUND",
            -200 => "NO_AVAILABLE_HANDLE",
            -300 => "INVALID_VERSION",
            -400 => "INVALID_KEY",
            -500 => "WRITE_FAIL",
            -600 => "INVALID_PARAMS",
            -601 => "ILLEGAL_CLIENT",
            -700 => "INVALID_WRITE",
            -701 => "INVALID_READ",
            -702 => "INVALID_REPLICA",
            -703 => "REPLICA_IS_NOT_READY",
            -704 => "OBJECT_NOT_FOUND",
            -705 => "OBJECT_ALREADY_EXISTS",
            -706 => "OBJECT_HAS_LEASE",
            -707 => "LEASE_EXPIRED",
            -708 => "OBJECT_HAS_REPLICATION_TASK",
            -709 => "OBJECT_NO_REPLICATION_TASK",
            -710 => "REPLICA_NOT_FOUND",
            -712 => "REPLICA_IS_GONE",
            -713 => "REPLICA_NOT_IN_LOCAL_MEMORY",
            -800 => "TRANSFER_FAIL",
            -801 => "CHECKSUM_MISMATCH",
            -900 => "RPC_FAIL",
            -901 => "RPC_TIMEOUT",
            -1010 => "UNAVAILABLE_IN_CURRENT_STATUS",
            -1012 => "NOT_SUPPORTED",
            -1300 => "UNABLE_OFFLOAD",
            -1301 => "UNABLE_OFFLOADING",
            -1400 => "TASK_NOT_FOUND",
            -1401 => "TASK_PENDING_LIMIT_EXCEEDED",
            _ => "ERROR",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

impl std::error::Error for ErrorCode {}

/// Result of one master operation.
pub type MasterResult<T> = Result<T, ErrorCode>;

/// Upstream's UUID: `std::pair<uint64_t, uint64_t>`, printed `first-second`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uuid {
    /// High half.
    pub first: u64,
    /// Low half.
    pub second: u64,
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.second)
    }
}

/// A client's contributed memory, as mounted on the master (`types.h` `Segment`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Segment {
    /// Unique id chosen by the client.
    pub id: Uuid,
    /// Segment name (the client's `host:port`), also its TE segment name.
    pub name: String,
    /// Base virtual address in the owner process.
    pub base: u64,
    /// Size in bytes.
    pub size: u64,
    /// Transfer Engine endpoint to reach it.
    pub te_endpoint: String,
    /// Transport protocol (`tcp`, `rdma`, ...).
    pub protocol: String,
    /// Host identity (for same-host placement).
    pub host_id: String,
}

code_enum! {
    /// `SoftPinAction` (u8 on the wire).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum SoftPinAction: u8 {
        /// Keep the object's current soft-pin state.
        #[default]
        Preserve = 0,
        /// Soft-pin the object.
        Enable = 1,
        /// Clear the soft pin.
        Disable = 2,
    }
}

/// `ReplicateConfig` in wire order (`replica.h`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicateConfig {
    /// Memory replicas wanted (best effort, distinct segments).
    pub replica_num: u64,
    /// NVMe-oF replicas (unsupported here).
    pub nof_replica_num: u64,
    /// DFS replicas (unsupported here).
    pub dfs_replica_num: u64,
    /// Soft-pin action.
    pub soft_pin_action: SoftPinAction,
    /// Soft-pin TTL override in milliseconds.
    pub soft_pin_ttl_ms: Option<u64>,
    /// Never evict.
    pub with_hard_pin: bool,
    /// Segment names to place replicas on first, in order.
    pub preferred_segments: Vec<String>,
    /// Deprecated single preferred segment.
    pub preferred_segment: String,
    /// Preferred NVMe-oF segments (unsupported here).
    pub preferred_nof_segments: Vec<String>,
    /// Prefer the writer's host.
    pub prefer_alloc_in_same_node: bool,
    /// `ObjectDataType` (u8).
    pub data_type: u8,
    /// Writer's host id.
    pub host_id: String,
    /// Group ids (objects of a group are evicted together).
    pub group_ids: Option<Vec<String>>,
}

impl Default for ReplicateConfig {
    fn default() -> Self {
        ReplicateConfig {
            replica_num: 1,
            nof_replica_num: 0,
            dfs_replica_num: 0,
            soft_pin_action: SoftPinAction::Preserve,
            soft_pin_ttl_ms: None,
            with_hard_pin: false,
            preferred_segments: Vec::new(),
            preferred_segment: String::new(),
            preferred_nof_segments: Vec::new(),
            prefer_alloc_in_same_node: false,
            data_type: 0,
            host_id: String::new(),
            group_ids: None,
        }
    }
}

/// One contiguous buffer in a segment (`AllocatedBuffer::Descriptor`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BufferDescriptor {
    /// Object size in bytes.
    pub size: u64,
    /// Absolute address in the segment owner's process.
    pub buffer_address: u64,
    /// Transport protocol.
    pub protocol: String,
    /// TE segment name of the owner.
    pub transport_endpoint: String,
}

/// Where a replica lives (the descriptor variant, index order is the wire order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaLocation {
    /// 0: in a client's memory segment.
    Memory(BufferDescriptor),
    /// 1: on an NVMe-oF segment.
    Nof(BufferDescriptor),
    /// 2: on a shared file system.
    Disk {
        /// File path.
        file_path: String,
        /// Object size.
        object_size: u64,
    },
    /// 3: on a client's local disk.
    LocalDisk {
        /// Owning client.
        client_id: Uuid,
        /// Object size.
        object_size: u64,
        /// TE endpoint of the owner.
        transport_endpoint: String,
    },
    /// 4: on a distributed file system.
    Dfs {
        /// File path.
        file_path: String,
        /// Offset in the file.
        offset: u64,
        /// Object size.
        object_size: u64,
        /// Aligned size.
        aligned_size: u64,
        /// Shard index.
        shard_idx: i32,
    },
}

code_enum! {
    /// `ReplicaStatus` (i32 on the wire).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ReplicaStatus: i32 {
        /// Not set.
        Undefined = 0,
        /// Allocated.
        Initialized = 1,
        /// Being written.
        Processing = 2,
        /// Readable.
        Complete = 3,
        /// Removed.
        Removed = 4,
        /// Failed.
        Failed = 5,
    }
}

/// `Replica::Descriptor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaDescriptor {
    /// Replica id.
    pub id: u64,
    /// Where it lives.
    pub location: ReplicaLocation,
    /// Its status.
    pub status: ReplicaStatus,
}

/// Result of `GetReplicaList`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetReplicaListResponse {
    /// Readable replicas.
    pub replicas: Vec<ReplicaDescriptor>,
    /// Read lease granted, in milliseconds.
    pub lease_ttl_ms: u64,
    /// Stored checksum, if any.
    pub checksum: Option<u64>,
}

/// `ObjectMeta` argument of `PutEnd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    /// Object key.
    pub key: String,
    /// Optional CRC-64 of the value.
    pub checksum: Option<u64>,
}

code_enum! {
    /// `ReplicaType` (i32 on the wire).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ReplicaType: i32 {
        /// Memory replicas.
        Memory = 0,
        /// Disk replicas.
        Disk = 1,
        /// Local-disk replicas.
        LocalDisk = 2,
        /// NVMe-oF replicas.
        NofSsd = 3,
        /// Every kind.
        All = 4,
        /// DFS replicas.
        Dfs = 100,
    }
}

code_enum! {
    /// `ClientStatus` returned by `Ping` (i32 on the wire).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ClientStatus: i32 {
        /// Unknown.
        Undefined = 0,
        /// Known and healthy.
        Ok = 1,
        /// The client must remount its segments.
        NeedRemount = 2,
    }
}

/// Result of `Ping`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingResponse {
    /// HA view version (0 without HA).
    pub view_version_id: i64,
    /// What the client must do.
    pub client_status: ClientStatus,
}

/// Result of `GetStorageConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StorageConfig {
    /// Shared-FS persistence directory ("" when none).
    pub fsdir: String,
    /// Whether disk eviction is on.
    pub enable_disk_eviction: bool,
    /// Disk quota in bytes.
    pub quota_bytes: u64,
}

/// One task handed to a client by `FetchTasks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskAssignment {
    /// Task id.
    pub id: Uuid,
    /// Task type.
    pub task_type: i32,
    /// JSON payload.
    pub payload: String,
    /// Creation time in ms.
    pub created_at_ms: i64,
    /// Retry budget.
    pub max_retry: u32,
}

/// `TaskType::REPLICA_COPY`: copy an object's replica to named segments.
pub const TASK_REPLICA_COPY: i32 = 0;
/// `TaskType::REPLICA_MOVE`: move an object's replica from one segment to another.
pub const TASK_REPLICA_MOVE: i32 = 1;

/// `TaskStatus` of a copy or move task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Waiting for its client to fetch it.
    Pending = 0,
    /// Fetched, being executed.
    Processing = 1,
    /// Ended in failure (reported, or timed out).
    Failed = 2,
    /// Ended in success.
    Success = 3,
}

impl TaskStatus {
    /// The status of wire value `v`.
    pub fn from_i32(v: i32) -> Option<TaskStatus> {
        match v {
            0 => Some(TaskStatus::Pending),
            1 => Some(TaskStatus::Processing),
            2 => Some(TaskStatus::Failed),
            3 => Some(TaskStatus::Success),
            _ => None,
        }
    }

    /// Whether the task has ended.
    pub fn is_final(self) -> bool {
        matches!(self, TaskStatus::Failed | TaskStatus::Success)
    }
}

/// `MarkTaskToComplete`'s report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskCompleteRequest {
    /// Task id.
    pub id: Uuid,
    /// `TaskStatus` as its wire value (only FAILED and SUCCESS are accepted).
    pub status: i32,
    /// What happened.
    pub message: String,
}

/// Result of `QueryTask`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryTaskResponse {
    /// Task id.
    pub id: Uuid,
    /// `TaskType` wire value.
    pub task_type: i32,
    /// `TaskStatus` wire value.
    pub status: i32,
    /// Creation time, ms since the epoch (master clock).
    pub created_at_ms: i64,
    /// Time of the last state change, ms since the epoch.
    pub last_updated_at_ms: i64,
    /// The client that executes it (the source segment's owner).
    pub assigned_client: Uuid,
    /// `""` until it ends; then the client's report or the timeout's.
    pub message: String,
}

/// Result of `CopyStart`: the source replica and the new (PROCESSING) targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyStartResponse {
    /// The replica to copy from.
    pub source: ReplicaDescriptor,
    /// The replicas to write (empty when every target already holds one).
    pub targets: Vec<ReplicaDescriptor>,
}

/// Result of `MoveStart`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveStartResponse {
    /// The replica to move.
    pub source: ReplicaDescriptor,
    /// The replica to write; `None` when the target already holds one.
    pub target: Option<ReplicaDescriptor>,
}

/// The version string `ServiceReady` must return for upstream clients to connect.
pub const SERVICE_VERSION: &str = "2.0.0";

/// Default tenant name.
pub const DEFAULT_TENANT: &str = "default";

/// The deadline of one master call from our store client unless `MC_RPC_TIMEOUT_MS`
/// says otherwise (upstream's default too).
pub const DEFAULT_RPC_TIMEOUT: Duration = Duration::from_secs(30);
