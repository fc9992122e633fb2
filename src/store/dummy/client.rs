//! [`DummyClient`]: a store client without a segment, Transfer Engine or master
//! connection of its own. It forwards every operation to a real client on the same
//! host (`mooncake_client`) over a Unix socket; the data moves through shared memory
//! the dummy creates (its local buffer and `alloc_from_mem_pool` allocations) and the
//! real client maps, so the real client's Transfer Engine reads and writes the
//! dummy's bytes in place.
//!
//! Memory the real client cannot see (any other caller memory; registering it is
//! accepted with a warning) is staged through the local buffer: one extra copy, the
//! same results. Memory from [`host_memory`] (upstream's `MooncakeHostMemAllocator`)
//! is shared like the dummy's own allocations.

use super::address;
use super::link::Link;
use super::shared_memory::SharedMemory;
use super::wire::{Op, WireRangedRead};
use crate::codec::debug_by_field::debug_by_field;
use crate::host::net::random_u64;
use crate::store::api::{write_piece, StoreApi};
use crate::store::error::{StoreError, StoreResult};
use crate::store::host_memory;
use crate::store::memory::{Mapping, StagingBuffer};
use crate::store::state::map_error;
use crate::store::vocab::{map_ranged, ranged_failure, RangedRead, RangedResults};
use crate::store::{BatchWrite, ErrorCode, Health, Pieces, ReplicateConfig, WriteMode};
use crate::wire::master_api::{QueryTaskResponse, ReplicaDescriptor, Uuid};
use parking_lot::RwLock;
use std::sync::atomic::AtomicU64;

/// Everything a set-up dummy holds; dropped by `close`.
struct Inner {
    /// The real client, and the memory shared with it.
    link: Link,
    /// Staging offered for whole-object reads: the size of the last objects read.
    read_hint: AtomicU64,
}

/// A dummy client (upstream `DummyClient`); thread-safe, every method takes `&self`.
pub struct DummyClient {
    state: RwLock<Option<Inner>>,
    /// The real client's name (its segment's name).
    hostname: String,
}

debug_by_field!(DummyClient, real_client = hostname);

impl DummyClient {
    /// Connects to the real client serving `server_address` (`host:port`, or a port;
    /// the real client listens on `@mooncake_client_<port>.sock`), creates a shared
    /// local buffer of `local_buffer_size` bytes (0: none; `put`/`get` of bytes need
    /// one) and has the real client map it. `mem_pool_size` is accepted as upstream
    /// (which does not use it either): `alloc_from_mem_pool` allocations are separate.
    /// -1 when the real client cannot be reached or refuses this process.
    pub fn setup(
        mem_pool_size: u64,
        local_buffer_size: u64,
        server_address: &str,
    ) -> StoreResult<DummyClient> {
        let _ = mem_pool_size;
        let Some(port) = address::port_of(server_address) else {
            return Err(StoreError::invalid(format!(
                "dummy client: '{server_address}' names no port of a real client"
            )));
        };
        let env = crate::store::config::StoreEnv::from_env();
        let staging = match local_buffer_size {
            0 => None,
            n => Some(StagingBuffer::new(
                Mapping::shared(n).map_err(|e| map_error("the local buffer", n, e))?,
            )),
        };
        let link = Link::new(
            address::socket_name(port),
            random_u64(),
            env.rpc_timeout,
            SharedMemory::new(staging),
        );
        let (conn, hostname) = link.connect().map_err(|e| {
            StoreError::internal(format!(
                "dummy client: connecting to the real client at @{} ({server_address}): {e}",
                link.socket()
            ))
        })?;
        link.keep(conn);
        if let Some(s) = link.memory().staging() {
            let m = s.memory();
            link.map(m.addr(), m.len(), m).map_err(|e| {
                e.context("dummy client: sharing the local buffer with the real client")
            })?;
        }
        log::info!(
            "dummy client: forwarding to real client '{hostname}' (@{})",
            link.socket()
        );
        let inner = Inner {
            link,
            read_hint: AtomicU64::new(0),
        };
        Ok(DummyClient {
            state: RwLock::new(Some(inner)),
            hostname,
        })
    }

    /// A copy of `value` stored under `key` (staged through the local buffer): -600
    /// when empty.
    fn write_value(
        &self,
        mode: WriteMode,
        key: &str,
        value: &[u8],
        config: &ReplicateConfig,
    ) -> StoreResult<()> {
        if value.is_empty() {
            return Err(StoreError::invalid(format!("put of '{key}' with no data")));
        }
        let piece = (value.as_ptr() as u64, value.len() as u64);
        // SAFETY: `value` is readable for the duration of the call.
        unsafe { write_piece(self, mode, key, piece, config) }
    }

    fn with<R>(&self, closed: impl FnOnce() -> R, op: impl FnOnce(&Inner) -> R) -> R {
        match self.state.read().as_ref() {
            Some(inner) => op(inner),
            None => closed(),
        }
    }
}

/// Why a closed dummy fails.
const CLOSED: &str = "the dummy client is closed";

/// `n` failures of a closed dummy (-600).
fn closed<T: Clone>(n: usize) -> Vec<StoreResult<T>> {
    vec![Err(StoreError::invalid(CLOSED)); n]
}

fn owned(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

impl StoreApi for DummyClient {
    fn hostname(&self) -> String {
        self.hostname.clone()
    }

    fn health(&self) -> Health {
        self.with(
            || Health::NotInitialized,
            |i| match i.link.call::<_, i32>(Op::Health, &(), None) {
                Ok(0) => Health::Healthy,
                Ok(1) => Health::NotInitialized,
                _ => Health::MasterUnreachable,
            },
        )
    }

    fn close(&self) {
        // Closing the connections ends the session: the real client unmaps everything.
        let inner = self.state.write().take();
        drop(inner);
    }

    fn put(&self, key: &str, value: &[u8], config: &ReplicateConfig) -> StoreResult<()> {
        self.write_value(WriteMode::Put, key, value, config)
    }

    fn upsert(&self, key: &str, value: &[u8], config: &ReplicateConfig) -> StoreResult<()> {
        self.write_value(WriteMode::Upsert, key, value, config)
    }

    unsafe fn batch_write_raw(&self, batch: BatchWrite<'_>) -> Vec<StoreResult<()>> {
        self.with(|| closed(batch.keys.len()), |i| i.link.write(batch))
    }

    unsafe fn batch_get_into_multi_raw(
        &self,
        keys: &[&str],
        items: &[Pieces],
    ) -> Vec<StoreResult<u64>> {
        self.with(|| closed(keys.len()), |i| i.link.read(keys, items))
    }

    unsafe fn batch_get_alloc_addr(
        &self,
        keys: &[&str],
        alloc: &mut dyn FnMut(usize, u64) -> Option<u64>,
    ) -> Vec<StoreResult<u64>> {
        self.with(
            || closed(keys.len()),
            // SAFETY: forwarded contract.
            |i| unsafe { i.link.fetch(&i.read_hint, keys, alloc) },
        )
    }

    unsafe fn get_into_ranges_raw(&self, reads: &[RangedRead]) -> RangedResults {
        let shape = |e: StoreError| ranged_failure(reads, e);
        self.with(
            || shape(StoreError::invalid(CLOSED)),
            |i| {
                let wire_reads: Vec<WireRangedRead> = reads
                    .iter()
                    .map(|r| {
                        let keys = r
                            .keys
                            .iter()
                            .map(|(k, frags)| {
                                (
                                    k.clone(),
                                    frags.iter().map(|f| (f.dst, f.src, f.len)).collect(),
                                )
                            })
                            .collect();
                        (r.buffer, keys)
                    })
                    .collect();
                match i
                    .link
                    .call::<_, RangedResults<ErrorCode>>(Op::Ranges, &wire_reads, None)
                {
                    Ok(r) => map_ranged(r, StoreError::from),
                    Err(e) => shape(e),
                }
            },
        )
    }

    fn batch_is_exist(&self, keys: &[&str]) -> Vec<StoreResult<bool>> {
        self.with(
            || closed(keys.len()),
            |i| i.link.call_batch(Op::Exist, &owned(keys), keys.len()),
        )
    }

    fn batch_get_size(&self, keys: &[&str]) -> Vec<StoreResult<u64>> {
        self.with(
            || closed(keys.len()),
            |i| i.link.call_batch(Op::Size, &owned(keys), keys.len()),
        )
    }

    /// A dummy stages nothing itself: its reads run in the real client, which counts
    /// them (as upstream, whose dummy has no count of its own).
    fn offload_rpc_read_count(&self) -> u64 {
        0
    }

    /// A dummy's operations run in its real client, whose HTTP server reports them:
    /// -600.
    fn start_http_server(&self, _port: u16) -> StoreResult<u16> {
        Err(StoreError::invalid(
            "a dummy client has no HTTP server of its own: its real client (mooncake_client) reports its operations",
        ))
    }

    fn batch_get_replica_desc(&self, keys: &[&str]) -> Vec<StoreResult<Vec<ReplicaDescriptor>>> {
        self.with(
            || closed(keys.len()),
            |i| i.link.call_batch(Op::Replicas, &owned(keys), keys.len()),
        )
    }

    fn batch_remove(&self, keys: &[&str], force: bool) -> Vec<StoreResult<()>> {
        self.with(
            || closed(keys.len()),
            |i| {
                i.link
                    .call_batch(Op::Remove, &(owned(keys), force), keys.len())
            },
        )
    }

    fn remove_by_regex(&self, pattern: &str, force: bool) -> StoreResult<i64> {
        self.with(
            || Err(StoreError::invalid(CLOSED)),
            |i| {
                Ok(i.link.call::<_, Result<i64, ErrorCode>>(
                    Op::RemoveRegex,
                    &(pattern.to_string(), force),
                    None,
                )??)
            },
        )
    }

    fn remove_all(&self, force: bool) -> StoreResult<i64> {
        self.with(
            || Err(StoreError::invalid(CLOSED)),
            |i| {
                Ok(i.link
                    .call::<_, Result<i64, ErrorCode>>(Op::RemoveAll, &force, None)??)
            },
        )
    }

    fn create_copy_task(&self, key: &str, targets: &[String]) -> StoreResult<Uuid> {
        self.with(
            || Err(StoreError::invalid(CLOSED)),
            |i| {
                Ok(i.link.call::<_, Result<Uuid, ErrorCode>>(
                    Op::CreateCopyTask,
                    &(key.to_string(), targets.to_vec()),
                    None,
                )??)
            },
        )
    }

    fn create_move_task(&self, key: &str, source: &str, target: &str) -> StoreResult<Uuid> {
        self.with(
            || Err(StoreError::invalid(CLOSED)),
            |i| {
                Ok(i.link.call::<_, Result<Uuid, ErrorCode>>(
                    Op::CreateMoveTask,
                    &(key.to_string(), source.to_string(), target.to_string()),
                    None,
                )??)
            },
        )
    }

    fn query_task(&self, id: Uuid) -> StoreResult<QueryTaskResponse> {
        self.with(
            || Err(StoreError::invalid(CLOSED)),
            |i| {
                Ok(i.link.call::<_, Result<QueryTaskResponse, ErrorCode>>(
                    Op::QueryTask,
                    &id,
                    None,
                )??)
            },
        )
    }

    fn batch_replica_clear(&self, keys: &[&str], segment_name: &str) -> StoreResult<Vec<String>> {
        self.with(
            || Err(StoreError::invalid(CLOSED)),
            |i| {
                Ok(i.link.call::<_, Result<Vec<String>, ErrorCode>>(
                    Op::ReplicaClear,
                    &(owned(keys), segment_name.to_string()),
                    None,
                )??)
            },
        )
    }

    /// Memory from [`StoreApi::alloc_from_mem_pool`] or [`host_memory::alloc`] (any
    /// sub-range of an allocation) is mapped by the real client, which then moves
    /// data to and from it in place. Other memory is accepted too, with a warning the
    /// first time: the real client cannot map it, so its transfers are staged through
    /// the local buffer (one extra copy). -600 when already registered.
    fn register_buffer(&self, addr: *mut u8, len: usize) -> StoreResult<()> {
        if addr.is_null() || len == 0 {
            return Err(StoreError::internal(format!(
                "register_buffer({addr:?}, {len}): NULL or empty"
            )));
        }
        let (addr, len) = (addr as u64, len as u64);
        self.with(
            || Err(StoreError::invalid(CLOSED)),
            |i| {
                let memory = i.link.memory();
                if memory.is_registered(addr) {
                    return Err(StoreError::invalid(format!(
                        "dummy client: register_buffer({addr:#x}): already registered"
                    )));
                }
                if let Some(r) = memory.with_pool_holder(addr, len, |m| i.link.map(addr, len, m)) {
                    return r;
                }
                if let Some(holder) = host_memory::holder(addr, len) {
                    return i.link.map(addr, len, &holder);
                }
                memory.add_staged(addr, len);
                Ok(())
            },
        )
    }

    fn unregister_buffer(&self, addr: *mut u8) -> StoreResult<()> {
        let addr = addr as u64;
        self.with(
            || Err(StoreError::invalid(CLOSED)),
            |i| {
                if i.link.memory().remove_staged(addr) {
                    return Ok(());
                }
                if !i.link.memory().remove_mapped(addr) {
                    return Err(StoreError::invalid(format!(
                        "dummy client: unregister_buffer({addr:#x}): not registered"
                    )));
                }
                Ok(i.link
                    .call::<_, Result<(), ErrorCode>>(Op::Unmap, &addr, None)??)
            },
        )
    }

    fn moves_in_place(&self, addr: u64, len: u64) -> StoreResult<bool> {
        self.with(
            || Err(StoreError::invalid(CLOSED)),
            |i| Ok(i.link.memory().is_mapped(addr, len)),
        )
    }

    fn alloc_from_mem_pool(&self, size: u64) -> StoreResult<u64> {
        self.with(
            || Err(StoreError::invalid(CLOSED)),
            |i| {
                let m =
                    Mapping::shared(size).map_err(|e| map_error("alloc_from_mem_pool", size, e))?;
                let addr = m.addr();
                i.link.memory().add_to_pool(m);
                Ok(addr)
            },
        )
    }
}
