//! Tests of [`super::Lane`] against a scripted fake peer.

use super::super::wire::{encode_status, STATUS_OK, STATUS_REJECTED};
use super::*;
use crate::te::batch::{Task, TaskStatus};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;

/// What the fake peer does with the next request it reads.
#[derive(Clone, Copy)]
enum Answer {
    Ok,
    /// Answers once the test releases the gate.
    OkWhenReleased,
    Reject,
    Hangup,
}

/// A v2 target that answers requests per the script, one connection at a time,
/// and reports every write payload it received.
fn fake_peer(script: Vec<Answer>) -> (u16, mpsc::Receiver<Vec<u8>>, mpsc::Sender<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    let (release, gate) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut script = script.into_iter();
        'conns: for conn in l.incoming() {
            let Ok(mut s) = conn else { return };
            loop {
                let mut h = [0u8; HEADER_LEN];
                if s.read_exact(&mut h).is_err() {
                    continue 'conns;
                }
                let header = Header::decode(&h);
                let mut payload = vec![0u8; header.size as usize];
                if header.op == Op::Write && s.read_exact(&mut payload).is_err() {
                    continue 'conns;
                }
                let answer = script.next().unwrap_or(Answer::Ok);
                let _ = tx.send(payload.clone());
                match answer {
                    Answer::Ok | Answer::OkWhenReleased => {
                        if let Answer::OkWhenReleased = answer {
                            let _ = gate.recv();
                        }
                        let mut reply = encode_status(STATUS_OK).to_vec();
                        if header.op == Op::Read {
                            reply.extend((0..header.size).map(|i| i as u8));
                        }
                        let _ = s.write_all(&reply);
                    }
                    Answer::Reject => {
                        let _ = s.write_all(&encode_status(STATUS_REJECTED));
                        continue 'conns;
                    }
                    Answer::Hangup => continue 'conns,
                }
            }
        }
    });
    (port, rx, release)
}

/// A lane whose inline exchanges wait `inline_wait` for a reply: long where a test
/// needs the reply read inline, short where it holds the reply back on purpose.
fn lane_to(port: u16, inline_wait: Duration) -> Lane {
    Lane::start(LaneConfig {
        host: "127.0.0.1".into(),
        port,
        v2: true,
        connect_timeout: Duration::from_secs(5),
        io_timeout: Duration::from_secs(30),
        inline_wait,
    })
    .unwrap()
}

/// Long enough that a reply the fake peer sends at once is always read inline.
const PATIENT: Duration = Duration::from_secs(30);

/// Moves `slices` inline, retrying while the lane declines them: right after the
/// lane's own threads finished a slice, the sender may still hold the connection
/// for a moment.
fn inline(lane: &Lane, mut slices: Vec<Slice>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        slices = lane.try_inline(slices);
        if slices.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "the lane kept declining");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn slice(op: Op, buf: &mut [u8]) -> (Slice, Arc<Task>) {
    let task = Task::new(buf.len() as u64, 1, None);
    let s = Slice {
        op,
        local: buf.as_mut_ptr() as u64,
        remote: 0x1000,
        len: buf.len() as u64,
        task: task.clone(),
        retries_left: 1,
        resent: false,
    };
    (s, task)
}

fn wait_terminal(task: &Task) -> TaskStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = task.status().0;
        if status.is_terminal() || Instant::now() > deadline {
            return status;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Connects the lane through the normal path and waits until it is idle.
fn warm_up(lane: &Lane) {
    let mut buf = [7u8; 16];
    let (s, task) = slice(Op::Write, &mut buf);
    lane.submit(s);
    assert_eq!(wait_terminal(&task), TaskStatus::Completed);
    let deadline = Instant::now() + Duration::from_secs(10);
    while lane.load() != 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn inline_write_and_read_complete_before_returning() {
    let (port, payloads, _) = fake_peer(vec![]);
    let lane = lane_to(port, PATIENT);
    let mut buf = [1u8; 8];
    let (s, _) = slice(Op::Write, &mut buf);
    assert_eq!(
        lane.try_inline(vec![s]).len(),
        1,
        "not connected yet: declined"
    );
    warm_up(&lane);
    payloads.recv().unwrap();

    let mut data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    let (s, task) = slice(Op::Write, &mut data);
    inline(&lane, vec![s]);
    assert_eq!(task.status().0, TaskStatus::Completed);
    assert_eq!(payloads.recv().unwrap(), data);

    let mut out = vec![0u8; 1000];
    let (s, task) = slice(Op::Read, &mut out);
    inline(&lane, vec![s]);
    assert_eq!(task.status(), (TaskStatus::Completed, 1000));
    assert!(out.iter().enumerate().all(|(i, b)| *b == i as u8));

    let mut big = vec![0u8; INLINE_MAX_BYTES as usize + 1];
    let (s, _) = slice(Op::Read, &mut big);
    assert_eq!(lane.try_inline(vec![s]).len(), 1, "too large: declined");
}

#[test]
fn slow_reply_is_handed_to_the_receiver_thread() {
    let (port, _payloads, release) = fake_peer(vec![Answer::Ok, Answer::OkWhenReleased]);
    let lane = lane_to(port, Duration::from_millis(20));
    warm_up(&lane);
    let mut out = vec![0u8; 512];
    let (s, task) = slice(Op::Read, &mut out);
    inline(&lane, vec![s]);
    assert_eq!(task.status().0, TaskStatus::Waiting, "left in flight");
    release.send(()).unwrap();
    assert_eq!(wait_terminal(&task), TaskStatus::Completed);
    assert!(out.iter().enumerate().all(|(i, b)| *b == i as u8));
    // The lane is usable inline again afterwards.
    let mut buf = [3u8; 64];
    let (s, task) = slice(Op::Write, &mut buf);
    inline(&lane, vec![s]);
    assert_eq!(wait_terminal(&task), TaskStatus::Completed);
}

#[test]
fn a_run_of_slices_is_read_inline_until_a_reply_is_slow() {
    let (port, payloads, release) = fake_peer(vec![
        Answer::Ok,
        Answer::Ok,
        Answer::OkWhenReleased,
        Answer::Ok,
    ]);
    // Patient enough for the first reply, which the peer sends at once; the second
    // is held back until after the call, so it is always handed over.
    let lane = lane_to(port, Duration::from_secs(3));
    warm_up(&lane);
    payloads.recv().unwrap();
    let mut a = vec![1u8; 300];
    let mut b = vec![0u8; 200];
    let mut c = vec![0u8; 100];
    let (sa, ta) = slice(Op::Write, &mut a);
    let (sb, tb) = slice(Op::Read, &mut b);
    let (sc, tc) = slice(Op::Read, &mut c);
    inline(&lane, vec![sa, sb, sc]);
    assert_eq!(
        ta.status().0,
        TaskStatus::Completed,
        "first reply read inline"
    );
    assert_eq!(tb.status().0, TaskStatus::Waiting, "second left in flight");
    release.send(()).unwrap();
    assert_eq!(wait_terminal(&tb), TaskStatus::Completed);
    assert_eq!(wait_terminal(&tc), TaskStatus::Completed);
    assert!(b.iter().enumerate().all(|(i, x)| *x == i as u8));
    assert!(c.iter().enumerate().all(|(i, x)| *x == i as u8));
    assert_eq!(payloads.recv().unwrap(), a);
}

#[test]
fn a_slice_the_peer_hung_up_on_is_retried_on_a_fresh_connection() {
    const ROUNDS: usize = 200;
    let mut script = vec![Answer::Ok];
    (0..ROUNDS).for_each(|_| script.extend([Answer::Hangup, Answer::Ok]));
    let (port, _payloads, _) = fake_peer(script);
    let lane = lane_to(port, PATIENT);
    warm_up(&lane);
    // Each slice meets a hang-up on the connection the last one used; its one retry
    // must not be spent on that connection again.
    for round in 0..ROUNDS {
        let mut buf = [round as u8; 32];
        let (s, task) = slice(Op::Write, &mut buf);
        lane.submit(s);
        assert_eq!(wait_terminal(&task), TaskStatus::Completed, "round {round}");
    }
}

#[test]
fn rejection_fails_only_that_slice_and_a_hangup_is_retried() {
    let (port, _payloads, _) =
        fake_peer(vec![Answer::Ok, Answer::Reject, Answer::Ok, Answer::Hangup]);
    let lane = lane_to(port, PATIENT);
    warm_up(&lane);
    let mut buf = [5u8; 100];
    let (s, task) = slice(Op::Write, &mut buf);
    inline(&lane, vec![s]);
    assert_eq!(wait_terminal(&task), TaskStatus::Failed);

    // The next slice goes through the lane (reconnect), then inline; the peer
    // hangs up on it and the retry on a fresh connection succeeds.
    warm_up(&lane);
    let (s, task) = slice(Op::Write, &mut buf);
    inline(&lane, vec![s]);
    assert_eq!(wait_terminal(&task), TaskStatus::Completed);
    assert_eq!(lane.load(), 0);
}

/// A v2 target as upstream's: it refuses writes whose payload starts with 0xBB and
/// closes the connection right after the refusal, so requests pipelined behind it
/// (unread) make the close a reset, which can take replies already sent with it.
fn refusing_peer() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        'conns: for conn in l.incoming() {
            let Ok(mut s) = conn else { return };
            loop {
                let mut h = [0u8; HEADER_LEN];
                if s.read_exact(&mut h).is_err() {
                    continue 'conns;
                }
                let header = Header::decode(&h);
                let mut payload = vec![0u8; header.size as usize];
                if header.op == Op::Write && s.read_exact(&mut payload).is_err() {
                    continue 'conns;
                }
                if payload.first() == Some(&0xBB) {
                    let _ = s.write_all(&encode_status(STATUS_REJECTED));
                    continue 'conns;
                }
                let _ = s.write_all(&encode_status(STATUS_OK));
            }
        }
    });
    port
}

#[test]
fn refusals_in_a_pipelined_run_fail_only_the_refused_slices() {
    let lane = lane_to(refusing_peer(), PATIENT);
    warm_up(&lane);
    for round in 0..100 {
        let refused = |i: usize| i % 3 == 1;
        let mut bufs: Vec<Vec<u8>> = (0..7)
            .map(|i| vec![if refused(i) { 0xBB } else { i as u8 }; 4096])
            .collect();
        let tasks: Vec<Arc<Task>> = bufs
            .iter_mut()
            .map(|b| {
                let (s, task) = slice(Op::Write, b);
                lane.submit(s);
                task
            })
            .collect();
        for (i, task) in tasks.iter().enumerate() {
            let want = if refused(i) {
                TaskStatus::Failed
            } else {
                TaskStatus::Completed
            };
            assert_eq!(wait_terminal(task), want, "round {round}, slice {i}");
        }
    }
}

#[test]
fn a_cancelled_task_loses_only_the_slices_not_yet_sent() {
    let (port, payloads, release) = fake_peer(vec![Answer::Ok, Answer::OkWhenReleased]);
    let lane = lane_to(port, PATIENT);
    warm_up(&lane);
    payloads.recv_timeout(PATIENT).expect("the warm-up request");
    let mut bufs: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 1 << 20]).collect();
    let tasks: Vec<Arc<Task>> = bufs
        .iter_mut()
        .map(|b| {
            let (s, task) = slice(Op::Write, b);
            lane.submit(s);
            task
        })
        .collect();
    // The peer read the first slice; it holds its reply and reads nothing more until
    // released, so the sender blocks once the socket buffers are full (a few MiB, one
    // batch of at most 32 slices taken): the last slices are still queued.
    payloads
        .recv_timeout(PATIENT)
        .expect("the first slice reached the peer");
    for task in &tasks {
        task.cancel();
    }
    release.send(()).unwrap();
    let statuses: Vec<TaskStatus> = tasks.iter().map(|t| wait_terminal(t)).collect();
    assert_eq!(statuses[0], TaskStatus::Completed, "{statuses:?}");
    assert_eq!(statuses[63], TaskStatus::Canceled, "{statuses:?}");
    assert!(
        statuses
            .iter()
            .all(|s| matches!(s, TaskStatus::Completed | TaskStatus::Canceled)),
        "{statuses:?}"
    );
    assert_eq!(tasks[63].status().1, 0, "a cancelled task moved nothing");
    let deadline = Instant::now() + Duration::from_secs(10);
    while lane.load() != 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(lane.load(), 0, "skipped slices leave the lane's load");
}
