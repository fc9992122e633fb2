//! Heap a long-lived engine or store client keeps per peer that came and went: a
//! counting global allocator measures live heap bytes while short-lived peers (each
//! with a new segment name, as a restarted process gets) are opened, used and
//! dropped, many times over. Whatever the long-lived side learned about a peer that
//! is gone must not pile up (a week-long process meets thousands of them).

use mooncake::config::Config;
use mooncake::master::{MasterConfig, MasterService};
use mooncake::store::{Client, ReplicateConfig, SetupConfig};
use mooncake::te::{Op, TaskStatus, TransferEngine, TransferRequest};
use parking_lot::Mutex;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

/// The system allocator, counting the bytes currently allocated.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; only a counter is updated.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with this layout.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The counter is process-wide: one measurement at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Peers used before measuring (caches, pools and tables reach their working size).
const WARM_UP: usize = 20;
/// Peers measured.
const ROUNDS: usize = 100;
/// Most heap an engine may keep per dead peer. It keeps the peer's segment name and
/// id for good (an id stays valid to its holder), measured at about 180 bytes: the
/// name, two hash-table slots, and the tables' spare capacity as they double. Before
/// idle descriptors, lanes, pooled same-host connections and the peers' RPC addresses
/// were dropped, it kept 1.3 KiB (more with the TCP lanes of the last minute).
const ENGINE_BYTES_PER_PEER: isize = 512;
/// Most heap a store client (with an in-process master) may keep per dead owner:
/// its engine's share, and about 130 bytes the master keeps per client that came and
/// went, measured at about 600 in all (2 KiB before).
const STORE_BYTES_PER_OWNER: isize = 1024;
/// Only reached when something never settles; nothing asserts on timing.
const SETTLE_DEADLINE: Duration = Duration::from_secs(60);

/// Live heap bytes once they stopped moving: background threads of a dropped peer
/// (lanes, servers) finish freeing what they held. Polled until the same value is
/// seen several times in a row.
fn settled_live_bytes() -> isize {
    let deadline = Instant::now() + SETTLE_DEADLINE;
    let mut last = LIVE.load(Ordering::SeqCst);
    let mut same = 0;
    while same < 20 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        let now = LIVE.load(Ordering::SeqCst);
        same = if now == last { same + 1 } else { 0 };
        last = now;
    }
    last
}

/// Runs `round` WARM_UP + ROUNDS times; the heap bytes that each measured round left
/// behind, on average.
fn retained_per_round(mut round: impl FnMut(usize)) -> isize {
    for i in 0..WARM_UP {
        round(i);
    }
    let before = settled_live_bytes();
    for i in WARM_UP..WARM_UP + ROUNDS {
        round(i);
    }
    let after = settled_live_bytes();
    (after - before) / ROUNDS as isize
}

/// The configuration of every engine here: TCP only, idle state of gone peers
/// released at once rather than after a minute.
fn engine_config() -> Config {
    Config {
        peer_idle_secs: 0,
        ..Config::default()
    }
}

fn engine() -> TransferEngine {
    let e = TransferEngine::with_config(engine_config(), "P2PHANDSHAKE", "127.0.0.1:0", false)
        .expect("engine");
    e.install_transport("tcp").expect("tcp");
    e
}

/// Moves one request; `Failed` also when it cannot be submitted (its segment's
/// descriptor cannot be fetched any more).
fn run(e: &TransferEngine, req: TransferRequest) -> TaskStatus {
    let batch = e.allocate_batch(1);
    if e.submit(batch, &[req]).is_err() {
        e.free_batch(batch).unwrap();
        return TaskStatus::Failed;
    }
    assert!(e.wait_batch(batch, SETTLE_DEADLINE).unwrap());
    let (status, _) = e.transfer_status(batch, 0).unwrap();
    e.free_batch(batch).unwrap();
    status
}

/// Takes the measurement lock; store clients' engines (configured from the
/// environment) drop idle peer state at once too.
fn serial() -> parking_lot::MutexGuard<'static, ()> {
    let guard = SERIAL.lock();
    std::env::set_var("MC_PEER_IDLE_SEC", "0");
    guard
}

#[test]
fn an_engine_keeps_little_per_dead_peer() {
    let _serial = serial();
    let long_lived = engine();
    let mut local = vec![7u8; 64 << 10];
    let laddr = local.as_mut_ptr() as u64;
    let len = local.len() as u64;
    long_lived
        .register_memory(laddr, len, "cpu:0", true)
        .unwrap();
    let per_peer = retained_per_round(|i| {
        let peer = engine();
        let mut remote = vec![0u8; 64 << 10];
        let raddr = remote.as_mut_ptr() as u64;
        peer.register_memory(raddr, len, "cpu:0", true).unwrap();
        let id = long_lived.open_segment(peer.segment_name()).unwrap();
        local.fill(i as u8);
        let write = TransferRequest::new(Op::Write, laddr, id, raddr, len);
        assert_eq!(run(&long_lived, write), TaskStatus::Completed);
        let read = TransferRequest::new(Op::Read, laddr, id, raddr, len);
        assert_eq!(run(&long_lived, read), TaskStatus::Completed);
        assert!(remote.iter().all(|&b| b == i as u8));
        drop(peer);
        // Holders of the id may still try it once the peer is gone.
        assert_eq!(run(&long_lived, read), TaskStatus::Failed);
    });
    eprintln!("engine: {per_peer} heap bytes retained per dead peer");
    assert!(
        per_peer < ENGINE_BYTES_PER_PEER,
        "{per_peer} bytes per dead peer"
    );
}

#[test]
fn a_store_client_keeps_little_per_dead_owner() {
    let _serial = serial();
    const MIB: u64 = 1 << 20;
    let config = |segment| SetupConfig {
        local_hostname: "127.0.0.1".into(),
        metadata_server: "P2PHANDSHAKE".into(),
        global_segment_size: segment,
        local_buffer_size: 16 * MIB,
        ..SetupConfig::default()
    };
    let master = MasterService::new(MasterConfig::default());
    let long_lived = Client::setup_with_master(&config(0), master.clone()).expect("client");
    let value = vec![5u8; 64 << 10];
    let mut out = vec![0u8; value.len()];
    let per_owner = retained_per_round(|i| {
        let owner = Client::setup_with_master(&config(16 * MIB), master.clone()).expect("owner");
        let key = format!("key-{i}");
        let on_owner = ReplicateConfig {
            preferred_segments: vec![owner.hostname().to_string()],
            ..ReplicateConfig::default()
        };
        long_lived.put(&key, &value, &on_owner).unwrap();
        assert_eq!(
            long_lived.get_into(&key, &mut out).unwrap(),
            value.len() as u64
        );
        assert_eq!(out, value);
        drop(owner);
        assert!(long_lived.get_into(&key, &mut out).is_err());
        let _ = long_lived.remove(&key, true);
    });
    eprintln!("store client: {per_owner} heap bytes retained per dead owner");
    assert!(
        per_owner < STORE_BYTES_PER_OWNER,
        "{per_owner} bytes per dead owner"
    );
}
