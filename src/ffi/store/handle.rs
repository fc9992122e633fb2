//! Store handles: the table of `mooncake_store_t` tokens, the client each one holds
//! once set up, and the setup calls that install it.

use crate::ffi::fail::FfiError;
use crate::ffi::handles::HandleTable;
use crate::store::{Client, DummyClient, ErrorCode, SetupConfig, StoreApi, StoreResult};
use crate::te::TransferEngine;
use parking_lot::{Mutex, RwLock};
use std::ffi::c_void;
use std::sync::Arc;

/// One handle: the client once set up, and a lock serialising setup calls.
#[derive(Default)]
pub(in crate::ffi) struct StoreHandle {
    /// The client (real, or a dummy forwarding to one), once set up.
    pub(in crate::ffi) client: RwLock<Option<Arc<dyn StoreApi>>>,
    /// Serialises setup calls on this handle.
    setup: Mutex<()>,
}

/// Every store `mooncake_store_create` made and nobody destroyed yet; tokens start
/// with "MCST", so an engine handle is never taken for a store.
pub(in crate::ffi) static STORES: HandleTable<StoreHandle> = HandleTable::new(
    0x4D43_5354_0000_0000,
    "store handle",
    "is not a live store (destroyed, or not from mooncake_store_create)",
);

/// The client of the `mooncake_store_t` `store`: `Err` (-1) for a bad handle,
/// `Ok(None)` when not set up.
pub(in crate::ffi) fn client(store: *mut c_void) -> Result<Option<Arc<dyn StoreApi>>, FfiError> {
    Ok(STORES.get(store)?.client.read().clone())
}

/// The client once set up; -600 (`INVALID_PARAMS`) when `client` is `None`.
pub(in crate::ffi) fn set_up(
    client: Option<Arc<dyn StoreApi>>,
) -> Result<Arc<dyn StoreApi>, FfiError> {
    client.ok_or_else(|| ErrorCode::INVALID_PARAMS.into())
}

/// The set-up client of `store`: -1 for a bad handle, -600 when not set up (the last
/// error says so).
pub(in crate::ffi) fn set_up_client(store: *mut c_void) -> Result<Arc<dyn StoreApi>, FfiError> {
    client(store)?.ok_or_else(|| FfiError::Code {
        code: ErrorCode::INVALID_PARAMS,
        what: "the store is not set up".into(),
    })
}

/// Sets up the handle's client unless it already has one (-600).
pub(in crate::ffi) fn setup_handle(store: *mut c_void, cfg: &SetupConfig) -> Result<i32, FfiError> {
    install(store, &tried(cfg), || {
        Client::open(cfg, cfg.disk_tier_from_env(), None).map(|c| Arc::new(c) as Arc<dyn StoreApi>)
    })
}

/// What a failed setup of `cfg` names in the last error.
fn tried(cfg: &SetupConfig) -> String {
    format!(
        "setting up '{}' with master '{}' and metadata server '{}'",
        cfg.local_hostname, cfg.master_server_addr, cfg.metadata_server
    )
}

/// Sets the handle up as a client over the existing `engine` (see
/// [`Client::setup_on_engine`]) unless it already has a client (-600).
pub(in crate::ffi) fn setup_engine_handle(
    store: *mut c_void,
    cfg: &SetupConfig,
    engine: Arc<TransferEngine>,
) -> Result<i32, FfiError> {
    let what = format!("{} over the given engine", tried(cfg));
    install(store, &what, || {
        Client::open(cfg, cfg.disk_tier_from_env(), Some(engine))
            .map(|c| Arc::new(c) as Arc<dyn StoreApi>)
    })
}

/// Sets the handle up as a dummy client of the real client at `server_address`
/// unless it already has a client (-600).
pub(in crate::ffi) fn setup_dummy_handle(
    store: *mut c_void,
    mem_pool_size: u64,
    local_buffer_size: u64,
    server_address: &str,
) -> Result<i32, FfiError> {
    let what = format!("setting up a dummy of the real client at '{server_address}'");
    install(store, &what, || {
        DummyClient::setup(mem_pool_size, local_buffer_size, server_address)
            .map(|c| Arc::new(c) as Arc<dyn StoreApi>)
    })
}

/// Installs the client `create` makes; a failure's last error says `what` was tried.
fn install(
    store: *mut c_void,
    what: &str,
    create: impl FnOnce() -> StoreResult<Arc<dyn StoreApi>>,
) -> Result<i32, FfiError> {
    let h = STORES.get(store)?;
    let _serial = h.setup.lock();
    if h.client.read().is_some() {
        return Err(ErrorCode::INVALID_PARAMS.into());
    }
    match create() {
        Ok(c) => {
            *h.client.write() = Some(c);
            Ok(0)
        }
        Err(e) => Err(FfiError::from(e.context(what))),
    }
}
