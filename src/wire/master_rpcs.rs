//! The master's RPC surface, declared once: one row per RPC, in [`Method::ALL`] order
//! (the order of the metrics and of the fuzz corpora's method indices).
//!
//! A row gives the upstream method name, its wire signature (the struct_pack argument
//! tuple and result), how its result travels (`[one]`: an `expected<T>`; `[batch k]`:
//! one result per element of argument `k`; `[long]`: a bare `long`; `[map]`: an
//! `unordered_map` returned as pairs; `, default` when the trait answers
//! `NOT_SUPPORTED` unless a master implements it), and its Rust signature on
//! [`MasterApi`] or [`DiskTierApi`]. A `writes` group names the four rows (start,
//! end, revoke, batch start) that the `Put*` and `Upsert*` families share but for
//! their names. [`master_rpcs!`] hands the whole table to a
//! macro of the caller's, which turns it into the `Method` enum, the codec's marker
//! types, the two traits, the client stubs, the dispatch arms, the leader-following
//! forwarder and the master's counting wrappers.
//!
//! [`Method::ALL`]: super::coro_rpc::Method::ALL
//! [`MasterApi`]: super::master_api::MasterApi
//! [`DiskTierApi`]: super::disk_tier_api::DiskTierApi

/// Hands the master's RPC table to `$callback!` as
/// `all [rows] master [rows] tier [rows]` (every RPC; the [`MasterApi`] ones; the
/// [`DiskTierApi`] ones), each row a braced group:
/// `{ #[doc] Name: (wire args) => wire result; [kind] fn name(args) -> result; }`.
/// Tokens after `$callback` go before the table (`master_rpcs!(both_apis Type, ...)`).
///
/// [`MasterApi`]: super::master_api::MasterApi
/// [`DiskTierApi`]: super::disk_tier_api::DiskTierApi
macro_rules! master_rpcs {
    ($callback:ident $($pre:tt)*) => {
        $crate::wire::master_rpcs::master_rpcs! { @split $callback [$($pre)*];
            all [] master [] tier [];
        master {
            /// `ServiceReady`: the service version ("2.0.0").
            ServiceReady: () => Expected<String>;
            [one] fn service_ready() -> MasterResult<String>;
        }
        master {
            /// `GetStorageConfig`.
            GetStorageConfig: () => Expected<StorageConfig>;
            [one] fn get_storage_config() -> MasterResult<StorageConfig>;
        }
        master {
            /// `GetFsdir` (legacy).
            GetFsdir: () => Expected<String>;
            [one] fn get_fsdir() -> MasterResult<String>;
        }
        master {
            /// `MountSegment`: idempotent.
            MountSegment: (Segment, Uuid) => Expected<()>;
            [one] fn mount_segment(segment: &Segment, client: Uuid) -> MasterResult<()>;
        }
        master {
            /// `ReMountSegment`: mounts all and marks the client OK.
            ReMountSegment: (Vec<Segment>, Uuid) => Expected<()>;
            [one] fn remount_segment(segments: &[Segment], client: Uuid) -> MasterResult<()>;
        }
        master {
            /// `UnmountSegment`: idempotent.
            UnmountSegment: (Uuid, Uuid) => Expected<()>;
            [one] fn unmount_segment(segment_id: Uuid, client: Uuid) -> MasterResult<()>;
        }
        master {
            /// `GracefulUnmountSegment`: unmount after a grace period.
            GracefulUnmountSegment: (Uuid, Uuid, u64) => Expected<()>;
            [one] fn graceful_unmount_segment(
                segment_id: Uuid,
                client: Uuid,
                grace_ms: u64
            ) -> MasterResult<()>;
        }
        master {
            /// `Ping`: heartbeat.
            Ping: (Uuid,) => Expected<PingResponse>;
            [one] fn ping(client: Uuid) -> MasterResult<PingResponse>;
        }
        master {
            /// `FetchTasks`.
            FetchTasks: (Uuid, u64) => Expected<Vec<TaskAssignment>>;
            [one] fn fetch_tasks(client: Uuid, batch_size: u64) -> MasterResult<Vec<TaskAssignment>>;
        }
        master {
            /// `ExistKey`: grants a read lease when it exists.
            ExistKey: (String, String) => Expected<bool>;
            [one] fn exist_key(key: &str, tenant: &str) -> MasterResult<bool>;
        }
        master {
            /// `BatchExistKey`.
            BatchExistKey: (Vec<String>, String) => Vec<Expected<bool>>;
            [batch keys] fn batch_exist_key(
                keys: &[String],
                tenant: &str
            ) -> MasterResult<Vec<MasterResult<bool>>>;
        }
        master {
            /// `GetReplicaList`: grants a read lease.
            GetReplicaList: (String, String) => Expected<GetReplicaListResponse>;
            [one] fn get_replica_list(key: &str, tenant: &str) -> MasterResult<GetReplicaListResponse>;
        }
        master {
            /// `BatchGetReplicaList`.
            BatchGetReplicaList: (Vec<String>, String) => Vec<Expected<GetReplicaListResponse>>;
            [batch keys] fn batch_get_replica_list(
                keys: &[String],
                tenant: &str
            ) -> MasterResult<Vec<MasterResult<GetReplicaListResponse>>>;
        }
        master {
            /// `GetReplicaListByRegex`: key -> readable replicas.
            GetReplicaListByRegex: (String, String)
                => Expected<Map<String, Vec<ReplicaDescriptor>>>;
            [map] fn get_replica_list_by_regex(
                regex: &str,
                tenant: &str
            ) -> MasterResult<Vec<(String, Vec<ReplicaDescriptor>)>>;
        }
        writes {
            /// `PutStart`: allocates replicas (PROCESSING).
            PutStart put_start;
            /// `PutEnd`: replicas become COMPLETE.
            PutEnd put_end;
            /// `PutRevoke`: drops PROCESSING replicas.
            PutRevoke put_revoke;
            /// `BatchPutStart`.
            BatchPutStart batch_put_start;
        }
        master {
            /// `BatchPutEnd`.
            BatchPutEnd: (Uuid, Vec<ObjectMeta>, ReplicaType, String) => Vec<Expected<()>>;
            [batch metas] fn batch_put_end(
                client: Uuid,
                metas: &[ObjectMeta],
                kind: ReplicaType,
                tenant: &str
            ) -> MasterResult<Vec<MasterResult<()>>>;
        }
        master {
            /// `BatchPutRevoke`.
            BatchPutRevoke: (Uuid, Vec<String>, ReplicaType, String) => Vec<Expected<()>>;
            [batch keys] fn batch_put_revoke(
                client: Uuid,
                keys: &[String],
                kind: ReplicaType,
                tenant: &str
            ) -> MasterResult<Vec<MasterResult<()>>>;
        }
        writes {
            /// `UpsertStart`: insert or replace (in place when the size is unchanged).
            UpsertStart upsert_start;
            /// `UpsertEnd`.
            UpsertEnd upsert_end;
            /// `UpsertRevoke`.
            UpsertRevoke upsert_revoke;
            /// `BatchUpsertStart`.
            BatchUpsertStart batch_upsert_start;
        }
        master {
            /// `BatchUpsertEnd` (upstream's takes no replica type; it means every kind).
            BatchUpsertEnd: (Uuid, Vec<ObjectMeta>, String) => Vec<Expected<()>>;
            [batch metas] fn batch_upsert_end(
                client: Uuid,
                metas: &[ObjectMeta],
                tenant: &str
            ) -> MasterResult<Vec<MasterResult<()>>>;
        }
        master {
            /// `BatchUpsertRevoke` (no replica type on the wire either).
            BatchUpsertRevoke: (Uuid, Vec<String>, String) => Vec<Expected<()>>;
            [batch keys] fn batch_upsert_revoke(
                client: Uuid,
                keys: &[String],
                tenant: &str
            ) -> MasterResult<Vec<MasterResult<()>>>;
        }
        master {
            /// `Remove`: -706 under a read lease unless forced.
            Remove: (String, bool, String) => Expected<()>;
            [one] fn remove(key: &str, force: bool, tenant: &str) -> MasterResult<()>;
        }
        master {
            /// `RemoveByRegex`: number removed.
            RemoveByRegex: (String, bool, String) => Expected<i64>;
            [one] fn remove_by_regex(regex: &str, force: bool, tenant: &str) -> MasterResult<i64>;
        }
        master {
            /// `RemoveAll`: number removed (a bare `long` on the wire: a failure travels
            /// as its negative error code, which a client returns as `Ok`, as upstream's
            /// does).
            RemoveAll: (bool, String) => i64;
            [long] fn remove_all(force: bool, tenant: &str) -> MasterResult<i64>;
        }
        master {
            /// `BatchRemove`.
            BatchRemove: (Vec<String>, bool, String) => Vec<Expected<()>>;
            [batch keys] fn batch_remove(
                keys: &[String],
                force: bool,
                tenant: &str
            ) -> MasterResult<Vec<MasterResult<()>>>;
        }
        master {
            /// `BatchQueryIp`: client id -> IPs of its segments.
            BatchQueryIp: (Vec<Uuid>,) => Expected<Map<Uuid, Vec<String>>>;
            [map] fn batch_query_ip(clients: &[Uuid]) -> MasterResult<Vec<(Uuid, Vec<String>)>>;
        }
        master {
            /// `BatchReplicaClear`: clears that client's expired-lease objects on a segment.
            BatchReplicaClear: (Vec<String>, Uuid, String) => Expected<Vec<String>>;
            [one] fn batch_replica_clear(
                keys: &[String],
                client: Uuid,
                segment_name: &str
            ) -> MasterResult<Vec<String>>;
        }
        tier {
            /// `MountLocalDiskSegment`: `client` keeps objects on its local disk; whether
            /// the master may queue offload tasks for it. Idempotent; -1300 when the
            /// master runs without `--enable_offload`.
            MountLocalDiskSegment: (Uuid, bool) => Expected<()>;
            [one] fn mount_local_disk_segment(client: Uuid, enable_offloading: bool) -> MasterResult<()>;
        }
        tier {
            /// `UnmountLocalDiskSegment`: every replica on `client`'s disk is dropped.
            UnmountLocalDiskSegment: (Uuid,) => Expected<()>;
            [one] fn unmount_local_disk_segment(client: Uuid) -> MasterResult<()>;
        }
        tier {
            /// `OffloadObjectHeartbeat`: drains `client`'s offload tasks (cancelled, and
            /// none returned, when `enable_offloading` is false). -101 for a client whose
            /// disk is not mounted (it mounts again).
            OffloadObjectHeartbeat: (Uuid, bool) => Expected<Vec<OffloadTaskItem>>;
            [one] fn offload_object_heartbeat(
                client: Uuid,
                enable_offloading: bool
            ) -> MasterResult<Vec<OffloadTaskItem>>;
        }
        tier {
            /// `PollRemoveAll`: whether a `RemoveAll` happened since the last poll (the
            /// client then wipes its disk); clears the flag.
            PollRemoveAll: (Uuid,) => Expected<bool>;
            [one] fn poll_remove_all(client: Uuid) -> MasterResult<bool>;
        }
        tier {
            /// `ReportSsdCapacity`: the bytes `client`'s disk may hold.
            ReportSsdCapacity: (Uuid, i64) => Expected<()>;
            [one] fn report_ssd_capacity(client: Uuid, bytes: i64) -> MasterResult<()>;
        }
        tier {
            /// `NotifyOffloadSuccess`: `tasks[i]` landed at `metadatas[i]` on `client`'s
            /// disk (or failed, `data_size` < 0). Lengths must match (-600); -101 at the
            /// end when the client's disk is not mounted.
            NotifyOffloadSuccess: (Uuid, Vec<OffloadTaskItem>, Vec<StorageObjectMetadata>)
                => Expected<()>;
            [one] fn notify_offload_success(
                client: Uuid,
                tasks: &[OffloadTaskItem],
                metadatas: &[StorageObjectMetadata]
            ) -> MasterResult<()>;
        }
        tier {
            /// `PromotionObjectHeartbeat`: drains `client`'s promotion tasks.
            PromotionObjectHeartbeat: (Uuid,) => Expected<Vec<PromotionTaskItem>>;
            [one] fn promotion_object_heartbeat(client: Uuid) -> MasterResult<Vec<PromotionTaskItem>>;
        }
        tier {
            /// `PromotionAllocStart`: a memory replica for `key`, which `client` holds on
            /// disk.
            PromotionAllocStart: (Uuid, String, String, u64, Vec<String>)
                => Expected<PromotionAllocation>;
            [one] fn promotion_alloc_start(
                client: Uuid,
                key: &str,
                tenant: &str,
                size: u64,
                preferred_segments: &[String]
            ) -> MasterResult<PromotionAllocation>;
        }
        tier {
            /// `NotifyPromotionSuccess`: the promoted memory replica is written.
            NotifyPromotionSuccess: (Uuid, String, String) => Expected<()>;
            [one] fn notify_promotion_success(client: Uuid, key: &str, tenant: &str) -> MasterResult<()>;
        }
        tier {
            /// `NotifyPromotionFailure`: the promotion is abandoned (its buffer is freed).
            NotifyPromotionFailure: (Uuid, String, String) => Expected<()>;
            [one] fn notify_promotion_failure(client: Uuid, key: &str, tenant: &str) -> MasterResult<()>;
        }
        tier {
            /// `EvictDiskReplica`: `client` is about to delete `key` from its disk; its
            /// replica of type `kind` (LOCAL_DISK or DISK) goes, and the object with it
            /// when it was the last.
            EvictDiskReplica: (Uuid, String, String, ReplicaType) => Expected<()>;
            [one] fn evict_disk_replica(
                client: Uuid,
                key: &str,
                tenant: &str,
                kind: ReplicaType
            ) -> MasterResult<()>;
        }
        tier {
            /// `BatchEvictDiskReplica`: `EvictDiskReplica` for each key.
            BatchEvictDiskReplica: (Uuid, Vec<String>, String, ReplicaType) => Vec<Expected<()>>;
            [batch keys] fn batch_evict_disk_replica(
                client: Uuid,
                keys: &[String],
                tenant: &str,
                kind: ReplicaType
            ) -> MasterResult<Vec<MasterResult<()>>>;
        }
        master {
            /// `BatchBeginRead`, an extension of mooncake-rs masters:
            /// `BatchGetReplicaList` whose reads hold the objects only until
            /// `BatchEndRead` (or the lease TTL) instead of for a whole lease.
            /// `NOT_SUPPORTED` from a master without it (upstream's answers "function
            /// not registered").
            BatchBeginRead: (Vec<String>, String) => Vec<Expected<GetReplicaListResponse>>;
            [batch keys, default] fn batch_begin_read(
                keys: &[String],
                tenant: &str
            ) -> MasterResult<Vec<MasterResult<GetReplicaListResponse>>>;
        }
        master {
            /// `BatchEndRead`, the extension ending reads begun with `BatchBeginRead`:
            /// `replica_ids[i]` is a replica the read of `keys[i]` was given.
            BatchEndRead: (Vec<String>, Vec<u64>, String) => Expected<()>;
            [one, default] fn batch_end_read(
                keys: &[String],
                replica_ids: &[u64],
                tenant: &str
            ) -> MasterResult<()>;
        }
        master {
            /// `CreateCopyTask`: queues a copy of `key` to `targets` for the owner of
            /// one of its replicas; the task id.
            CreateCopyTask: (String, String, Vec<String>) => Expected<Uuid>;
            [one] fn create_copy_task(
                key: &str,
                tenant: &str,
                targets: &[String]
            ) -> MasterResult<Uuid>;
        }
        master {
            /// `CreateMoveTask`: queues a move of `key`'s replica on `source` to
            /// `target` for the owner of `source`; the task id.
            CreateMoveTask: (String, String, String, String) => Expected<Uuid>;
            [one] fn create_move_task(
                key: &str,
                tenant: &str,
                source: &str,
                target: &str
            ) -> MasterResult<Uuid>;
        }
        master {
            /// `QueryTask`: a task's state.
            QueryTask: (Uuid,) => Expected<QueryTaskResponse>;
            [one] fn query_task(id: Uuid) -> MasterResult<QueryTaskResponse>;
        }
        master {
            /// `MarkTaskToComplete`: the executing client reports a task's end.
            MarkTaskToComplete: (Uuid, TaskCompleteRequest) => Expected<()>;
            [one] fn mark_task_to_complete(
                client: Uuid,
                report: &TaskCompleteRequest
            ) -> MasterResult<()>;
        }
        master {
            /// `CopyStart`: new PROCESSING replicas of `key` on `targets`, copied from
            /// its replica on `source`, which stays held until the end.
            CopyStart: (Uuid, String, String, String, Vec<String>) => Expected<CopyStartResponse>;
            [one] fn copy_start(
                client: Uuid,
                key: &str,
                tenant: &str,
                source: &str,
                targets: &[String]
            ) -> MasterResult<CopyStartResponse>;
        }
        master {
            /// `CopyEnd`: the copies are written.
            CopyEnd: (Uuid, String, String) => Expected<()>;
            [one] fn copy_end(client: Uuid, key: &str, tenant: &str) -> MasterResult<()>;
        }
        master {
            /// `CopyRevoke`: the copy is given up.
            CopyRevoke: (Uuid, String, String) => Expected<()>;
            [one] fn copy_revoke(client: Uuid, key: &str, tenant: &str) -> MasterResult<()>;
        }
        master {
            /// `MoveStart`: a new PROCESSING replica of `key` on `target` (none when
            /// it holds one), to replace the one on `source`.
            MoveStart: (Uuid, String, String, String, String) => Expected<MoveStartResponse>;
            [one] fn move_start(
                client: Uuid,
                key: &str,
                tenant: &str,
                source: &str,
                target: &str
            ) -> MasterResult<MoveStartResponse>;
        }
        master {
            /// `MoveEnd`: the target is written; the source replica goes.
            MoveEnd: (Uuid, String, String) => Expected<()>;
            [one] fn move_end(client: Uuid, key: &str, tenant: &str) -> MasterResult<()>;
        }
        master {
            /// `MoveRevoke`: the move is given up.
            MoveRevoke: (Uuid, String, String) => Expected<()>;
            [one] fn move_revoke(client: Uuid, key: &str, tenant: &str) -> MasterResult<()>;
        }
        master {
            /// `DynamicReplicaCopyStart`: `CopyStart` of a copy the master asked for
            /// to spread a hot object, with the lease and version epoch of its task.
            #[allow(clippy::too_many_arguments)]
            DynamicReplicaCopyStart: (Uuid, String, String, String, Vec<String>, Uuid, u64)
                => Expected<CopyStartResponse>;
            [one] fn dynamic_replica_copy_start(
                client: Uuid,
                key: &str,
                tenant: &str,
                source: &str,
                targets: &[String],
                lease: Uuid,
                epoch: u64
            ) -> MasterResult<CopyStartResponse>;
        }
        master {
            /// `DynamicReplicaCopyEnd`: `CopyEnd` of a dynamic copy.
            DynamicReplicaCopyEnd: (Uuid, String, String, Uuid, u64) => Expected<()>;
            [one] fn dynamic_replica_copy_end(
                client: Uuid,
                key: &str,
                tenant: &str,
                lease: Uuid,
                epoch: u64
            ) -> MasterResult<()>;
        }
        master {
            /// `DynamicReplicaCopyRevoke`: `CopyRevoke` of a dynamic copy.
            DynamicReplicaCopyRevoke: (Uuid, String, String, Uuid, u64) => Expected<()>;
            [one] fn dynamic_replica_copy_revoke(
                client: Uuid,
                key: &str,
                tenant: &str,
                lease: Uuid,
                epoch: u64
            ) -> MasterResult<()>;
        }
        }
    };
    (@split $callback:ident $pre:tt; all [$($a:tt)*] master [$($m:tt)*] tier [$($t:tt)*];
        master $row:tt $($rest:tt)*) => {
        $crate::wire::master_rpcs::master_rpcs! { @split $callback $pre;
            all [$($a)* $row] master [$($m)* $row] tier [$($t)*]; $($rest)* }
    };
    (@split $callback:ident $pre:tt; all [$($a:tt)*] master [$($m:tt)*] tier [$($t:tt)*];
        tier $row:tt $($rest:tt)*) => {
        $crate::wire::master_rpcs::master_rpcs! { @split $callback $pre;
            all [$($a)* $row] master [$($m)*] tier [$($t)* $row]; $($rest)* }
    };
    // A `writes` group: the four master rows that `Put*` and `Upsert*` share, by name.
    (@split $callback:ident $pre:tt; all [$($a:tt)*] master [$($m:tt)*] tier [$($t:tt)*];
        writes {
            $(#[$start_doc:meta])* $Start:ident $start:ident;
            $(#[$end_doc:meta])* $End:ident $end:ident;
            $(#[$revoke_doc:meta])* $Revoke:ident $revoke:ident;
            $(#[$batch_doc:meta])* $BatchStart:ident $batch_start:ident;
        } $($rest:tt)*) => {
        $crate::wire::master_rpcs::master_rpcs! { @split $callback $pre;
            all [$($a)*] master [$($m)*] tier [$($t)*];
            master {
                $(#[$start_doc])*
                $Start: (Uuid, String, u64, ReplicateConfig, String)
                    => Expected<Vec<ReplicaDescriptor>>;
                [one] fn $start(
                    client: Uuid,
                    key: &str,
                    len: u64,
                    config: &ReplicateConfig,
                    tenant: &str
                ) -> MasterResult<Vec<ReplicaDescriptor>>;
            }
            master {
                $(#[$end_doc])*
                $End: (Uuid, ObjectMeta, ReplicaType, String) => Expected<()>;
                [one] fn $end(
                    client: Uuid,
                    meta: &ObjectMeta,
                    kind: ReplicaType,
                    tenant: &str
                ) -> MasterResult<()>;
            }
            master {
                $(#[$revoke_doc])*
                $Revoke: (Uuid, String, ReplicaType, String) => Expected<()>;
                [one] fn $revoke(
                    client: Uuid,
                    key: &str,
                    kind: ReplicaType,
                    tenant: &str
                ) -> MasterResult<()>;
            }
            master {
                $(#[$batch_doc])*
                $BatchStart: (Uuid, Vec<String>, Vec<u64>, ReplicateConfig, String)
                    => Vec<Expected<Vec<ReplicaDescriptor>>>;
                [batch keys] fn $batch_start(
                    client: Uuid,
                    keys: &[String],
                    lens: &[u64],
                    config: &ReplicateConfig,
                    tenant: &str
                ) -> MasterResult<Vec<MasterResult<Vec<ReplicaDescriptor>>>>;
            }
            $($rest)*
        }
    };
    (@split $callback:ident [$($pre:tt)*];
        all [$($a:tt)*] master [$($m:tt)*] tier [$($t:tt)*];) => {
        $callback! { $($pre)* all [$($a)*] master [$($m)*] tier [$($t)*] }
    };
}

/// One row of [`master_rpcs!`] as a trait method: a declaration, or for a `default`
/// row a method answering `NOT_SUPPORTED`.
macro_rules! trait_method {
    ({ $(#[$doc:meta])* $m:ident: $args:ty => $wret:ty;
       [$kind:ident $($count:ident)?, default]
       fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; }) => {
        $(#[$doc])*
        fn $name(&self $(, $arg: $ty)*) -> $ret {
            $(let _ = $arg;)*
            Err(ErrorCode::NOT_SUPPORTED)
        }
    };
    ({ $(#[$doc:meta])* $m:ident: $args:ty => $wret:ty;
       [$kind:ident $($count:ident)?]
       fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; }) => {
        $(#[$doc])*
        fn $name(&self $(, $arg: $ty)*) -> $ret;
    };
}

/// Implements [`MasterApi`] and [`DiskTierApi`] for `$ty` from the table, as a
/// [`master_rpcs!`] callback: every row through `$row!`, `disk_tier` answering
/// `Some(self)`, and the other [`MasterApi`] methods in `$extra` (the caller imports
/// both traits).
///
/// [`MasterApi`]: super::master_api::MasterApi
/// [`DiskTierApi`]: super::disk_tier_api::DiskTierApi
macro_rules! both_apis {
    ($ty:ty, $row:ident, { $($extra:tt)* }
        all [$($all:tt)*] master [$($master:tt)*] tier [$($tier:tt)*]) => {
        impl MasterApi for $ty {
            fn disk_tier(&self) -> Option<&dyn DiskTierApi> {
                Some(self)
            }
            $($extra)*
            $($row!($master);)*
        }

        impl DiskTierApi for $ty {
            $($row!($tier);)*
        }
    };
}

pub(crate) use both_apis;
pub(crate) use master_rpcs;
pub(crate) use trait_method;
