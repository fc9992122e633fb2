//! `pg::Group` over real Transfer Engines: ranks as threads of this process, each with
//! its own engine on 127.0.0.1, meeting in one in-memory store. (Ranks as processes,
//! killed ones included, are tested from Python: `python/tests/test_pg.py`.)

use mooncake::pg::{DType, Group, GroupOptions, Kv, MemoryKv, PgErrorKind, ReduceOp};
use mooncake::te::TransferEngine;
use std::sync::Arc;
use std::time::Duration;

fn engine(same_host: bool) -> Arc<TransferEngine> {
    let config = mooncake::config::Config {
        disable_same_host: !same_host,
        ..mooncake::config::Config::global().clone()
    };
    let e =
        TransferEngine::with_config(config, "P2PHANDSHAKE", "127.0.0.1", false).expect("an engine");
    e.install("tcp", None).expect("tcp");
    Arc::new(e)
}

/// Runs `f(rank, group)` for ranks `0..size` of a fresh group, one thread each.
fn with_group<T: Send>(
    size: usize,
    slots: usize,
    same_host: bool,
    f: impl Fn(usize, &mut Group) -> T + Sync,
) -> Vec<T> {
    let kv: Arc<dyn Kv> = Arc::new(MemoryKv::default());
    let name = format!("test-{}", fastrand::u64(..));
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..size)
            .map(|rank| {
                let kv = kv.clone();
                let (f, name) = (&f, &name);
                s.spawn(move || {
                    let mut options = GroupOptions::new(size);
                    options.max_group_size = slots;
                    options.timeout = Duration::from_secs(20);
                    let mut g = Group::new(engine(same_host), kv, name, rank, size, options)
                        .expect("joining the group");
                    f(rank, &mut g)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank panicked"))
            .collect()
    })
}

fn f64s(v: impl Iterator<Item = f64>) -> Vec<u8> {
    v.flat_map(|x| x.to_ne_bytes()).collect()
}

#[test]
fn collectives_over_tcp_and_the_same_host_path() {
    for same_host in [false, true] {
        let n = 300_000usize; // 2.4 MB: the ring path, many chunks
        let got = with_group(3, 3, same_host, |rank, g| {
            let mut small = f64s((0..4).map(|i| (rank * 10 + i) as f64));
            g.all_reduce(&mut small, DType::F64, ReduceOp::Sum)
                .expect("small");
            let mut big = f64s((0..n).map(|i| ((rank + i) % 7) as f64));
            g.all_reduce(&mut big, DType::F64, ReduceOp::Sum)
                .expect("big");
            let mut all = vec![0u8; 3 * 1000];
            g.all_gather(&[rank as u8; 1000], &mut all)
                .expect("all_gather");
            g.barrier().expect("barrier");
            (small, big, all)
        });
        let want_small = f64s((0..4).map(|i| (30 + 3 * i) as f64));
        let want_big = f64s((0..n).map(|i| (0..3).map(|r| ((r + i) % 7) as f64).sum()));
        for (small, big, all) in got {
            assert_eq!(small, want_small, "same_host={same_host}");
            assert!(
                big == want_big,
                "big all_reduce differs (same_host={same_host})"
            );
            for r in 0..3 {
                assert!(all[r * 1000..(r + 1) * 1000].iter().all(|&b| b == r as u8));
            }
        }
    }
}

#[test]
fn deactivated_ranks_leave_holes_and_the_rest_go_on() {
    let got = with_group(4, 4, true, |rank, g| {
        g.deactivate_ranks(&[1]).expect("deactivating");
        let mask = g.active_ranks();
        if rank == 1 {
            let mut b = [0u8; 4];
            let e = g.all_reduce(&mut b, DType::U8, ReduceOp::Sum).unwrap_err();
            return (mask, e.kind == PgErrorKind::NotActive, 0, g.size());
        }
        let mut b = [rank as u8 + 1; 4];
        g.all_reduce(&mut b, DType::U8, ReduceOp::Sum)
            .expect("survivors");
        (mask, true, b[0], g.size())
    });
    for (rank, (mask, ok, sum, size)) in got.into_iter().enumerate() {
        assert_eq!(mask, vec![true, false, true, true]);
        assert!(ok);
        assert_eq!(size, 4, "size stays one past the highest active rank");
        if rank != 1 {
            assert_eq!(sum, 1 + 3 + 4);
        }
    }
}

/// A rank that falls behind while the others change the membership and leave (their
/// endpoints removed with their groups) still adopts the views they left behind.
#[test]
fn a_rank_behind_adopts_views_whose_ranks_have_left() {
    let kv: Arc<dyn Kv> = Arc::new(MemoryKv::default());
    let name = format!("test-{}", fastrand::u64(..));
    let (left, gone) = crossbeam_channel::unbounded::<()>();
    let got: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|rank| {
                let (kv, name, left) = (kv.clone(), &name, left.clone());
                let gone = (rank == 1).then_some(&gone);
                s.spawn(move || {
                    let mut options = GroupOptions::new(3);
                    options.timeout = Duration::from_secs(20);
                    let mut g = Group::new(engine(false), kv, name, rank, 3, options)
                        .expect("joining the group");
                    g.deactivate_ranks(&[1]).expect("taking rank 1 out");
                    if let Some(gone) = gone {
                        // Both others changed the membership again and left.
                        gone.recv().expect("rank 0 left");
                        gone.recv().expect("rank 2 left");
                        g.tick().expect("catching up");
                        return (g.epoch(), g.active_ranks());
                    }
                    g.deactivate_ranks(&[2]).expect("taking rank 2 out");
                    let seen = (g.epoch(), g.active_ranks());
                    drop(g);
                    left.send(()).expect("rank 1 waits");
                    seen
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank panicked"))
            .collect()
    });
    for (epoch, mask) in got {
        assert_eq!((epoch, mask), (2, vec![true, false, false]));
    }
}

#[test]
fn a_rank_that_leaves_is_named_and_the_survivors_continue() {
    let got = with_group(3, 3, false, |rank, g| {
        g.set_timeout(Duration::from_secs(3));
        let mut b = [1u8; 8];
        g.all_reduce(&mut b, DType::U8, ReduceOp::Sum)
            .expect("all three");
        if rank == 2 {
            return (Vec::new(), Vec::new(), 0u8);
        }
        // Rank 2 is gone (its engine closed with its group): the next operation fails
        // naming it, and the group goes on without it.
        let mut b = [1u8; 8];
        let e = g.all_reduce(&mut b, DType::U8, ReduceOp::Sum).unwrap_err();
        let mut b = [1u8; 8];
        g.all_reduce(&mut b, DType::U8, ReduceOp::Sum)
            .expect("the survivors");
        (e.suspects, g.active_ranks(), b[0])
    });
    for (rank, (suspects, mask, sum)) in got.into_iter().enumerate().take(2) {
        assert!(suspects.contains(&2), "rank {rank} suspects {suspects:?}");
        assert_eq!(mask, vec![true, true, false]);
        assert_eq!(sum, 2);
    }
}

#[test]
fn chunks_of_an_abandoned_operation_never_hold_up_the_next_one() {
    // Each of ranks 0-2 leaves two chunks (a whole mailbox: no credit left) at the
    // next rank that are never received, then the membership changes: the next
    // operation must consume them as stale while it waits, or every rank waits for
    // credit from the next in a cycle.
    let got = with_group(4, 4, true, |rank, g| {
        g.set_timeout(Duration::from_secs(10));
        if rank < 3 {
            g.send(&vec![7u8; 1 << 20], (rank + 1) % 3)
                .expect("two chunks fit without credit");
        }
        g.deactivate_ranks(&[3]).expect("deactivating");
        if rank == 3 {
            return 0;
        }
        let mut b = [rank as u8 + 1; 16];
        g.all_reduce(&mut b, DType::U8, ReduceOp::Sum)
            .expect("the first operation of the new epoch");
        b[0]
    });
    assert_eq!(&got[..3], &[6, 6, 6]);
}

#[test]
fn c_functions_reject_bad_handles_and_arguments() {
    use mooncake::ffi::ext::mooncake_last_error_message;
    use mooncake::ffi::ext_pg::*;
    use std::ffi::CStr;
    let last = || {
        // SAFETY: the library's last-error string, valid until the next call.
        unsafe { CStr::from_ptr(mooncake_last_error_message()) }
            .to_string_lossy()
            .into_owned()
    };
    let dtypes = [
        (MOONCAKE_PG_DTYPE_F32, DType::F32),
        (MOONCAKE_PG_DTYPE_F64, DType::F64),
        (MOONCAKE_PG_DTYPE_BF16, DType::Bf16),
        (MOONCAKE_PG_DTYPE_F16, DType::F16),
        (MOONCAKE_PG_DTYPE_I32, DType::I32),
        (MOONCAKE_PG_DTYPE_I64, DType::I64),
        (MOONCAKE_PG_DTYPE_U8, DType::U8),
    ];
    for (c, d) in dtypes {
        assert_eq!(c, d.code(), "the header's dtype codes are the library's");
    }
    let ops = [
        (MOONCAKE_PG_OP_SUM, ReduceOp::Sum),
        (MOONCAKE_PG_OP_PROD, ReduceOp::Prod),
        (MOONCAKE_PG_OP_MIN, ReduceOp::Min),
        (MOONCAKE_PG_OP_MAX, ReduceOp::Max),
        (MOONCAKE_PG_OP_AVG, ReduceOp::Avg),
    ];
    for (c, o) in ops {
        assert_eq!(c, o.code(), "the header's operator codes are the library's");
    }
    let null = std::ptr::null_mut();
    // SAFETY: NULL handles and buffers with zero lengths are what is under test.
    unsafe {
        assert_eq!(
            mooncake_pg_all_reduce(null, null, 0, 0, 0),
            MOONCAKE_PG_ERR_INVALID
        );
        assert!(last().contains("PG handle is NULL"), "{}", last());
        assert_eq!(
            mooncake_pg_all_reduce(null, null, 8, 0, 0),
            MOONCAKE_PG_ERR_INVALID
        );
        assert!(last().contains("buf is NULL"), "{}", last());
        let mut b = [0u8; 8];
        assert_eq!(
            mooncake_pg_all_reduce(null, b.as_mut_ptr().cast(), 8, 42, 0),
            MOONCAKE_PG_ERR_INVALID
        );
        assert!(last().contains("dtype"), "{}", last());
        assert_eq!(mooncake_pg_barrier(null), MOONCAKE_PG_ERR_INVALID);
        assert_eq!(mooncake_pg_rank(null), -1);
        assert_eq!(mooncake_pg_destroy(null), -1);
        assert_eq!(mooncake_pg_last_suspects(std::ptr::null_mut(), 0), 0);
        let created = mooncake_pg_create(
            null,
            std::ptr::null(),
            c"not-a-store".as_ptr(),
            null,
            None,
            None,
            None,
            c"g".as_ptr(),
            0,
            1,
            0,
            0,
            1,
            1000,
        );
        assert!(created.is_null());
        assert!(!last().is_empty());
        let created = mooncake_pg_create(
            null,
            std::ptr::null(),
            std::ptr::null(),
            null,
            None,
            None,
            None,
            c"g".as_ptr(),
            0,
            1,
            0,
            0,
            1,
            1000,
        );
        assert!(created.is_null());
        assert!(last().contains("store_conn"), "{}", last());
    }
}
