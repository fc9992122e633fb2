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
        self.submit_pinned_with_notify(batch_id, requests, &[], name, msg)
    }

    /// [`TransferEngine::submit_with_notify`] with requests pinned to transports as
    /// [`TransferEngine::submit_pinned`] pins them.
    pub fn submit_pinned_with_notify(
        &self,
        batch_id: u64,
        requests: &[TransferRequest],
        pins: &[Option<&'static str>],
        name: &str,
        msg: &str,
    ) -> Result<()> {
        let first = requests
            .first()
            .ok_or_else(|| Error::InvalidArgument("no requests to submit".into()))?;
        self.submit_pinned(batch_id, requests, pins)?;
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

    /// The whole batch: FAILED when any task failed, else CANCELED when any was
    /// cancelled, else COMPLETED when every task completed (or there is none), else
    /// WAITING; with the bytes of the completed tasks. Every task is observed as
    /// [`TransferEngine::transfer_status`] observes it (a completion notify is sent).
    pub fn batch_status(&self, batch_id: u64) -> Result<(TaskStatus, u64)> {
        let count = self.inner.batches.get(batch_id)?.len();
        let (mut failed, mut canceled, mut all_completed, mut bytes) = (false, false, true, 0u64);
        for task in 0..count {
            let (status, moved) = self.transfer_status(batch_id, task)?;
            match status {
                TaskStatus::Failed => failed = true,
                TaskStatus::Canceled => canceled = true,
                TaskStatus::Completed => bytes = bytes.saturating_add(moved),
                _ => {}
            }
            all_completed &= status == TaskStatus::Completed;
        }
        let state = if failed {
            TaskStatus::Failed
        } else if canceled {
            TaskStatus::Canceled
        } else if all_completed {
            TaskStatus::Completed
        } else {
            TaskStatus::Waiting
        };
        Ok((state, bytes))
    }

    /// Every task's status, in submission order, each observed as
    /// [`TransferEngine::transfer_status`] observes it.
    pub fn task_statuses(&self, batch_id: u64) -> Result<Vec<(TaskStatus, u64)>> {
        let count = self.inner.batches.get(batch_id)?.len();
        (0..count)
            .map(|task| self.transfer_status(batch_id, task))
            .collect()
    }

    /// Asks task `task` of the batch to drop the slices its transports have not
    /// started: it ends CANCELED unless all of it already moved (or failed).
    pub fn cancel_task(&self, batch_id: u64, task: usize) -> Result<()> {
        if self.inner.batches.get(batch_id)?.cancel_task(task) {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "task {task} is not in batch {batch_id:#x}"
            )))
        }
    }

    /// Forgets a batch at once (TENT's rule): tasks still moving finish in the
    /// background, into buffers the caller keeps valid.
    pub fn discard_batch(&self, batch_id: u64) -> Result<()> {
        self.inner.batches.remove(batch_id)
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
