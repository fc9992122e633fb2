//! Every listening port is bounded: a flood of connections from one host is refused
//! beyond that host's share while other hosts are still served, silent or slow peers
//! hold only their own connections, and idle connections are closed. Peers on other
//! hosts are played by other loopback addresses (127.0.0.2, ...), which Linux routes to
//! `lo` like 127.0.0.1.

mod te_support;

use mooncake::config::Config;
use mooncake::master::ha::stream::{ReplicationServer, MAX_STANDBYS_PER_HOST};
use mooncake::master::kv_events::{KvEventConfig, KvEvents, MAX_SUBSCRIBERS_PER_PEER};
use mooncake::master::rpc_server::{RpcLimits, RpcServer as MasterRpcServer};
use mooncake::master::{MasterConfig, MasterService};
use mooncake::metadata::http_server::{HttpMetadataServer, MAX_CONNECTIONS_PER_PEER};
use mooncake::runtime::conn_threads::ConnLimits;
use mooncake::runtime::unix_server::UnixServer;
use mooncake::te::rpc::{RpcClient, RpcHandler, RpcServer};
use mooncake::te::transport::tcp::wire::Header;
use mooncake::te::Op;
use mooncake::te::{TaskStatus, TransferEngine};
use mooncake::wire::codec::{self, rpc, Rpc};
use mooncake::wire::coro_rpc;
use serde_json::Value;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};
use te_support::{pattern, req, run};

/// Only reached when something hangs; nothing asserts on timing.
const DEADLINE: Duration = Duration::from_secs(30);

/// A TCP connection to `to` from the loopback address `127.0.0.<host>`.
fn connect_from(host: u8, to: SocketAddr) -> TcpStream {
    let sockaddr = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip.octets()),
        },
        sin_zero: [0; 8],
    };
    let SocketAddr::V4(to) = to else {
        panic!("IPv4 only")
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let from = sockaddr(Ipv4Addr::new(127, 0, 0, host), 0);
    let to = sockaddr(*to.ip(), to.port());
    // SAFETY: plain socket calls on a socket we own, with valid sockaddr_in values of
    // the length given; the fd is handed to the TcpStream, which closes it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let stream = TcpStream::from_raw_fd(fd);
        assert_eq!(
            libc::bind(fd, (&from as *const libc::sockaddr_in).cast(), len),
            0
        );
        assert_eq!(
            libc::connect(fd, (&to as *const libc::sockaddr_in).cast(), len),
            0
        );
        stream
            .set_read_timeout(Some(DEADLINE))
            .expect("read timeout");
        stream
    }
}

fn local(port: u16) -> SocketAddr {
    SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into()
}

/// Whether the server closed `stream` (EOF or reset) before `DEADLINE`, reading and
/// discarding anything it sent first.
fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// Sends `bytes` and returns everything the server answers before closing.
fn exchange(stream: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
    let _ = stream.write_all(bytes);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return out,
        }
    }
}

fn poll_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Answers probes; the handshake is never reached in these tests.
struct Probes;

impl RpcHandler for Probes {
    fn local_descriptor(&self) -> Option<Value> {
        None
    }
    fn on_notify(&self, _name: String, _msg: String) {}
    fn on_connection(&self, request: &Value) -> Value {
        request.clone()
    }
}

fn probe_frame() -> Vec<u8> {
    let mut v = 3u64.to_le_bytes().to_vec();
    v.push(3);
    v.extend_from_slice(b"{}\n");
    v
}

#[test]
fn rpc_daemon_refuses_a_flooding_host_and_serves_the_others() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = RpcServer::start(listener, Arc::new(Probes), 1 << 20, ConnLimits::new(64, 4))
        .expect("start");
    let addr = local(server.local_port());
    // Host .2 holds its four connections, sending nothing (or half a frame).
    let mut held: Vec<TcpStream> = (0..4).map(|_| connect_from(2, addr)).collect();
    held[0].write_all(&[4, 0]).unwrap();
    // Its fifth is closed without an answer.
    let mut fifth = connect_from(2, addr);
    assert!(exchange(&mut fifth, &probe_frame()).is_empty());
    // More slow senders than the old worker pool had threads, from other hosts, ...
    let slow: Vec<TcpStream> = (3..8)
        .flat_map(|h| (0..2).map(move |_| connect_from(h, addr)))
        .collect();
    // ... and the daemon still answers everybody else.
    let client = RpcClient::new(Duration::from_secs(5), 1 << 20);
    for _ in 0..5 {
        client.probe("127.0.0.1", server.local_port()).unwrap();
    }
    let mut other = connect_from(9, addr);
    assert!(!exchange(&mut other, &probe_frame()).is_empty());
    // A silent connection is closed after the request deadline; its slot is free again.
    assert!(closed_by_server(&mut held[1]));
    drop(held);
    drop(slow);
    poll_until("host .2 is served again", || {
        !exchange(&mut connect_from(2, addr), &probe_frame()).is_empty()
    });
}

fn engine(config: Config) -> TransferEngine {
    let e = TransferEngine::with_config(config, "P2PHANDSHAKE", "127.0.0.1:0", false).unwrap();
    e.install("tcp", None).unwrap();
    e
}

#[test]
fn tcp_data_port_limits_hosts_and_closes_idle_lanes() {
    let target = engine(Config {
        advertised_ip: Some("127.0.0.1".into()),
        max_inbound_per_peer: 2,
        tcp_idle_timeout_secs: 1,
        // The idle deadline is checked whenever a read times out.
        tcp_progress_timeout_secs: 1,
        disable_same_host: true,
        ..Config::default()
    });
    let initiator = engine(Config {
        advertised_ip: Some("127.0.0.1".into()),
        tcp_lanes_per_peer: 2,
        disable_same_host: true,
        ..Config::default()
    });
    let len = 1 << 20;
    let mut remote = pattern(len, 1);
    target
        .register_memory(remote.as_mut_ptr() as u64, len as u64, "cpu:0", true)
        .unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    let data_port = initiator.segment_descriptor(id).unwrap().tcp_data_port;
    let addr = local(data_port);

    // Host .2 floods: two connections are served, the third is closed unanswered.
    let held: Vec<TcpStream> = (0..2).map(|_| connect_from(2, addr)).collect();
    let read = Header {
        size: 64,
        addr: remote.as_ptr() as u64,
        op: Op::Read,
        v2: true,
    };
    let mut third = connect_from(2, addr);
    assert!(exchange(&mut third, &read.encode()).is_empty());
    let mut answered = connect_from(3, addr);
    answered.write_all(&read.encode()).unwrap();
    let mut reply = [0u8; 8 + 64];
    answered.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[8..], &remote[..64]);

    // Meanwhile the initiator (host .1) moves data, ...
    let mut local_buf = vec![0u8; len];
    initiator
        .register_memory(local_buf.as_mut_ptr() as u64, len as u64, "cpu:0", true)
        .unwrap();
    let read_all = [req(
        mooncake::te::Op::Read,
        local_buf.as_ptr() as u64,
        id,
        remote.as_ptr() as u64,
        len as u64,
    )];
    assert_eq!(run(&initiator, &read_all), vec![TaskStatus::Completed]);
    assert_eq!(local_buf, remote);
    // ... the target closes the flood's connections (and the lanes) once idle, ...
    for mut s in held {
        assert!(closed_by_server(&mut s));
    }
    // ... and the lanes reconnect for the next transfer.
    remote.iter_mut().for_each(|b| *b = b.wrapping_add(7));
    assert_eq!(run(&initiator, &read_all), vec![TaskStatus::Completed]);
    assert_eq!(local_buf, remote);
}

/// Sends a ServiceReady request and returns whether a reply came back.
fn service_ready_answered(stream: &mut TcpStream) -> bool {
    let frame =
        coro_rpc::encode_request(1, rpc::ServiceReady::METHOD.id(), &codec::encode_args(&()));
    if stream.write_all(&frame).is_err() {
        return false;
    }
    matches!(coro_rpc::read_response(stream, 1 << 20), Ok(Some(_)))
}

#[test]
fn master_rpc_port_limits_hosts() {
    let master = MasterService::new(MasterConfig::default());
    let server = MasterRpcServer::start(
        "127.0.0.1:0".parse().unwrap(),
        master,
        RpcLimits {
            idle_timeout: None,
            connections: ConnLimits::new(16, 3),
        },
    )
    .unwrap();
    let addr = server.local_addr();
    let mut held: Vec<TcpStream> = (0..3).map(|_| connect_from(2, addr)).collect();
    assert!(service_ready_answered(&mut held[0]));
    // A slow sender: half a request header.
    held[1].write_all(&[1, 2, 3]).unwrap();
    let mut fourth = connect_from(2, addr);
    assert!(!service_ready_answered(&mut fourth));
    for host in 3..6 {
        assert!(service_ready_answered(&mut connect_from(host, addr)));
    }
    // A refused connection never took a slot; one that leaves frees its own.
    drop(held.pop());
    poll_until("host .2 is served again", || {
        service_ready_answered(&mut connect_from(2, addr))
    });
}

#[test]
fn http_servers_answer_a_flooding_host_503_and_serve_the_others() {
    let server = HttpMetadataServer::start("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = server.local_addr();
    let get = b"GET /metadata?key=k HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let held: Vec<TcpStream> = (0..MAX_CONNECTIONS_PER_PEER)
        .map(|_| connect_from(2, addr))
        .collect();
    let mut over = connect_from(2, addr);
    let answer = String::from_utf8_lossy(&exchange(&mut over, get)).to_string();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    let mut other = connect_from(3, addr);
    let answer = String::from_utf8_lossy(&exchange(&mut other, get)).to_string();
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    drop(held);
}

#[test]
fn replication_port_limits_hosts_and_drops_silent_or_garbage_peers() {
    let master = MasterService::new(MasterConfig::default());
    let server = ReplicationServer::start("127.0.0.1:0".parse().unwrap(), &master).unwrap();
    let addr = server.local_addr();
    let held: Vec<TcpStream> = (0..MAX_STANDBYS_PER_HOST)
        .map(|_| connect_from(2, addr))
        .collect();
    // Over the host's share: closed although it sends the right magic.
    let mut over = connect_from(2, addr);
    assert!(exchange(&mut over, b"MCHAREP1").is_empty());
    // Garbage and silence are closed too.
    let mut garbage = connect_from(3, addr);
    assert!(exchange(&mut garbage, b"GET / HTTP/1.1\r\n\r\n").is_empty());
    for mut silent in held {
        assert!(closed_by_server(&mut silent));
    }
    // A real standby from another host gets the stream (its first frame).
    let mut standby = connect_from(4, addr);
    standby.write_all(b"MCHAREP1").unwrap();
    let mut first = [0u8; 4];
    standby.read_exact(&mut first).unwrap();
    assert!(u32::from_le_bytes(first) >= 8);
}

#[test]
fn unix_servers_limit_connections_per_process() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr as UnixAddr, UnixStream};
    let name = format!("mooncake-port-limits-{}", std::process::id());
    let server = UnixServer::start(&name, "mc-test", ConnLimits::new(8, 2), |mut s| {
        let mut b = [0u8; 1];
        while s.read_exact(&mut b).is_ok() && s.write_all(&b).is_ok() {}
    })
    .unwrap();
    let addr = UnixAddr::from_abstract_name(&name).unwrap();
    let echo = |s: &mut UnixStream| -> bool {
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut b = [0u8; 1];
        s.write_all(b"x").is_ok() && s.read_exact(&mut b).is_ok()
    };
    let mut first = UnixStream::connect_addr(&addr).unwrap();
    let mut second = UnixStream::connect_addr(&addr).unwrap();
    assert!(echo(&mut first) && echo(&mut second));
    let mut third = UnixStream::connect_addr(&addr).unwrap();
    assert!(!echo(&mut third));
    drop(first);
    poll_until("a slot is free again", || {
        echo(&mut UnixStream::connect_addr(&addr).unwrap())
    });
    drop(server);
}

#[test]
fn kv_event_port_limits_hosts_and_drops_silent_or_garbage_peers() {
    let config = KvEventConfig {
        enabled: true,
        bind_endpoint: "tcp://127.0.0.1:0".into(),
        backend_id: "limits".into(),
        ..KvEventConfig::default()
    };
    let events = KvEvents::start(&config, |_| None);
    let addr = events.local_addr().expect("the publisher is enabled");
    let greeted = |stream: &mut TcpStream| {
        let mut g = [0u8; 64];
        stream.read_exact(&mut g).is_ok() && g[0] == 0xff && g[9] == 0x7f && g[10] == 3
    };
    let mut held: Vec<TcpStream> = (0..MAX_SUBSCRIBERS_PER_PEER)
        .map(|_| connect_from(2, addr))
        .collect();
    assert!(greeted(&mut held[0]));
    // Over the host's share: closed at accept, before any greeting.
    let mut over = connect_from(2, addr);
    assert!(exchange(&mut over, &[]).is_empty());
    // Another host is served; garbage gets it closed.
    let mut other = connect_from(3, addr);
    assert!(greeted(&mut other));
    let mut garbage = connect_from(4, addr);
    assert!(exchange(&mut garbage, b"GET / HTTP/1.1\r\n\r\n").len() <= 64);
    // Silent peers are closed at the end of the handshake time.
    assert!(closed_by_server(&mut held[0]));
    drop(held);
    poll_until("host .2 is served again", || {
        greeted(&mut connect_from(2, addr))
    });
}
