//! etcd and Redis metadata against real servers started by the tests: the stores
//! themselves (binary-safe values, missing keys, endpoint failover, authentication,
//! database selection, a restarted server), upstream's key layout, and two of our
//! engines finding each other through each backend with bytes verified.

mod kv_servers;
mod te_support;

use kv_servers::{Etcd, Redis};
use mooncake::config::Config;
use mooncake::metadata::etcd::EtcdMetadataStore;
use mooncake::metadata::redis::{RedisAuth, RedisMetadataStore};
use mooncake::metadata::{MetadataSource, MetadataStore};
use mooncake::te::{Op, TaskStatus, TransferEngine};
use te_support::{pattern, req, run};

fn exercise(store: &dyn MetadataStore) {
    assert_eq!(store.get("mooncake/ram/absent").unwrap(), None);
    let value: Vec<u8> = (0..=255u8).chain(b"{\"a\":1}\n".iter().copied()).collect();
    store.set("mooncake/ram/10.0.0.1:1234", &value).unwrap();
    assert_eq!(
        store.get("mooncake/ram/10.0.0.1:1234").unwrap(),
        Some(value)
    );
    store.set("mooncake/ram/10.0.0.1:1234", b"").unwrap();
    assert_eq!(
        store.get("mooncake/ram/10.0.0.1:1234").unwrap(),
        Some(Vec::new())
    );
    store.remove("mooncake/ram/10.0.0.1:1234").unwrap();
    assert_eq!(store.get("mooncake/ram/10.0.0.1:1234").unwrap(), None);
    store.remove("mooncake/ram/never-set").unwrap();
}

#[test]
fn etcd_store_round_trips_and_fails_over_between_endpoints() {
    let Some(mut etcd) = Etcd::start("etcd_store_round_trips_and_fails_over_between_endpoints")
    else {
        return;
    };
    let store = EtcdMetadataStore::new(&etcd.url()).unwrap();
    exercise(&store);
    // A dead endpoint first: the live one answers.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    let both =
        EtcdMetadataStore::new(&format!("127.0.0.1:{dead_port};127.0.0.1:{}", etcd.port)).unwrap();
    both.set("k", b"v").unwrap();
    assert_eq!(store.get("k").unwrap(), Some(b"v".to_vec()));
    // The server restarts: the data is there and the client reconnects.
    etcd.restart();
    assert_eq!(both.get("k").unwrap(), Some(b"v".to_vec()));
    // Nothing answers: a clear error, not a hang.
    let none = EtcdMetadataStore::new(&format!("127.0.0.1:{dead_port}")).unwrap();
    let err = none.get("k").unwrap_err().to_string();
    assert!(err.contains("no etcd endpoint answered"), "{err}");
}

#[test]
fn redis_store_round_trips_with_auth_and_database() {
    let Some(redis) = Redis::start(
        "redis_store_round_trips_with_auth_and_database",
        Some("s3cret"),
    ) else {
        return;
    };
    let auth = RedisAuth {
        password: "s3cret".into(),
        db: 3,
        ..RedisAuth::default()
    };
    let store = RedisMetadataStore::new(&redis.url(), auth.clone()).unwrap();
    exercise(&store);
    store.set("k", b"db3").unwrap();
    let db0 = RedisMetadataStore::new(
        &redis.url(),
        RedisAuth {
            db: 0,
            ..auth.clone()
        },
    )
    .unwrap();
    assert_eq!(
        db0.get("k").unwrap(),
        None,
        "SELECT put the key in database 3"
    );
    let wrong = RedisMetadataStore::new(
        &redis.url(),
        RedisAuth {
            password: "nope".into(),
            ..auth
        },
    )
    .unwrap();
    let err = wrong.get("k").unwrap_err().to_string();
    assert!(err.contains("AUTH"), "{err}");
}

fn engine(metadata: &str, name: &str) -> TransferEngine {
    let cfg = Config {
        advertised_ip: Some("127.0.0.1".into()),
        force_tcp: true,
        ..Config::default()
    };
    TransferEngine::with_config(cfg, metadata, name, true).expect("engine")
}

/// Two engines find each other through `metadata`, move bytes both ways, and leave no
/// key behind when they stop.
fn engines_meet_through(metadata: &str, store: &dyn MetadataStore) {
    let tag = std::process::id();
    let (ta, ia) = (format!("target-{tag}"), format!("initiator-{tag}"));
    {
        let target = engine(metadata, &ta);
        let initiator = engine(metadata, &ia);
        let desc = store
            .get(&format!("mooncake/ram/{ta}"))
            .unwrap()
            .expect("descriptor");
        assert!(
            desc.ends_with(b"\n"),
            "upstream's FastWriter form ends in a newline"
        );
        let meta = store
            .get(&format!("mooncake/rpc_meta/{ta}"))
            .unwrap()
            .expect("rpc_meta");
        let meta: serde_json::Value = serde_json::from_slice(&meta).unwrap();
        assert_eq!(meta["ip_or_host_name"], "127.0.0.1");

        let len = 3 << 20;
        let mut remote = vec![0u8; len];
        let local = pattern(len, 17);
        target
            .register_memory(remote.as_mut_ptr() as u64, len as u64, "cpu:0", true)
            .unwrap();
        let id = initiator.open_segment(&ta).unwrap();
        let st = run(
            &initiator,
            &[req(
                Op::Write,
                local.as_ptr() as u64,
                id,
                remote.as_ptr() as u64,
                len as u64,
            )],
        );
        assert_eq!(st, vec![TaskStatus::Completed]);
        assert_eq!(remote, local);
        let mut back = vec![0u8; len];
        let st = run(
            &initiator,
            &[req(
                Op::Read,
                back.as_mut_ptr() as u64,
                id,
                remote.as_ptr() as u64,
                len as u64,
            )],
        );
        assert_eq!(st, vec![TaskStatus::Completed]);
        assert_eq!(back, local);
    }
    for key in [
        format!("mooncake/ram/{ta}"),
        format!("mooncake/rpc_meta/{ta}"),
        format!("mooncake/ram/{ia}"),
        format!("mooncake/rpc_meta/{ia}"),
    ] {
        assert_eq!(store.get(&key).unwrap(), None, "{key} left behind");
    }
}

#[test]
fn engines_meet_through_etcd() {
    let Some(etcd) = Etcd::start("engines_meet_through_etcd") else {
        return;
    };
    let store = MetadataSource::parse(&etcd.url())
        .unwrap()
        .open()
        .unwrap()
        .unwrap();
    engines_meet_through(&etcd.url(), store.as_ref());
    // A bare host:port is etcd too.
    engines_meet_through(&format!("127.0.0.1:{}", etcd.port), store.as_ref());
}

#[test]
fn engines_meet_through_redis() {
    let Some(redis) = Redis::start("engines_meet_through_redis", None) else {
        return;
    };
    let store = RedisMetadataStore::new(&redis.url(), RedisAuth::default()).unwrap();
    engines_meet_through(&redis.url(), &store);
}
