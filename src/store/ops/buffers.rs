//! Caller memory registered with this client's Transfer Engine.

use crate::store::error::{StoreError, StoreResult};
use crate::store::Client;

impl Client {
    /// Registers caller memory with the Transfer Engine (not remotely accessible),
    /// as RDMA users must; TCP transfers work without it. -1 for a NULL address or
    /// zero length, -600 when the engine refuses (e.g. overlap with a registered
    /// region). Registration never lets peers touch the memory. On a shared engine
    /// ([`Client::setup_on_engine`]), memory its owner registered is accepted as it
    /// is (not registered twice, and left registered by `unregister_buffer`).
    pub fn register_buffer(&self, addr: *mut u8, len: usize) -> StoreResult<()> {
        if addr.is_null() || len == 0 {
            return Err(StoreError::internal(format!(
                "register_buffer({addr:?}, {len}): NULL or empty"
            )));
        }
        self.state()?.register_buffer(addr as u64, len as u64)
    }

    /// Unregisters a buffer registered with [`Client::register_buffer`] (exact base
    /// address); -600 for anything else.
    pub fn unregister_buffer(&self, addr: *mut u8) -> StoreResult<()> {
        self.state()?.unregister_buffer(addr as u64)
    }
}
