//! `mooncake_pg_*`: Mooncake PG on CPU (`pg::Group`) for the Python package's
//! `mooncake.pg` (numpy API and the `"mooncake-cpu"` torch backend).
//!
//! A handle is one rank of one group. Calls on one handle are serialized (operations
//! of a group run in program order on every rank). Operations return 0 or a negative
//! `MOONCAKE_PG_ERR_*` code with the reason in the thread's last error, and the ranks
//! the failure points at in `mooncake_pg_last_suspects`.

use super::args::{c_slice, c_str, c_str_or};
use super::boundary::ffi_boundary;
use super::engines::ENGINES;
use super::fail::{failed, invalid, FfiError};
use super::handles::HandleTable;
use super::te_types::transfer_engine_t;
use crate::metadata::MetadataSource;
use crate::pg::{
    Agent, DType, Group, GroupOptions, Kv, MetadataKv, PgError, PgErrorKind, PgResult, ReduceOp,
};
use crate::te::TransferEngine;
use crate::wire::master_types::ErrorCode;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;
use std::time::Duration;

#[allow(non_camel_case_types)]
/// An opaque group handle (`typedef void *`), from `mooncake_pg_create` until
/// `mooncake_pg_destroy`.
pub type mooncake_pg_t = *mut c_void;

/// Element type float32.
pub const MOONCAKE_PG_DTYPE_F32: c_int = 0;
/// Element type float64.
pub const MOONCAKE_PG_DTYPE_F64: c_int = 1;
/// Element type bfloat16.
pub const MOONCAKE_PG_DTYPE_BF16: c_int = 2;
/// Element type float16.
pub const MOONCAKE_PG_DTYPE_F16: c_int = 3;
/// Element type int32.
pub const MOONCAKE_PG_DTYPE_I32: c_int = 4;
/// Element type int64.
pub const MOONCAKE_PG_DTYPE_I64: c_int = 5;
/// Element type uint8.
pub const MOONCAKE_PG_DTYPE_U8: c_int = 6;
/// Reduction: sum.
pub const MOONCAKE_PG_OP_SUM: c_int = 0;
/// Reduction: product.
pub const MOONCAKE_PG_OP_PROD: c_int = 1;
/// Reduction: minimum.
pub const MOONCAKE_PG_OP_MIN: c_int = 2;
/// Reduction: maximum.
pub const MOONCAKE_PG_OP_MAX: c_int = 3;
/// Reduction: average (sum over the number of active ranks).
pub const MOONCAKE_PG_OP_AVG: c_int = 4;
/// Success.
pub const MOONCAKE_PG_OK: c_int = 0;
/// A bad argument (also a bad handle).
pub const MOONCAKE_PG_ERR_INVALID: c_int = -1;
/// The ranks disagree about the operation (sizes, kinds).
pub const MOONCAKE_PG_ERR_MISMATCH: c_int = -2;
/// A peer failed, timed out or went away (see `mooncake_pg_last_suspects`).
pub const MOONCAKE_PG_ERR_PEER_FAILED: c_int = -3;
/// The membership changed under the operation; it may be retried.
pub const MOONCAKE_PG_ERR_MEMBERSHIP_CHANGED: c_int = -4;
/// This rank is not an active member.
pub const MOONCAKE_PG_ERR_NOT_ACTIVE: c_int = -5;
/// A local failure (store, engine).
pub const MOONCAKE_PG_ERR_INTERNAL: c_int = -6;

#[allow(non_camel_case_types)]
/// Reads a key of the caller's store: writes up to `cap` bytes of the value to `buf`
/// and its full length to `*len`; returns 1 when found, 0 when absent, -1 on error
/// (a value longer than `cap` is read again with a larger buffer).
pub type mooncake_pg_kv_get_fn = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        key: *const c_char,
        buf: *mut u8,
        cap: usize,
        len: *mut usize,
    ) -> c_int,
>;

#[allow(non_camel_case_types)]
/// Writes a key of the caller's store; returns 0, or -1 on error.
pub type mooncake_pg_kv_set_fn = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        key: *const c_char,
        value: *const u8,
        len: usize,
    ) -> c_int,
>;

#[allow(non_camel_case_types)]
/// Removes a key of the caller's store; returns 0, or -1 on error.
pub type mooncake_pg_kv_remove_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, key: *const c_char) -> c_int>;

/// A group behind a handle, with the agent that lets it take part in membership
/// changes while idle (stopped before the group goes).
struct PgHandle {
    group: Arc<Mutex<Group>>,
    _agent: Agent,
}

/// Every live group; tokens start with "MCPG".
static GROUPS: HandleTable<PgHandle> = HandleTable::new(
    0x4D43_5047_0000_0000,
    "PG handle",
    "is not a live PG group (destroyed, or not from mooncake_pg_create)",
);

thread_local! {
    /// The ranks the calling thread's last failed PG call suspects.
    static SUSPECTS: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// A PG failure as a C code (a bad argument as the failure value with EINVAL),
/// remembering its suspects for this thread.
fn pg_error(e: PgError) -> FfiError {
    SUSPECTS.with(|s| *s.borrow_mut() = e.suspects.clone());
    if e.kind == PgErrorKind::Invalid {
        return invalid(e.to_string());
    }
    FfiError::Code {
        code: ErrorCode(e.kind.code()),
        what: e.to_string(),
    }
}

/// A store reached through the caller's callbacks.
struct CallbackKv {
    ctx: *mut c_void,
    get: unsafe extern "C" fn(*mut c_void, *const c_char, *mut u8, usize, *mut usize) -> c_int,
    set: unsafe extern "C" fn(*mut c_void, *const c_char, *const u8, usize) -> c_int,
    remove: Option<unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int>,
}

// SAFETY: `mooncake_pg_create`'s contract makes the callbacks callable from any
// thread with `ctx` until the group is destroyed.
unsafe impl Send for CallbackKv {}
// SAFETY: as above.
unsafe impl Sync for CallbackKv {}

fn c_key(key: &str) -> PgResult<std::ffi::CString> {
    std::ffi::CString::new(key).map_err(|_| PgError::internal("a store key with a NUL byte"))
}

impl Kv for CallbackKv {
    fn get(&self, key: &str) -> PgResult<Option<Vec<u8>>> {
        let k = c_key(key)?;
        let mut buf = vec![0u8; 256];
        loop {
            let mut len = 0usize;
            // SAFETY: the callback contract; `buf` is writable for its length and
            // `len` is a valid out pointer.
            let rc =
                unsafe { (self.get)(self.ctx, k.as_ptr(), buf.as_mut_ptr(), buf.len(), &mut len) };
            match rc {
                0 => return Ok(None),
                1 if len <= buf.len() => {
                    buf.truncate(len);
                    return Ok(Some(buf));
                }
                1 => buf = vec![0u8; len],
                _ => return Err(PgError::internal(format!("the store failed reading {key}"))),
            }
        }
    }

    fn set(&self, key: &str, value: &[u8]) -> PgResult<()> {
        let k = c_key(key)?;
        // SAFETY: the callback contract; `value` is valid for its length.
        match unsafe { (self.set)(self.ctx, k.as_ptr(), value.as_ptr(), value.len()) } {
            0 => Ok(()),
            _ => Err(PgError::internal(format!("the store failed writing {key}"))),
        }
    }

    fn remove(&self, key: &str) -> PgResult<()> {
        let Some(remove) = self.remove else {
            return Ok(());
        };
        let k = c_key(key)?;
        // SAFETY: the callback contract.
        match unsafe { remove(self.ctx, k.as_ptr()) } {
            0 => Ok(()),
            _ => Err(PgError::internal(format!(
                "the store failed removing {key}"
            ))),
        }
    }
}

fn rank_arg(value: c_int, what: &str) -> Result<usize, FfiError> {
    usize::try_from(value).map_err(|_| invalid(format!("{what} {value} is negative")))
}

/// Creates rank `rank` of group `group_name` (`size` founding ranks, `max_group_size`
/// slots, at least `size`; 0 means `size`). The group meets in a store: the caller's
/// callbacks when `kv_get` and `kv_set` are given, else the metadata store
/// `store_conn` (`http://host:port/metadata`, `etcd://host:port`,
/// `redis://host:port`). It moves data through `engine` when not NULL (the engine
/// must outlive the group), else through an engine of its own on `host_ip` (NULL:
/// 127.0.0.1) with TCP (and the same-host path). `is_extension` 1: a rank entering an
/// existing group with `mooncake_pg_join_group`. `auto_deactivate` 1: ranks that make
/// an operation fail are taken out before it returns. `timeout_ms` bounds every wait
/// (0: `MC_PG_TIMEOUT_MS` or 30 s). Blocks until every founding rank published itself.
///
/// Returns the handle, or NULL with the reason in the thread's last error.
///
/// # Safety
/// Strings NULL or NUL-terminated; the callbacks safe to call from any thread with
/// `kv_ctx` until the group is destroyed.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mooncake_pg_create(
    engine: transfer_engine_t,
    host_ip: *const c_char,
    store_conn: *const c_char,
    kv_ctx: *mut c_void,
    kv_get: mooncake_pg_kv_get_fn,
    kv_set: mooncake_pg_kv_set_fn,
    kv_remove: mooncake_pg_kv_remove_fn,
    group_name: *const c_char,
    rank: c_int,
    size: c_int,
    max_group_size: c_int,
    is_extension: c_int,
    auto_deactivate: c_int,
    timeout_ms: i64,
) -> mooncake_pg_t {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        let name = unsafe { c_str(group_name, "group_name") }?.into_owned();
        if name.is_empty() {
            return Err(invalid("group_name is empty"));
        }
        let kv: Arc<dyn Kv> = match (kv_get, kv_set) {
            (Some(get), Some(set)) => Arc::new(CallbackKv {
                ctx: kv_ctx,
                get,
                set,
                remove: kv_remove,
            }),
            _ => {
                // SAFETY: as above.
                let conn = unsafe { c_str(store_conn, "store_conn") }?;
                let store = MetadataSource::parse(&conn)?
                    .open()?
                    .ok_or_else(|| invalid(format!("{conn} is not a store a group can meet in")))?;
                Arc::new(MetadataKv(store))
            }
        };
        let engine = if engine.is_null() {
            // SAFETY: as above.
            let host = unsafe { c_str_or(host_ip, "127.0.0.1") }.into_owned();
            let e = TransferEngine::new("P2PHANDSHAKE", &host, false)?;
            e.install("tcp", None)?;
            Arc::new(e)
        } else {
            ENGINES.get(engine)?
        };
        let size = rank_arg(size, "size")?;
        let mut options = GroupOptions::new(size);
        let max = rank_arg(max_group_size, "max_group_size")?;
        if max > 0 {
            options.max_group_size = max;
        }
        options.is_extension = is_extension != 0;
        options.auto_deactivate_on_failure = auto_deactivate != 0;
        if timeout_ms > 0 {
            options.timeout = Duration::from_millis(timeout_ms as u64);
        }
        let rank = rank_arg(rank, "rank")?;
        let group = Group::new(engine, kv, &name, rank, size, options).map_err(pg_error)?;
        let group = Arc::new(Mutex::new(group));
        let agent = Agent::start(&group)
            .map_err(|e| failed(format!("starting the group's agent thread: {e}")))?;
        Ok(GROUPS.insert(PgHandle {
            group,
            _agent: agent,
        }))
    })
}

/// Leaves the group and frees the handle. Returns 0, or -1 for a bad handle.
#[no_mangle]
pub extern "C" fn mooncake_pg_destroy(pg: mooncake_pg_t) -> c_int {
    ffi_boundary!({
        GROUPS.remove(pg)?;
        Ok(0)
    })
}

/// Runs `f` on the group behind `pg`.
fn with_group<T>(
    pg: mooncake_pg_t,
    f: impl FnOnce(&mut Group) -> PgResult<T>,
) -> Result<T, FfiError> {
    let handle = GROUPS.get(pg)?;
    SUSPECTS.with(|s| s.borrow_mut().clear());
    let mut g = handle.group.lock();
    f(&mut g).map_err(pg_error)
}

fn dtype_arg(code: c_int) -> Result<DType, FfiError> {
    DType::from_code(code).ok_or_else(|| invalid(format!("unknown dtype code {code}")))
}

fn op_arg(code: c_int) -> Result<ReduceOp, FfiError> {
    ReduceOp::from_code(code).ok_or_else(|| invalid(format!("unknown reduce op code {code}")))
}

/// `len` writable bytes at `ptr` (NULL allowed when `len` is 0).
///
/// # Safety
/// A non-NULL `ptr` valid for `len` bytes of reads and writes during the call.
unsafe fn bytes_mut<'a>(
    ptr: *mut c_void,
    len: usize,
    what: &str,
) -> Result<&'a mut [u8], FfiError> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(invalid(format!("{what} is NULL but its length is {len}")));
    }
    if len > isize::MAX as usize {
        return Err(invalid(format!(
            "{what}: length {len} is larger than any buffer"
        )));
    }
    // SAFETY: non-NULL, bounded; the caller guarantees the bytes.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) })
}

/// `len` readable bytes at `ptr`.
///
/// # Safety
/// A non-NULL `ptr` valid for `len` bytes of reads during the call.
unsafe fn bytes<'a>(ptr: *const c_void, len: usize, what: &str) -> Result<&'a [u8], FfiError> {
    // SAFETY: forwarded contract.
    unsafe { c_slice(ptr.cast::<u8>(), len, what) }
}

/// All-reduces `len` bytes of `dtype` elements at `buf` in place. Returns 0 or a
/// `MOONCAKE_PG_ERR_*` code.
///
/// # Safety
/// `buf` valid for `len` bytes of reads and writes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_pg_all_reduce(
    pg: mooncake_pg_t,
    buf: *mut c_void,
    len: usize,
    dtype: c_int,
    op: c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let buf = unsafe { bytes_mut(buf, len, "buf") }?;
        let (dtype, op) = (dtype_arg(dtype)?, op_arg(op)?);
        with_group(pg, |g| g.all_reduce(buf, dtype, op))?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// Reduces `len` bytes at `buf` into rank `root`'s `buf` (other ranks' buffers are
/// unchanged). Returns 0 or a `MOONCAKE_PG_ERR_*` code.
///
/// # Safety
/// `buf` valid for `len` bytes of reads and writes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_pg_reduce(
    pg: mooncake_pg_t,
    buf: *mut c_void,
    len: usize,
    dtype: c_int,
    op: c_int,
    root: c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let buf = unsafe { bytes_mut(buf, len, "buf") }?;
        let (dtype, op, root) = (dtype_arg(dtype)?, op_arg(op)?, rank_arg(root, "root")?);
        with_group(pg, |g| g.reduce(buf, dtype, op, root))?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// Copies rank `root`'s `len` bytes at `buf` into every rank's `buf`.
///
/// # Safety
/// `buf` valid for `len` bytes of reads and writes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_pg_broadcast(
    pg: mooncake_pg_t,
    buf: *mut c_void,
    len: usize,
    root: c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let buf = unsafe { bytes_mut(buf, len, "buf") }?;
        let root = rank_arg(root, "root")?;
        with_group(pg, |g| g.broadcast(buf, root))?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// Gathers every active rank's `len` bytes at `input` into `output` (`output_len`
/// bytes, at least `len * size`) at `rank * len`; holes stay untouched.
///
/// # Safety
/// `input` valid for `len` bytes of reads, `output` for `output_len` of writes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_pg_all_gather(
    pg: mooncake_pg_t,
    input: *const c_void,
    len: usize,
    output: *mut c_void,
    output_len: usize,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let input = unsafe { bytes(input, len, "input") }?;
        // SAFETY: as above.
        let output = unsafe { bytes_mut(output, output_len, "output") }?;
        with_group(pg, |g| g.all_gather(input, output))?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// Reduces `input` (`input_len` bytes: one block of `output_len` bytes per rank slot
/// up to the group's size) and leaves this rank's block of the result in `output`.
///
/// # Safety
/// `input` valid for `input_len` bytes of reads, `output` for `output_len` of writes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mooncake_pg_reduce_scatter(
    pg: mooncake_pg_t,
    input: *const c_void,
    input_len: usize,
    output: *mut c_void,
    output_len: usize,
    dtype: c_int,
    op: c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let input = unsafe { bytes(input, input_len, "input") }?;
        // SAFETY: as above.
        let output = unsafe { bytes_mut(output, output_len, "output") }?;
        let (dtype, op) = (dtype_arg(dtype)?, op_arg(op)?);
        with_group(pg, |g| g.reduce_scatter(input, output, dtype, op))?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// All-to-all: `send_counts[r]` bytes of `input` (blocks in rank order) go to rank
/// `r`, `recv_counts[r]` bytes from rank `r` land in `output` (in rank order);
/// `ncounts` entries each, at least the group's size.
///
/// # Safety
/// The buffers valid for their lengths; the count arrays for `ncounts` elements.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mooncake_pg_all_to_all(
    pg: mooncake_pg_t,
    input: *const c_void,
    input_len: usize,
    send_counts: *const u64,
    output: *mut c_void,
    output_len: usize,
    recv_counts: *const u64,
    ncounts: usize,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let input = unsafe { bytes(input, input_len, "input") }?;
        // SAFETY: as above.
        let output = unsafe { bytes_mut(output, output_len, "output") }?;
        // SAFETY: as above.
        let sc = unsafe { c_slice(send_counts, ncounts, "send_counts") }?;
        // SAFETY: as above.
        let rc = unsafe { c_slice(recv_counts, ncounts, "recv_counts") }?;
        let to_usize = |v: &[u64]| -> Result<Vec<usize>, FfiError> {
            v.iter()
                .map(|&c| usize::try_from(c).map_err(|_| invalid("a count larger than memory")))
                .collect()
        };
        let (sc, rc) = (to_usize(sc)?, to_usize(rc)?);
        with_group(pg, |g| g.all_to_all(input, &sc, output, &rc))?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// Gathers every active rank's `len` bytes into rank `root`'s `output` (at
/// `rank * len`; `output` may be NULL elsewhere).
///
/// # Safety
/// `input` valid for `len` bytes of reads, `output` for `output_len` of writes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_pg_gather(
    pg: mooncake_pg_t,
    input: *const c_void,
    len: usize,
    output: *mut c_void,
    output_len: usize,
    root: c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let input = unsafe { bytes(input, len, "input") }?;
        // SAFETY: as above.
        let output = unsafe { bytes_mut(output, output_len, "output") }?;
        let root = rank_arg(root, "root")?;
        with_group(pg, |g| g.gather(input, output, root))?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// Scatters rank `root`'s `input` (one block of `len` bytes per rank slot) so each
/// rank's `output` (`len` bytes) gets its block.
///
/// # Safety
/// `input` valid for `input_len` bytes of reads, `output` for `len` of writes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_pg_scatter(
    pg: mooncake_pg_t,
    input: *const c_void,
    input_len: usize,
    output: *mut c_void,
    len: usize,
    root: c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let input = unsafe { bytes(input, input_len, "input") }?;
        // SAFETY: as above.
        let output = unsafe { bytes_mut(output, len, "output") }?;
        let root = rank_arg(root, "root")?;
        with_group(pg, |g| g.scatter(input, output, root))?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// Blocks until every active rank arrived.
#[no_mangle]
pub extern "C" fn mooncake_pg_barrier(pg: mooncake_pg_t) -> c_int {
    ffi_boundary!({
        with_group(pg, |g| g.barrier())?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// Sends `len` bytes to rank `to` (matched in order by its `mooncake_pg_recv`).
///
/// # Safety
/// `buf` valid for `len` bytes of reads.
#[no_mangle]
pub unsafe extern "C" fn mooncake_pg_send(
    pg: mooncake_pg_t,
    buf: *const c_void,
    len: usize,
    to: c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let data = unsafe { bytes(buf, len, "buf") }?;
        let to = rank_arg(to, "to")?;
        with_group(pg, |g| g.send(data, to))?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// Receives exactly `len` bytes from rank `from`.
///
/// # Safety
/// `buf` valid for `len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_pg_recv(
    pg: mooncake_pg_t,
    buf: *mut c_void,
    len: usize,
    from: c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let buf = unsafe { bytes_mut(buf, len, "buf") }?;
        let from = rank_arg(from, "from")?;
        with_group(pg, |g| g.recv(buf, from))?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// This rank's in-group rank, or -1 for a bad handle.
#[no_mangle]
pub extern "C" fn mooncake_pg_rank(pg: mooncake_pg_t) -> c_int {
    ffi_boundary!({
        let rank = with_group(pg, |g| Ok(g.rank()))?;
        c_int::try_from(rank).map_err(|_| invalid("rank does not fit an int"))
    })
}

/// One past the highest active rank (an extension not yet joined: the declared
/// size), or -1 for a bad handle.
#[no_mangle]
pub extern "C" fn mooncake_pg_size(pg: mooncake_pg_t) -> c_int {
    ffi_boundary!({
        let size = with_group(pg, |g| Ok(g.size()))?;
        c_int::try_from(size).map_err(|_| invalid("size does not fit an int"))
    })
}

/// The membership epoch (0 at founding, one more per change), or -1.
#[no_mangle]
pub extern "C" fn mooncake_pg_epoch(pg: mooncake_pg_t) -> i64 {
    ffi_boundary!({
        let epoch = with_group(pg, |g| Ok(g.epoch()))?;
        i64::try_from(epoch).map_err(|_| invalid("epoch does not fit an int64"))
    })
}

/// Writes one byte per rank slot (1 active, 0 not) to `out`, up to `cap`; returns
/// the number of slots (`max_group_size`), or -1.
///
/// # Safety
/// `out` valid for `cap` bytes of writes (NULL when `cap` is 0).
#[no_mangle]
pub unsafe extern "C" fn mooncake_pg_active_ranks(
    pg: mooncake_pg_t,
    out: *mut u8,
    cap: usize,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let out = unsafe { bytes_mut(out.cast(), cap, "out") }?;
        let mask = with_group(pg, |g| Ok(g.active_ranks()))?;
        for (o, m) in out.iter_mut().zip(&mask) {
            *o = u8::from(*m);
        }
        c_int::try_from(mask.len()).map_err(|_| invalid("slots do not fit an int"))
    })
}

/// Reads a rank list argument.
///
/// # Safety
/// `ranks` valid for `n` ints.
unsafe fn rank_list(ranks: *const c_int, n: usize) -> Result<Vec<usize>, FfiError> {
    // SAFETY: forwarded contract.
    let list = unsafe { c_slice(ranks, n, "ranks") }?;
    list.iter().map(|&r| rank_arg(r, "rank")).collect()
}

/// Takes `n` ranks out of the group (a membership change every active rank takes part
/// in; ranks inside an operation join it by themselves). Returns 0 or an error code.
///
/// # Safety
/// `ranks` valid for `n` ints.
#[no_mangle]
pub unsafe extern "C" fn mooncake_pg_deactivate_ranks(
    pg: mooncake_pg_t,
    ranks: *const c_int,
    n: usize,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let ranks = unsafe { rank_list(ranks, n) }?;
        with_group(pg, |g| g.deactivate_ranks(&ranks))?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// Brings `n` ranks waiting in `mooncake_pg_join_group` into the group. Returns 0 or
/// an error code.
///
/// # Safety
/// `ranks` valid for `n` ints.
#[no_mangle]
pub unsafe extern "C" fn mooncake_pg_activate_ranks(
    pg: mooncake_pg_t,
    ranks: *const c_int,
    n: usize,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let ranks = unsafe { rank_list(ranks, n) }?;
        with_group(pg, |g| g.activate_ranks(&ranks))?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// Declares this (extension) rank ready and blocks until it is activated. Returns 0
/// or an error code.
#[no_mangle]
pub extern "C" fn mooncake_pg_join_group(pg: mooncake_pg_t) -> c_int {
    ffi_boundary!({
        with_group(pg, |g| g.join_group())?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// Sets how long operations and membership changes may wait (milliseconds, > 0).
#[no_mangle]
pub extern "C" fn mooncake_pg_set_timeout(pg: mooncake_pg_t, timeout_ms: i64) -> c_int {
    ffi_boundary!({
        let ms = u64::try_from(timeout_ms)
            .ok()
            .filter(|&m| m > 0)
            .ok_or_else(|| invalid(format!("timeout {timeout_ms} ms is not positive")))?;
        with_group(pg, |g| {
            g.set_timeout(Duration::from_millis(ms));
            Ok(())
        })?;
        Ok(MOONCAKE_PG_OK)
    })
}

/// Writes the ranks the calling thread's last failed PG call suspects to `out` (up to
/// `cap`); returns how many there are (0 when none).
///
/// # Safety
/// `out` valid for `cap` ints of writes (NULL when `cap` is 0).
#[no_mangle]
pub unsafe extern "C" fn mooncake_pg_last_suspects(out: *mut c_int, cap: usize) -> c_int {
    ffi_boundary!(@keep, fail = -1, {
        let list = SUSPECTS.with(|s| s.borrow().clone());
        if cap > 0 && !out.is_null() {
            for (i, r) in list.iter().take(cap).enumerate() {
                // SAFETY: `out` holds `cap` ints, per the contract.
                unsafe { out.add(i).write(c_int::try_from(*r).unwrap_or(c_int::MAX)) };
            }
        }
        c_int::try_from(list.len()).map_err(|_| invalid("too many suspects"))
    })
}
