//! Two engines in one process over real TCP sockets (P2PHANDSHAKE), and the own
//! segment's memcpy path: data verified byte for byte.

mod te_support;

use mooncake::te::{Op, TaskStatus, TransferEngine};
use te_support::{failing, in_two, pattern, req, run, served, wait, Served};

fn engine() -> TransferEngine {
    TransferEngine::new("P2PHANDSHAKE", "127.0.0.1:0", true).expect("engine")
}

#[test]
fn write_then_read_between_two_engines() {
    let Served {
        target,
        initiator,
        mut remote,
        raddr,
        id,
    } = served(4 << 20, engine);
    let mut local = pattern(4 << 20, 7);
    let laddr = local.as_mut_ptr() as u64;
    initiator
        .register_memory(laddr, local.len() as u64, "cpu:0", true)
        .unwrap();
    assert_eq!(id, 1);
    assert_eq!(initiator.open_segment(target.segment_name()).unwrap(), 1);
    assert_eq!(initiator.open_segment(initiator.segment_name()).unwrap(), 0);

    let sizes = [1u64, 4096, 65536, 1 << 20, (1 << 20) + 13];
    let mut offset = 0u64;
    let reqs: Vec<_> = sizes
        .iter()
        .map(|&len| {
            let r = req(Op::Write, laddr + offset, id, raddr + offset, len);
            offset += len;
            r
        })
        .collect();
    assert!(run(&initiator, &reqs)
        .iter()
        .all(|s| *s == TaskStatus::Completed));
    assert_eq!(&remote[..offset as usize], &local[..offset as usize]);

    let fresh = pattern(2 << 20, 99);
    remote[..fresh.len()].copy_from_slice(&fresh);
    let batch = initiator.allocate_batch(2);
    let reqs = in_two(Op::Read, laddr, id, raddr, 2 << 20, 1 << 20);
    initiator.submit(batch, &reqs).unwrap();
    assert!(wait(&initiator, batch, 2)
        .iter()
        .all(|s| *s == TaskStatus::Completed));
    assert_eq!(&local[..2 << 20], &fresh[..]);
    assert_eq!(initiator.transfer_status(batch, 0).unwrap().1, 1 << 20);
    initiator.free_batch(batch).unwrap();
}

#[test]
fn out_of_range_fails_only_its_own_request() {
    let peer = served(1 << 20, engine);
    let (raddr, id) = (peer.raddr, peer.id);
    let local = pattern(1 << 20, 3);
    let laddr = local.as_ptr() as u64;
    let bad = |i: u64| i == 5;
    let reqs: Vec<_> = (0..16u64)
        .map(|i| {
            let offset = if bad(i) {
                raddr + (1 << 20) - 10
            } else {
                raddr + i * 4096
            };
            req(Op::Write, laddr + i * 4096, id, offset, 4096)
        })
        .collect();
    assert_eq!(run(&peer.initiator, &reqs), failing(16, bad));
    for i in (0..16).filter(|i| *i != 5) {
        assert_eq!(
            &peer.remote[i * 4096..(i + 1) * 4096],
            &local[i * 4096..(i + 1) * 4096]
        );
    }
}

#[test]
fn local_segment_copy_is_validated() {
    let e = engine();
    let mut region = vec![0u8; 8192];
    let src = pattern(4096, 1);
    let raddr = region.as_mut_ptr() as u64;
    e.register_memory(raddr, 8192, "cpu:0", false).unwrap();
    let source = src.as_ptr() as u64;
    let reqs = [
        req(Op::Write, source, 0, raddr + 4096, 4096),
        req(Op::Write, source, 0, raddr + 8000, 4096),
    ];
    assert_eq!(
        run(&e, &reqs),
        vec![TaskStatus::Completed, TaskStatus::Failed]
    );
    assert_eq!(&region[4096..], &src[..]);
}

#[test]
fn notify_reaches_the_peer() {
    let a = engine();
    let b = engine();
    let id = a.open_segment(b.segment_name()).unwrap();
    a.send_notify(id, "n1", "hello").unwrap();
    let got = b.take_notifies();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].name.as_str(), got[0].msg.as_str()), ("n1", "hello"));
    a.probe(b.segment_name()).unwrap();
}

#[test]
fn many_rejections_in_one_pipelined_batch_fail_only_themselves() {
    let peer = served(1 << 20, engine);
    let (raddr, id) = (peer.raddr, peer.id);
    let local = pattern(1 << 20, 11);
    let bad = |i: u64| i % 3 == 1;
    let reqs: Vec<_> = (0..24u64)
        .map(|i| {
            let offset = if bad(i) { 0x10 } else { raddr + i * 1024 };
            req(
                Op::Write,
                local.as_ptr() as u64 + i * 1024,
                id,
                offset,
                1024,
            )
        })
        .collect();
    assert_eq!(run(&peer.initiator, &reqs), failing(24, bad));
    for i in (0..24usize).filter(|i| !bad(*i as u64)) {
        assert_eq!(
            &peer.remote[i * 1024..(i + 1) * 1024],
            &local[i * 1024..(i + 1) * 1024]
        );
    }
}
