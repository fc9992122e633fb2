//! The [`MasterApi`] trait that both the master service (in process) and the RPC
//! client (over coro_rpc) implement; its argument and result types are in
//! [`super::master_types`] and re-exported here.

use super::disk_tier_api::DiskTierApi;
use super::master_rpcs::{master_rpcs, trait_method};
pub use super::master_types::{
    BufferDescriptor, ClientStatus, CopyStartResponse, ErrorCode, GetReplicaListResponse,
    MasterResult, MoveStartResponse, ObjectMeta, PingResponse, QueryTaskResponse,
    ReplicaDescriptor, ReplicaLocation, ReplicaStatus, ReplicaType, ReplicateConfig, Segment,
    SoftPinAction, StorageConfig, TaskAssignment, TaskCompleteRequest, TaskStatus, Uuid,
    DEFAULT_RPC_TIMEOUT, DEFAULT_TENANT, SERVICE_VERSION, TASK_REPLICA_COPY, TASK_REPLICA_MOVE,
};

/// What a client does on a new master leader before any call goes there (remount its
/// segments, as upstream's client does on a leader switch).
pub type OnNewLeader = Box<dyn Fn(&dyn MasterApi) -> MasterResult<()> + Send + Sync>;

/// Declares [`MasterApi`] from the RPC table's `master` rows.
macro_rules! master_api {
    (all [$($all:tt)*] master [$($row:tt)*] tier [$($tier:tt)*]) => {
        /// Every master RPC a client uses. Batch calls return one result per input; the
        /// outer `Err` is a failure of the call itself (RPC failure, timeout).
        pub trait MasterApi: Send + Sync {
            /// Has `hook` run on every new leader before calls go to it, for connections
            /// that follow a changing leader (`etcd://` master addresses); others ignore
            /// it.
            fn on_new_leader(&self, hook: OnNewLeader) {
                drop(hook);
            }
            /// Called by an RPC server before replies to requests this thread handled are
            /// sent: a replicated master waits here until their changes are durable, once
            /// for a whole run of pipelined requests. Others do nothing.
            fn before_reply(&self) {}
            /// Whether this master may answer requests now; an RPC server refuses
            /// requests and withholds replies while it may not. False for an HA leader
            /// whose lease may have lapsed (a process stopped past its TTL and resumed);
            /// others always may.
            fn serving(&self) -> bool {
                true
            }
            /// The disk-tier RPCs, for a master (or a connection to one) that has them.
            fn disk_tier(&self) -> Option<&dyn DiskTierApi> {
                None
            }
            $(trait_method!($row);)*
        }
    };
}

master_rpcs!(master_api);
