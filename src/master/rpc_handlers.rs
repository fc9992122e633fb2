//! The master's RPCs as served, before counting: each one's work, mostly handed to
//! the sub-service that owns it (reads in `read`, writes in `write`, removals in
//! `remove`). The counting [`MasterApi`] wrappers around them are made from the RPC
//! table in `mod.rs`.
//!
//! [`MasterApi`]: crate::wire::master_api::MasterApi

use super::copies::Token;
use super::write::WriteEnd;
use super::{MasterHandlers, MasterService};
use crate::wire::master_api::{
    ClientStatus, CopyStartResponse, ErrorCode, GetReplicaListResponse, MasterResult,
    MoveStartResponse, ObjectMeta, PingResponse, QueryTaskResponse, ReplicaDescriptor, ReplicaType,
    ReplicateConfig, Segment, StorageConfig, TaskAssignment, TaskCompleteRequest, Uuid,
    SERVICE_VERSION,
};
use std::sync::atomic::Ordering;

/// A batch RPC: `one` applied to each input, the batch itself succeeding.
pub(super) fn each<T, R>(
    items: &[T],
    one: impl FnMut(&T) -> MasterResult<R>,
) -> MasterResult<Vec<MasterResult<R>>> {
    Ok(items.iter().map(one).collect())
}

/// The `Put*` and `Upsert*` handlers that differ only in whether a start may
/// replace the object (`upsert`): start, end, revoke and batch start.
macro_rules! write_handlers {
    ($upsert:literal: $start:ident, $end:ident, $revoke:ident, $batch_start:ident) => {
        fn $start(
            &self,
            client: Uuid,
            key: &str,
            len: u64,
            config: &ReplicateConfig,
            tenant: &str,
        ) -> MasterResult<Vec<ReplicaDescriptor>> {
            self.writes
                .start_one($upsert, client, key, len, config, tenant)
        }

        fn $end(
            &self,
            client: Uuid,
            meta: &ObjectMeta,
            kind: ReplicaType,
            tenant: &str,
        ) -> MasterResult<()> {
            self.writes
                .end_one(client, kind, tenant, WriteEnd::Written(meta))
        }

        fn $revoke(
            &self,
            client: Uuid,
            key: &str,
            kind: ReplicaType,
            tenant: &str,
        ) -> MasterResult<()> {
            self.writes
                .end_one(client, kind, tenant, WriteEnd::Revoked(key))
        }

        fn $batch_start(
            &self,
            client: Uuid,
            keys: &[String],
            lens: &[u64],
            config: &ReplicateConfig,
            tenant: &str,
        ) -> MasterResult<Vec<MasterResult<Vec<ReplicaDescriptor>>>> {
            Ok(self
                .writes
                .batch_start($upsert, client, keys, lens, config, tenant))
        }
    };
}

impl MasterHandlers for MasterService {
    fn service_ready(&self) -> MasterResult<String> {
        Ok(SERVICE_VERSION.to_string())
    }

    fn get_storage_config(&self) -> MasterResult<StorageConfig> {
        let cfg = StorageConfig {
            fsdir: String::new(),
            enable_disk_eviction: self.t.config.enable_disk_eviction,
            quota_bytes: 0,
        };
        Ok(cfg)
    }

    fn get_fsdir(&self) -> MasterResult<String> {
        Ok(String::new())
    }

    fn mount_segment(&self, segment: &Segment, client: Uuid) -> MasterResult<()> {
        self.liveness
            .clients
            .touch(client, self.t.now(), self.t.client_ttl_ns);
        self.t.segments.mount(segment, client)
    }

    fn remount_segment(&self, segments: &[Segment], client: Uuid) -> MasterResult<()> {
        // Start (or restart) the client's liveness clock, as a mount does: a client
        // that remounts and dies before its next ping must still expire.
        self.liveness
            .clients
            .touch(client, self.t.now(), self.t.client_ttl_ns);
        for s in segments {
            self.t.segments.validate_remount(s, client)?;
        }
        for s in segments {
            match self.t.segments.mount(s, client) {
                Ok(()) | Err(ErrorCode::INVALID_PARAMS) => {}
                Err(e) => return Err(e),
            }
        }
        self.liveness.clients.mark_ok(client);
        Ok(())
    }

    fn unmount_segment(&self, segment_id: Uuid, _client: Uuid) -> MasterResult<()> {
        if self.t.segments.unmount(segment_id).is_some() {
            self.t.sweep_dead_replicas();
        }
        Ok(())
    }

    fn graceful_unmount_segment(
        &self,
        segment_id: Uuid,
        client: Uuid,
        grace_ms: u64,
    ) -> MasterResult<()> {
        let deadline = self
            .t
            .now()
            .saturating_add(grace_ms.saturating_mul(1_000_000));
        self.t
            .segments
            .begin_graceful_unmount(segment_id, client, deadline)
    }

    fn ping(&self, client: Uuid) -> MasterResult<PingResponse> {
        let status: ClientStatus =
            self.liveness
                .clients
                .ping(client, self.t.now(), self.t.client_ttl_ns);
        let r = PingResponse {
            view_version_id: self.t.view_version.load(Ordering::Relaxed),
            client_status: status,
        };
        Ok(r)
    }

    fn fetch_tasks(&self, client: Uuid, batch_size: u64) -> MasterResult<Vec<TaskAssignment>> {
        Ok(self.copies.fetch_tasks(client, batch_size))
    }

    fn create_copy_task(&self, key: &str, tenant: &str, targets: &[String]) -> MasterResult<Uuid> {
        self.copies.create_copy_task(key, tenant, targets)
    }

    fn create_move_task(
        &self,
        key: &str,
        tenant: &str,
        source: &str,
        target: &str,
    ) -> MasterResult<Uuid> {
        self.copies.create_move_task(key, tenant, source, target)
    }

    fn query_task(&self, id: Uuid) -> MasterResult<QueryTaskResponse> {
        self.copies.query_task(id)
    }

    fn mark_task_to_complete(
        &self,
        client: Uuid,
        report: &TaskCompleteRequest,
    ) -> MasterResult<()> {
        self.copies.mark_task_to_complete(client, report)
    }

    fn copy_start(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        source: &str,
        targets: &[String],
    ) -> MasterResult<CopyStartResponse> {
        self.copies.copy_start(client, key, tenant, source, targets)
    }

    fn copy_end(&self, client: Uuid, key: &str, tenant: &str) -> MasterResult<()> {
        self.copies
            .end(client, key, tenant, false, true, Token::PLAIN)
    }

    fn copy_revoke(&self, client: Uuid, key: &str, tenant: &str) -> MasterResult<()> {
        self.copies
            .end(client, key, tenant, false, false, Token::PLAIN)
    }

    fn dynamic_replica_copy_start(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        source: &str,
        targets: &[String],
        lease: Uuid,
        epoch: u64,
    ) -> MasterResult<CopyStartResponse> {
        self.copies
            .dynamic_copy_start(client, key, tenant, source, targets, Token(lease, epoch))
    }

    fn dynamic_replica_copy_end(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        lease: Uuid,
        epoch: u64,
    ) -> MasterResult<()> {
        self.copies
            .end(client, key, tenant, false, true, Token(lease, epoch))
    }

    fn dynamic_replica_copy_revoke(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        lease: Uuid,
        epoch: u64,
    ) -> MasterResult<()> {
        self.copies
            .end(client, key, tenant, false, false, Token(lease, epoch))
    }

    fn move_start(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        source: &str,
        target: &str,
    ) -> MasterResult<MoveStartResponse> {
        self.copies.move_start(client, key, tenant, source, target)
    }

    fn move_end(&self, client: Uuid, key: &str, tenant: &str) -> MasterResult<()> {
        self.copies
            .end(client, key, tenant, true, true, Token::PLAIN)
    }

    fn move_revoke(&self, client: Uuid, key: &str, tenant: &str) -> MasterResult<()> {
        self.copies
            .end(client, key, tenant, true, false, Token::PLAIN)
    }

    fn exist_key(&self, key: &str, tenant: &str) -> MasterResult<bool> {
        self.reads.exist_one(key, tenant)
    }

    fn batch_exist_key(
        &self,
        keys: &[String],
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<bool>>> {
        each(keys, |k| self.reads.exist_one(k, tenant))
    }

    fn get_replica_list(&self, key: &str, tenant: &str) -> MasterResult<GetReplicaListResponse> {
        self.reads.replica_list(key, tenant, false)
    }

    fn batch_get_replica_list(
        &self,
        keys: &[String],
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<GetReplicaListResponse>>> {
        each(keys, |k| self.reads.replica_list(k, tenant, false))
    }

    fn get_replica_list_by_regex(
        &self,
        regex: &str,
        tenant: &str,
    ) -> MasterResult<Vec<(String, Vec<ReplicaDescriptor>)>> {
        self.reads.get_replica_list_by_regex_impl(regex, tenant)
    }

    fn batch_begin_read(
        &self,
        keys: &[String],
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<GetReplicaListResponse>>> {
        each(keys, |k| self.reads.replica_list(k, tenant, true))
    }

    fn batch_end_read(
        &self,
        keys: &[String],
        replica_ids: &[u64],
        tenant: &str,
    ) -> MasterResult<()> {
        if keys.len() == replica_ids.len() {
            for (k, id) in keys.iter().zip(replica_ids) {
                self.reads.end_read_one(k, *id, tenant);
            }
            Ok(())
        } else {
            Err(ErrorCode::INVALID_PARAMS)
        }
    }

    write_handlers!(false: put_start, put_end, put_revoke, batch_put_start);

    fn batch_put_end(
        &self,
        client: Uuid,
        metas: &[ObjectMeta],
        kind: ReplicaType,
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        each(metas, |m| {
            self.writes
                .end_one(client, kind, tenant, WriteEnd::Written(m))
        })
    }

    fn batch_put_revoke(
        &self,
        client: Uuid,
        keys: &[String],
        kind: ReplicaType,
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        each(keys, |k| {
            self.writes
                .end_one(client, kind, tenant, WriteEnd::Revoked(k))
        })
    }

    write_handlers!(true: upsert_start, upsert_end, upsert_revoke, batch_upsert_start);

    fn batch_upsert_end(
        &self,
        client: Uuid,
        metas: &[ObjectMeta],
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        each(metas, |m| {
            self.writes
                .end_one(client, ReplicaType::All, tenant, WriteEnd::Written(m))
        })
    }

    fn batch_upsert_revoke(
        &self,
        client: Uuid,
        keys: &[String],
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        each(keys, |k| {
            self.writes
                .end_one(client, ReplicaType::All, tenant, WriteEnd::Revoked(k))
        })
    }

    fn remove(&self, key: &str, force: bool, tenant: &str) -> MasterResult<()> {
        self.writes.remove_one(key, force, tenant, true)
    }

    fn remove_by_regex(&self, regex: &str, force: bool, tenant: &str) -> MasterResult<i64> {
        self.writes.remove_by_regex_impl(regex, force, tenant)
    }

    fn remove_all(&self, force: bool, tenant: &str) -> MasterResult<i64> {
        Ok(self.writes.remove_all_impl(force, tenant))
    }

    fn batch_remove(
        &self,
        keys: &[String],
        force: bool,
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        // Upstream's BatchRemove announces nothing (spec tiers-events-conductor.md §2.5).
        each(keys, |k| self.writes.remove_one(k, force, tenant, false))
    }

    fn batch_query_ip(&self, clients: &[Uuid]) -> MasterResult<Vec<(Uuid, Vec<String>)>> {
        Ok(self.liveness.batch_query_ip_impl(clients))
    }

    fn batch_replica_clear(
        &self,
        keys: &[String],
        client: Uuid,
        segment_name: &str,
    ) -> MasterResult<Vec<String>> {
        Ok(self
            .writes
            .batch_replica_clear_impl(keys, client, segment_name))
    }
}
