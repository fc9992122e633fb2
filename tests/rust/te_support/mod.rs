//! Helpers shared by the Transfer Engine transport tests: byte patterns, requests, and
//! running a batch until every task is final.
#![allow(dead_code)]

use mooncake::te::{Op, TaskStatus, TransferEngine, TransferRequest};
use std::time::{Duration, Instant};

/// Only reached when a transfer hangs; nothing asserts on timing.
const TASK_DEADLINE: Duration = Duration::from_secs(120);

/// `len` bytes that differ from position to position and from seed to seed.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 11) as u8)
        .collect()
}

/// One request (keeps test bodies short).
pub fn req(
    op: Op,
    source: u64,
    target_id: i32,
    target_offset: u64,
    length: u64,
) -> TransferRequest {
    TransferRequest::new(op, source, target_id, target_offset, length)
}

/// `length` bytes moved as two requests, the first of `first` bytes.
pub fn in_two(
    op: Op,
    source: u64,
    target_id: i32,
    target_offset: u64,
    length: u64,
    first: u64,
) -> [TransferRequest; 2] {
    [
        req(op, source, target_id, target_offset, first),
        req(
            op,
            source + first,
            target_id,
            target_offset + first,
            length - first,
        ),
    ]
}

/// Polls the first `tasks` tasks of `batch` until each is final (TIMEOUT is not).
pub fn wait(e: &TransferEngine, batch: u64, tasks: usize) -> Vec<TaskStatus> {
    let deadline = Instant::now() + TASK_DEADLINE;
    (0..tasks)
        .map(|t| loop {
            let (s, _) = e.transfer_status(batch, t).unwrap();
            if s.is_terminal() || Instant::now() > deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(1));
        })
        .collect()
}

/// Runs `reqs` as one batch and returns each task's final status.
pub fn run(e: &TransferEngine, reqs: &[TransferRequest]) -> Vec<TaskStatus> {
    let batch = e.allocate_batch(reqs.len());
    e.submit(batch, reqs).unwrap();
    let st = wait(e, batch, reqs.len());
    e.free_batch(batch).unwrap();
    st
}

/// A target engine serving registered zero bytes, and an initiator that opened its
/// segment.
pub struct Served {
    /// The engine whose memory is written and read.
    pub target: TransferEngine,
    /// The engine that moves data, with the target's segment open.
    pub initiator: TransferEngine,
    /// The target's registered buffer.
    pub remote: Vec<u8>,
    /// `remote`'s address.
    pub raddr: u64,
    /// The target's segment id at the initiator.
    pub id: i32,
}

/// Two engines from `engine`, the target serving `len` bytes.
pub fn served(len: usize, engine: impl Fn() -> TransferEngine) -> Served {
    let target = engine();
    let initiator = engine();
    let mut remote = vec![0u8; len];
    let raddr = remote.as_mut_ptr() as u64;
    target
        .register_memory(raddr, remote.len() as u64, "cpu:0", true)
        .unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    Served {
        target,
        initiator,
        remote,
        raddr,
        id,
    }
}

/// The expected status of each of `tasks` tasks: those `bad` picks fail.
pub fn failing(tasks: u64, bad: impl Fn(u64) -> bool) -> Vec<TaskStatus> {
    (0..tasks)
        .map(|i| {
            if bad(i) {
                TaskStatus::Failed
            } else {
                TaskStatus::Completed
            }
        })
        .collect()
}
