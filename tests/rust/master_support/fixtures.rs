//! Fixtures shared by the tests of an in-process `MasterService`: clients, segments
//! (the master never touches their memory) and replication configs.
#![allow(dead_code)]

use mooncake::master::MasterConfig;
use mooncake::wire::master_api::{ReplicateConfig, Segment, Uuid};
use std::time::Duration;

/// Client `n`.
pub fn client(n: u64) -> Uuid {
    Uuid {
        first: 0xC0FFEE,
        second: n,
    }
}

/// Segment `i` of `size` bytes; its name is `127.0.0.<i>:<12000+i>`, on `host-<i>`.
pub fn seg(i: u64, size: u64) -> Segment {
    let name = format!("127.0.0.{i}:{}", 12000 + i);
    Segment {
        id: Uuid {
            first: 0x5E6,
            second: i,
        },
        name: name.clone(),
        base: 0x10_0000_0000 * i,
        size,
        te_endpoint: name,
        protocol: "tcp".into(),
        host_id: format!("host-{i}"),
    }
}

/// `replicas` replicas, placed anywhere.
pub fn rc(replicas: u64) -> ReplicateConfig {
    ReplicateConfig {
        replica_num: replicas,
        ..ReplicateConfig::default()
    }
}

/// A config whose background threads tick fast.
pub fn fast() -> MasterConfig {
    MasterConfig {
        eviction_interval: Duration::from_millis(2),
        client_monitor_interval: Duration::from_millis(10),
        ..MasterConfig::default()
    }
}
