//! Segments a client mounts and unmounts at run time, beside the one `setup` mounted
//! (upstream's `mount_segment`, `allocate_and_mount_segment`, `unmount_segment` and
//! `unmount_and_free_segment`): a range of a file, or memory the client maps, each a
//! segment of its own at the master under the client's name.

use super::client::Client;
use super::error::{StoreError, StoreResult};
use super::memory::Mapping;
use super::state::{ClientState, SegmentOrigin};
use crate::wire::master_api::{ErrorCode, Uuid};
use std::path::Path;
use std::time::Duration;

/// Allocated segments are whole multiples of this (upstream's allocator slab, 16 MiB).
pub const SEGMENT_GRANULE: u64 = 16 << 20;

/// How long after its grace period a gracefully unmounted segment's memory is kept,
/// so reads the master allowed before it dropped the segment can finish (upstream:
/// 10 s).
const DRAIN_MARGIN: Duration = Duration::from_secs(10);

/// A local failure of a run-time mount: upstream answers -1 (`INTERNAL_ERROR`).
fn failed(what: String) -> StoreError {
    StoreError::new(ErrorCode::INTERNAL_ERROR, what)
}

impl Client {
    /// Maps `size` bytes of the file at `path` from `offset` (a multiple of the page
    /// size; the range must lie inside the file) shared, so the segment's objects are
    /// the file's bytes, and mounts them as one segment reached by `protocol`
    /// (registered at `location`, `""`: anywhere). Its id, or None for `size` 0
    /// (nothing mounted, as upstream). -1 when the file cannot be mapped or the
    /// protocol is not installed; the master's code when it refuses; -600 once closed.
    pub fn mount_file_segment(
        &self,
        path: &Path,
        offset: u64,
        size: u64,
        protocol: &str,
        location: &str,
    ) -> StoreResult<Option<Uuid>> {
        if size == 0 {
            return Ok(None);
        }
        let what = || {
            format!(
                "mount_segment('{}', offset {offset}, {size} bytes)",
                path.display()
            )
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| failed(format!("{}: opening the file: {e}", what())))?;
        let memory = Mapping::of_file_at(&file, offset, size, true)
            .map_err(|e| failed(format!("{}: {e}", what())))?;
        self.mount_run_time(memory, protocol, location, SegmentOrigin::File)
            .map(Some)
            .map_err(|e| e.context(what()))
    }

    /// Maps `size` bytes (> 0, rounded up to a multiple of [`SEGMENT_GRANULE`]) of
    /// shared memory and mounts them as one segment reached by `protocol` (registered
    /// at `location`); its id and the size mounted. -1 for size 0 or memory that cannot
    /// be had; as [`Client::mount_file_segment`] otherwise.
    pub fn allocate_and_mount_segment(
        &self,
        size: u64,
        protocol: &str,
        location: &str,
    ) -> StoreResult<(Uuid, u64)> {
        let what = format!("allocate_and_mount_segment({size} bytes)");
        let aligned = size
            .checked_next_multiple_of(SEGMENT_GRANULE)
            .filter(|&a| a > 0)
            .ok_or_else(|| failed(format!("{what}: the size must be 1 byte to 2^64 - 16 MiB")))?;
        let memory = Mapping::shared(aligned).map_err(|e| failed(format!("{what}: {e}")))?;
        let id = self
            .mount_run_time(memory, protocol, location, SegmentOrigin::Allocated)
            .map_err(|e| e.context(what))?;
        Ok((id, aligned))
    }

    /// Unmounts the segment `id` that `mount_file_segment` (`allocated` false) or
    /// `allocate_and_mount_segment` (true) mounted: at once (`grace_seconds` 0), its
    /// objects dropped and its memory released; or gracefully, the master no longer
    /// placing objects in it and dropping it after the grace period, its memory kept
    /// that long (and [`DRAIN_MARGIN`] more) for reads still under way. -1 for an id
    /// this client did not mount that way; the master's code when it refuses.
    pub fn unmount_run_time_segment(
        &self,
        id: Uuid,
        allocated: bool,
        grace_seconds: u64,
    ) -> StoreResult<()> {
        let origin = match allocated {
            true => SegmentOrigin::Allocated,
            false => SegmentOrigin::File,
        };
        let grace_ms = grace_seconds.saturating_mul(1000);
        let mut guard = self.shared_state().write();
        let inner = guard.as_mut().ok_or_else(closed)?;
        inner.unmount_own(id, origin, grace_ms)?;
        if grace_ms > 0 {
            let delay = Duration::from_millis(grace_ms).saturating_add(DRAIN_MARGIN);
            let state = std::sync::Arc::downgrade(self.shared_state());
            let spawned = std::thread::Builder::new()
                .name("mc-store-drain".into())
                .spawn(move || {
                    std::thread::sleep(delay);
                    if let Some(state) = state.upgrade() {
                        if let Some(inner) = state.write().as_mut() {
                            inner.release_drained(id);
                        }
                    }
                });
            if let Err(e) = spawned {
                log::warn!(
                    "store: segment {}-{} keeps its memory until close: {e}",
                    id.first,
                    id.second
                );
            }
        }
        Ok(())
    }

    /// Mounts `memory` under the client's name; starts the heartbeat if this is the
    /// client's first segment.
    fn mount_run_time(
        &self,
        memory: Mapping,
        protocol: &str,
        location: &str,
        origin: SegmentOrigin,
    ) -> StoreResult<Uuid> {
        let mut guard = self.shared_state().write();
        let inner = guard.as_mut().ok_or_else(closed)?;
        check_protocol(inner, protocol)?;
        let location = if location.is_empty() { "*" } else { location };
        let id = inner.mount_memory(memory, self.hostname(), protocol, location, origin)?;
        self.ensure_heartbeat(inner)?;
        Ok(id)
    }
}

/// -600: the client is closed.
fn closed() -> StoreError {
    StoreError::invalid("the store is closed")
}

/// -1 unless the client's engine has the transport `protocol` names.
fn check_protocol(inner: &ClientState, protocol: &str) -> StoreResult<()> {
    if (protocol == "tcp" || protocol == "rdma") && inner.engine().has_transport(protocol) {
        return Ok(());
    }
    Err(failed(format!(
        "protocol '{protocol}' is not a transport of this client (tcp, or rdma when installed)"
    )))
}
