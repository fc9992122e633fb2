//! Copy and move tasks as bookkeeping (spec tasks §2.4): a task is queued for the
//! client that owns its source segment, handed out by `FetchTasks`, ended by the
//! client's `MarkTaskToComplete` or by a timeout, and kept for `QueryTask` until the
//! finished history outgrows its limit. The copying itself is the client's, through
//! `CopyStart`/`MoveStart` (see `replication`).
//!
//! Unlike upstream, completing a task that was never fetched frees its pending slot
//! (upstream leaks it for the master's lifetime).

use std::collections::{HashMap, HashSet, VecDeque};

use parking_lot::Mutex;

use super::config::MasterConfig;
use crate::wire::master_api::{
    ErrorCode, MasterResult, QueryTaskResponse, TaskAssignment, TaskCompleteRequest, TaskStatus,
    Uuid,
};

/// The message of a task that was not fetched in time.
const PENDING_TIMEOUT: &str = "pending timeout";
/// The message of a task whose client did not report in time.
const PROCESSING_TIMEOUT: &str = "processing timeout";

/// The task table's limits, from the master's flags.
#[derive(Debug, Clone, Copy)]
pub(super) struct TaskLimits {
    max_pending: u64,
    max_processing: u64,
    max_finished: u64,
    /// ms; 0 = never.
    pending_timeout_ms: i64,
    /// ms; 0 = never.
    processing_timeout_ms: i64,
    max_retry: u32,
}

impl TaskLimits {
    /// The limits `config` sets.
    pub fn of(config: &MasterConfig) -> TaskLimits {
        let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        TaskLimits {
            max_pending: config.max_total_pending_tasks,
            max_processing: config.max_total_processing_tasks,
            max_finished: config.max_total_finished_tasks,
            pending_timeout_ms: ms(config.pending_task_timeout),
            processing_timeout_ms: ms(config.processing_task_timeout),
            max_retry: config.max_retry_attempts,
        }
    }
}

struct Task {
    task_type: i32,
    payload: String,
    status: TaskStatus,
    created_ms: i64,
    updated_ms: i64,
    client: Uuid,
    message: String,
    max_retry: u32,
}

#[derive(Default)]
struct Table {
    all: HashMap<Uuid, Task>,
    /// Per client, the tasks to hand out, oldest first (ids of ended tasks are
    /// skipped when met).
    pending: HashMap<Uuid, VecDeque<Uuid>>,
    processing: HashMap<Uuid, HashSet<Uuid>>,
    /// Ended tasks, in the order they ended.
    finished: VecDeque<Uuid>,
    total_pending: u64,
    total_processing: u64,
}

impl Table {
    /// Ends task `id` (pending or processing) with `status` and `message` at `now`.
    fn end(&mut self, id: Uuid, status: TaskStatus, message: String, now: i64) {
        let Some(t) = self.all.get_mut(&id) else {
            return;
        };
        match t.status {
            TaskStatus::Pending => self.total_pending = self.total_pending.saturating_sub(1),
            TaskStatus::Processing => {
                self.total_processing = self.total_processing.saturating_sub(1);
                if let Some(set) = self.processing.get_mut(&t.client) {
                    set.remove(&id);
                    if set.is_empty() {
                        self.processing.remove(&t.client);
                    }
                }
            }
            TaskStatus::Failed | TaskStatus::Success => return,
        }
        t.status = status;
        t.message = message;
        t.updated_ms = now;
        self.finished.push_back(id);
    }
}

/// The copy and move tasks of a master.
pub(super) struct Tasks {
    limits: TaskLimits,
    table: Mutex<Table>,
}

impl Tasks {
    /// No tasks yet.
    pub fn new(limits: TaskLimits) -> Tasks {
        Tasks {
            limits,
            table: Mutex::new(Table::default()),
        }
    }

    /// Queues a task of `task_type` with `payload` for `client` at `now` (ms since the
    /// epoch); its id, or -1401 when the pending limit is reached.
    pub fn submit(
        &self,
        client: Uuid,
        task_type: i32,
        payload: String,
        now: i64,
    ) -> MasterResult<Uuid> {
        let mut table = self.table.lock();
        if table.total_pending >= self.limits.max_pending {
            return Err(ErrorCode::TASK_PENDING_LIMIT_EXCEEDED);
        }
        let mut id = random_id();
        while table.all.contains_key(&id) {
            id = random_id();
        }
        table.all.insert(
            id,
            Task {
                task_type,
                payload,
                status: TaskStatus::Pending,
                created_ms: now,
                updated_ms: now,
                client,
                message: String::new(),
                max_retry: self.limits.max_retry,
            },
        );
        table.pending.entry(client).or_default().push_back(id);
        table.total_pending += 1;
        Ok(id)
    }

    /// `FetchTasks`: up to `batch` of `client`'s pending tasks, oldest first, now
    /// processing; fewer when the processing limit is reached.
    pub fn fetch(&self, client: Uuid, batch: u64, now: i64) -> Vec<TaskAssignment> {
        let mut table = self.table.lock();
        let table = &mut *table;
        let mut out = Vec::new();
        let Some(queue) = table.pending.get_mut(&client) else {
            return out;
        };
        while (out.len() as u64) < batch && table.total_processing < self.limits.max_processing {
            let Some(id) = queue.pop_front() else {
                break;
            };
            let Some(t) = table.all.get_mut(&id) else {
                continue;
            };
            if t.status != TaskStatus::Pending {
                continue;
            }
            t.status = TaskStatus::Processing;
            t.updated_ms = now;
            table.total_pending = table.total_pending.saturating_sub(1);
            table.total_processing += 1;
            table.processing.entry(client).or_default().insert(id);
            out.push(TaskAssignment {
                id,
                task_type: t.task_type,
                payload: t.payload.clone(),
                created_at_ms: t.created_ms,
                max_retry: t.max_retry,
            });
        }
        if queue.is_empty() {
            table.pending.remove(&client);
        }
        out
    }

    /// `MarkTaskToComplete` from `client`: -600 for a status other than FAILED or
    /// SUCCESS, -1400 for an unknown task, -601 when another client was assigned it;
    /// a report on a task already ended changes nothing.
    pub fn complete(
        &self,
        client: Uuid,
        report: &TaskCompleteRequest,
        now: i64,
    ) -> MasterResult<()> {
        let status = match TaskStatus::from_i32(report.status) {
            Some(s) if s.is_final() => s,
            _ => return Err(ErrorCode::INVALID_PARAMS),
        };
        let mut table = self.table.lock();
        let Some(t) = table.all.get(&report.id) else {
            return Err(ErrorCode::TASK_NOT_FOUND);
        };
        if t.client != client {
            return Err(ErrorCode::ILLEGAL_CLIENT);
        }
        table.end(report.id, status, report.message.clone(), now);
        Ok(())
    }

    /// Fails task `id` with `message` at `now` if it is still waiting to be fetched.
    pub fn fail_if_pending(&self, id: Uuid, message: &str, now: i64) {
        let mut table = self.table.lock();
        if table
            .all
            .get(&id)
            .is_some_and(|t| t.status == TaskStatus::Pending)
        {
            table.end(id, TaskStatus::Failed, message.to_string(), now);
        }
    }

    /// `QueryTask`: -1400 for an unknown (or forgotten) task.
    pub fn query(&self, id: Uuid) -> MasterResult<QueryTaskResponse> {
        let table = self.table.lock();
        let t = table.all.get(&id).ok_or(ErrorCode::TASK_NOT_FOUND)?;
        Ok(QueryTaskResponse {
            id,
            task_type: t.task_type,
            status: t.status as i32,
            created_at_ms: t.created_ms,
            last_updated_at_ms: t.updated_ms,
            assigned_client: t.client,
            message: t.message.clone(),
        })
    }

    /// Fails the tasks past their timeouts at `now` (pending ones first), then forgets
    /// the oldest ended tasks beyond the history limit.
    pub fn sweep(&self, now: i64) {
        let mut table = self.table.lock();
        let late = |since: i64, limit: i64| limit > 0 && now.saturating_sub(since) > limit;
        let mut expired: Vec<(i64, Uuid, TaskStatus)> = table
            .all
            .iter()
            .filter_map(|(id, t)| match t.status {
                TaskStatus::Pending if late(t.created_ms, self.limits.pending_timeout_ms) => {
                    Some((0, *id, t.status))
                }
                TaskStatus::Processing if late(t.updated_ms, self.limits.processing_timeout_ms) => {
                    Some((1, *id, t.status))
                }
                _ => None,
            })
            .collect();
        expired.sort_by_key(|(order, id, _)| (*order, table.all[id].created_ms));
        for (_, id, status) in expired {
            let message = match status {
                TaskStatus::Pending => PENDING_TIMEOUT,
                _ => PROCESSING_TIMEOUT,
            };
            table.end(id, TaskStatus::Failed, message.to_string(), now);
        }
        while table.finished.len() as u64 > self.limits.max_finished {
            if let Some(id) = table.finished.pop_front() {
                table.all.remove(&id);
            }
        }
    }
}

/// A fresh random task id.
fn random_id() -> Uuid {
    Uuid {
        first: fastrand::u64(..),
        second: fastrand::u64(..),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const A: Uuid = Uuid {
        first: 1,
        second: 1,
    };
    const B: Uuid = Uuid {
        first: 2,
        second: 2,
    };

    fn tasks(f: impl FnOnce(&mut MasterConfig)) -> Tasks {
        let mut c = MasterConfig::default();
        f(&mut c);
        Tasks::new(TaskLimits::of(&c))
    }

    fn report(id: Uuid, status: TaskStatus, message: &str) -> TaskCompleteRequest {
        TaskCompleteRequest {
            id,
            status: status as i32,
            message: message.to_string(),
        }
    }

    fn status(t: &Tasks, id: Uuid) -> (TaskStatus, String) {
        let r = t.query(id).unwrap();
        (TaskStatus::from_i32(r.status).unwrap(), r.message)
    }

    #[test]
    fn a_task_goes_pending_processing_success() {
        let t = tasks(|_| {});
        let id = t.submit(A, 0, "{}".into(), 100).unwrap();
        assert_eq!(status(&t, id).0, TaskStatus::Pending);
        assert!(t.fetch(B, 16, 110).is_empty());
        let got = t.fetch(A, 16, 120);
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].id, got[0].max_retry, got[0].created_at_ms),
            (id, 10, 100)
        );
        assert_eq!(status(&t, id).0, TaskStatus::Processing);
        assert!(t.fetch(A, 16, 130).is_empty());
        assert_eq!(
            t.complete(B, &report(id, TaskStatus::Success, "x"), 140),
            Err(ErrorCode::ILLEGAL_CLIENT)
        );
        assert_eq!(
            t.complete(A, &report(id, TaskStatus::Processing, "x"), 140),
            Err(ErrorCode::INVALID_PARAMS)
        );
        t.complete(A, &report(id, TaskStatus::Success, "done"), 150)
            .unwrap();
        let r = t.query(id).unwrap();
        assert_eq!(
            (r.status, r.message.as_str(), r.last_updated_at_ms),
            (3, "done", 150)
        );
        // A second report changes nothing.
        t.complete(A, &report(id, TaskStatus::Failed, "late"), 160)
            .unwrap();
        assert_eq!(status(&t, id), (TaskStatus::Success, "done".into()));
        let unknown = Uuid {
            first: 9,
            second: 9,
        };
        assert_eq!(t.query(unknown), Err(ErrorCode::TASK_NOT_FOUND));
    }

    #[test]
    fn limits_hold_and_completing_an_unfetched_task_frees_its_slot() {
        let t = tasks(|c| {
            c.max_total_pending_tasks = 3;
            c.max_total_processing_tasks = 2;
        });
        let ids: Vec<Uuid> = (0..3)
            .map(|i| t.submit(A, 0, String::new(), i).unwrap())
            .collect();
        assert_eq!(
            t.submit(A, 0, String::new(), 5),
            Err(ErrorCode::TASK_PENDING_LIMIT_EXCEEDED)
        );
        let got: Vec<Uuid> = t.fetch(A, 16, 10).into_iter().map(|a| a.id).collect();
        assert_eq!(got, ids[..2]);
        assert!(t.fetch(A, 16, 11).is_empty());
        t.complete(A, &report(ids[2], TaskStatus::Failed, "gave up"), 12)
            .unwrap();
        t.submit(A, 0, String::new(), 13).unwrap();
        t.submit(A, 0, String::new(), 14).unwrap();
        t.submit(A, 0, String::new(), 15).unwrap();
        assert!(t.submit(A, 0, String::new(), 16).is_err());
    }

    #[test]
    fn timeouts_fail_tasks_and_history_is_trimmed() {
        let t = tasks(|c| {
            c.pending_task_timeout = Duration::from_secs(2);
            c.processing_task_timeout = Duration::from_secs(2);
            c.max_total_finished_tasks = 1;
        });
        let fetched = t.submit(A, 1, String::new(), 0).unwrap();
        t.fetch(A, 1, 1_000);
        let waiting = t.submit(A, 1, String::new(), 500).unwrap();
        t.sweep(2_000);
        assert_eq!(status(&t, fetched).0, TaskStatus::Processing);
        t.sweep(2_600);
        assert_eq!(
            status(&t, waiting),
            (TaskStatus::Failed, PENDING_TIMEOUT.into())
        );
        assert_eq!(status(&t, fetched).0, TaskStatus::Processing);
        t.sweep(3_100);
        // The pending one ended first, so it is the one forgotten.
        assert_eq!(t.query(waiting), Err(ErrorCode::TASK_NOT_FOUND));
        assert_eq!(
            status(&t, fetched),
            (TaskStatus::Failed, PROCESSING_TIMEOUT.into())
        );
        t.submit(A, 1, String::new(), 3_000).unwrap();
        assert!(t.fetch(A, 16, 3_000).len() == 1);
    }
}
