//! The algorithms over in-memory queues: every collective, on 1 to 8 ranks (with
//! holes in the membership), through the one-round and the ring paths, against a
//! reference computed directly.

use super::algo::Ring;
use super::channel::{Channel, OpKind, Recv, Send};
use super::dtype::{self, DType, ReduceOp};
use super::error::{PgError, PgResult};
use crossbeam_channel::{unbounded, Receiver, Sender};

/// One chunk in flight: kind, total length, offset, bytes.
type Chunk = (OpKind, usize, usize, Vec<u8>);

/// A rank's queues: `to[p]` sends to slot p, `from[p]` receives from slot p.
struct MemChannel {
    chunk: usize,
    to: Vec<Option<Sender<Chunk>>>,
    from: Vec<Option<Receiver<Chunk>>>,
}

impl Channel for MemChannel {
    fn chunk_bytes(&self) -> usize {
        self.chunk
    }

    fn exchange(
        &mut self,
        kind: OpKind,
        sends: &[Send<'_>],
        recvs: &[Recv],
        sink: &mut dyn FnMut(usize, usize, &[u8]),
    ) -> PgResult<()> {
        for (peer, data) in sends {
            let tx = self.to[*peer].as_ref().expect("a queue to the peer");
            let mut off = 0;
            loop {
                let len = (data.len() - off).min(self.chunk);
                // A peer that already finished (or failed) drops its queues.
                let _ = tx.send((kind, data.len(), off, data[off..off + len].to_vec()));
                off += len;
                if off >= data.len() {
                    break;
                }
            }
        }
        for (i, (peer, len)) in recvs.iter().enumerate() {
            let rx = self.from[*peer].as_ref().expect("a queue from the peer");
            let mut done = 0;
            loop {
                let (k, total, off, bytes) = rx.recv().expect("the peer's queue is open");
                if k != kind || total != *len || off != done {
                    return Err(PgError::mismatch(format!(
                        "rank {peer} sent {total} bytes of {} where {len} of {} were expected",
                        k.name(),
                        kind.name()
                    )));
                }
                sink(i, off, &bytes);
                done += bytes.len();
                if done >= *len {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// Runs `f(rank, ring)` on one thread per member of `members` (slots `0..slots`),
/// returning each member's result in member order.
fn run<T: std::marker::Send>(
    slots: usize,
    members: &[usize],
    chunk: usize,
    f: impl Fn(usize, &mut Ring<'_, MemChannel>) -> T + Sync,
) -> Vec<T> {
    let mut txs: Vec<Vec<Option<Sender<Chunk>>>> = (0..slots).map(|_| vec![None; slots]).collect();
    let mut rxs: Vec<Vec<Option<Receiver<Chunk>>>> = (0..slots)
        .map(|_| (0..slots).map(|_| None).collect())
        .collect();
    for a in 0..slots {
        for b in 0..slots {
            let (tx, rx) = unbounded();
            txs[a][b] = Some(tx);
            rxs[b][a] = Some(rx);
        }
    }
    let mut chans: Vec<Option<MemChannel>> = txs
        .into_iter()
        .zip(rxs)
        .map(|(to, from)| Some(MemChannel { chunk, to, from }))
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = members
            .iter()
            .enumerate()
            .map(|(me, &rank)| {
                let mut ch = chans[rank].take().expect("one channel per member");
                let f = &f;
                s.spawn(move || {
                    let mut ring = Ring {
                        ch: &mut ch,
                        members,
                        me,
                    };
                    f(rank, &mut ring)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank panicked"))
            .collect()
    })
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn to_f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

/// Rank `r`'s input of `n` elements: small integers, so sums are exact.
fn input(rank: usize, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((rank * 7 + i * 3) % 11) as f32 - 5.0)
        .collect()
}

/// Memberships to run: all ranks, and holes.
fn memberships() -> Vec<(usize, Vec<usize>)> {
    vec![
        (1, vec![0]),
        (2, vec![0, 1]),
        (3, vec![0, 1, 2]),
        (4, vec![0, 1, 2, 3]),
        (5, vec![0, 1, 3, 4]),
        (8, vec![0, 1, 2, 3, 4, 5, 6, 7]),
        (6, vec![1, 2, 5]),
    ]
}

/// Element counts through the one-round path and the ring path (chunk 64 bytes).
const COUNTS: [usize; 4] = [1, 5, 16, 1003];

#[test]
fn all_reduce_every_operator_matches_the_reference() {
    for (slots, members) in memberships() {
        for n in COUNTS {
            for &op in ReduceOp::ALL {
                let mut want = f32s(&input(members[0], n));
                for &m in &members[1..] {
                    dtype::fold(DType::F32, op, &mut want, &f32s(&input(m, n)));
                }
                if op == ReduceOp::Avg {
                    dtype::divide(DType::F32, &mut want, members.len());
                }
                let got = run(slots, &members, 64, |rank, ring| {
                    let mut buf = f32s(&input(rank, n));
                    ring.all_reduce(&mut buf, DType::F32, op)
                        .expect("all_reduce");
                    buf
                });
                for g in &got {
                    assert_eq!(to_f32s(g), to_f32s(&want), "{members:?} n={n} {op:?}");
                }
            }
        }
    }
}

#[test]
fn reduce_leaves_the_result_at_the_root_only() {
    for (slots, members) in memberships() {
        for n in COUNTS {
            let root = members.len() - 1;
            let mut want = f32s(&input(members[0], n));
            for &m in &members[1..] {
                dtype::fold(DType::F32, ReduceOp::Sum, &mut want, &f32s(&input(m, n)));
            }
            let got = run(slots, &members, 64, |rank, ring| {
                let mut buf = f32s(&input(rank, n));
                ring.reduce(&mut buf, DType::F32, ReduceOp::Sum, root)
                    .expect("reduce");
                buf
            });
            for (i, g) in got.iter().enumerate() {
                if i == root {
                    assert_eq!(g, &want, "{members:?} n={n}");
                } else {
                    assert_eq!(g, &f32s(&input(members[i], n)), "non-root unchanged");
                }
            }
        }
    }
}

#[test]
fn broadcast_gather_scatter_and_all_gather_place_every_block() {
    for (slots, members) in memberships() {
        for n in COUNTS {
            let len = n * 4;
            let root = members.len() / 2;
            let root_rank = members[root];
            let got = run(slots, &members, 64, |rank, ring| {
                let mut b = f32s(&input(rank, n));
                ring.broadcast(&mut b, root).expect("broadcast");
                let mut all = vec![0u8; len * slots];
                ring.all_gather(&f32s(&input(rank, n)), &mut all)
                    .expect("all_gather");
                let mut gathered = vec![0u8; len * slots];
                ring.gather(&f32s(&input(rank, n)), &mut gathered, root)
                    .expect("gather");
                let blocks: Vec<u8> = (0..slots).flat_map(|s| f32s(&input(s + 100, n))).collect();
                let mut mine = vec![0u8; len];
                ring.scatter(&blocks, &mut mine, root).expect("scatter");
                (rank, b, all, gathered, mine)
            });
            for (rank, b, all, gathered, mine) in got {
                assert_eq!(b, f32s(&input(root_rank, n)), "broadcast {members:?} n={n}");
                for s in 0..slots {
                    let block = &all[s * len..(s + 1) * len];
                    if members.contains(&s) {
                        assert_eq!(block, &f32s(&input(s, n))[..], "all_gather slot {s}");
                    } else {
                        assert!(block.iter().all(|&x| x == 0), "holes stay untouched");
                    }
                }
                if rank == root_rank {
                    for &m in &members {
                        assert_eq!(&gathered[m * len..(m + 1) * len], &f32s(&input(m, n))[..]);
                    }
                }
                assert_eq!(mine, f32s(&input(rank + 100, n)), "scatter to {rank}");
            }
        }
    }
}

#[test]
fn reduce_scatter_gives_each_rank_its_reduced_block() {
    for (slots, members) in memberships() {
        for n in COUNTS {
            let len = n * 4;
            let all_input = |rank: usize| -> Vec<u8> {
                (0..slots)
                    .flat_map(|s| f32s(&input(rank * 10 + s, n)))
                    .collect()
            };
            let got = run(slots, &members, 64, |rank, ring| {
                let mut out = vec![0u8; len];
                ring.reduce_scatter(&all_input(rank), &mut out, DType::F32, ReduceOp::Max)
                    .expect("reduce_scatter");
                (rank, out)
            });
            for (rank, out) in got {
                let mut want = all_input(members[0])[rank * len..(rank + 1) * len].to_vec();
                for &m in &members[1..] {
                    dtype::fold(
                        DType::F32,
                        ReduceOp::Max,
                        &mut want,
                        &all_input(m)[rank * len..(rank + 1) * len],
                    );
                }
                assert_eq!(out, want, "{members:?} n={n} rank {rank}");
            }
        }
    }
}

#[test]
fn uneven_all_to_all_delivers_each_block() {
    for (slots, members) in memberships() {
        // Rank a sends (a + 2 * b) % 5 * 30 bytes to rank b: some empty, some multi-chunk.
        let count = |a: usize, b: usize| (a + 2 * b) % 5 * 30;
        let payload = |a: usize, b: usize| -> Vec<u8> {
            (0..count(a, b))
                .map(|i| (a * 31 + b * 7 + i) as u8)
                .collect()
        };
        let got = run(slots, &members, 64, |rank, ring| {
            let send_counts: Vec<usize> = (0..slots).map(|b| count(rank, b)).collect();
            let recv_counts: Vec<usize> = (0..slots).map(|a| count(a, rank)).collect();
            let input: Vec<u8> = (0..slots).flat_map(|b| payload(rank, b)).collect();
            let mut output = vec![0u8; recv_counts.iter().sum()];
            ring.all_to_all(&input, &send_counts, &mut output, &recv_counts)
                .expect("all_to_all");
            (rank, output)
        });
        for (rank, output) in got {
            let mut at = 0;
            for a in 0..slots {
                let c = count(a, rank);
                if members.contains(&a) {
                    assert_eq!(&output[at..at + c], &payload(a, rank)[..], "{a} -> {rank}");
                }
                at += c;
            }
        }
    }
}

#[test]
fn every_dtype_sums_through_both_paths() {
    for &dt in DType::ALL {
        for n in [3usize, 700] {
            let members = [0usize, 1, 2];
            let value = |rank: usize, i: usize| -> Vec<u8> {
                let v = ((rank + i) % 4) as i64;
                match dt {
                    DType::F32 => (v as f32).to_ne_bytes().to_vec(),
                    DType::F64 => (v as f64).to_ne_bytes().to_vec(),
                    DType::Bf16 => half::bf16::from_f32(v as f32).to_ne_bytes().to_vec(),
                    DType::F16 => half::f16::from_f32(v as f32).to_ne_bytes().to_vec(),
                    DType::I32 => (v as i32).to_ne_bytes().to_vec(),
                    DType::I64 => v.to_ne_bytes().to_vec(),
                    DType::U8 => vec![v as u8],
                }
            };
            let buf_of = |rank: usize| -> Vec<u8> { (0..n).flat_map(|i| value(rank, i)).collect() };
            let want: Vec<u8> = (0..n)
                .flat_map(|i| {
                    let s: i64 = members.iter().map(|&r| ((r + i) % 4) as i64).sum();
                    match dt {
                        DType::F32 => (s as f32).to_ne_bytes().to_vec(),
                        DType::F64 => (s as f64).to_ne_bytes().to_vec(),
                        DType::Bf16 => half::bf16::from_f32(s as f32).to_ne_bytes().to_vec(),
                        DType::F16 => half::f16::from_f32(s as f32).to_ne_bytes().to_vec(),
                        DType::I32 => (s as i32).to_ne_bytes().to_vec(),
                        DType::I64 => s.to_ne_bytes().to_vec(),
                        DType::U8 => vec![s as u8],
                    }
                })
                .collect();
            let got = run(3, &members, 64, |rank, ring| {
                let mut buf = buf_of(rank);
                ring.all_reduce(&mut buf, dt, ReduceOp::Sum)
                    .expect("all_reduce");
                buf
            });
            for g in got {
                assert_eq!(g, want, "{dt:?} n={n}");
            }
        }
    }
}

#[test]
fn mismatched_lengths_and_kinds_are_clear_errors() {
    let got = run(2, &[0, 1], 64, |rank, ring| {
        let mut buf = vec![0u8; if rank == 0 { 8 } else { 16 }];
        ring.all_reduce(&mut buf, DType::F32, ReduceOp::Sum)
    });
    let err = got.into_iter().find_map(Result::err).expect("a mismatch");
    assert!(err.message.contains("bytes"), "{err}");
    let got = run(2, &[0, 1], 64, |rank, ring| {
        let mut buf = vec![0u8; 8];
        if rank == 0 {
            ring.broadcast(&mut buf, 0)
        } else {
            ring.all_reduce(&mut buf, DType::F32, ReduceOp::Sum)
        }
    });
    let err = got.into_iter().find_map(Result::err).expect("a mismatch");
    assert!(err.message.contains("broadcast"), "{err}");
    let got = run(1, &[0], 64, |_, ring| {
        let mut buf = vec![0u8; 7];
        ring.all_reduce(&mut buf, DType::F32, ReduceOp::Sum)
    });
    assert!(got[0]
        .as_ref()
        .is_err_and(|e| e.message.contains("whole number")));
}
