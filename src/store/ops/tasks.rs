//! Copy and move tasks of [`Client`] (upstream's `create_copy_task`,
//! `create_move_task`, `query_task`): one master call each; the copying is done later
//! by the client that owns the source segment.

use crate::store::error::StoreResult;
use crate::store::Client;
use crate::wire::master_api::{QueryTaskResponse, Uuid};

impl Client {
    /// Queues a copy of `key` to the segments `targets` (segment names: the owning
    /// clients' hostnames); the task id. -600 for no target or an unknown one, -704
    /// for a missing object, -1401 when the master's pending limit is reached.
    pub fn create_copy_task(&self, key: &str, targets: &[String]) -> StoreResult<Uuid> {
        let state = self.state()?;
        Ok(state
            .master()
            .create_copy_task(key, state.tenant(), targets)?)
    }

    /// Queues a move of `key`'s replica on segment `source` to segment `target`; the
    /// task id. -600 when they are the same, `target` is unknown or `source` holds no
    /// replica of it, -704 for a missing object.
    pub fn create_move_task(&self, key: &str, source: &str, target: &str) -> StoreResult<Uuid> {
        let state = self.state()?;
        Ok(state
            .master()
            .create_move_task(key, state.tenant(), source, target)?)
    }

    /// A task's state; -1400 for an unknown (or long finished) task.
    pub fn query_task(&self, id: Uuid) -> StoreResult<QueryTaskResponse> {
        let state = self.state()?;
        Ok(state.master().query_task(id)?)
    }
}
