//! Dummy clients forwarding to a real client: every operation through the dummy gives
//! what the real client gives, data moves in place through shared memory or staged
//! through the dummy's local buffer (memory outside what can be shared is registered
//! and staged), the process-wide host allocator's memory moves in place,
//! a dummy's memory is released when it goes, a restarted real client gets the
//! dummy's memory again, and the `mooncake_client` binary serves a dummy and survives
//! nothing but SIGTERM.

#[path = "store_support/tcp_master.rs"]
mod tcp_master;

use mooncake::master::{MasterConfig, MasterService};
use mooncake::store::dummy::wire::{self, Op};
use mooncake::store::host_memory;
use mooncake::store::{
    BatchWrite, Client, Code, DummyClient, DummyServer, ErrorCode, Health, ReplicateConfig,
    SetupConfig, StoreApi, WriteMode,
};
use mooncake::wire::master_api::MasterApi;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

fn real_client(master: &Arc<MasterService>) -> Arc<Client> {
    let cfg = SetupConfig {
        local_hostname: "127.0.0.1".into(),
        metadata_server: "P2PHANDSHAKE".into(),
        global_segment_size: 64 * MIB,
        local_buffer_size: 16 * MIB,
        ..SetupConfig::default()
    };
    Arc::new(Client::setup_with_master(&cfg, master.clone() as Arc<dyn MasterApi>).expect("setup"))
}

/// A dummy server on a port no other test uses (abstract socket names are global).
fn serve(client: &Arc<Client>) -> (DummyServer, u16) {
    for _ in 0..100 {
        let port = 20000 + (mooncake::host::net::random_u64() % 40000) as u16;
        if let Ok(s) = DummyServer::start(client.clone(), port) {
            return (s, port);
        }
    }
    panic!("no free dummy socket name");
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Setup {
    _master: Arc<MasterService>,
    real: Arc<Client>,
    server: DummyServer,
    port: u16,
}

fn setup() -> Setup {
    let master = MasterService::new(MasterConfig::default());
    let real = real_client(&master);
    let (server, port) = serve(&real);
    Setup {
        _master: master,
        real,
        server,
        port,
    }
}

fn dummy(port: u16, local: u64) -> DummyClient {
    DummyClient::setup(0, local, &format!("127.0.0.1:{port}")).expect("dummy setup")
}

#[test]
fn bytes_queries_and_removal_match_the_real_client() {
    let s = setup();
    let d = dummy(s.port, 8 * MIB);
    assert_eq!(d.hostname(), s.real.hostname());
    assert_eq!(d.health(), Health::Healthy);
    let cfg = ReplicateConfig::default();
    let value = pattern(3 * MIB as usize + 17, 1);
    d.put("k1", &value, &cfg).unwrap();
    assert_eq!(s.real.get("k1").unwrap(), value);
    assert_eq!(d.get_size("k1"), Ok(value.len() as u64));
    assert_eq!(d.is_exist("k1"), Ok(true));
    assert_eq!(d.is_exist("missing"), Ok(false));
    // SAFETY: every target is a Vec the closure returns, writable for its length while it lives.
    let got = unsafe {
        mooncake::store::api::batch_get_alloc(&d, &["k1", "missing"], |n| {
            Some(vec![0u8; n as usize])
        })
    };
    assert_eq!(got[0].as_ref().unwrap().0, value);
    assert_eq!(got[1].as_ref().unwrap_err(), &ErrorCode::OBJECT_NOT_FOUND);
    // Upsert replaces; the real client sees the new value.
    let newer = pattern(1000, 2);
    d.upsert("k1", &newer, &cfg).unwrap();
    assert_eq!(s.real.get("k1").unwrap(), newer);
    // Too large for the dummy's local buffer: refused as a real client refuses it.
    assert_eq!(
        d.put("big", &vec![1u8; 9 * MIB as usize], &cfg).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    let e = d.put("empty", &[], &cfg).unwrap_err();
    assert_eq!(e, ErrorCode::INVALID_PARAMS);
    assert!(e.cause.contains("'empty' with no data"), "{e}");
    assert_eq!(d.get_replica_desc("k1").unwrap().len(), 1);
    assert_eq!(
        d.batch_remove(&["k1", "missing"], true).code(),
        vec![Ok(()), Err(ErrorCode::OBJECT_NOT_FOUND)]
    );
    d.put("r1", &newer, &cfg).unwrap();
    d.put("r2", &newer, &cfg).unwrap();
    assert_eq!(d.remove_by_regex("^r1$", true), Ok(1));
    assert_eq!(d.remove_all(true), Ok(1));
    assert_eq!(d.is_exist("r2"), Ok(false));
    d.close();
    assert_eq!(d.health(), Health::NotInitialized);
    let e = d.put("after", &newer, &cfg).unwrap_err();
    assert_eq!(e, ErrorCode::INVALID_PARAMS);
    assert!(e.cause.contains("closed"), "{e}");
}

#[test]
fn host_allocator_memory_moves_in_place_in_any_sub_range() {
    let s = setup();
    // A local buffer smaller than one half: staging could not move them.
    let d = dummy(s.port, MIB / 2);
    let cfg = ReplicateConfig::default();
    let len = MIB;
    let base = host_memory::alloc(2 * len).unwrap();
    let (k, v) = (base, base + len);
    // SGLang's standalone HiCache: the host pool's K and V halves, one by one.
    d.register_buffer(k as *mut u8, len as usize).unwrap();
    d.register_buffer(v as *mut u8, len as usize).unwrap();
    assert_eq!(d.moves_in_place(k, 2 * len), Ok(false), "two registrations");
    assert_eq!(d.moves_in_place(k, len), Ok(true));
    assert_eq!(d.moves_in_place(v, len), Ok(true));
    let (a, b) = (pattern(len as usize, 7), pattern(len as usize, 8));
    // SAFETY: both halves are this test's live allocation.
    unsafe {
        std::ptr::copy_nonoverlapping(a.as_ptr(), k as *mut u8, a.len());
        std::ptr::copy_nonoverlapping(b.as_ptr(), v as *mut u8, b.len());
        let put = d.batch_put_from_raw(&["hk", "hv"], &[(k, len), (v, len)], &cfg);
        assert_eq!(put, vec![Ok(()), Ok(())]);
        std::ptr::write_bytes(k as *mut u8, 0, (2 * len) as usize);
        let got = d.batch_get_into_raw(&["hv", "hk"], &[(k, len), (v, len)]);
        assert_eq!(got, vec![Ok(len), Ok(len)]);
        assert_eq!(
            std::slice::from_raw_parts(k as *const u8, len as usize),
            &b[..]
        );
        assert_eq!(
            std::slice::from_raw_parts(v as *const u8, len as usize),
            &a[..]
        );
    }
    d.unregister_buffer(k as *mut u8).unwrap();
    d.unregister_buffer(v as *mut u8).unwrap();
    d.close();
    assert!(host_memory::free(base));
}

#[test]
fn pool_memory_moves_in_place_and_other_memory_is_staged() {
    let s = setup();
    let d = dummy(s.port, 4 * MIB);
    let cfg = ReplicateConfig::default();
    let len = 2 * MIB;
    let buf = d.alloc_from_mem_pool(2 * len).unwrap();
    assert_ne!(buf, 0);
    d.register_buffer(buf as *mut u8, (2 * len) as usize)
        .unwrap();
    let a = pattern(len as usize, 3);
    let b = pattern(len as usize - 5, 4);
    // SAFETY: the pool allocation is 2*len bytes, ours.
    unsafe {
        std::ptr::copy_nonoverlapping(a.as_ptr(), buf as *mut u8, a.len());
        std::ptr::copy_nonoverlapping(b.as_ptr(), (buf + len) as *mut u8, b.len());
    }
    // SAFETY: both items lie in the 2*len-byte pool allocation filled above, readable during the
    // call.
    let r = unsafe {
        d.batch_put_from_raw(
            &["a", "b"],
            &[(buf, len), (buf + len, b.len() as u64)],
            &cfg,
        )
    };
    assert_eq!(r, vec![Ok(()), Ok(())]);
    assert_eq!(s.real.get("a").unwrap(), a);
    assert_eq!(s.real.get("b").unwrap(), b);
    // Read back in place, after clearing the pool memory.
    // SAFETY: as above.
    unsafe { std::ptr::write_bytes(buf as *mut u8, 0, (2 * len) as usize) };
    // SAFETY: both destinations lie in the 2*len-byte pool allocation, untouched during the call.
    let r = unsafe { d.batch_get_into_raw(&["b", "a"], &[(buf, len), (buf + len, len)]) };
    assert_eq!(r, vec![Ok(b.len() as u64), Ok(len)]);
    // SAFETY: as above.
    let pool = unsafe { std::slice::from_raw_parts(buf as *const u8, (2 * len) as usize) };
    assert_eq!(&pool[..b.len()], &b[..]);
    assert_eq!(&pool[len as usize..], &a[..]);
    // Caller memory the real client never saw is staged through the local buffer:
    // multi-piece writes and reads give the same bytes.
    let c = pattern(300_000, 5);
    let pieces = vec![
        (c.as_ptr() as u64, 100_000),
        (c.as_ptr() as u64 + 100_000, 200_000),
    ];
    let batch = BatchWrite {
        mode: WriteMode::Put,
        keys: &["c"],
        items: &[pieces],
        config: &cfg,
    };
    // SAFETY: both pieces lie inside `c`, live and unchanged during the call.
    let r = unsafe { d.batch_write_raw(batch) };
    assert_eq!(r, vec![Ok(())]);
    assert_eq!(s.real.get("c").unwrap(), c);
    let mut out = vec![0u8; 300_000];
    // SAFETY: `out` is a live Vec of `out.len()` bytes, untouched during the call.
    let r = unsafe { d.batch_get_into_raw(&["c"], &[(out.as_mut_ptr() as u64, out.len() as u64)]) };
    assert_eq!(r, vec![Ok(300_000)]);
    assert_eq!(out, c);
    // A read too large for the free local buffer fails alone.
    let mut huge = vec![0u8; 5 * MIB as usize];
    // SAFETY: `huge` is a live Vec of its length and `(buf, len)` lies in the pool allocation;
    // neither is touched during the call.
    let r = unsafe {
        d.batch_get_into_raw(
            &["c", "a"],
            &[(huge.as_mut_ptr() as u64, huge.len() as u64), (buf, len)],
        )
    };
    assert_eq!(r.code(), vec![Err(ErrorCode::INVALID_PARAMS), Ok(len)]);
    // Other memory registers too, and stays staged; pool memory moves in place.
    assert_eq!(d.moves_in_place(buf, 2 * len), Ok(true));
    d.register_buffer(out.as_mut_ptr(), out.len()).unwrap();
    assert_eq!(
        d.register_buffer(out.as_mut_ptr(), out.len()).code(),
        Err(ErrorCode::INVALID_PARAMS),
        "registered once"
    );
    assert_eq!(d.moves_in_place(out.as_ptr() as u64, 16), Ok(false));
    d.unregister_buffer(out.as_mut_ptr()).unwrap();
    // Unregistering twice fails.
    d.unregister_buffer(buf as *mut u8).unwrap();
    assert_eq!(
        d.unregister_buffer(buf as *mut u8).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    assert_eq!(
        StoreApi::alloc_from_mem_pool(&*s.real, 10).code(),
        Err(ErrorCode::NOT_SUPPORTED)
    );
}

#[test]
fn ranged_reads_stay_inside_the_registered_buffer() {
    let s = setup();
    let d = dummy(s.port, MIB);
    let data = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ".to_vec();
    d.put("rk", &data, &ReplicateConfig::default()).unwrap();
    let buf = d.alloc_from_mem_pool(32).unwrap();
    d.register_buffer(buf as *mut u8, 32).unwrap();
    use mooncake::store::{Range, RangedRead};
    let read = |dst: u64, src: u64, len: u64| RangedRead {
        buffer: buf,
        keys: vec![("rk".to_string(), vec![Range { dst, src, len }])],
    };
    // SAFETY: the destination is this test's pool allocation (its page is mapped), untouched during
    // the call.
    let r = unsafe { d.get_into_ranges_raw(&[read(0, 2, 4)]) };
    assert_eq!(r, vec![vec![vec![Ok(4)]]]);
    assert_eq!(
        // SAFETY: 32 bytes of pool memory.
        unsafe { std::slice::from_raw_parts(buf as *const u8, 4) },
        &data[2..6]
    );
    // Past the registered 32 bytes (the page behind it is mapped, but not registered).
    // SAFETY: as above; the read is expected to be refused before anything is written.
    let r = unsafe { d.get_into_ranges_raw(&[read(30, 0, 4)]) };
    assert!(r[0][0][0].is_err());
    // SAFETY: as above; the read is expected to be refused before anything is written.
    let r = unsafe { d.get_into_ranges_raw(&[read(0, data.len() as u64 - 1, 4)]) };
    assert!(r[0][0][0].is_err());
}

/// A raw connection speaking the protocol, as a misbehaving dummy would.
fn raw(port: u16) -> UnixStream {
    let name = mooncake::store::dummy::address::socket_name(port);
    let s = UnixStream::connect_addr(&SocketAddr::from_abstract_name(&name).unwrap()).unwrap();
    wire::send_request(&s, Op::Hello, &(wire::VERSION, 77u64), None).unwrap();
    let r: Result<(String, bool), ErrorCode> =
        wire::decode(&wire::read_reply(&s).unwrap()).unwrap();
    assert!(r.is_ok());
    s
}

#[test]
fn memory_a_dummy_did_not_share_is_refused_and_broken_peers_are_dropped() {
    let s = setup();
    // Writes and reads naming real-client addresses (its own segment, say) or
    // nothing mapped at all fail per key; the server stays up.
    let conn = raw(s.port);
    let segment_addr = 0x7f00_0000_0000u64;
    let args = (
        false,
        vec!["x".to_string()],
        vec![vec![(segment_addr, 64u64)]],
        ReplicateConfig::default(),
    );
    wire::send_request(&conn, Op::Write, &args, None).unwrap();
    let r: Vec<Result<(), ErrorCode>> = wire::decode(&wire::read_reply(&conn).unwrap()).unwrap();
    assert_eq!(r, vec![Err(ErrorCode::INVALID_PARAMS)]);
    wire::send_request(
        &conn,
        Op::Read,
        &(vec!["x".to_string()], vec![vec![(1u64 << 40, 8u64)]]),
        None,
    )
    .unwrap();
    let r: Vec<Result<u64, ErrorCode>> = wire::decode(&wire::read_reply(&conn).unwrap()).unwrap();
    assert_eq!(r, vec![Err(ErrorCode::INVALID_PARAMS)]);
    // A MAP without a file, and one with a file that is not sealed, are refused.
    wire::send_request(&conn, Op::Map, &(0x10000u64, 4096u64, 0u64), None).unwrap();
    let r: Result<(), ErrorCode> = wire::decode(&wire::read_reply(&conn).unwrap()).unwrap();
    assert_eq!(r, Err(ErrorCode::INVALID_PARAMS));
    // SAFETY: a fresh unsealed memfd, owned below.
    let fd = unsafe { libc::memfd_create(c"unsealed".as_ptr(), libc::MFD_CLOEXEC) };
    // SAFETY: ftruncate on it.
    assert_eq!(unsafe { libc::ftruncate(fd, 4096) }, 0);
    // SAFETY: the descriptor is owned by nothing else.
    let file = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    wire::send_request(&conn, Op::Map, &(0x10000u64, 4096u64, 0u64), Some(&file)).unwrap();
    let r: Result<(), ErrorCode> = wire::decode(&wire::read_reply(&conn).unwrap()).unwrap();
    assert_eq!(r, Err(ErrorCode::INVALID_PARAMS));
    // Garbage and a truncated frame end only that connection.
    use std::io::Write;
    (&conn).write_all(&[9, 0, 0, 0, 4, 1, 2]).unwrap();
    drop(conn);
    let d = dummy(s.port, MIB);
    d.put("after", b"still serving", &ReplicateConfig::default())
        .unwrap();
    assert_eq!(s.real.get("after").unwrap(), b"still serving");
}

#[test]
fn a_dummys_memory_is_released_when_it_goes_and_remapped_after_a_restart() {
    let mut s = setup();
    let d = dummy(s.port, MIB);
    let buf = d.alloc_from_mem_pool(MIB).unwrap();
    d.register_buffer(buf as *mut u8, MIB as usize).unwrap();
    assert_eq!(s.server.sessions(), 1);
    // The real client's dummy server restarts: the dummy's next call opens a new
    // session and shares its memory again before using it.
    s.server.stop();
    let (server, _) = loop {
        if let Ok(srv) = DummyServer::start(s.real.clone(), s.port) {
            break (srv, s.port);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    s.server = server;
    let value = pattern(MIB as usize, 9);
    // SAFETY: the pool allocation is MIB bytes.
    unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), buf as *mut u8, value.len()) };
    // The closed idle connection is noticed before it is used.
    // SAFETY: `[buf, buf+MIB)` is the pool allocation filled above, readable during the call.
    unsafe { d.put_from_raw("p", buf, MIB, &ReplicateConfig::default()) }.unwrap();
    assert_eq!(s.real.get("p").unwrap(), value);
    d.close();
    wait_until("the session to end", || s.server.sessions() == 0);
}

/// A `mooncake_client` child, killed when dropped.
struct RealClientProcess(Child);

impl Drop for RealClientProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_mooncake_client_binary_serves_dummies_and_its_death_fails_calls_cleanly() {
    let master = MasterService::new(MasterConfig::default());
    let master_addr = tcp_master::serve(master.clone());
    let port = 20000 + (mooncake::host::net::random_u64() % 40000) as u16;
    let child = Command::new(env!("CARGO_BIN_EXE_mooncake_client"))
        .args([
            "--host=127.0.0.1",
            &format!("--port={port}"),
            "--metadata_server=P2PHANDSHAKE",
            &format!("--master_server_address={master_addr}"),
            "--global_segment_size=48MB",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn mooncake_client");
    let mut child = RealClientProcess(child);
    let mut d = None;
    wait_until("mooncake_client to serve", || {
        d = DummyClient::setup(0, 8 * MIB, &format!("127.0.0.1:{port}")).ok();
        d.is_some()
    });
    let d = d.unwrap();
    let cfg = ReplicateConfig::default();
    let value = pattern(5 * MIB as usize, 7);
    d.put("bin", &value, &cfg).unwrap();
    // SAFETY: every target is a Vec the closure returns, writable for its length while it lives.
    let got = unsafe {
        mooncake::store::api::batch_get_alloc(&d, &["bin"], |n| Some(vec![0u8; n as usize]))
    };
    assert_eq!(got[0].as_ref().unwrap().0, value);
    // The object lives in the child's segment, as the master reports.
    let replicas = master
        .get_replica_list("bin", mooncake::wire::master_api::DEFAULT_TENANT)
        .unwrap();
    assert_eq!(replicas.replicas.len(), 1);
    // The child's segment is mapped here (the dummy reads from it directly); no other
    // test of this binary maps 48 MiB.
    assert_eq!(shared_mappings_of(48 << 20), 1);
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let r = d.put("gone", &value, &cfg);
    assert!(matches!(&r, Err(e) if *e == ErrorCode::RPC_FAIL), "{r:?}");
    assert_eq!(d.health(), Health::MasterUnreachable);
    // ... and no longer once the real client is found gone: its memory is freed.
    assert_eq!(shared_mappings_of(48 << 20), 0);
}

/// How many of this process's mappings are this library's shared memory (memfd
/// `mooncake_shm`) of exactly `len` bytes.
fn shared_mappings_of(len: u64) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter(|l| l.contains("memfd:mooncake_shm"))
        .filter(|l| {
            let range = l.split_whitespace().next().unwrap_or("");
            let (a, b) = range.split_once('-').unwrap_or(("0", "0"));
            let (a, b) = (
                u64::from_str_radix(a, 16).unwrap_or(0),
                u64::from_str_radix(b, 16).unwrap_or(0),
            );
            b - a == len
        })
        .count()
}

#[test]
fn whole_object_reads_of_mixed_sizes_fit_in_at_most_two_calls() {
    let s = setup();
    let d = dummy(s.port, 8 * MIB);
    let cfg = ReplicateConfig::default();
    let sizes = [1000usize, 3 * MIB as usize, 10, 200_000];
    let keys: Vec<String> = (0..sizes.len()).map(|i| format!("mixed{i}")).collect();
    for (i, (k, &n)) in keys.iter().zip(&sizes).enumerate() {
        d.put(k, &pattern(n, i as u8), &cfg).unwrap();
    }
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    // Twice: first with no size hint, then with the largest size as the hint (the
    // smaller objects fit the staging offered, and nothing is read twice wrongly).
    for _ in 0..2 {
        let mut with_missing = refs.clone();
        with_missing.push("absent");
        // SAFETY: every target is a Vec the closure returns, writable for its length while it
        // lives.
        let got = unsafe {
            mooncake::store::api::batch_get_alloc(&d, &with_missing, |n| {
                Some(vec![0u8; n as usize])
            })
        };
        for (i, r) in got.iter().take(sizes.len()).enumerate() {
            let (v, n) = r.as_ref().unwrap();
            assert_eq!(*n as usize, sizes[i]);
            assert_eq!(v, &pattern(sizes[i], i as u8));
        }
        assert_eq!(
            got[sizes.len()].as_ref().unwrap_err(),
            &ErrorCode::OBJECT_NOT_FOUND
        );
    }
    // A caller allocator that declines: -600 for that key only.
    let mut calls = 0;
    // SAFETY: every target is a Vec the closure returns, writable for its length while it lives.
    let got = unsafe {
        mooncake::store::api::batch_get_alloc(&d, &refs[..2], |n| {
            calls += 1;
            (calls == 2).then(|| vec![0u8; n as usize])
        })
    };
    assert_eq!(got[0].as_ref().unwrap_err(), &ErrorCode::INVALID_PARAMS);
    assert_eq!(got[1].as_ref().unwrap().1 as usize, sizes[1]);
}

#[test]
fn a_real_client_admits_its_own_user_only_unless_it_runs_as_root() {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("SKIP: switching users needs root");
        return;
    }
    let setpriv = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ];
    if !Command::new(setpriv[0])
        .args(&setpriv[1..])
        .arg("true")
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("SKIP: setpriv cannot switch users");
        return;
    }
    // A real client running as nobody refuses this (root) process.
    let master = MasterService::new(MasterConfig::default());
    let master_addr = tcp_master::serve(master.clone());
    let port = 20000 + (mooncake::host::net::random_u64() % 40000) as u16;
    let child = Command::new(setpriv[0])
        .args(&setpriv[1..])
        .arg(env!("CARGO_BIN_EXE_mooncake_client"))
        .args([
            "--host=127.0.0.1",
            &format!("--port={port}"),
            "--metadata_server=P2PHANDSHAKE",
            &format!("--master_server_address={master_addr}"),
            "--global_segment_size=16MB",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn mooncake_client as nobody");
    let _child = RealClientProcess(child);
    let name = mooncake::store::dummy::address::socket_name(port);
    wait_until("mooncake_client to listen", || {
        UnixStream::connect_addr(&SocketAddr::from_abstract_name(&name).unwrap()).is_ok()
    });
    let refused = DummyClient::setup(0, MIB, &format!("127.0.0.1:{port}"));
    assert_eq!(refused.unwrap_err(), ErrorCode::INTERNAL_ERROR);

    // A real client running as root (this process) serves every user: a process of
    // nobody's is admitted.
    let s = setup();
    let code = hello_as_nobody(s.port);
    assert_eq!(code, 1, "the root real client's answer to nobody");
}

/// Connects to the dummy socket of `port` as uid 65534 (in a forked child) and sends a
/// HELLO; the reply's `expected` flag (1 admitted, 0 refused), or 2 when no reply came.
fn hello_as_nobody(port: u16) -> i32 {
    // Everything the child needs is prepared before fork: it only makes syscalls.
    let name = mooncake::store::dummy::address::socket_name(port);
    // SAFETY: an all-zero sockaddr_un is valid; the path is filled below.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (i, b) in name.bytes().enumerate() {
        addr.sun_path[i + 1] = b as libc::c_char;
    }
    let addr_len = (std::mem::size_of::<libc::sa_family_t>() + 1 + name.len()) as libc::socklen_t;
    let body = mooncake::wire::struct_pack::serialize(&(wire::VERSION, 5u64));
    let mut hello = (body.len() as u32).to_le_bytes().to_vec();
    hello.push(Op::Hello as u8);
    hello.extend_from_slice(&body);
    // SAFETY: the child makes only async-signal-safe syscalls on memory prepared
    // above, then _exits; the parent waits for it.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            let mut reply = [0u8; 64];
            let mut code = 2;
            if libc::setresgid(65534, 65534, 65534) == 0
                && libc::setresuid(65534, 65534, 65534) == 0
            {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let sa = (&addr as *const libc::sockaddr_un).cast();
                if fd >= 0 && libc::connect(fd, sa, addr_len) == 0 {
                    // A refusal may come before the hello is even sent.
                    libc::send(fd, hello.as_ptr().cast(), hello.len(), libc::MSG_NOSIGNAL);
                    // Reply: length (4), type hash (4), then the `expected` flag.
                    if libc::read(fd, reply.as_mut_ptr().cast(), reply.len()) >= 9 && reply[8] <= 1
                    {
                        code = i32::from(reply[8]);
                    }
                }
            }
            libc::_exit(code);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for the child forked above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "status {status}");
    libc::WEXITSTATUS(status)
}

#[test]
fn objects_a_dummy_copied_from_the_real_clients_segment_are_released_at_once() {
    let s = setup();
    let d = dummy(s.port, MIB);
    let cfg = ReplicateConfig::default();
    let value = pattern(3 * MIB as usize, 4);
    // Larger than the dummy's local buffer: it can only be read straight from the
    // real client's segment, which the dummy maps.
    assert!(d.put("big", &value, &cfg).is_err());
    StoreApi::put(&*s.real, "big", &value, &cfg).unwrap();
    // SAFETY: every target is a Vec the closure returns, writable for its length while it lives.
    let got = unsafe {
        mooncake::store::api::batch_get_alloc(&d, &["big"], |n| Some(vec![0u8; n as usize]))
    };
    assert_eq!(got[0].as_ref().unwrap().0, value);
    // The read ended as soon as the dummy had copied it (not after the 10 s lease):
    // a plain remove goes through.
    let deadline = Instant::now() + Duration::from_secs(8);
    while s.real.remove("big", false) != Ok(()) {
        assert!(Instant::now() < deadline, "the read was never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
}
