//! Allocating the replica buffers of a new object (spec store.md §2.2 step 3): the
//! preferred segments, then the writer's host when asked, then `placement`.

use std::sync::atomic::Ordering;

use super::placement::{place, random_index};
use super::replica::{Replica, Replicas};
use super::tables::Tables;
use crate::wire::master_api::{ErrorCode, MasterResult, ReplicaStatus, ReplicateConfig, Uuid};

impl Tables {
    /// Allocates the replica buffers of a new object; -200 (and the need-eviction flag)
    /// when nothing fits.
    pub fn allocate_replicas(
        &self,
        client: Uuid,
        key: &str,
        len: u64,
        c: &ReplicateConfig,
    ) -> MasterResult<Replicas> {
        let mut preferred: Vec<String> = Vec::new();
        if !c.preferred_segment.is_empty() {
            preferred.push(c.preferred_segment.clone());
        } else {
            for s in &c.preferred_segments {
                if !s.is_empty() && !preferred.contains(s) {
                    preferred.push(s.clone());
                }
            }
        }
        let host = if c.prefer_alloc_in_same_node && c.replica_num == 1 {
            if c.host_id.is_empty() {
                self.segments
                    .client_segments(client)
                    .into_iter()
                    .map(|s| s.host_id)
                    .find(|h| !h.is_empty())
                    .unwrap_or_default()
            } else {
                c.host_id.clone()
            }
        } else {
            String::new()
        };
        let want = usize::try_from(c.replica_num).unwrap_or(usize::MAX);
        let strategy = self.config.allocation_strategy;
        let (bufs, names) = self.segments.with_view(|view| {
            if !host.is_empty() {
                let mut local = view.host_segments(&host);
                if !local.is_empty() {
                    let shift = key.len().wrapping_add(random_index(local.len())) % local.len();
                    local.rotate_left(shift);
                }
                for s in local {
                    if !preferred.contains(&s) {
                        preferred.push(s);
                    }
                }
            }
            let bufs = place(view, strategy, len, want, &preferred);
            (bufs, view.names().len())
        });
        if bufs.is_empty() {
            if names > 0 {
                self.need_eviction.store(true, Ordering::Release);
            }
            return Err(ErrorCode::NO_AVAILABLE_HANDLE);
        }
        if bufs.len() < want {
            self.metrics
                .put_start_partial_allocations
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(bufs
            .into_iter()
            .map(|buf| Replica::new(self.next_replica_id(), ReplicaStatus::Processing, buf))
            .collect())
    }
}
