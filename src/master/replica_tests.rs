//! The replica list: one replica inline, more in a vector, back inline when one is
//! left.

use super::*;
use crate::master::object::{Object, PendingPin};
use crate::master::segments::Segments;
use crate::wire::master_api::{SoftPinAction, Uuid};

fn buffers(n: usize) -> (Segments, Vec<Buffer>) {
    use crate::wire::master_api::Segment;
    let segs = Segments::new(false);
    let seg = Segment {
        id: Uuid {
            first: 1,
            second: 2,
        },
        name: "seg".into(),
        base: 0x1000,
        size: 1 << 20,
        ..Default::default()
    };
    segs.mount(&seg, Uuid::default()).unwrap();
    let bufs = segs.with_view(|v| (0..n).map(|_| v.try_alloc("seg", 64, 0).unwrap()).collect());
    (segs, bufs)
}

fn ids(r: &Replicas) -> Vec<u64> {
    r.iter().map(|r| r.id).collect()
}

#[test]
fn replicas_inline_and_vector() {
    let (_segs, bufs) = buffers(3);
    let make = |n: usize| -> Replicas {
        bufs[..n]
            .iter()
            .enumerate()
            .map(|(i, b)| Replica::new(i as u64, ReplicaStatus::Processing, b.clone()))
            .collect()
    };
    let empty = make(0);
    assert!(empty.is_empty());
    let mut one = make(1);
    assert_eq!(ids(&one), [0]);
    one[0].status = ReplicaStatus::Complete;
    assert_eq!(one.iter().next().unwrap().status, ReplicaStatus::Complete);
    one.retain(|_| true);
    assert_eq!(ids(&one), [0]);
    one.retain(|_| false);
    assert!(one.is_empty());

    let mut three = make(3);
    assert_eq!(ids(&three), [0, 1, 2]);
    three.retain(|r| r.id != 1);
    assert_eq!(ids(&three), [0, 2]);
    let back: Vec<u64> = three.clone().into_iter().map(|r| r.id).collect();
    assert_eq!(back, [0, 2]);
    three.retain(|r| r.id == 2);
    assert!(matches!(three.0, ReplicasRepr::One(_)));
    assert_eq!(ids(&three), [2]);
    let buf = three.into_iter().next().unwrap().into_buffer(64);
    assert_eq!(
        (buf.addr, buf.size, buf.block),
        (bufs[2].addr, 64, bufs[2].block)
    );

    let mut o = Object::new(
        Uuid::default(),
        1,
        64,
        make(2),
        false,
        None,
        PendingPin {
            action: SoftPinAction::Preserve,
            ttl_ns: 0,
        },
        "",
    );
    let taken = o.take_replicas(|r| r.id == 0);
    assert_eq!(taken.len(), 1);
    assert_eq!((taken[0].addr, taken[0].size), (bufs[0].addr, 64));
    assert_eq!(ids(&o.replicas), [1]);
}
