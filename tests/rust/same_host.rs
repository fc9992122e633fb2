//! The same-host path: two engines on one host copy directly between their
//! processes (data verified byte for byte, and the bytes counted on that path), the
//! target still refuses what it refuses over TCP, `MC_DISABLE_SAME_HOST` keeps
//! sockets, a target that may not be copied into (another user) is reached over TCP
//! instead, a target killed mid-transfer fails the transfer without harming the
//! initiator, and one paused mid-batch over sockets fails the batch within the
//! progress deadline. Cross-process cases run our `transfer_engine_bench` as the target.

mod interop_common;

use interop_common::te_support::{pattern, req, run, served, Served};
use interop_common::ChildGuard;
use mooncake::config::Config;
use mooncake::te::{Op, TaskStatus, TransferEngine, TransferRequest};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// Whether this environment lets a process use `process_vm_readv` at all (a seccomp
/// profile may forbid it): where it does not, the same-host path falls back to TCP
/// and these tests check that instead.
fn process_vm_allowed() -> bool {
    let src = [7u8; 64];
    let mut dst = [0u8; 64];
    let local = libc::iovec {
        iov_base: dst.as_mut_ptr().cast(),
        iov_len: dst.len(),
    };
    let remote = libc::iovec {
        iov_base: src.as_ptr() as *mut libc::c_void,
        iov_len: src.len(),
    };
    // SAFETY: both iovecs describe live buffers of this process.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    let allowed = n == 64 && dst == src;
    if !allowed {
        eprintln!("note: process_vm_readv is not allowed here; checking the TCP fallback");
    }
    allowed
}

/// `moved` bytes went over the same-host path where it can work here, none elsewhere.
fn assert_same_host_moved(e: &TransferEngine, at_least: u64) {
    if process_vm_allowed() {
        assert!(
            e.same_host_bytes() >= at_least,
            "{} < {at_least}",
            e.same_host_bytes()
        );
    } else {
        assert_eq!(e.same_host_bytes(), 0);
    }
}

fn engine_with(config: Config) -> TransferEngine {
    TransferEngine::with_config(config, "P2PHANDSHAKE", "127.0.0.1:0", true).expect("engine")
}

fn engine() -> TransferEngine {
    engine_with(Config::global().clone())
}

/// Runs one request to completion; whether it succeeded.
fn ok(e: &TransferEngine, r: TransferRequest) -> bool {
    run(e, &[r]) == [TaskStatus::Completed]
}

/// Writes `data` at `remote` and reads it back into a fresh buffer.
fn round_trip(e: &TransferEngine, target: i32, remote: u64, data: &[u8]) -> Vec<u8> {
    let mut src = data.to_vec();
    let mut back = vec![0u8; data.len()];
    let (s, b) = (src.as_mut_ptr() as u64, back.as_mut_ptr() as u64);
    let len = data.len() as u64;
    e.register_memory(s, len, "cpu:0", false).unwrap();
    e.register_memory(b, len, "cpu:0", false).unwrap();
    assert!(ok(e, req(Op::Write, s, target, remote, len)), "write");
    assert!(ok(e, req(Op::Read, b, target, remote, len)), "read");
    e.unregister_memory(s).unwrap();
    e.unregister_memory(b).unwrap();
    back
}

#[test]
fn two_engines_on_one_host_copy_directly() {
    let Served {
        target: _target,
        initiator,
        remote,
        raddr,
        id,
    } = served(8 * MIB as usize, engine);
    let desc = initiator.segment_descriptor(id).unwrap();
    assert!(
        desc.same_host.is_some(),
        "the target publishes its same-host socket"
    );
    for (off, len) in [
        (0u64, 1usize),
        (4096, 65536),
        (MIB, 4 * MIB as usize),
        (13, 777_777),
    ] {
        let data = pattern(len, off as u8);
        assert_eq!(round_trip(&initiator, id, raddr + off, &data), data);
        assert_eq!(&remote[off as usize..off as usize + len], &data[..]);
    }
    assert_same_host_moved(&initiator, 2 * (1 + 65536 + 4 * MIB + 777_777));
}

#[test]
fn the_target_refuses_what_it_refuses_over_tcp() {
    let target = engine();
    let initiator = engine();
    let mut open = vec![0u8; MIB as usize];
    let mut private = vec![7u8; MIB as usize];
    let (oaddr, paddr) = (open.as_mut_ptr() as u64, private.as_mut_ptr() as u64);
    target.register_memory(oaddr, MIB, "cpu:0", true).unwrap();
    target.register_memory(paddr, MIB, "cpu:0", false).unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    let mut local = vec![1u8; 2 * MIB as usize];
    let laddr = local.as_mut_ptr() as u64;
    initiator
        .register_memory(laddr, 2 * MIB, "cpu:0", false)
        .unwrap();
    // Beyond the region, straddling its end, and a region not remotely accessible.
    assert!(!ok(&initiator, req(Op::Write, laddr, id, oaddr + MIB, 16)));
    assert!(!ok(
        &initiator,
        req(Op::Write, laddr, id, oaddr + MIB - 8, 16)
    ));
    assert!(!ok(&initiator, req(Op::Read, laddr, id, paddr, 16)));
    assert!(!ok(&initiator, req(Op::Write, laddr, id, paddr, 16)));
    assert!(
        private.iter().all(|b| *b == 7),
        "the private region is untouched"
    );
    // The path still works afterwards.
    assert!(ok(&initiator, req(Op::Write, laddr, id, oaddr, MIB)));
    assert!(open.iter().all(|b| *b == 1));
    assert_same_host_moved(&initiator, MIB);
    drop(local);
}

#[test]
fn disabled_same_host_keeps_sockets() {
    let config = Config {
        disable_same_host: true,
        ..Config::global().clone()
    };
    let target = engine_with(config.clone());
    let initiator = engine_with(config);
    let mut remote = vec![0u8; MIB as usize];
    let raddr = remote.as_mut_ptr() as u64;
    target.register_memory(raddr, MIB, "cpu:0", true).unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    assert!(initiator
        .segment_descriptor(id)
        .unwrap()
        .same_host
        .is_none());
    let data = pattern(MIB as usize, 3);
    assert_eq!(round_trip(&initiator, id, raddr, &data), data);
    assert_eq!(initiator.same_host_bytes(), 0);
    // The registration must not outlive `remote`: unregistering waits for the target's
    // threads to let go of the region (what orders their writes before the free).
    target.unregister_memory(raddr).unwrap();
}

/// Our `transfer_engine_bench --mode=target` (optionally under `wrapper`), with the
/// segment name it announces.
fn bench_target(wrapper: &[&str], buffer: u64) -> (ChildGuard, String) {
    let bench = env!("CARGO_BIN_EXE_transfer_engine_bench");
    let mut argv: Vec<String> = wrapper.iter().map(|s| s.to_string()).collect();
    argv.push(bench.into());
    argv.extend([
        "--mode=target".into(),
        "--metadata_server=P2PHANDSHAKE".into(),
        "--local_server_name=127.0.0.1".into(),
        "--auto_discovery".into(),
        format!("--buffer_size={buffer}"),
    ]);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env("MC_TCP_BIND_ADDRESS", "127.0.0.1")
        .stdin(Stdio::null());
    let mut guard = ChildGuard::spawn(cmd, "same-host-target", false);
    let deadline = Instant::now() + Duration::from_secs(60);
    let name = loop {
        let log = guard.log_tail();
        if let Some(name) = log.lines().find_map(|l| l.split("listening on ").nth(1)) {
            break name.trim().to_string();
        }
        assert!(
            guard.exited().is_none() && Instant::now() < deadline,
            "the target did not start\n{log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    (guard, name)
}

/// The address of the target's buffer: the only remotely accessible region it
/// publishes.
fn target_buffer(e: &TransferEngine, id: i32) -> u64 {
    let desc = e.segment_descriptor(id).unwrap();
    desc.buffers.first().expect("one buffer").addr
}

#[test]
fn another_process_on_this_host() {
    let (_target, name) = bench_target(&[], 64 * MIB);
    let initiator = engine();
    let id = initiator.open_segment(&name).unwrap();
    assert!(initiator
        .segment_descriptor(id)
        .unwrap()
        .same_host
        .is_some());
    let remote = target_buffer(&initiator, id);
    let data = pattern(16 * MIB as usize, 9);
    assert_eq!(round_trip(&initiator, id, remote + 4096, &data), data);
    assert_same_host_moved(&initiator, 32 * MIB);
}

#[test]
fn an_initiator_of_another_user_goes_over_tcp() {
    let setpriv = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ];
    let runs = Command::new(setpriv[0])
        .args(&setpriv[1..])
        .arg("true")
        .status()
        .is_ok_and(|s| s.success());
    if !runs {
        eprintln!("SKIP an_initiator_of_another_user_goes_over_tcp: setpriv cannot switch users");
        return;
    }
    // This process (root) is the target; our bench, as nobody, writes into it. The
    // region is shared memory, but its file goes to the target's own user only, and
    // the kernel refuses nobody's copies into root's memory: the bench says so once
    // and moves the bytes over TCP.
    let target = engine();
    let (raddr, file) = memfd_memory(4 * MIB, None);
    // SAFETY: the test's own 4 MiB mapping.
    let remote = unsafe { std::slice::from_raw_parts_mut(raddr as *mut u8, 4 * MIB as usize) };
    remote.fill(0xAA);
    target
        .register_memory(raddr, remote.len() as u64, "cpu:0", true)
        .unwrap();
    target.share_memory(raddr, file, 0).unwrap();
    let mut cmd = Command::new(setpriv[0]);
    cmd.args(&setpriv[1..])
        .arg(env!("CARGO_BIN_EXE_transfer_engine_bench"))
        .args([
            "--metadata_server=P2PHANDSHAKE",
            "--local_server_name=127.0.0.1",
            &format!("--segment_id={}", target.segment_name()),
            "--operation=write",
            "--threads=1",
            "--batch_size=4",
            "--block_size=65536",
            "--buffer_size=262144",
            "--duration=1",
        ])
        .env("MC_TCP_BIND_ADDRESS", "127.0.0.1")
        .stdin(Stdio::null());
    let mut bench = ChildGuard::spawn(cmd, "same-host-nobody", false);
    let status = bench.wait_until(Instant::now() + Duration::from_secs(60));
    let log = bench.log_tail();
    assert!(status.is_some_and(|s| s.success()), "bench failed\n{log}");
    assert!(log.contains("Test completed"), "{log}");
    assert_eq!(log.matches("same-host path to").count(), 1, "{log}");
    assert!(
        remote[..262144].iter().any(|b| *b != 0xAA),
        "nothing was written"
    );
    drop(target);
}

/// 256 MiB of `fill` registered with `e`, and its address.
fn registered(e: &TransferEngine, fill: u8) -> (Vec<u8>, u64) {
    let mut local = vec![fill; 256 * MIB as usize];
    let addr = local.as_mut_ptr() as u64;
    e.register_memory(addr, local.len() as u64, "cpu:0", false)
        .unwrap();
    (local, addr)
}

/// Sends `sig` (`-KILL`, `-STOP`) to process `pid` 20 ms from now, from a thread.
fn signal_soon(pid: u32, sig: &'static str) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
    })
}

#[test]
fn a_target_killed_mid_transfer_fails_the_transfer_only() {
    let (mut target, name) = bench_target(&[], 256 * MIB);
    let initiator = engine();
    let id = initiator.open_segment(&name).unwrap();
    let remote = target_buffer(&initiator, id);
    let (mut local, laddr) = registered(&initiator, 3);
    let killer = signal_soon(target.pid(), "-KILL");
    // Writes until one fails: the target is gone.
    let deadline = Instant::now() + Duration::from_secs(60);
    while ok(&initiator, req(Op::Write, laddr, id, remote, 256 * MIB)) {
        assert!(Instant::now() < deadline, "the target never went away");
    }
    killer.join().unwrap();
    let _ = target.child.wait();
    // The initiator lives on and still works with its own memory.
    local[0] = 9;
    assert_eq!(local[0], 9);
}

#[test]
fn a_target_paused_mid_batch_over_tcp_fails_the_batch_within_its_deadline() {
    let (target, name) = bench_target(&[], 256 * MIB);
    // Over sockets, where a paused target stops answering (through this host's mapping
    // of its memory a paused target is still written, as it should be); a transfer
    // that moves nothing for 1 s gives up.
    let initiator = engine_with(Config {
        disable_same_host: true,
        tcp_progress_timeout_secs: 1,
        tcp_status_timeout_secs: 1,
        ..Config::global().clone()
    });
    let id = initiator.open_segment(&name).unwrap();
    let remote = target_buffer(&initiator, id);
    let (_local, laddr) = registered(&initiator, 5);
    let slice = 16 * MIB;
    let batch: Vec<TransferRequest> = (0..16)
        .map(|i| req(Op::Write, laddr + i * slice, id, remote + i * slice, slice))
        .collect();
    let pid = target.pid();
    let pauser = signal_soon(pid, "-STOP");
    // Batches go until one ends with a failure: the target stopped answering. Each
    // request ends, none is left pending (`run` gives up on a task only after
    // minutes, and then its status is not final).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let statuses = run(&initiator, &batch);
        assert!(
            statuses.iter().all(|s| s.is_terminal()),
            "a request never ended: {statuses:?}"
        );
        if statuses.contains(&TaskStatus::Failed) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the paused target never failed a batch"
        );
    }
    pauser.join().unwrap();
    // Still paused: a fresh batch fails as a whole, it does not hang.
    let statuses = run(&initiator, &batch[..2]);
    assert_eq!(statuses, [TaskStatus::Failed, TaskStatus::Failed]);
    let _ = Command::new("kill")
        .args(["-CONT", &pid.to_string()])
        .status();
    drop(target);
}

#[test]
fn one_submission_of_many_requests_fails_only_the_refused_ones() {
    let peer = served(4 * MIB as usize, engine);
    let (initiator, raddr, id) = (&peer.initiator, peer.raddr, peer.id);
    let mut local = pattern(4 * MIB as usize, 11);
    let laddr = local.as_mut_ptr() as u64;
    initiator
        .register_memory(laddr, local.len() as u64, "cpu:0", false)
        .unwrap();
    // 64 writes of 64 KiB, every 10th aimed past the region.
    let block = 64 << 10;
    let reqs: Vec<TransferRequest> = (0..64u64)
        .map(|i| {
            let remote = if i % 10 == 9 {
                raddr + 4 * MIB + i
            } else {
                raddr + i * block
            };
            req(Op::Write, laddr + i * block, id, remote, block)
        })
        .collect();
    let batch = initiator.allocate_batch(reqs.len());
    initiator.submit(batch, &reqs).unwrap();
    for i in 0..reqs.len() {
        let (status, _) = initiator.transfer_status(batch, i).unwrap();
        let expected = if i % 10 == 9 {
            TaskStatus::Failed
        } else {
            TaskStatus::Completed
        };
        assert_eq!(status, expected, "request {i}");
    }
    initiator.free_batch(batch).unwrap();
    for i in (0..64usize).filter(|i| i % 10 != 9) {
        let r = i * block as usize..(i + 1) * block as usize;
        assert_eq!(peer.remote[r.clone()], local[r], "block {i}");
    }
    local.clear();
}

/// `len` bytes of a new sealed memfd mapped shared, at `at` when given (replacing what
/// is mapped there); the address and the file. The mapping is never unmapped (tests).
fn memfd_memory(len: u64, at: Option<u64>) -> (u64, std::os::fd::OwnedFd) {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: plain syscalls on a descriptor created and owned here; the fixed mapping
    // only replaces memory this test owns.
    unsafe {
        let fd = libc::memfd_create(
            c"test".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        );
        assert!(fd >= 0);
        let file = OwnedFd::from_raw_fd(fd);
        assert_eq!(libc::ftruncate(fd, len as libc::off_t), 0);
        assert_eq!(
            libc::fcntl(
                fd,
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW
            ),
            0
        );
        let flags = libc::MAP_SHARED | at.map_or(0, |_| libc::MAP_FIXED);
        let p = libc::mmap(
            at.unwrap_or(0) as *mut libc::c_void,
            len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        (p as u64, file)
    }
}

fn bytes_at(addr: u64, len: usize) -> Vec<u8> {
    // SAFETY: the test's own live mapping of at least `len` bytes.
    unsafe { std::slice::from_raw_parts(addr as *const u8, len) }.to_vec()
}

#[test]
fn shared_regions_are_mapped_once_and_never_reached_once_unregistered() {
    let target = engine();
    let initiator = engine();
    let len = 4 * MIB;
    let (addr, file) = memfd_memory(len, None);
    target.register_memory(addr, len, "cpu:0", true).unwrap();
    target
        .share_memory(addr, file.try_clone().unwrap(), 0)
        .unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    let data = pattern(len as usize, 5);
    assert_eq!(round_trip(&initiator, id, addr, &data), data);
    assert_eq!(bytes_at(addr, len as usize), data);
    let small = pattern(4096, 6);
    assert_eq!(round_trip(&initiator, id, addr + 12345, &small), small);
    assert!(
        initiator.same_host_mapped_bytes() >= 2 * (len + 4096),
        "{} bytes through the mapping",
        initiator.same_host_mapped_bytes()
    );
    // Regions that are not remotely accessible are never shared.
    let (private, private_file) = memfd_memory(MIB, None);
    target
        .register_memory(private, MIB, "cpu:0", false)
        .unwrap();
    assert!(target.share_memory(private, private_file, 0).is_err());
    // Past the end of the region: refused, as over TCP.
    let mut local = vec![1u8; 8192];
    let laddr = local.as_mut_ptr() as u64;
    initiator
        .register_memory(laddr, 8192, "cpu:0", false)
        .unwrap();
    assert!(!ok(
        &initiator,
        req(Op::Write, laddr, id, addr + len - 100, 200)
    ));
    // Unregistered: the next write fails rather than landing in the old file.
    target.unregister_memory(addr).unwrap();
    assert!(!ok(&initiator, req(Op::Write, laddr, id, addr, 4096)));
    // New memory at the same address, registered and shared: writes reach it, and
    // the old file keeps what it had.
    let (again, new_file) = memfd_memory(len, Some(addr));
    assert_eq!(again, addr);
    target.register_memory(addr, len, "cpu:0", true).unwrap();
    target.share_memory(addr, new_file, 0).unwrap();
    let newer = pattern(8192, 7);
    local.copy_from_slice(&newer);
    assert!(ok(&initiator, req(Op::Write, laddr, id, addr, 8192)));
    assert_eq!(bytes_at(addr, 8192), newer);
    let old = mooncake::host::mapping::Mapping::from_shared_file(file, len).unwrap();
    assert_eq!(bytes_at(old.addr(), 8192), data[..8192]);
    initiator.unregister_memory(laddr).unwrap();
}

#[test]
fn pages_the_target_already_backs_are_mapped_ahead_of_the_copies() {
    let target = engine();
    let initiator = engine();
    let len = 4 * MIB;
    let (addr, file) = memfd_memory(len, None);
    // The owner wrote every page: all are backed, so all can be mapped ahead.
    // SAFETY: the test's own live mapping of `len` bytes.
    unsafe { std::ptr::write_bytes(addr as usize as *mut u8, 3, len as usize) };
    target.register_memory(addr, len, "cpu:0", true).unwrap();
    target.share_memory(addr, file, 0).unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    assert_eq!(initiator.same_host_premapped_bytes(), 0);
    // The first copy maps the region here and queues the rest of it to be mapped.
    let small = pattern(4096, 9);
    assert_eq!(round_trip(&initiator, id, addr, &small), small);
    assert!(initiator.same_host_mapped_bytes() >= 2 * 4096);
    let deadline = Instant::now() + Duration::from_secs(60);
    while initiator.same_host_premapped_bytes() < len {
        assert!(
            Instant::now() < deadline,
            "{} of {len} bytes mapped ahead",
            initiator.same_host_premapped_bytes()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(bytes_at(addr + 4096, 4096), vec![3u8; 4096]);
}

#[test]
fn memory_shared_by_a_killed_store_owner_is_never_claimed_written() {
    #[path = "store_support/tcp_master.rs"]
    mod tcp_master;
    use mooncake::master::{MasterConfig, MasterService};
    use mooncake::store::{Client, ReplicateConfig, SetupConfig};
    let master = MasterService::new(MasterConfig::default());
    let master_addr = tcp_master::serve(master.clone());
    let port = 20000 + (mooncake::host::net::random_u64() % 40000) as u16;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mooncake_client"));
    cmd.args([
        "--host=127.0.0.1",
        &format!("--port={port}"),
        "--metadata_server=P2PHANDSHAKE",
        &format!("--master_server_address={master_addr}"),
        "--global_segment_size=256MB",
    ]);
    let mut owner = ChildGuard::spawn(cmd, "mooncake_client", false);
    let cfg = SetupConfig {
        local_hostname: "127.0.0.1".into(),
        metadata_server: "P2PHANDSHAKE".into(),
        local_buffer_size: 64 * MIB,
        master_server_addr: master_addr,
        ..SetupConfig::default()
    };
    let client = Client::setup(&cfg).expect("pure client");
    let value = pattern(8 * MIB as usize, 9);
    let deadline = Instant::now() + Duration::from_secs(30);
    while client
        .put("first", &value, &ReplicateConfig::default())
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "the owner never mounted its segment"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(client.get("first").unwrap(), value);
    owner.child.kill().unwrap();
    owner.child.wait().unwrap();
    // The only segment is the dead owner's: puts fail (none is claimed written into
    // the file this process still maps) and reads of what it held fail, until the
    // master forgets it; this process carries on.
    for i in 0..5 {
        let r = client.put(&format!("after{i}"), &value, &ReplicateConfig::default());
        assert!(r.is_err(), "put {i} into a dead owner succeeded");
    }
    assert!(client.get("first").is_err());
    client.close();
}

#[test]
fn caller_memory_is_leased_once_and_never_written_once_unregistered() {
    use std::sync::Arc;
    let block = MIB;
    let blocks = 8u64;
    let len = block * blocks;
    let Served {
        target,
        initiator,
        remote,
        raddr,
        id,
    } = served(len as usize, engine);
    let data = pattern(len as usize, 3);
    assert_eq!(round_trip(&initiator, id, raddr, &data), data);
    assert_eq!(remote, data);
    if process_vm_allowed() {
        assert!(
            initiator.same_host_leased_bytes() >= 2 * len,
            "{} bytes through the lease",
            initiator.same_host_leased_bytes()
        );
    }
    let initiator = Arc::new(initiator);
    for cycle in 0..3 {
        if cycle > 0 {
            target.register_memory(raddr, len, "cpu:0", true).unwrap();
        }
        unregistered_while_written(&target, &initiator, id, raddr, block, blocks);
    }
    // Registered again: a new lease, and writes land again.
    let leased_before = initiator.same_host_leased_bytes();
    target.register_memory(raddr, len, "cpu:0", true).unwrap();
    let newer = pattern(len as usize, 8);
    assert_eq!(round_trip(&initiator, id, raddr, &newer), newer);
    assert_eq!(bytes_at(raddr, len as usize), newer);
    if process_vm_allowed() {
        assert!(initiator.same_host_leased_bytes() >= leased_before + 2 * len);
    }
    target.unregister_memory(raddr).unwrap();
    drop(remote);
}

/// A writer keeps overwriting the target's region at `raddr` (`blocks` of `block`
/// bytes), a new fill each time, in one submission of several requests, while the
/// target unregisters it: once the unregistration returned, nothing lands there.
fn unregistered_while_written(
    target: &TransferEngine,
    initiator: &std::sync::Arc<TransferEngine>,
    id: i32,
    raddr: u64,
    block: u64,
    blocks: u64,
) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let len = block * blocks;
    let written = Arc::new(AtomicU64::new(0));
    let unregistered = Arc::new(AtomicBool::new(false));
    let writer = {
        let (initiator, written, unregistered) =
            (initiator.clone(), written.clone(), unregistered.clone());
        std::thread::spawn(move || {
            let mut local = vec![0u8; len as usize];
            let laddr = local.as_mut_ptr() as u64;
            initiator
                .register_memory(laddr, len, "cpu:0", false)
                .unwrap();
            let mut written_after = 0;
            let mut tries_after = 0;
            for round in 0u64.. {
                let after = unregistered.load(Ordering::SeqCst);
                if after && tries_after == 20 {
                    break;
                }
                local.fill((round % 251) as u8 + 1);
                let reqs: Vec<_> = (0..blocks)
                    .map(|b| req(Op::Write, laddr + b * block, id, raddr + b * block, block))
                    .collect();
                let all = run(&initiator, &reqs)
                    .iter()
                    .all(|s| *s == TaskStatus::Completed);
                if after {
                    tries_after += 1;
                    written_after += u32::from(all);
                } else if all {
                    written.fetch_add(1, Ordering::SeqCst);
                }
            }
            initiator.unregister_memory(laddr).unwrap();
            written_after
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while written.load(Ordering::SeqCst) < 3 {
        assert!(Instant::now() < deadline, "the writer never wrote");
        std::thread::sleep(Duration::from_millis(1));
    }
    target.unregister_memory(raddr).unwrap();
    // Every copy under way ended before the unregistration returned: nothing lands
    // in the memory from here on.
    let snapshot = bytes_at(raddr, len as usize);
    unregistered.store(true, Ordering::SeqCst);
    assert_eq!(
        writer.join().unwrap(),
        0,
        "writes succeeded after the unregistration"
    );
    assert_eq!(bytes_at(raddr, len as usize), snapshot);
}

#[test]
fn a_target_that_does_not_lease_is_asked_per_batch() {
    let target = engine_with(Config {
        same_host_no_lease: true,
        ..Config::global().clone()
    });
    let initiator = engine();
    let mut remote = vec![0u8; MIB as usize];
    let raddr = remote.as_mut_ptr() as u64;
    target.register_memory(raddr, MIB, "cpu:0", true).unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    let data = pattern(MIB as usize, 4);
    assert_eq!(round_trip(&initiator, id, raddr, &data), data);
    assert_eq!(remote, data);
    assert_same_host_moved(&initiator, 2 * MIB);
    assert_eq!(initiator.same_host_leased_bytes(), 0);
    target.unregister_memory(raddr).unwrap();
}
