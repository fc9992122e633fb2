//! The RDMA transport end to end over the in-process fake fabric: two engines with
//! their own NICs, the real handshake over their RPC daemons, slices posted on queue
//! pairs, completions, and the faults a real network produces (refused accesses,
//! retry-exceeded, flushed and lost completions, reordered completions, a NIC reset).
//! Every transfer is verified byte for byte.

mod te_support;

use mooncake::config::Config;
use mooncake::sys::verbs::fake::{Fabric, FakeVerbs};
use mooncake::sys::verbs::fake_state::Fault;
use mooncake::te::{Op, TaskStatus, TransferEngine};
use std::sync::Arc;
use std::time::Duration;
use te_support::{pattern, req, run, wait};

fn engine_with(
    fabric: &Arc<Fabric>,
    nics: &[&str],
    tweak: impl FnOnce(&mut Config),
) -> TransferEngine {
    let mut cfg = Config::global().clone();
    tweak(&mut cfg);
    let e = TransferEngine::with_config(cfg, "P2PHANDSHAKE", "127.0.0.1:0", false).expect("engine");
    let verbs = Arc::new(FakeVerbs::new(fabric.clone(), nics));
    e.install_rdma(Some(verbs), None, &[]).expect("rdma");
    e
}

fn engine(fabric: &Arc<Fabric>, nics: &[&str]) -> TransferEngine {
    engine_with(fabric, nics, |_| {})
}

/// A target engine with `len` registered bytes, an initiator with as many, and the
/// initiator's id for the target.
struct Pair {
    target: TransferEngine,
    initiator: TransferEngine,
    remote: Vec<u8>,
    local: Vec<u8>,
    id: i32,
}

impl Pair {
    fn new(fabric: &Arc<Fabric>, len: usize, tweak: impl Fn(&mut Config)) -> Pair {
        let target = engine_with(fabric, &["tgt_0", "tgt_1"], &tweak);
        let initiator = engine_with(fabric, &["ini_0", "ini_1"], &tweak);
        let mut remote = vec![0u8; len];
        let mut local = pattern(len, 7);
        target
            .register_memory(remote.as_mut_ptr() as u64, len as u64, "cpu:0", true)
            .unwrap();
        initiator
            .register_memory(local.as_mut_ptr() as u64, len as u64, "cpu:0", true)
            .unwrap();
        let id = initiator.open_segment(target.segment_name()).unwrap();
        Pair {
            target,
            initiator,
            remote,
            local,
            id,
        }
    }

    fn laddr(&self) -> u64 {
        self.local.as_ptr() as u64
    }

    fn raddr(&self) -> u64 {
        self.remote.as_ptr() as u64
    }

    fn write(&self, at: u64, len: u64) -> TaskStatus {
        run(
            &self.initiator,
            &[req(
                Op::Write,
                self.laddr() + at,
                self.id,
                self.raddr() + at,
                len,
            )],
        )[0]
    }
}

#[test]
fn writes_and_reads_over_two_nics_arrive_byte_for_byte() {
    let fabric = Fabric::new();
    let mut p = Pair::new(&fabric, 32 << 20, |_| {});
    assert!(p.initiator.has_transport("rdma"));
    assert!(!p.initiator.has_transport("tcp"));
    let desc = p.initiator.segment_descriptor(p.id).unwrap();
    assert_eq!(desc.protocol, "rdma");
    let rdma = desc.rdma.as_ref().unwrap();
    assert_eq!(rdma.devices.len(), 2);

    let sizes = [1u64, 4095, 65536, 65537, (1 << 20) + 13, 8 << 20, 7 << 20];
    let mut reqs = Vec::new();
    let mut at = 0u64;
    for &len in &sizes {
        reqs.push(req(Op::Write, p.laddr() + at, p.id, p.raddr() + at, len));
        at += len + 3;
    }
    assert!(run(&p.initiator, &reqs)
        .iter()
        .all(|s| *s == TaskStatus::Completed));
    let mut at = 0usize;
    for &len in &sizes {
        let r = at..at + len as usize;
        assert_eq!(p.remote[r.clone()], p.local[r], "write of {len} bytes");
        at += len as usize + 3;
    }

    let fresh = pattern(16 << 20, 99);
    p.remote[..fresh.len()].copy_from_slice(&fresh);
    let reqs = [
        req(Op::Read, p.laddr(), p.id, p.raddr(), 10 << 20),
        req(
            Op::Read,
            p.laddr() + (10 << 20),
            p.id,
            p.raddr() + (10 << 20),
            6 << 20,
        ),
    ];
    let batch = p.initiator.allocate_batch(2);
    p.initiator.submit(batch, &reqs).unwrap();
    assert_eq!(wait(&p.initiator, batch, 2), vec![TaskStatus::Completed; 2]);
    assert_eq!(
        p.initiator.transfer_status(batch, 1).unwrap().1,
        6 << 20,
        "transferred bytes of a completed task"
    );
    p.initiator.free_batch(batch).unwrap();
    assert_eq!(&p.local[..16 << 20], &fresh[..]);

    let loads = p.initiator.rdma().unwrap().nic_loads();
    assert_eq!(loads.len(), 2);
    assert!(
        loads
            .iter()
            .all(|(_, in_flight, rate)| *in_flight == 0 && *rate > 0.0),
        "both NICs carried slices and none is left in flight: {loads:?}"
    );
}

#[test]
fn refused_transfers_fail_only_themselves_and_leave_memory_untouched() {
    let fabric = Fabric::new();
    let p = Pair::new(&fabric, 1 << 20, |c| c.rdma.retry_count = 3);
    let mut private = vec![0u8; 4096];
    p.target
        .register_memory(private.as_mut_ptr() as u64, 4096, "cpu:0", false)
        .unwrap();
    let id = p
        .initiator
        .open_segment_no_cache(p.target.segment_name())
        .unwrap();
    let unregistered = pattern(4096, 5);
    let reqs = [
        req(Op::Write, p.laddr(), id, p.raddr(), 4096),
        // Past the end of the target's buffer.
        req(Op::Write, p.laddr(), id, p.raddr() + (1 << 20) - 10, 4096),
        // A buffer the target registered without remote access.
        req(Op::Write, p.laddr(), id, private.as_ptr() as u64, 4096),
        // Local memory not registered.
        req(
            Op::Write,
            unregistered.as_ptr() as u64,
            id,
            p.raddr() + 8192,
            4096,
        ),
        req(Op::Write, p.laddr() + 4096, id, p.raddr() + 4096, 4096),
    ];
    let st = run(&p.initiator, &reqs);
    assert_eq!(
        st,
        vec![
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Failed,
            TaskStatus::Failed,
            TaskStatus::Completed
        ]
    );
    assert!(
        private.iter().all(|b| *b == 0),
        "a refused write changed memory"
    );
    assert!(p.remote[8192..12288].iter().all(|b| *b == 0));
    assert_eq!(p.remote[..8192], p.local[..8192]);
    drop(private);
}

#[test]
fn failed_requests_are_retried_on_fresh_queue_pairs() {
    let fabric = Fabric::new();
    let p = Pair::new(&fabric, 4 << 20, |c| c.rdma.retry_count = 4);
    assert_eq!(p.write(0, 4096), TaskStatus::Completed);

    fabric.inject(&[Fault::RemoteAccess, Fault::RetryExceeded, Fault::QpError]);
    assert_eq!(p.write(0, 4 << 20), TaskStatus::Completed);
    assert_eq!(p.remote, p.local);

    // One slice, as many failures as attempts: it fails, and the next one works.
    fabric.inject(&[Fault::RetryExceeded; 4]);
    assert_eq!(p.write(0, 4096), TaskStatus::Failed);
    assert_eq!(p.write(8192, 4096), TaskStatus::Completed);
    assert_eq!(p.remote[8192..12288], p.local[8192..12288]);
}

#[test]
fn a_lost_completion_is_detected_and_the_request_retried() {
    let fabric = Fabric::new();
    let p = Pair::new(&fabric, 2 << 20, |c| {
        c.rdma.completion_timeout = Duration::from_secs(1);
    });
    assert_eq!(p.write(0, 4096), TaskStatus::Completed);
    fabric.inject(&[Fault::LostCompletion]);
    assert_eq!(p.write(4096, 4096), TaskStatus::Completed);
    // A lost completion among the first requests of a multi-slice transfer.
    fabric.inject(&[Fault::LostCompletion; 16]);
    assert_eq!(p.write(0, 2 << 20), TaskStatus::Completed);
    assert_eq!(p.remote, p.local);
}

#[test]
fn a_cancelled_task_loses_only_the_slices_not_yet_posted() {
    let fabric = Fabric::new();
    let p = Pair::new(&fabric, 1 << 20, |c| {
        c.rdma.qp_per_endpoint = 1;
        c.rdma.max_wr = 4;
        c.rdma.slice_size = 4096;
        c.rdma.completion_timeout = Duration::from_secs(600);
    });
    // Posted requests wait on the "link": the queue pairs fill up and the worker
    // keeps the rest of the 256 slices queued.
    fabric.hold();
    let batch = p.initiator.allocate_batch(1);
    p.initiator
        .submit(
            batch,
            &[req(Op::Write, p.laddr(), p.id, p.raddr(), 1 << 20)],
        )
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while fabric.held() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let posted = fabric.held();
    assert!(posted > 0, "nothing was posted");
    p.initiator.cancel_task(batch, 0).unwrap();
    fabric.release();
    assert_eq!(wait(&p.initiator, batch, 1), vec![TaskStatus::Canceled]);
    // Every slice either arrived whole or was never sent; only those posted before
    // the cancel (the queue pairs' room) arrived.
    let mut arrived = 0;
    for (remote, local) in p.remote.chunks(4096).zip(p.local.chunks(4096)) {
        if remote == local {
            arrived += 1;
        } else {
            assert!(remote.iter().all(|b| *b == 0), "a slice arrived in part");
        }
    }
    assert!(
        arrived >= posted,
        "{arrived} slices arrived, {posted} were posted"
    );
    assert!(arrived < 256, "every slice arrived: nothing was dropped");
    assert_eq!(fabric.held(), 0);
    p.initiator.free_batch(batch).unwrap();
}

#[test]
fn reordered_completions_settle_the_right_tasks() {
    let fabric = Fabric::new();
    fabric.set_reorder(true);
    let p = Pair::new(&fabric, 16 << 20, |c| c.rdma.qp_per_endpoint = 4);
    let mut reqs = Vec::new();
    let mut at = 0u64;
    for i in 0..64u64 {
        let len = 1 + (i * 37_813) % (256 << 10);
        reqs.push(req(Op::Write, p.laddr() + at, p.id, p.raddr() + at, len));
        at += len;
    }
    assert!(run(&p.initiator, &reqs)
        .iter()
        .all(|s| *s == TaskStatus::Completed));
    assert_eq!(p.remote[..at as usize], p.local[..at as usize]);
}

#[test]
fn a_reset_nic_on_either_side_is_reconnected() {
    let fabric = Fabric::new();
    let p = Pair::new(&fabric, 4 << 20, |_| {});
    assert_eq!(p.write(0, 1 << 20), TaskStatus::Completed);
    fabric.break_device("tgt_0");
    fabric.break_device("tgt_1");
    assert_eq!(p.write(1 << 20, 1 << 20), TaskStatus::Completed);
    fabric.break_device("ini_0");
    fabric.break_device("ini_1");
    assert_eq!(p.write(2 << 20, 2 << 20), TaskStatus::Completed);
    assert_eq!(p.remote, p.local);
}

#[test]
fn both_directions_at_once() {
    let fabric = Fabric::new();
    let a = engine(&fabric, &["a_0"]);
    let b = engine(&fabric, &["b_0"]);
    let len = 8 << 20;
    let mut a_mem = pattern(len, 1);
    let mut b_mem = pattern(len, 2);
    a.register_memory(a_mem.as_mut_ptr() as u64, len as u64, "cpu:0", true)
        .unwrap();
    b.register_memory(b_mem.as_mut_ptr() as u64, len as u64, "cpu:0", true)
        .unwrap();
    let a_sees_b = a.open_segment(b.segment_name()).unwrap();
    let b_sees_a = b.open_segment(a.segment_name()).unwrap();
    let half = (len / 2) as u64;
    let (a_base, b_base) = (a_mem.as_ptr() as u64, b_mem.as_ptr() as u64);
    std::thread::scope(|s| {
        s.spawn(|| {
            let st = run(&a, &[req(Op::Write, a_base, a_sees_b, b_base, half)]);
            assert_eq!(st, vec![TaskStatus::Completed]);
        });
        s.spawn(|| {
            let st = run(
                &b,
                &[req(Op::Write, b_base + half, b_sees_a, a_base + half, half)],
            );
            assert_eq!(st, vec![TaskStatus::Completed]);
        });
    });
    let (a_orig, b_orig) = (pattern(len, 1), pattern(len, 2));
    assert_eq!(b_mem[..len / 2], a_orig[..len / 2]);
    assert_eq!(a_mem[len / 2..], b_orig[len / 2..]);
}

#[test]
fn unregistering_and_dropping_release_every_verbs_resource() {
    let fabric = Fabric::new();
    {
        let p = Pair::new(&fabric, 1 << 20, |_| {});
        assert_eq!(p.write(0, 1 << 20), TaskStatus::Completed);
        assert!(fabric.queue_pairs() > 0);
        let regions = fabric.memory_regions();
        // Two NICs each: one region per NIC per registered buffer.
        assert_eq!(regions, 4);
        p.initiator.unregister_memory(p.laddr()).unwrap();
        assert_eq!(fabric.memory_regions(), 2);
        assert_eq!(p.write(0, 4096), TaskStatus::Failed, "unregistered source");
    }
    assert_eq!(fabric.memory_regions(), 0);
    assert_eq!(fabric.queue_pairs(), 0);
}

#[test]
fn the_local_segment_is_reached_through_the_nics_when_tcp_is_absent() {
    let fabric = Fabric::new();
    let mut cfg_local = Config::global().clone();
    cfg_local.disable_local_copy = true;
    let e = TransferEngine::with_config(cfg_local, "P2PHANDSHAKE", "127.0.0.1:0", false).unwrap();
    e.install_rdma(
        Some(Arc::new(FakeVerbs::new(fabric.clone(), &["solo_0"]))),
        None,
        &[],
    )
    .unwrap();
    let len = 1 << 20;
    let src = pattern(len, 3);
    let mut dst = vec![0u8; len];
    e.register_memory(src.as_ptr() as u64, len as u64, "cpu:0", true)
        .unwrap();
    e.register_memory(dst.as_mut_ptr() as u64, len as u64, "cpu:0", true)
        .unwrap();
    let before = fabric.posted();
    let st = run(
        &e,
        &[req(
            Op::Write,
            src.as_ptr() as u64,
            0,
            dst.as_ptr() as u64,
            len as u64,
        )],
    );
    assert_eq!(st, vec![TaskStatus::Completed]);
    assert!(
        fabric.posted() > before,
        "the copy went through the fake NIC"
    );
    assert_eq!(dst, src);
}

#[test]
fn an_rdma_engine_with_tcp_reaches_a_tcp_only_peer_over_tcp() {
    let fabric = Fabric::new();
    let a = engine(&fabric, &["mixed_0"]);
    a.install("tcp", None).unwrap();
    let b = TransferEngine::new("P2PHANDSHAKE", "127.0.0.1:0", false).unwrap();
    b.install("tcp", None).unwrap();
    let len = 1 << 20;
    let src = pattern(len, 4);
    let mut dst = vec![0u8; len];
    a.register_memory(src.as_ptr() as u64, len as u64, "cpu:0", true)
        .unwrap();
    b.register_memory(dst.as_mut_ptr() as u64, len as u64, "cpu:0", true)
        .unwrap();
    let id = a.open_segment(b.segment_name()).unwrap();
    let before = fabric.posted();
    let st = run(
        &a,
        &[req(
            Op::Write,
            src.as_ptr() as u64,
            id,
            dst.as_ptr() as u64,
            len as u64,
        )],
    );
    assert_eq!(st, vec![TaskStatus::Completed]);
    assert_eq!(fabric.posted(), before, "nothing went over RDMA");
    assert_eq!(dst, src);

    // And the TCP-only peer reaches the RDMA engine through the TCP port it publishes.
    let mut back = vec![0u8; len];
    b.register_memory(back.as_mut_ptr() as u64, len as u64, "cpu:0", true)
        .unwrap();
    let id = b.open_segment(a.segment_name()).unwrap();
    let st = run(
        &b,
        &[req(
            Op::Read,
            back.as_ptr() as u64,
            id,
            src.as_ptr() as u64,
            len as u64,
        )],
    );
    assert_eq!(st, vec![TaskStatus::Completed]);
    assert_eq!(back, src);
}

/// A peer that publishes `target`'s RDMA descriptor under its own address and
/// answers metadata requests, but never answers a QP handshake (a hung process).
struct MutePeer {
    name: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MutePeer {
    fn new(target: &TransferEngine) -> MutePeer {
        use mooncake::te::rpc::MsgType;
        use mooncake::te::rpc::{Frame, RpcClient};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let name = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let client = RpcClient::new(Duration::from_secs(5), 1 << 20);
        let real = target.segment_name().to_string();
        let (own, flag) = (name.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut hung = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let Ok((mut stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                stream.set_nonblocking(false).unwrap();
                let Ok(frame) = Frame::read_from(&mut stream, 1 << 20) else {
                    continue;
                };
                if frame.msg_type != MsgType::Metadata {
                    hung.push(stream);
                    continue;
                }
                let (host, port) = real.rsplit_once(':').unwrap();
                let mut desc = client
                    .exchange_metadata(host, port.parse().unwrap(), &serde_json::json!({}))
                    .unwrap();
                desc["name"] = own.clone().into();
                Frame::from_value(MsgType::Metadata, &desc)
                    .write_to(&mut stream)
                    .unwrap();
            }
        });
        MutePeer {
            name,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for MutePeer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_peer_that_never_answers_the_handshake_fails_its_transfers_only() {
    let fabric = Fabric::new();
    let p = Pair::new(&fabric, 1 << 20, |c| {
        c.rdma.handshake_timeout = Duration::from_secs(1);
        c.rdma.retry_count = 2;
    });
    let mute = MutePeer::new(&p.target);
    let mute_id = p.initiator.open_segment(&mute.name).unwrap();
    let batch = p.initiator.allocate_batch(1);
    p.initiator
        .submit(
            batch,
            &[req(Op::Write, p.laddr(), mute_id, p.raddr(), 1 << 20)],
        )
        .unwrap();
    // Meanwhile the healthy peer is served.
    assert_eq!(p.write(0, 1 << 20), TaskStatus::Completed);
    assert_eq!(wait(&p.initiator, batch, 1), vec![TaskStatus::Failed]);
    p.initiator.free_batch(batch).unwrap();
    assert_eq!(p.remote, p.local);
}
