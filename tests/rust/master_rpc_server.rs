//! The master's RPC listener: idle connections are closed after
//! `--rpc_conn_timeout_seconds`, and a client simply reconnects on its next call; the
//! connections a segment owner pings over tell the master when it died.

use mooncake::master::rpc_server::{RpcLimits, RpcServer};
use mooncake::master::{MasterConfig, MasterService};
use mooncake::wire::codec::{self, rpc, Rpc};
use mooncake::wire::coro_rpc;
use mooncake::wire::master_api::{
    ErrorCode, MasterApi, ObjectMeta, ReplicaLocation, ReplicaType, ReplicateConfig, Segment, Uuid,
};
use mooncake::wire::rpc_client::{self, MasterRpcClient};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[test]
fn idle_connections_close_and_clients_reconnect() {
    let master = MasterService::new(MasterConfig::default());
    let server = RpcServer::start(
        "127.0.0.1:0".parse().unwrap(),
        master.clone(),
        RpcLimits {
            idle_timeout: Some(Duration::from_millis(300)),
            ..RpcLimits::default()
        },
    )
    .unwrap();
    let addr = server.local_addr().to_string();

    let mut idle = TcpStream::connect(&addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(
        idle.read(&mut byte).unwrap(),
        0,
        "the master closes an idle connection"
    );

    let client =
        MasterRpcClient::connect(&addr, Duration::from_secs(10), Duration::from_secs(5)).unwrap();
    assert_eq!(client.service_ready().unwrap(), "2.0.0");
    std::thread::sleep(Duration::from_millis(700));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let answered = loop {
        match client.service_ready() {
            Ok(v) => break v,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("retrying after {e}");
            }
            Err(e) => panic!("client never recovered: {e}"),
        }
    };
    assert_eq!(answered, "2.0.0");
}

/// `seg(i)`: segment `i` of 64 KiB, named `127.0.0.<i>:<9000+i>`.
fn seg(i: u64) -> Segment {
    let name = format!("127.0.0.{i}:{}", 9000 + i);
    Segment {
        id: Uuid {
            first: 0x5E6,
            second: i,
        },
        name: name.clone(),
        base: 0x10_0000_0000 * i,
        size: 64 << 10,
        te_endpoint: name,
        protocol: "tcp".into(),
        host_id: format!("host-{i}"),
    }
}

/// Sends one request of `R` over `stream` and waits for its reply.
fn call<R: Rpc>(stream: &mut TcpStream, args: &R::Args) {
    let frame = coro_rpc::encode_request(1, R::METHOD.id(), &codec::encode_args(args));
    stream.write_all(&frame).unwrap();
    let (header, _) = coro_rpc::read_response(stream, 1 << 20)
        .unwrap()
        .expect("a reply");
    assert_eq!(header.err_code, coro_rpc::ERR_OK, "{}", R::METHOD.name());
}

/// The segment names `key`'s readable replicas are on (empty when it reads as a miss).
fn placed_on(m: &MasterService, key: &str) -> Vec<String> {
    match m.get_replica_list(key, "default") {
        Ok(r) => r
            .replicas
            .iter()
            .map(|d| match &d.location {
                ReplicaLocation::Memory(b) => b.transport_endpoint.clone(),
                other => panic!("{other:?}"),
            })
            .collect(),
        Err(e) => {
            assert_eq!(e, ErrorCode::OBJECT_NOT_FOUND);
            Vec::new()
        }
    }
}

fn poll_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A segment owner whose connections are closed by its side (its process died) is
/// unreachable at once: its objects read as misses and puts go elsewhere. A ping over
/// a new connection brings it back; without one it expires after the grace period.
/// A connection the master closes for idleness proves nothing and changes nothing.
#[test]
fn a_segment_owner_whose_connections_drop_is_unreachable_at_once() {
    let master = MasterService::new(MasterConfig {
        client_ttl: Duration::from_secs(3600),
        client_monitor_interval: Duration::from_millis(20),
        ..MasterConfig::default()
    });
    let server = RpcServer::start_with_events(
        "127.0.0.1:0".parse().unwrap(),
        master.clone(),
        Some(master.clone()),
        RpcLimits {
            idle_timeout: Some(Duration::from_millis(500)),
            ..RpcLimits::default()
        },
    )
    .unwrap();
    let addr = server.local_addr().to_string();
    let (owner, other) = (
        Uuid {
            first: 1,
            second: 1,
        },
        Uuid {
            first: 2,
            second: 2,
        },
    );
    let mut conn = TcpStream::connect(&addr).unwrap();
    call::<rpc::MountSegment>(&mut conn, &(seg(1), owner));
    master.mount_segment(&seg(2), other).unwrap();
    let on = |name: String| ReplicateConfig {
        preferred_segment: name,
        ..ReplicateConfig::default()
    };
    let put = |key: &str| {
        master
            .put_start(other, key, 1024, &on(seg(1).name), "default")
            .unwrap();
        master
            .put_end(
                other,
                &ObjectMeta {
                    key: key.into(),
                    checksum: None,
                },
                ReplicaType::All,
                "default",
            )
            .unwrap();
    };
    put("k");
    assert_eq!(placed_on(&master, "k"), [seg(1).name]);

    // The master closes the idle connection: nothing changes.
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(conn.read(&mut byte).unwrap(), 0);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(placed_on(&master, "k"), [seg(1).name]);

    // The owner pings over a new connection, then its side closes it.
    let mut conn = TcpStream::connect(&addr).unwrap();
    call::<rpc::Ping>(&mut conn, &(owner,));
    drop(conn);
    poll_until("the owner's objects read as misses", || {
        placed_on(&master, "k").is_empty()
    });
    put("k2");
    assert_eq!(
        placed_on(&master, "k2"),
        [seg(2).name],
        "placed on the lost segment"
    );

    // It pings again: reachable, its object readable again.
    let mut conn = TcpStream::connect(&addr).unwrap();
    call::<rpc::Ping>(&mut conn, &(owner,));
    assert_eq!(placed_on(&master, "k"), [seg(1).name]);

    // Gone for good: expired after the grace period, its segment unmounted.
    drop(conn);
    poll_until("the lost owner expires", || {
        master
            .segments_summary()
            .iter()
            .all(|s| s.name != seg(1).name)
    });
    assert!(placed_on(&master, "k").is_empty());
    assert_eq!(placed_on(&master, "k2"), [seg(2).name]);
}

/// A master past its fence (an HA leader whose lease may have lapsed) refuses every
/// request with a transport error (`RPC_FAIL` to our client, which then asks the
/// master view) and changes nothing; fenced again into the future, it answers.
#[test]
fn a_master_past_its_fence_refuses_every_request() {
    let master = MasterService::new(MasterConfig::default());
    let server = RpcServer::start(
        "127.0.0.1:0".parse().unwrap(),
        master.clone(),
        RpcLimits::default(),
    )
    .unwrap();
    let addr = server.local_addr().to_string();
    let client =
        MasterRpcClient::connect(&addr, Duration::from_secs(10), Duration::from_secs(5)).unwrap();
    let owner = Uuid {
        first: 3,
        second: 3,
    };
    let put =
        |c: &MasterRpcClient| c.put_start(owner, "k", 1024, &ReplicateConfig::default(), "default");

    master.serve_until(Instant::now());
    assert!(!master.is_serving());
    assert_eq!(client.service_ready(), Err(ErrorCode::RPC_FAIL));
    assert_eq!(
        client.mount_segment(&seg(1), owner),
        Err(ErrorCode::RPC_FAIL)
    );

    master.serve_until(Instant::now() + Duration::from_secs(600));
    assert_eq!(client.service_ready().as_deref(), Ok("2.0.0"));
    // The refused mount did not happen: there is nowhere to put.
    assert!(put(&client).is_err_and(|e| e != ErrorCode::RPC_FAIL));
    client.mount_segment(&seg(1), owner).unwrap();
    put(&client).unwrap();
}

/// A call records when its request was sent on the calling thread only, so a read
/// lease granted in the answer is counted from the attempt that was answered.
#[test]
fn a_call_records_its_send_on_the_calling_thread() {
    let master = MasterService::new(MasterConfig::default());
    let server = RpcServer::start(
        "127.0.0.1:0".parse().unwrap(),
        master.clone(),
        RpcLimits::default(),
    )
    .unwrap();
    let addr = server.local_addr().to_string();
    let client =
        MasterRpcClient::connect(&addr, Duration::from_secs(10), Duration::from_secs(5)).unwrap();
    let before = Instant::now();
    client.service_ready().unwrap();
    let after = Instant::now();
    let sent = rpc_client::last_sent_on_this_thread().expect("the send is recorded");
    assert!(
        before <= sent && sent <= after,
        "the send lies within the call"
    );
    let elsewhere = std::thread::spawn(rpc_client::last_sent_on_this_thread)
        .join()
        .unwrap();
    assert_eq!(elsewhere, None, "another thread sent nothing");
}
