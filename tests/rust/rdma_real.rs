//! The RDMA transport on real verbs: two engines in one process on the device named
//! by `MOONCAKE_INTEROP_RDMA` (`rxe0` in `scripts/rxe-vm.sh`, run by
//! `scripts/test-rdma-vm.sh`). Without it every test prints a skip line and passes:
//! hosts without RDMA run the same transport over the fake fabric (`rdma_fake`).

mod te_support;

use mooncake::config::Config;
use mooncake::te::{Op, TaskStatus, TransferEngine};
use te_support::{pattern, req, run};

fn device(test: &str) -> Option<String> {
    match std::env::var("MOONCAKE_INTEROP_RDMA") {
        Ok(d) if !d.trim().is_empty() => Some(d),
        _ => {
            eprintln!("SKIPPED {test}: no RDMA device (MOONCAKE_INTEROP_RDMA is not set)");
            None
        }
    }
}

fn engine(dev: &str) -> TransferEngine {
    let e = TransferEngine::with_config(Config::default(), "P2PHANDSHAKE", "127.0.0.1:0", false)
        .expect("engine");
    let topology = format!(r#"{{"cpu:0": [["{dev}"], []]}}"#);
    e.install("rdma", Some(&topology))
        .expect("rdma on the device");
    e
}

#[test]
fn writes_and_reads_over_real_verbs_arrive_byte_for_byte() {
    let Some(dev) = device("writes_and_reads_over_real_verbs_arrive_byte_for_byte") else {
        return;
    };
    let target = engine(&dev);
    let initiator = engine(&dev);
    let len = 16 << 20;
    let mut remote = vec![0u8; len];
    let mut local = pattern(len, 3);
    let (ra, la) = (remote.as_mut_ptr() as u64, local.as_mut_ptr() as u64);
    target
        .register_memory(ra, len as u64, "cpu:0", true)
        .unwrap();
    initiator
        .register_memory(la, len as u64, "cpu:0", true)
        .unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    let desc = initiator.segment_descriptor(id).unwrap();
    assert_eq!(desc.protocol, "rdma");
    assert_eq!(desc.rdma.as_ref().unwrap().devices[0].name, dev);

    let sizes = [1u64, 4097, 65536, 65536 + 16384 + 1, 3 << 20, 8 << 20];
    let mut reqs = Vec::new();
    let mut at = 0;
    for &n in &sizes {
        reqs.push(req(Op::Write, la + at, id, ra + at, n));
        at += n + 5;
    }
    assert!(run(&initiator, &reqs)
        .iter()
        .all(|s| *s == TaskStatus::Completed));
    let mut at = 0usize;
    for &n in &sizes {
        assert_eq!(
            remote[at..at + n as usize],
            local[at..at + n as usize],
            "{n} bytes"
        );
        at += n as usize + 5;
    }

    let fresh = pattern(len, 77);
    remote.copy_from_slice(&fresh);
    let st = run(
        &initiator,
        &[
            req(Op::Read, la, id, ra, 5 << 20),
            req(Op::Read, la + (5 << 20), id, ra + (5 << 20), 11 << 20),
        ],
    );
    assert_eq!(st, vec![TaskStatus::Completed; 2]);
    assert_eq!(local, fresh);

    let loads = initiator.rdma().unwrap().nic_loads();
    assert_eq!(loads.len(), 1);
    assert_eq!(loads[0].0, dev);
    assert_eq!(loads[0].1, 0, "nothing left in flight");
}

#[test]
fn the_nic_refuses_what_the_target_did_not_open() {
    let Some(dev) = device("the_nic_refuses_what_the_target_did_not_open") else {
        return;
    };
    let mut cfg = Config::default();
    cfg.rdma.retry_count = 2;
    let target = engine(&dev);
    let initiator = TransferEngine::with_config(cfg, "P2PHANDSHAKE", "127.0.0.1:0", false).unwrap();
    initiator
        .install("rdma", Some(&format!(r#"{{"cpu:0": [["{dev}"], []]}}"#)))
        .unwrap();
    let mut open = vec![0u8; 1 << 20];
    let mut private = vec![0u8; 1 << 20];
    let local = pattern(1 << 20, 9);
    let (oa, pa, la) = (
        open.as_mut_ptr() as u64,
        private.as_mut_ptr() as u64,
        local.as_ptr() as u64,
    );
    target.register_memory(oa, 1 << 20, "cpu:0", true).unwrap();
    target.register_memory(pa, 1 << 20, "cpu:0", false).unwrap();
    initiator
        .register_memory(la, 1 << 20, "cpu:0", true)
        .unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    let st = run(
        &initiator,
        &[
            req(Op::Write, la, id, pa, 4096),
            req(Op::Write, la, id, oa + (1 << 20) - 100, 4096),
            req(Op::Write, la, id, oa, 4096),
        ],
    );
    assert_eq!(
        st,
        vec![
            TaskStatus::Failed,
            TaskStatus::Failed,
            TaskStatus::Completed
        ]
    );
    assert!(
        private.iter().all(|b| *b == 0),
        "the NIC let a private write in"
    );
    assert!(open[(1 << 20) - 100..].iter().all(|b| *b == 0));
    assert_eq!(open[..4096], local[..4096]);
    // The endpoint recovers from the remote access error.
    let st = run(&initiator, &[req(Op::Write, la, id, oa + 8192, 65536)]);
    assert_eq!(st, vec![TaskStatus::Completed]);
    assert_eq!(open[8192..8192 + 65536], local[..65536]);
}
