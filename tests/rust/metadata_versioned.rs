//! The versioned metadata stores (`metadata::versioned`) against real servers: our HTTP
//! metadata server in this process, and etcd and Redis started by the tests
//! (`kv_servers`: a missing binary fails the test; only `MOONCAKE_SKIP_KV_SERVERS=1`,
//! which CI allows only when the user set it, skips). Every backend runs the same
//! behaviour table and the same contended counter; etcd's versions are also checked
//! against the gateway's own `mod_revision` and transactions, which the Go client uses.

mod kv_servers;

use std::time::{Duration, Instant};

use kv_servers::{Etcd, Redis};
use mooncake::metadata::http_server::HttpMetadataServer;
use mooncake::metadata::versioned::{
    open_versioned, InMemoryVersionedStore, Swapped, Versioned, VersionedStore,
};
use mooncake::metadata::MetadataSource;
use serde_json::{json, Value};

/// Threads of the contended counter, and increments each.
const THREADS: usize = 4;
const INCREMENTS: usize = 50;
/// Only reached when something hangs; nothing asserts on timing.
const COUNTER_DEADLINE: Duration = Duration::from_secs(120);

fn get(store: &dyn VersionedStore, key: &str) -> Option<Versioned> {
    store.get_versioned(key).expect("get_versioned")
}

/// Absent keys, create, compare-and-swap (right and stale versions), put, delete.
fn single_key_contract(store: &dyn VersionedStore, ns: &str) {
    let key = format!("{ns}/object");
    assert_eq!(get(store, &key), None, "absent");
    assert!(
        !store.compare_and_swap(&key, 1, Some(b"x")).unwrap(),
        "CAS of an absent key"
    );
    assert!(
        !store.compare_and_swap(&key, 1, None).unwrap(),
        "CAS delete of an absent key"
    );
    assert!(store.create(&key, b"first").unwrap(), "first create");
    assert!(!store.create(&key, b"second").unwrap(), "second create");
    let v1 = get(store, &key).expect("created");
    assert_eq!(v1.value, b"first", "the second create changed nothing");

    assert!(store
        .compare_and_swap(&key, v1.version, Some(b"swapped"))
        .unwrap());
    let v2 = get(store, &key).unwrap();
    assert_eq!(v2.value, b"swapped");
    assert!(v2.version > v1.version, "{v2:?} after {v1:?}");

    assert!(
        !store
            .compare_and_swap(&key, v1.version, Some(b"stale"))
            .unwrap(),
        "a stale version"
    );
    assert_eq!(get(store, &key).unwrap(), v2, "unchanged by the stale CAS");

    store.put(&key, b"put").unwrap();
    let v3 = get(store, &key).unwrap();
    assert_eq!(v3.value, b"put");
    assert!(v3.version > v2.version);

    assert!(!store.compare_and_swap(&key, v2.version, None).unwrap());
    assert_eq!(
        get(store, &key).unwrap(),
        v3,
        "unchanged by the stale delete"
    );
    assert!(store.compare_and_swap(&key, v3.version, None).unwrap());
    assert_eq!(get(store, &key), None, "deleted");
    assert!(!store.compare_and_swap(&key, v3.version, None).unwrap());

    // Re-created: its versions still only grow; any bytes round-trip.
    let bytes: Vec<u8> = (0..=255u8).collect();
    assert!(store.create(&key, &bytes).unwrap());
    let v4 = get(store, &key).unwrap();
    assert_eq!(v4.value, bytes);
    assert!(v4.version > v3.version);
    assert!(store.compare_and_swap(&key, v4.version, Some(b"")).unwrap());
    assert_eq!(get(store, &key).unwrap().value, b"", "an empty value");
}

/// A swap writes over the current version (telling the new one, where the store
/// does, as a get then reads it) and, over a stale one, writes nothing and returns the
/// key as it stands.
fn swap_contract(store: &dyn VersionedStore, ns: &str) {
    let key = format!("{ns}/swapped");
    assert_eq!(
        store.swap(&key, 1, Some(b"x")).unwrap(),
        Swapped::Lost(None)
    );
    assert!(store.create(&key, b"first").unwrap());
    let v1 = get(store, &key).unwrap();
    let Swapped::Written(written) = store.swap(&key, v1.version, Some(b"second")).unwrap() else {
        panic!("a swap over the current version was not written");
    };
    let v2 = get(store, &key).unwrap();
    assert_eq!(v2.value, b"second");
    if let Some(version) = written {
        assert_eq!(version, v2.version, "the version the swap told");
    }
    assert_eq!(
        store.swap(&key, v1.version, Some(b"stale")).unwrap(),
        Swapped::Lost(Some(v2.clone())),
        "a stale swap returns the key as it stands"
    );
    assert_eq!(
        store.swap(&key, v2.version, None).unwrap(),
        Swapped::Written(None)
    );
    assert_eq!(get(store, &key), None, "deleted by the swap");
    assert_eq!(
        store.swap(&key, v2.version, None).unwrap(),
        Swapped::Lost(None)
    );
}

/// A listing holds exactly the keys that start with the prefix, in order, each with
/// the version a get reads.
fn list_contract(store: &dyn VersionedStore, ns: &str) {
    let ns = &format!("{ns}/listing");
    let prefix = format!("{ns}/list/");
    let inside = ["b", "a", "a/x", "c*", "é"].map(|s| format!("{prefix}{s}"));
    // Next to the prefix, and glob look-alikes of the one with glob characters.
    let glob = format!("{ns}/g*b?[x]/");
    let outside = [
        format!("{ns}/list"),
        format!("{ns}/lis"),
        format!("{ns}/list0"),
        format!("{ns}/listed/a"),
        format!("{ns}/gXXbQx/a"),
        format!("{ns}/g*bZx/a"),
    ];
    for key in inside.iter().chain(&outside) {
        assert!(store.create(key, key.as_bytes()).unwrap(), "{key}");
    }
    assert!(store.create(&format!("{glob}k"), b"g").unwrap());

    let listed = store.list(&prefix).unwrap();
    let mut want: Vec<&String> = inside.iter().collect();
    want.sort();
    let keys: Vec<&String> = listed.iter().map(|(k, _)| k).collect();
    assert_eq!(keys, want);
    for (key, versioned) in &listed {
        assert_eq!(versioned.value, key.as_bytes());
        assert_eq!(get(store, key).as_ref(), Some(versioned), "{key}");
    }

    let globbed = store.list(&glob).unwrap();
    assert_eq!(globbed.len(), 1, "{globbed:?}");
    assert_eq!(globbed[0].0, format!("{glob}k"));
    assert!(store.list(&format!("{ns}/nothing/")).unwrap().is_empty());
    let all = store.list(ns).unwrap();
    assert_eq!(all.len(), inside.len() + outside.len() + 1);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0), "in key order");
}

/// One increment of the decimal counter at `key` by read, CAS, retry; the attempts.
fn increment(store: &dyn VersionedStore, key: &str, deadline: Instant) -> usize {
    for attempt in 1.. {
        assert!(Instant::now() < deadline, "the counter did not finish");
        let done = match get(store, key) {
            None => store.create(key, b"1").unwrap(),
            Some(v) => {
                let n: u64 = std::str::from_utf8(&v.value).unwrap().parse().unwrap();
                let next = (n + 1).to_string();
                store
                    .compare_and_swap(key, v.version, Some(next.as_bytes()))
                    .unwrap()
            }
        };
        if done {
            return attempt;
        }
    }
    unreachable!()
}

/// One increment of the counter at `key` (which exists) by swaps alone: a lost swap's
/// value is the next try's start, with no read of its own; the attempts.
fn increment_by_swap(store: &dyn VersionedStore, key: &str, deadline: Instant) -> usize {
    let mut current = get(store, key);
    for attempt in 1.. {
        assert!(Instant::now() < deadline, "the counter did not finish");
        let v = current.expect("the counter exists");
        let n: u64 = std::str::from_utf8(&v.value).unwrap().parse().unwrap();
        let next = (n + 1).to_string();
        match store.swap(key, v.version, Some(next.as_bytes())).unwrap() {
            Swapped::Written(_) => return attempt,
            Swapped::Lost(now) => current = now,
        }
    }
    unreachable!()
}

/// `THREADS` threads, each with its own store, increment one counter `INCREMENTS`
/// times each from nothing (half by read and compare-and-swap, half by swaps alone,
/// once the first has created it): the final count is exact.
fn counter_is_exact(stores: &[&dyn VersionedStore], ns: &str) {
    assert_eq!(stores.len(), THREADS);
    let key = format!("{ns}/counter");
    let deadline = Instant::now() + COUNTER_DEADLINE;
    let attempts: usize = std::thread::scope(|s| {
        let handles: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(i, &store)| {
                let key = &key;
                s.spawn(move || {
                    (0..INCREMENTS)
                        .map(|_| match i % 2 {
                            1 if get(store, key).is_some() => {
                                increment_by_swap(store, key, deadline)
                            }
                            _ => increment(store, key, deadline),
                        })
                        .sum::<usize>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let total = (THREADS * INCREMENTS).to_string();
    assert_eq!(get(stores[0], &key).unwrap().value, total.as_bytes());
    eprintln!("{ns}: {total} increments in {attempts} attempts");
}

/// The whole table on `conn`, with one store per counter thread.
fn exercise(conn: &str, ns: &str) {
    let store = open_versioned(conn).expect("open");
    single_key_contract(store.as_ref(), ns);
    swap_contract(store.as_ref(), ns);
    list_contract(store.as_ref(), ns);
    let stores: Vec<Box<dyn VersionedStore>> = (0..THREADS)
        .map(|_| open_versioned(conn).unwrap())
        .collect();
    let refs: Vec<&dyn VersionedStore> = stores.iter().map(|s| s.as_ref()).collect();
    counter_is_exact(&refs, ns);
}

#[test]
fn in_memory_store() {
    let store = InMemoryVersionedStore::default();
    single_key_contract(&store, "t");
    swap_contract(&store, "t");
    list_contract(&store, "t");
    let shared: &dyn VersionedStore = &store;
    counter_is_exact(&[shared; THREADS], "t");
}

#[test]
fn http_metadata_server() {
    let server = HttpMetadataServer::start("127.0.0.1:0".parse().unwrap()).unwrap();
    let conn = format!("http://{}/metadata", server.local_addr());
    exercise(&conn, "mooncake/checkpoint");
    // The plain protocol's writes are versioned too, and see the versioned ones.
    let plain = MetadataSource::parse(&conn)
        .unwrap()
        .open()
        .unwrap()
        .unwrap();
    let store = open_versioned(&conn).unwrap();
    plain.set("plain/k", b"p").unwrap();
    let v = store.get_versioned("plain/k").unwrap().unwrap();
    assert_eq!(v.value, b"p");
    assert!(store
        .compare_and_swap("plain/k", v.version, Some(b"q"))
        .unwrap());
    assert_eq!(plain.get("plain/k").unwrap().unwrap(), b"q");
    assert_eq!(
        server.table().get_versioned("plain/k").unwrap().version,
        store.get_versioned("plain/k").unwrap().unwrap().version
    );
}

#[test]
fn http_client_refuses_a_server_without_versions() {
    // A server that answers like upstream's: 200 and the value, no ETag.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        use std::io::{BufRead, BufReader, Write};
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 2 {
            line.clear();
        }
        let mut stream = stream;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nv")
            .unwrap();
    });
    let store = open_versioned(&format!("http://{addr}/metadata")).unwrap();
    let err = store.get_versioned("k").unwrap_err().to_string();
    assert!(err.contains("ETag") && err.contains("'k'"), "{err}");
    server.join().unwrap();
}

/// POSTs `body` to etcd's JSON gateway at `path`.
fn gateway(etcd: &Etcd, path: &str, body: &Value) -> Value {
    let url = format!("http://127.0.0.1:{}{path}", etcd.port);
    let text = ureq::post(&url)
        .send_string(&body.to_string())
        .unwrap()
        .into_string()
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn etcd() {
    let Some(etcd) = Etcd::start("metadata_versioned::etcd") else {
        return;
    };
    exercise(&etcd.url(), "mooncake/checkpoint");
    // A bare host:port list (as upstream's Go store passes it) is etcd too.
    let bare = format!("127.0.0.1:{},127.0.0.1:{}", etcd.port, etcd.port);
    let store = open_versioned(&bare).unwrap();

    // Our version is etcd's mod_revision, as the Go client reads it ...
    let key = "mooncake/checkpoint/interop";
    assert!(store.create(key, b"{\"shards\":[]}").unwrap());
    let ours = store.get_versioned(key).unwrap().unwrap();
    let raw = gateway(&etcd, "/v3/kv/range", &json!({"key": b64(key.as_bytes())}));
    let kv = &raw["kvs"][0];
    assert_eq!(kv["mod_revision"], ours.version.to_string());
    assert_eq!(kv["value"], b64(b"{\"shards\":[]}"));
    // ... and the Go client's Compare(ModRevision(key), "=", rev) then Put holds with it.
    let txn = json!({
        "compare": [{"key": b64(key.as_bytes()), "result": "EQUAL", "target": "MOD",
                     "mod_revision": ours.version.to_string()}],
        "success": [{"request_put": {"key": b64(key.as_bytes()), "value": b64(b"theirs")}}],
    });
    assert_eq!(gateway(&etcd, "/v3/kv/txn", &txn)["succeeded"], true);
    // Their write is ours to read, and it moved the version past what we held.
    let theirs = store.get_versioned(key).unwrap().unwrap();
    assert_eq!(theirs.value, b"theirs");
    assert!(!store
        .compare_and_swap(key, ours.version, Some(b"late"))
        .unwrap());
    assert!(store.compare_and_swap(key, theirs.version, None).unwrap());
}

#[test]
fn redis() {
    let Some(redis) = Redis::start("metadata_versioned::redis", None) else {
        return;
    };
    exercise(&redis.url(), "mooncake/checkpoint");
    // The value stays where a plain GET (upstream's) finds it; a plain SET's value
    // reads at version 0 and can be swapped from there.
    let plain = MetadataSource::parse(&redis.url())
        .unwrap()
        .open()
        .unwrap()
        .unwrap();
    let store = open_versioned(&redis.url()).unwrap();
    assert!(store.create("mooncake/checkpoint/v", b"value").unwrap());
    assert_eq!(
        plain.get("mooncake/checkpoint/v").unwrap().unwrap(),
        b"value"
    );
    plain.set("plain/k", b"p").unwrap();
    let v = store.get_versioned("plain/k").unwrap().unwrap();
    assert_eq!(
        v,
        Versioned {
            value: b"p".to_vec(),
            version: 0
        }
    );
    assert!(store.compare_and_swap("plain/k", 0, Some(b"q")).unwrap());
    assert!(store.get_versioned("plain/k").unwrap().unwrap().version > 0);
    // The version keys and the counter never show in a listing.
    let all = store.list("").unwrap();
    assert!(all.iter().all(|(k, _)| !k.contains('\0')), "{all:?}");
    assert!(store.list("").unwrap().iter().any(|(k, _)| k == "plain/k"));
    // A key that is no string (another client's hash) is not listed, reads as absent,
    // and exists for create.
    redis_command(&redis, "HSET mooncake/checkpoint/hash f v");
    assert_eq!(
        store.get_versioned("mooncake/checkpoint/hash").unwrap(),
        None
    );
    assert!(!store.create("mooncake/checkpoint/hash", b"x").unwrap());
    let listed = store.list("mooncake/checkpoint/").unwrap();
    assert!(
        listed.iter().all(|(k, _)| !k.ends_with("/hash")),
        "{listed:?}"
    );
    // The NUL the layout reserves is refused in keys.
    let err = store.create("bad\0key", b"x").unwrap_err().to_string();
    assert!(err.contains("NUL") && err.contains("bad"), "{err}");
}

/// Sends one inline command to `redis`; its first reply line.
fn redis_command(redis: &Redis, command: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", redis.port)).unwrap();
    stream
        .write_all(format!("{command}\r\n").as_bytes())
        .unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    assert!(!line.starts_with('-'), "{command}: {line}");
    line
}
