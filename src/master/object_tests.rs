//! The object layout (replica, object and bucket sizes) and the boxed rare
//! attributes.

use super::*;
use crate::wire::master_api::Uuid;
use std::mem::size_of;

/// The per-object footprint this layout is built for: an 80-byte object with one
/// inline replica, which `entries` places with its key in one allocation (with a
/// 31-byte key, 119 bytes: a 128-byte malloc chunk).
#[test]
fn layout_sizes() {
    assert_eq!(size_of::<Replica>(), 32);
    assert_eq!(size_of::<Replicas>(), 32);
    assert!(size_of::<Object>() <= 80, "{}", size_of::<Object>());
}

#[test]
fn rare_attributes_box_only_while_set() {
    let pin = |action, ttl_ns| PendingPin { action, ttl_ns };
    let new = |hard, soft, p, g: &str| {
        Object::new(
            Uuid::default(),
            1,
            64,
            Replicas::default(),
            hard,
            soft,
            p,
            g,
        )
    };
    let mut o = new(false, None, pin(SoftPinAction::Preserve, 0), "");
    assert!(o.extra.is_none());
    assert_eq!(
        (o.hard_pin(), o.soft_pin(), o.checksum(), o.group_id()),
        (false, None, None, "")
    );
    o.set_checksum(None);
    o.set_pending_pin(None);
    o.commit_pending_pin(5);
    assert!(o.extra.is_none());
    o.set_checksum(Some(7));
    assert_eq!(o.checksum(), Some(7));
    o.set_checksum(None);
    assert!(o.extra.is_none());

    // Enable: pinned from the first completion on, for the TTL.
    let mut o = new(false, None, pin(SoftPinAction::Enable, 10), "");
    assert!(o.extra.is_some() && o.soft_pin().is_none());
    o.commit_pending_pin(100);
    assert_eq!(o.soft_pin(), Some(110));
    assert!(o.soft_pinned(109) && !o.soft_pinned(110));
    // Expired at the next commit: dropped, and the box with it.
    o.set_pending_pin(Some(pin(SoftPinAction::Preserve, 0)));
    o.commit_pending_pin(200);
    assert_eq!(o.soft_pin(), None);
    assert!(o.extra.is_none());
    // Disable and Enable(0) clear a live pin; Preserve keeps it.
    for (action, kept) in [
        (SoftPinAction::Disable, None),
        (SoftPinAction::Enable, None),
        (SoftPinAction::Preserve, Some(500)),
    ] {
        let mut o = new(false, Some(500), pin(action, 0), "");
        o.commit_pending_pin(300);
        assert_eq!(o.soft_pin(), kept, "{action:?}");
        assert_eq!(o.extra.is_some(), kept.is_some());
    }
    let mut o = new(true, None, pin(SoftPinAction::Disable, 0), "g");
    o.set_pending_pin(None);
    o.commit_pending_pin(1);
    assert!(o.hard_pin());
    assert_eq!(o.group_id(), "g");
}
