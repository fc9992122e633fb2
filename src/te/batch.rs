//! Batches and tasks: validated batch ids, per-task atomics, upstream's status rules.

use crate::codec::code_enum::code_enum;
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Bumped by every [`Task::cancel`] (after the task's flag is set): a transport
/// holding queued slices scans them for cancelled tasks only when it moved.
static CANCEL_EPOCH: AtomicU64 = AtomicU64::new(0);

/// The process's cancellation epoch: changes whenever some task was cancelled.
pub fn cancel_epoch() -> u64 {
    CANCEL_EPOCH.load(Ordering::Acquire)
}

code_enum! {
    /// Upstream's task status values (`STATUS_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum TaskStatus: u8 {
        /// Still moving.
        Waiting = 0,
        /// Never produced by the classic engine.
        Pending = 1,
        /// Never produced by the classic engine.
        Invalid = 2,
        /// Cancelled (TENT's `tent_cancel_task`) before all of it moved.
        Canceled = 3,
        /// Every byte is visible at the destination.
        Completed = 4,
        /// A slice passed its deadline (not terminal).
        Timeout = 5,
        /// At least one slice failed.
        Failed = 6,
    }
}

impl TaskStatus {
    /// Whether the task can no longer change.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Canceled
        )
    }
}

/// Wakes threads blocked in [`Batch::wait`] when one of the batch's tasks finishes.
/// Costs nothing when nobody waits.
#[derive(Debug, Default)]
pub struct CompletionSignal {
    waiters: AtomicUsize,
    lock: Mutex<()>,
    finished: Condvar,
}

impl CompletionSignal {
    /// Blocks until `task` (one that raises this signal) is terminal; its status.
    pub fn wait_task(&self, task: &Task) -> TaskStatus {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.lock.lock();
        let status = loop {
            let status = task.status().0;
            if status.is_terminal() {
                break status;
            }
            self.finished
                .wait_for(&mut guard, std::time::Duration::from_millis(100));
        };
        drop(guard);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        status
    }

    fn notify(&self) {
        fence(Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock();
            self.finished.notify_all();
        }
    }
}

/// One submitted request; its slices complete it.
#[derive(Debug)]
pub struct Task {
    length: u64,
    signal: Option<Arc<CompletionSignal>>,
    status: AtomicU8,
    transferred: AtomicU64,
    slices_left: AtomicU32,
    failed: AtomicBool,
    /// Cancellation was asked for: slices not yet started are dropped.
    cancel_requested: AtomicBool,
    /// A slice was dropped by the cancellation.
    skipped: AtomicBool,
    seen_terminal: AtomicBool,
}

impl Task {
    /// A task of `length` bytes that `slices` slices will complete; `signal` (the
    /// batch's) is raised when it finishes.
    pub fn new(length: u64, slices: u32, signal: Option<Arc<CompletionSignal>>) -> Arc<Task> {
        let task = Arc::new(Task {
            length,
            signal,
            status: AtomicU8::new(TaskStatus::Waiting.code()),
            transferred: AtomicU64::new(0),
            slices_left: AtomicU32::new(slices),
            failed: AtomicBool::new(false),
            cancel_requested: AtomicBool::new(false),
            skipped: AtomicBool::new(false),
            seen_terminal: AtomicBool::new(false),
        });
        if slices == 0 {
            task.status
                .store(TaskStatus::Completed.code(), Ordering::Release);
        }
        task
    }

    /// A task that failed before any byte moved.
    pub fn failed(length: u64) -> Arc<Task> {
        Task::finished(length, false)
    }

    /// A task whose `length` bytes were all moved on the calling thread.
    pub fn done(length: u64) -> Arc<Task> {
        Task::finished(length, true)
    }

    /// A task of one slice, already finished with `ok`.
    fn finished(length: u64, ok: bool) -> Arc<Task> {
        let task = Task::new(length, 1, None);
        task.finish_slice(ok);
        task
    }

    /// Asks the transports to drop this task's slices they have not started; the
    /// task ends CANCELED if any was dropped (those already moving still finish).
    pub fn cancel(&self) {
        self.cancel_requested.store(true, Ordering::Release);
        CANCEL_EPOCH.fetch_add(1, Ordering::Release);
    }

    /// Whether [`Task::cancel`] was called: a transport drops a slice it has not
    /// started with [`Task::skip_slice`].
    pub fn cancel_requested(&self) -> bool {
        self.cancel_requested.load(Ordering::Acquire)
    }

    /// Records a slice dropped, unstarted, because the task was cancelled.
    pub fn skip_slice(&self) {
        self.skipped.store(true, Ordering::Relaxed);
        self.count_slice();
    }

    /// Records one slice's outcome; the last one decides the task's status.
    pub fn finish_slice(&self, ok: bool) {
        if !ok {
            self.failed.store(true, Ordering::Relaxed);
        }
        self.count_slice();
    }

    /// Counts one slice done; the last sets the final status (failed over cancelled
    /// over completed).
    fn count_slice(&self) {
        if self.slices_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            if self.failed.load(Ordering::Relaxed) {
                self.status
                    .store(TaskStatus::Failed.code(), Ordering::Release);
            } else if self.skipped.load(Ordering::Relaxed) {
                self.status
                    .store(TaskStatus::Canceled.code(), Ordering::Release);
            } else {
                self.transferred.store(self.length, Ordering::Relaxed);
                self.status
                    .store(TaskStatus::Completed.code(), Ordering::Release);
            }
            if let Some(signal) = &self.signal {
                signal.notify();
            }
        }
    }

    /// Reports TIMEOUT (`MC_SLICE_TIMEOUT`) while the task is still waiting; its last
    /// slice still decides the final status.
    pub fn mark_timed_out(&self) {
        let _ = self.status.compare_exchange(
            TaskStatus::Waiting.code(),
            TaskStatus::Timeout.code(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Current status and transferred bytes.
    pub fn status(&self) -> (TaskStatus, u64) {
        // Only Waiting, Completed, Canceled, Timeout and Failed are ever stored.
        let status = TaskStatus::from_code(self.status.load(Ordering::Acquire))
            .unwrap_or(TaskStatus::Waiting);
        (status, self.transferred.load(Ordering::Relaxed))
    }
}

/// A notify to send once the whole batch completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingNotify {
    /// Segment the notify goes to.
    pub target_id: i32,
    /// Notify name field.
    pub name: String,
    /// Notify message field.
    pub msg: String,
}

/// A batch: capacity, accumulated tasks, and an optional completion notify.
#[derive(Debug)]
pub struct Batch {
    capacity: usize,
    signal: Arc<CompletionSignal>,
    tasks: RwLock<Vec<Arc<Task>>>,
    notify: Mutex<Option<PendingNotify>>,
}

impl Batch {
    /// Appends tasks, refusing (code 2) if the capacity would be exceeded.
    pub fn reserve(&self, count: usize) -> Result<BatchReservation<'_>> {
        let tasks = self.tasks.write();
        if tasks
            .len()
            .checked_add(count)
            .map_or(true, |n| n > self.capacity)
        {
            return Err(Error::TooManyRequests(format!(
                "batch holds {} of {} tasks; {count} more do not fit",
                tasks.len(),
                self.capacity
            )));
        }
        Ok(BatchReservation { tasks })
    }

    /// The signal tasks of this batch raise when they finish.
    pub fn signal(&self) -> Arc<CompletionSignal> {
        self.signal.clone()
    }

    /// Whether every task is terminal.
    fn all_terminal(&self) -> bool {
        self.tasks.read().iter().all(|t| t.status().0.is_terminal())
    }

    /// Blocks until every task submitted so far is terminal or `deadline` passes;
    /// true when all are terminal.
    pub fn wait(&self, deadline: Instant) -> bool {
        let signal = &self.signal;
        signal.waiters.fetch_add(1, Ordering::SeqCst);
        let mut guard = signal.lock.lock();
        let done = loop {
            if self.all_terminal() {
                break true;
            }
            if signal.finished.wait_until(&mut guard, deadline).timed_out() {
                break self.all_terminal();
            }
        };
        drop(guard);
        signal.waiters.fetch_sub(1, Ordering::SeqCst);
        done
    }

    /// Number of tasks submitted so far.
    pub fn len(&self) -> usize {
        self.tasks.read().len()
    }

    /// Whether no task was submitted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Status of task `index`, marking it seen when terminal; `None` if out of range.
    pub fn task_status(&self, index: usize) -> Option<(TaskStatus, u64)> {
        let task = self.tasks.read().get(index).cloned()?;
        let (status, bytes) = task.status();
        if status.is_terminal() {
            task.seen_terminal.store(true, Ordering::Release);
        }
        Some((status, bytes))
    }

    /// Asks task `index` to drop its unstarted slices; false if out of range.
    pub fn cancel_task(&self, index: usize) -> bool {
        match self.tasks.read().get(index) {
            Some(task) => {
                task.cancel();
                true
            }
            None => false,
        }
    }

    /// Whether every task completed successfully.
    pub fn all_completed(&self) -> bool {
        self.tasks
            .read()
            .iter()
            .all(|t| t.status().0 == TaskStatus::Completed)
    }

    /// Whether every task was observed terminal by [`Batch::task_status`].
    pub fn all_seen(&self) -> bool {
        self.tasks
            .read()
            .iter()
            .all(|t| t.seen_terminal.load(Ordering::Acquire))
    }

    /// Stores the notify to send on completion.
    pub fn set_notify(&self, notify: PendingNotify) {
        *self.notify.lock() = Some(notify);
    }

    /// Takes the notify if the batch just completed (at most once).
    pub fn take_notify_if_complete(&self) -> Option<PendingNotify> {
        let mut slot = self.notify.lock();
        if slot.is_some() && self.all_completed() {
            slot.take()
        } else {
            None
        }
    }
}

/// Write access to a batch's task list for one submit.
#[derive(Debug)]
pub struct BatchReservation<'a> {
    tasks: parking_lot::RwLockWriteGuard<'a, Vec<Arc<Task>>>,
}

impl BatchReservation<'_> {
    /// Appends a task.
    pub fn push(&mut self, task: Arc<Task>) {
        self.tasks.push(task);
    }
}

/// Live batches of one engine, by id. Ids are never reused and never `u64::MAX`.
pub struct BatchTable {
    batches: RwLock<HashMap<u64, Arc<Batch>>>,
    next: AtomicU64,
}

impl BatchTable {
    /// An empty table whose ids start at a per-engine random-looking base, so another
    /// engine's ids are not accepted by accident.
    pub fn new() -> BatchTable {
        static ENGINES: AtomicU64 = AtomicU64::new(1);
        let engine = ENGINES.fetch_add(1, Ordering::Relaxed);
        let base = (engine.wrapping_mul(0x9E37_79B9) & 0xFFFF) << 40
            | (std::process::id() as u64 & 0xFF) << 32;
        BatchTable {
            batches: RwLock::new(HashMap::new()),
            next: AtomicU64::new(base | 1),
        }
    }

    /// Allocates a batch of `capacity` tasks.
    pub fn allocate(&self, capacity: usize) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let batch = Batch {
            capacity,
            signal: Arc::default(),
            tasks: RwLock::new(Vec::new()),
            notify: Mutex::new(None),
        };
        self.batches.write().insert(id, Arc::new(batch));
        id
    }

    /// Looks a batch up; unknown ids are an error, never undefined behaviour.
    pub fn get(&self, id: u64) -> Result<Arc<Batch>> {
        self.batches
            .read()
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::InvalidArgument(format!("unknown batch id {id:#x}")))
    }

    /// Forgets a batch at once, whatever its tasks' state (TENT's `freeBatch`): tasks
    /// still moving finish in the background.
    pub fn remove(&self, id: u64) -> Result<()> {
        self.batches
            .write()
            .remove(&id)
            .map(drop)
            .ok_or_else(|| Error::InvalidArgument(format!("unknown batch id {id:#x}")))
    }

    /// Frees a batch; busy (code 4) until every task was observed terminal.
    pub fn free(&self, id: u64) -> Result<()> {
        let mut batches = self.batches.write();
        let batch = batches
            .get(&id)
            .ok_or_else(|| Error::InvalidArgument(format!("unknown batch id {id:#x}")))?;
        if !batch.all_seen() {
            return Err(Error::BatchBusy(format!(
                "batch {id:#x} has tasks not yet observed complete or failed"
            )));
        }
        batches.remove(&id);
        Ok(())
    }
}

impl Default for BatchTable {
    fn default() -> Self {
        BatchTable::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_and_busy_rules() {
        let table = BatchTable::new();
        let id = table.allocate(2);
        assert_ne!(id, u64::MAX);
        let batch = table.get(id).unwrap();
        assert_eq!(batch.reserve(3).unwrap_err().status_code(), 2);
        let task = Task::new(10, 2, None);
        batch.reserve(1).unwrap().push(task.clone());
        assert_eq!(batch.task_status(0).unwrap(), (TaskStatus::Waiting, 0));
        assert!(batch.task_status(1).is_none());
        assert_eq!(table.free(id).unwrap_err().status_code(), 4);
        task.finish_slice(true);
        assert_eq!(batch.task_status(0).unwrap().0, TaskStatus::Waiting);
        task.finish_slice(true);
        assert_eq!(
            table.free(id).unwrap_err().status_code(),
            4,
            "not yet observed"
        );
        assert_eq!(batch.task_status(0).unwrap(), (TaskStatus::Completed, 10));
        table.free(id).unwrap();
        assert!(table.get(id).is_err());
        assert!(table.free(id).is_err(), "double free is an error");
    }

    #[test]
    fn a_cancelled_task_ends_canceled_unless_a_slice_failed() {
        let task = Task::new(10, 3, None);
        assert!(!task.cancel_requested());
        task.finish_slice(true);
        task.cancel();
        assert!(task.cancel_requested());
        task.skip_slice();
        assert_eq!(task.status().0, TaskStatus::Waiting);
        task.finish_slice(true);
        assert_eq!(task.status(), (TaskStatus::Canceled, 0));
        assert!(TaskStatus::Canceled.is_terminal());
        let task = Task::new(10, 2, None);
        task.skip_slice();
        task.finish_slice(false);
        assert_eq!(task.status().0, TaskStatus::Failed);
        let task = Task::new(10, 1, None);
        task.cancel();
        task.finish_slice(true);
        assert_eq!(
            task.status().0,
            TaskStatus::Completed,
            "nothing was dropped"
        );
    }

    #[test]
    fn failed_slice_fails_task_with_zero_bytes() {
        let task = Task::new(10, 2, None);
        task.finish_slice(true);
        task.finish_slice(false);
        assert_eq!(task.status(), (TaskStatus::Failed, 0));
        assert_eq!(Task::new(0, 0, None).status(), (TaskStatus::Completed, 0));
    }

    #[test]
    fn wait_returns_when_tasks_finish() {
        let table = BatchTable::new();
        let batch = table.get(table.allocate(2)).unwrap();
        let a = Task::new(1, 1, Some(batch.signal()));
        let b = Task::new(1, 1, Some(batch.signal()));
        let mut r = batch.reserve(2).unwrap();
        r.push(a.clone());
        r.push(b.clone());
        drop(r);
        assert!(!batch.wait(Instant::now()));
        let worker = std::thread::spawn(move || {
            a.finish_slice(true);
            b.finish_slice(false);
        });
        assert!(batch.wait(Instant::now() + std::time::Duration::from_secs(60)));
        worker.join().unwrap();
    }

    #[test]
    fn foreign_ids_are_rejected() {
        let a = BatchTable::new();
        let b = BatchTable::new();
        let id = a.allocate(1);
        assert!(b.get(id).is_err());
        assert!(a.get(0).is_err() && a.get(u64::MAX).is_err());
    }
}
