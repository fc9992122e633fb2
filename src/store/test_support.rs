//! Fixtures shared by the store's tests and the C layer's.

use crate::master::MasterService;
use crate::wire::master_api::{MasterApi, Segment, Uuid};

/// Mounts on `master` a 32 MiB segment whose owner nobody can reach (its Transfer
/// Engine would be at 127.0.0.1:1), and returns its name, also its TE endpoint.
pub(crate) fn mount_unreachable_segment(master: &MasterService) -> &'static str {
    let name = "127.0.0.1:1";
    let id = |second| Uuid {
        first: 0xdead,
        second,
    };
    let segment = Segment {
        id: id(2),
        name: name.into(),
        base: 1 << 40,
        size: 32 << 20,
        te_endpoint: name.into(),
        protocol: "tcp".into(),
        host_id: "127.0.0.1".into(),
    };
    master
        .mount_segment(&segment, id(1))
        .expect("mounting a segment");
    name
}
