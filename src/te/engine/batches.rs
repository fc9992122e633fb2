//! Batches and notifies: allocating, polling and freeing batches (submitting is the
//! router's), and the notify messages sent and received.

use super::own_segment::Notify;
use super::request::TransferRequest;
use super::state::TransferEngine;
use crate::error::{Error, Result};
use crate::te::batch::{PendingNotify, TaskStatus};
use crate::te::segment::LOCAL_SEGMENT_ID;
use std::time::Duration;

impl TransferEngine {
    /// Allocates a batch that can hold `capacity` tasks.
    pub fn allocate_batch(&self, capacity: usize) -> u64 {
        self.inner.batches.allocate(capacity)
    }

    /// Submits, then sends `notify` to the first request's target once the whole
    /// batch completed (from inside [`TransferEngine::transfer_status`]).
    pub fn submit_with_notify(
        &self,
        batch_id: u64,
        requests: &[TransferRequest],
        name: &str,
        msg: &str,
    ) -> Result<()> {
        let first = requests
            .first()
            .ok_or_else(|| Error::InvalidArgument("no requests to submit".into()))?;
        self.submit(batch_id, requests)?;
        let notify = PendingNotify {
            target_id: first.target_id,
            name: name.to_string(),
            msg: msg.to_string(),
        };
        self.inner.batches.get(batch_id)?.set_notify(notify);
        Ok(())
    }

    /// Status of one task; `None`-like error when the index is out of range.
    pub fn transfer_status(&self, batch_id: u64, task: usize) -> Result<(TaskStatus, u64)> {
        let batch = self.inner.batches.get(batch_id)?;
        let status = batch.task_status(task).ok_or_else(|| {
            Error::InvalidArgument(format!("task {task} is not in batch {batch_id:#x}"))
        })?;
        if status.0 == TaskStatus::Completed {
            if let Some(n) = batch.take_notify_if_complete() {
                if let Err(e) = self.send_notify(n.target_id, &n.name, &n.msg) {
                    log::warn!(
                        "batch completion notify to segment {} failed: {e}",
                        n.target_id
                    );
                }
            }
        }
        Ok(status)
    }

    /// Blocks until every task submitted to the batch so far is terminal, or the
    /// timeout passes (true when all are terminal). An alternative to polling
    /// [`TransferEngine::transfer_status`] in a loop; it does not mark tasks observed.
    pub fn wait_batch(&self, batch_id: u64, timeout: Duration) -> Result<bool> {
        let batch = self.inner.batches.get(batch_id)?;
        Ok(batch.wait(std::time::Instant::now() + timeout))
    }

    /// Frees a batch; busy until every task was observed terminal.
    pub fn free_batch(&self, batch_id: u64) -> Result<()> {
        self.inner.batches.free(batch_id)
    }

    /// Removes and returns every received notify.
    pub fn take_notifies(&self) -> Vec<Notify> {
        self.inner.local.drain_notifies()
    }

    /// Sends a notify now to segment `target_id`.
    pub fn send_notify(&self, target_id: i32, name: &str, msg: &str) -> Result<()> {
        let segment = if target_id == LOCAL_SEGMENT_ID {
            self.inner.local.name.clone()
        } else {
            let (segment, _) =
                self.inner.segments.get(target_id).ok_or_else(|| {
                    Error::Metadata(format!("segment id {target_id} is not open"))
                })?;
            segment
        };
        let (host, port) = self.inner.rpc_address(&segment)?;
        self.inner.rpc_client.send_notify(&host, port, name, msg)
    }
}
