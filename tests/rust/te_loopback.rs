//! Two engines in one process over real TCP sockets (P2PHANDSHAKE), and the own
//! segment's memcpy path: data verified byte for byte.

use mooncake::te::{Op, TaskStatus, TransferEngine, TransferRequest};
use std::time::{Duration, Instant};

fn engine() -> TransferEngine {
    TransferEngine::new("P2PHANDSHAKE", "127.0.0.1:0", true).expect("engine")
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn wait(e: &TransferEngine, batch: u64, tasks: usize) -> Vec<TaskStatus> {
    let deadline = Instant::now() + Duration::from_secs(30);
    (0..tasks)
        .map(|t| loop {
            let (s, _) = e.transfer_status(batch, t).unwrap();
            if s.is_terminal() || Instant::now() > deadline {
                return s;
            }
            std::thread::yield_now();
        })
        .collect()
}

#[test]
fn write_then_read_between_two_engines() {
    let target = engine();
    let initiator = engine();
    let mut remote = vec![0u8; 4 << 20];
    let mut local = pattern(4 << 20, 7);
    let raddr = remote.as_mut_ptr() as u64;
    let laddr = local.as_mut_ptr() as u64;
    target
        .register_memory(raddr, remote.len() as u64, "cpu:0", true)
        .unwrap();
    initiator
        .register_memory(laddr, local.len() as u64, "cpu:0", true)
        .unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    assert_eq!(id, 1);
    assert_eq!(initiator.open_segment(target.segment_name()).unwrap(), 1);
    assert_eq!(initiator.open_segment(initiator.segment_name()).unwrap(), 0);

    let sizes = [1u64, 4096, 65536, 1 << 20, (1 << 20) + 13];
    let batch = initiator.allocate_batch(sizes.len());
    let mut offset = 0u64;
    let reqs: Vec<_> = sizes
        .iter()
        .map(|&len| {
            let r = TransferRequest {
                op: Op::Write,
                source: laddr + offset,
                target_id: id,
                target_offset: raddr + offset,
                length: len,
            };
            offset += len;
            r
        })
        .collect();
    initiator.submit(batch, &reqs).unwrap();
    assert!(wait(&initiator, batch, reqs.len())
        .iter()
        .all(|s| *s == TaskStatus::Completed));
    initiator.free_batch(batch).unwrap();
    assert_eq!(&remote[..offset as usize], &local[..offset as usize]);

    let fresh = pattern(2 << 20, 99);
    remote[..fresh.len()].copy_from_slice(&fresh);
    let batch = initiator.allocate_batch(2);
    let reqs = [
        TransferRequest {
            op: Op::Read,
            source: laddr,
            target_id: id,
            target_offset: raddr,
            length: 1 << 20,
        },
        TransferRequest {
            op: Op::Read,
            source: laddr + (1 << 20),
            target_id: id,
            target_offset: raddr + (1 << 20),
            length: 1 << 20,
        },
    ];
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
    let target = engine();
    let initiator = engine();
    let mut remote = vec![0u8; 1 << 20];
    let mut local = pattern(1 << 20, 3);
    let raddr = remote.as_mut_ptr() as u64;
    let laddr = local.as_mut_ptr() as u64;
    target
        .register_memory(raddr, remote.len() as u64, "cpu:0", true)
        .unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    let mut reqs = Vec::new();
    for i in 0..16u64 {
        let bad = i == 5;
        reqs.push(TransferRequest {
            op: Op::Write,
            source: laddr + i * 4096,
            target_id: id,
            target_offset: if bad {
                raddr + (1 << 20) - 10
            } else {
                raddr + i * 4096
            },
            length: 4096,
        });
    }
    let batch = initiator.allocate_batch(reqs.len());
    initiator.submit(batch, &reqs).unwrap();
    let st = wait(&initiator, batch, reqs.len());
    for (i, s) in st.iter().enumerate() {
        let expected = if i == 5 {
            TaskStatus::Failed
        } else {
            TaskStatus::Completed
        };
        assert_eq!(*s, expected, "task {i}");
    }
    for i in (0..16).filter(|i| *i != 5) {
        assert_eq!(
            &remote[i * 4096..(i + 1) * 4096],
            &local[i * 4096..(i + 1) * 4096]
        );
    }
    initiator.free_batch(batch).unwrap();
}

#[test]
fn local_segment_copy_is_validated() {
    let e = engine();
    let mut region = vec![0u8; 8192];
    let src = pattern(4096, 1);
    let raddr = region.as_mut_ptr() as u64;
    e.register_memory(raddr, 8192, "cpu:0", false).unwrap();
    let batch = e.allocate_batch(2);
    let reqs = [
        TransferRequest {
            op: Op::Write,
            source: src.as_ptr() as u64,
            target_id: 0,
            target_offset: raddr + 4096,
            length: 4096,
        },
        TransferRequest {
            op: Op::Write,
            source: src.as_ptr() as u64,
            target_id: 0,
            target_offset: raddr + 8000,
            length: 4096,
        },
    ];
    e.submit(batch, &reqs).unwrap();
    assert_eq!(
        wait(&e, batch, 2),
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
    let target = engine();
    let initiator = engine();
    let mut remote = vec![0u8; 1 << 20];
    let local = pattern(1 << 20, 11);
    let raddr = remote.as_mut_ptr() as u64;
    target
        .register_memory(raddr, remote.len() as u64, "cpu:0", true)
        .unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    let bad = |i: u64| i % 3 == 1;
    let reqs: Vec<_> = (0..24u64)
        .map(|i| TransferRequest {
            op: Op::Write,
            source: local.as_ptr() as u64 + i * 1024,
            target_id: id,
            target_offset: if bad(i) { 0x10 } else { raddr + i * 1024 },
            length: 1024,
        })
        .collect();
    let batch = initiator.allocate_batch(reqs.len());
    initiator.submit(batch, &reqs).unwrap();
    for (i, s) in wait(&initiator, batch, reqs.len()).iter().enumerate() {
        let expected = if bad(i as u64) {
            TaskStatus::Failed
        } else {
            TaskStatus::Completed
        };
        assert_eq!(*s, expected, "task {i}");
    }
    for i in (0..24usize).filter(|i| !bad(*i as u64)) {
        assert_eq!(
            &remote[i * 1024..(i + 1) * 1024],
            &local[i * 1024..(i + 1) * 1024]
        );
    }
    initiator.free_batch(batch).unwrap();
}
