//! Plumbing of the store C ABI: the handle table, return-code helpers, and the
//! readers that validate and copy C arguments (keys, batches, the replicate config).

use super::{mooncake_replicate_config_t, mooncake_store_t};
use crate::ffi::boundary::{c_slice, c_str, invalid, set_last_error, FfiError};
use crate::store::{
    Client, DiskTierConfig, DummyClient, ErrorCode, ReplicateConfig, SetupConfig, SoftPinAction,
    StoreApi,
};
use crate::te::TransferEngine;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// High bits shared by every store token ("MCST"); distinct from engine tokens.
const TOKEN_BASE: u64 = 0x4D43_5354_0000_0000;

/// One handle: the client once set up, and a lock serialising setup calls.
#[derive(Default)]
pub(super) struct StoreHandle {
    /// The client (real, or a dummy forwarding to one), once set up.
    pub(super) client: RwLock<Option<Arc<dyn StoreApi>>>,
    /// Serialises setup calls on this handle.
    setup: Mutex<()>,
}

static STORES: RwLock<BTreeMap<usize, Arc<StoreHandle>>> = RwLock::new(BTreeMap::new());
static NEXT: AtomicUsize = AtomicUsize::new(1);

pub(super) fn bad_handle(store: mooncake_store_t) -> FfiError {
    FfiError::Invalid {
        what: if store.is_null() {
            "store handle is NULL".into()
        } else {
            format!("store handle {store:p} is not a live store (destroyed, or not from mooncake_store_create)")
        },
        errno: libc::EBADF,
    }
}

pub(super) fn handle(store: mooncake_store_t) -> Result<Arc<StoreHandle>, FfiError> {
    STORES
        .read()
        .get(&(store as usize))
        .cloned()
        .ok_or_else(|| bad_handle(store))
}

/// The handle's client: `Err` (-1) for a bad handle, `Ok(None)` when not set up.
pub(in crate::ffi) fn client(
    store: mooncake_store_t,
) -> Result<Option<Arc<dyn StoreApi>>, FfiError> {
    Ok(handle(store)?.client.read().clone())
}

/// Records a store error as the thread's last error and returns its code.
pub(in crate::ffi) fn code(function: &str, e: ErrorCode) -> i32 {
    set_last_error(function, &e.to_string(), 0);
    e.0
}

/// `0` or the error code.
pub(in crate::ffi) fn rc(function: &str, r: Result<(), ErrorCode>) -> c_int {
    r.map_or_else(|e| code(function, e), |()| 0)
}

/// A size/count as `int64_t`, or the error code.
pub(in crate::ffi) fn rc64(function: &str, r: Result<u64, ErrorCode>) -> i64 {
    r.map_or_else(|e| i64::from(code(function, e)), |v| v as i64)
}

/// Runs `op` on the set-up client, or returns -600 when the handle is not set up.
pub(super) fn with_client<R>(
    function: &str,
    store: mooncake_store_t,
    not_set_up: R,
    op: impl FnOnce(&dyn StoreApi) -> R,
) -> Result<R, FfiError> {
    match client(store)? {
        Some(c) => Ok(op(&*c)),
        None => {
            set_last_error(function, "the store is not set up", 0);
            Ok(not_set_up)
        }
    }
}

/// Converts the C config (spec store.md §1.1).
///
/// # Safety
/// `config` must be NULL or point to a valid struct whose non-NULL
/// `preferred_segments` has `preferred_segments_count` entries, each NULL or a
/// NUL-terminated string.
pub(super) unsafe fn replicate_config(
    config: *const mooncake_replicate_config_t,
) -> Result<ReplicateConfig, FfiError> {
    let mut out = ReplicateConfig::default();
    if config.is_null() {
        return Ok(out);
    }
    if (config as usize) % std::mem::align_of::<mooncake_replicate_config_t>() != 0 {
        return Err(invalid("config is not aligned"));
    }
    // SAFETY: non-NULL, aligned, valid per the contract; copied by value.
    let c = unsafe { *config };
    out.replica_num = c.replica_num as u64;
    out.soft_pin_action = if c.with_soft_pin != 0 {
        SoftPinAction::Enable
    } else {
        SoftPinAction::Preserve
    };
    out.with_hard_pin = c.with_hard_pin != 0;
    if !c.preferred_segments.is_null() {
        // SAFETY: the array has preferred_segments_count entries per the contract.
        let names = unsafe {
            c_slice(
                c.preferred_segments,
                c.preferred_segments_count,
                "preferred_segments",
            )
        }?;
        for &name in names.iter().filter(|n| !n.is_null()) {
            // SAFETY: a non-NULL entry is a NUL-terminated string.
            out.preferred_segments
                .push(unsafe { c_str(name, "preferred segment") }?.into_owned());
        }
    }
    Ok(out)
}

/// Reads a key; NULL is a shim failure (-1).
///
/// # Safety
/// `key` must be NULL or NUL-terminated.
pub(in crate::ffi) unsafe fn key_arg(key: *const c_char) -> Result<String, FfiError> {
    // SAFETY: forwarded contract.
    Ok(unsafe { c_str(key, "key") }?.into_owned())
}

/// Reads `count` keys; a NULL array or NULL entry is a shim failure (-1).
///
/// # Safety
/// `keys` must be NULL or hold `count` pointers, each NULL or NUL-terminated.
pub(in crate::ffi) unsafe fn keys_arg(
    keys: *const *const c_char,
    count: usize,
) -> Result<Vec<String>, FfiError> {
    if keys.is_null() {
        return Err(invalid("keys is NULL"));
    }
    // SAFETY: `count` entries per the contract.
    let ptrs = unsafe { c_slice(keys, count, "keys") }?;
    // SAFETY: each entry is NULL (rejected) or NUL-terminated.
    ptrs.iter().map(|&k| unsafe { key_arg(k) }).collect()
}

/// Reads the `(buffer, size)` pairs of a batch; NULL arrays, or a NULL buffer with a
/// non-zero size, are shim failures (-1).
///
/// # Safety
/// Non-NULL arrays must hold `count` entries.
pub(in crate::ffi) unsafe fn items_arg(
    buffers: *const *mut c_void,
    sizes: *const usize,
    count: usize,
) -> Result<Vec<(u64, u64)>, FfiError> {
    if buffers.is_null() || sizes.is_null() {
        return Err(invalid("buffers or sizes is NULL"));
    }
    // SAFETY: `count` entries each, per the contract.
    let (bufs, lens) = unsafe {
        (
            c_slice(buffers, count, "buffers")?,
            c_slice(sizes, count, "sizes")?,
        )
    };
    bufs.iter()
        .zip(lens)
        .enumerate()
        .map(|(i, (&b, &n))| {
            if b.is_null() && n > 0 {
                return Err(invalid(format!(
                    "buffers[{i}] is NULL but sizes[{i}] is {n}"
                )));
            }
            Ok((b as u64, n as u64))
        })
        .collect()
}

/// Registers a new, not yet set-up handle and returns its token.
pub(super) fn insert_handle() -> mooncake_store_t {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let token = (TOKEN_BASE as usize).wrapping_add(0x1000 + n.wrapping_mul(16));
    STORES
        .write()
        .insert(token, Arc::new(StoreHandle::default()));
    token as mooncake_store_t
}

/// Removes a handle from the table (`None` when it is not a live handle).
pub(super) fn remove_handle(store: mooncake_store_t) -> Option<Arc<StoreHandle>> {
    STORES.write().remove(&(store as usize))
}

/// Sets up the handle's client unless it already has one (-600).
pub(in crate::ffi) fn setup_handle(
    function: &str,
    store: mooncake_store_t,
    cfg: &SetupConfig,
) -> Result<c_int, FfiError> {
    install(function, store, &tried(cfg), || {
        Client::setup(cfg).map(|c| Arc::new(c) as Arc<dyn StoreApi>)
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
    function: &str,
    store: mooncake_store_t,
    cfg: &SetupConfig,
    engine: Arc<TransferEngine>,
) -> Result<c_int, FfiError> {
    let disk = cfg
        .enable_ssd_offload
        .then(|| DiskTierConfig::from_env(|k| std::env::var(k).ok(), &cfg.ssd_offload_path));
    let what = format!("{} over the given engine", tried(cfg));
    install(function, store, &what, || {
        Client::setup_on_engine(cfg, disk, engine).map(|c| Arc::new(c) as Arc<dyn StoreApi>)
    })
}

/// Sets the handle up as a dummy client of the real client at `server_address`
/// unless it already has a client (-600).
pub(in crate::ffi) fn setup_dummy_handle(
    function: &str,
    store: mooncake_store_t,
    mem_pool_size: u64,
    local_buffer_size: u64,
    server_address: &str,
) -> Result<c_int, FfiError> {
    let what = format!("setting up a dummy of the real client at '{server_address}'");
    install(function, store, &what, || {
        DummyClient::setup(mem_pool_size, local_buffer_size, server_address)
            .map(|c| Arc::new(c) as Arc<dyn StoreApi>)
    })
}

/// Installs the client `create` makes; a failure's last error says `what` was tried.
fn install(
    function: &str,
    store: mooncake_store_t,
    what: &str,
    create: impl FnOnce() -> Result<Arc<dyn StoreApi>, ErrorCode>,
) -> Result<c_int, FfiError> {
    let h = handle(store)?;
    let _serial = h.setup.lock();
    if h.client.read().is_some() {
        return Ok(code(function, ErrorCode::INVALID_PARAMS));
    }
    match create() {
        Ok(c) => {
            *h.client.write() = Some(c);
            Ok(0)
        }
        Err(e) => {
            set_last_error(function, &format!("{what}: {e}"), 0);
            Ok(e.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::store::*;

    #[test]
    fn config_conversion_follows_upstream() {
        // SAFETY: NULL and locally built, valid configs.
        unsafe {
            assert_eq!(
                replicate_config(std::ptr::null()).unwrap(),
                ReplicateConfig::default()
            );
            let mut names = [c"a:1".as_ptr(), std::ptr::null(), c"b:2".as_ptr()];
            let c = mooncake_replicate_config {
                replica_num: 0,
                with_soft_pin: 5,
                with_hard_pin: 1,
                preferred_segments: names.as_mut_ptr(),
                preferred_segments_count: names.len(),
            };
            let r = replicate_config(&c).unwrap();
            assert_eq!(r.replica_num, 0);
            assert_eq!(r.soft_pin_action, SoftPinAction::Enable);
            assert!(r.with_hard_pin);
            assert_eq!(r.preferred_segments, vec!["a:1", "b:2"]);
            let c = mooncake_replicate_config {
                replica_num: 2,
                with_soft_pin: 0,
                with_hard_pin: 0,
                preferred_segments: std::ptr::null_mut(),
                preferred_segments_count: 3,
            };
            let r = replicate_config(&c).unwrap();
            assert_eq!(r.soft_pin_action, SoftPinAction::Preserve);
            assert!(r.preferred_segments.is_empty() && !r.with_hard_pin);
        }
        assert_eq!(std::mem::size_of::<mooncake_replicate_config>(), 32);
        assert_eq!(
            std::mem::offset_of!(mooncake_replicate_config, preferred_segments),
            16
        );
    }

    #[test]
    fn foreign_and_destroyed_handles_are_rejected() {
        let h = mooncake_store_create();
        assert_eq!(mooncake_store_health_check(h), 1);
        mooncake_store_destroy(h);
        assert_eq!(mooncake_store_health_check(h), -1);
        assert_eq!(mooncake_store_health_check(std::ptr::null_mut()), -1);
        assert_eq!(mooncake_store_remove_all(0x4000 as mooncake_store_t, 1), -1);
    }
}
