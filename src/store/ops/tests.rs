//! Multi-piece writes and reads, upserts, group ids, replica descriptors and batch removes between two clients of an in-process master
//! (P2PHANDSHAKE, real TCP transfers for the remote side).

use crate::master::{MasterConfig, MasterService};
use crate::store::test_support::mount_unreachable_segment;
use crate::store::{BatchWrite, Code, ErrorCode, Pieces, ReplicateConfig, WriteMode};
use crate::store::{Client, SetupConfig};
use crate::wire::master_api::{MasterApi, ReplicaLocation, ReplicaStatus, DEFAULT_TENANT};
use std::sync::Arc;

const MIB: u64 = 1 << 20;

/// A client of `master` with a 32 MiB segment and an 8 MiB local buffer (the
/// fixture of the operations' tests).
pub(super) fn client(master: &Arc<MasterService>) -> Client {
    let cfg = SetupConfig {
        local_hostname: "127.0.0.1".into(),
        metadata_server: "P2PHANDSHAKE".into(),
        global_segment_size: 32 * MIB,
        local_buffer_size: 8 * MIB,
        ..SetupConfig::default()
    };
    Client::setup_with_master(&cfg, master.clone()).expect("setup")
}

/// One replica, on `segment`.
pub(super) fn on(segment: &str) -> ReplicateConfig {
    ReplicateConfig {
        preferred_segments: vec![segment.to_string()],
        ..ReplicateConfig::default()
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

/// Puts of `items` under `keys`.
fn puts<'a>(
    keys: &'a [&'a str],
    items: &'a [Pieces],
    config: &'a ReplicateConfig,
) -> BatchWrite<'a> {
    BatchWrite {
        mode: WriteMode::Put,
        keys,
        items,
        config,
    }
}

fn pieces(parts: &[&[u8]]) -> Pieces {
    parts
        .iter()
        .map(|p| (p.as_ptr() as u64, p.len() as u64))
        .collect()
}

#[test]
fn multi_buffer_put_and_get_across_clients() {
    let m = MasterService::new(MasterConfig::default());
    let (a, b) = (client(&m), client(&m));
    let src = pattern(3 * MIB as usize, 3);
    let (p1, p2, p3) = (&src[..1000], &src[5000..(2 * MIB as usize)], &src[7..8]);
    let whole: Vec<u8> = [p1, p2, p3].concat();
    // Written into b's segment (remote for a) and a's own segment.
    for (key, seg) in [("remote", b.hostname()), ("own", a.hostname())] {
        // SAFETY: the pieces borrow `src`, alive for the call.
        let r = unsafe {
            a.batch_write_raw(BatchWrite {
                mode: WriteMode::Put,
                keys: &[key],
                items: &[pieces(&[p1, p2, p3])],
                config: &on(seg),
            })
        };
        assert_eq!(r, vec![Ok(())]);
        assert_eq!(b.batch_get(&[key]), vec![Ok(whole.clone())]);
    }
    // Scattered read: exact fit, larger buffers (filled up to the object), too small.
    let mut x = vec![0u8; 1000];
    let mut y = vec![0u8; whole.len()];
    let items = vec![vec![
        (x.as_mut_ptr() as u64, 1000),
        (y.as_mut_ptr() as u64, whole.len() as u64),
    ]];
    // SAFETY: x and y are distinct, writable and alive for the call.
    let r = unsafe { a.batch_get_into_multi_raw(&["remote"], &items) };
    assert_eq!(r, vec![Ok(whole.len() as u64)]);
    assert!(x[..] == whole[..1000] && y[..whole.len() - 1000] == whole[1000..]);
    let small = vec![(x.as_mut_ptr() as u64, 1000)];
    // SAFETY: as above.
    let r = unsafe { a.batch_get_into_multi_raw(&["remote", "none"], &[small, vec![]]) };
    assert_eq!(
        r.code(),
        vec![
            Err(ErrorCode::INVALID_PARAMS),
            Err(ErrorCode::OBJECT_NOT_FOUND)
        ]
    );
}

#[test]
fn upserts_replace_and_puts_keep() {
    let m = MasterService::new(MasterConfig::default());
    let (a, b) = (client(&m), client(&m));
    let cfg = on(b.hostname());
    a.put("k", b"first", &cfg).unwrap();
    a.put("k", b"other", &cfg).unwrap();
    assert_eq!(a.batch_get(&["k"]), vec![Ok(b"first".to_vec())]);
    a.upsert("k", b"third", &cfg).unwrap();
    assert_eq!(b.batch_get(&["k"]), vec![Ok(b"third".to_vec())]);
    a.upsert("k", b"a longer value", &cfg).unwrap();
    assert_eq!(b.batch_get(&["k"]), vec![Ok(b"a longer value".to_vec())]);
    assert_eq!(
        a.upsert("k", b"", &cfg).code(),
        Err(ErrorCode::INVALID_PARAMS)
    );
    // Batch upsert with a duplicate key (last wins) and an empty object.
    let (v1, v2, v3) = (b"one".as_slice(), b"two!".as_slice(), b"three".as_slice());
    let items = vec![pieces(&[v1]), pieces(&[v2]), pieces(&[v3]), vec![]];
    // SAFETY: the pieces borrow static data.
    let r = unsafe {
        a.batch_write_raw(BatchWrite {
            mode: WriteMode::Upsert,
            keys: &["k", "n", "k", "e"],
            items: &items,
            config: &cfg,
        })
    };
    assert_eq!(
        r.code(),
        vec![Ok(()), Ok(()), Ok(()), Err(ErrorCode::INVALID_PARAMS)]
    );
    assert_eq!(
        b.batch_get(&["k", "n", "e"]).code(),
        vec![
            Ok(b"three".to_vec()),
            Ok(b"two!".to_vec()),
            Err(ErrorCode::OBJECT_NOT_FOUND)
        ]
    );
    assert_eq!(
        a.batch_get_size(&["k", "n", "e"]).code(),
        vec![Ok(5), Ok(4), Err(ErrorCode::OBJECT_NOT_FOUND)]
    );
}

#[test]
fn group_ids_are_one_per_key() {
    let m = MasterService::new(MasterConfig::default());
    let a = client(&m);
    let data = b"grouped".as_slice();
    let items = vec![pieces(&[data]), pieces(&[data]), pieces(&[data])];
    let mut cfg = ReplicateConfig {
        group_ids: Some(vec!["g1".into(), "g1".into()]),
        ..ReplicateConfig::default()
    };
    // SAFETY: static data.
    let r = unsafe { a.batch_write_raw(puts(&["x", "y", "z"], &items, &cfg)) };
    assert_eq!(r.code(), vec![Err(ErrorCode::INVALID_PARAMS); 3]);
    cfg.group_ids = Some(vec!["g1".into(), "g1".into(), "g2".into()]);
    // Duplicates collapse; the group ids follow their keys.
    // SAFETY: static data.
    let r = unsafe { a.batch_write_raw(puts(&["x", "y", "x"], &items, &cfg)) };
    assert_eq!(r, vec![Ok(()); 3]);
    assert_eq!(a.batch_get_size(&["x", "y"]), vec![Ok(7), Ok(7)]);
}

#[test]
fn replica_descriptors_and_batch_remove() {
    let m = MasterService::new(MasterConfig::default());
    let (a, b) = (client(&m), client(&m));
    a.put("d", b"descriptor", &on(b.hostname())).unwrap();
    let reps = a.get_replica_desc("d").unwrap();
    assert_eq!(reps.len(), 1);
    assert_eq!(reps[0].status, ReplicaStatus::Complete);
    match &reps[0].location {
        ReplicaLocation::Memory(d) => {
            assert_eq!(d.size, 10);
            assert_eq!(d.transport_endpoint, b.te_segment_name().unwrap());
        }
        other => panic!("unexpected replica {other:?}"),
    }
    assert_eq!(
        a.get_replica_desc("none").code(),
        Err(ErrorCode::OBJECT_NOT_FOUND)
    );
    let all = a.batch_get_replica_desc(&["d", "none"]);
    assert!(
        all[0].is_ok()
            && all[1]
                .as_ref()
                .is_err_and(|e| *e == ErrorCode::OBJECT_NOT_FOUND)
    );
    // The lookups granted a read lease: only a forced remove goes through.
    assert_eq!(
        a.batch_remove(&["d", "none"], false).code(),
        vec![
            Err(ErrorCode::OBJECT_HAS_LEASE),
            Err(ErrorCode::OBJECT_NOT_FOUND)
        ]
    );
    assert_eq!(a.batch_remove(&["d"], true), vec![Ok(())]);
    assert!(!m.exist_key("d", DEFAULT_TENANT).unwrap());
    a.close();
    assert_eq!(
        a.batch_remove(&["d"], true).code(),
        vec![Err(ErrorCode::INVALID_PARAMS)]
    );
    assert_eq!(
        a.batch_get(&["d"]).code(),
        vec![Err(ErrorCode::INVALID_PARAMS)]
    );
}

#[test]
fn a_failed_transfer_names_the_segment_it_could_not_reach() {
    let m = MasterService::new(MasterConfig::default());
    let gone = mount_unreachable_segment(&m);
    let a = client(&m);
    let e = a.put("lost", b"never stored", &on(gone)).unwrap_err();
    assert_eq!(e, ErrorCode::TRANSFER_FAIL);
    assert!(
        e.cause.contains("writing 'lost'") && e.cause.contains(&format!("segment '{gone}'")),
        "{e}"
    );
    assert_eq!(a.is_exist("lost"), Ok(false));
}
