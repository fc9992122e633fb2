//! RPC / handshake daemon (spec §3): byte-exact framing, client <-> server for all four
//! message types, legacy frames, and robustness against bad or slow peers.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use mooncake::error::ErrorKind as TeErrorKind;
use mooncake::runtime::conn_threads::ConnLimits;
use mooncake::te::rpc::{Frame, MsgType, RpcClient, RpcHandler, RpcServer};
use mooncake::Error;
use parking_lot::Mutex;
use serde_json::{json, Value};

const MAX: u64 = 1 << 20;
/// The limits an engine applies by default.
const LIMITS: ConnLimits = ConnLimits {
    max_connections: 1024,
    max_per_peer: 256,
};
const HOST: &str = "127.0.0.1";

/// Records notifies; echoes connection requests; serves a fixed descriptor.
#[derive(Default)]
struct TestHandler {
    descriptor: Option<Value>,
    notifies: Mutex<Vec<(String, String)>>,
    connections: Mutex<Vec<Value>>,
}

impl RpcHandler for TestHandler {
    fn local_descriptor(&self) -> Option<Value> {
        self.descriptor.clone()
    }
    fn on_notify(&self, name: String, msg: String) {
        self.notifies.lock().push((name, msg));
    }
    fn on_connection(&self, request: &Value) -> Value {
        self.connections.lock().push(request.clone());
        json!({"local_gid": "", "local_lid": 0, "local_nic_path": "", "payload": "",
               "peer_nic_path": "", "qp_num": [], "reply_msg": ""})
    }
}

const SECOND: std::time::Duration = std::time::Duration::from_secs(1);

fn descriptor() -> Value {
    json!({"buffers": [{"addr": 139756792971264u64, "length": 100663296u64,
                        "name": "127.0.0.1:12345"}],
           "name": "127.0.0.1:12345", "protocol": "tcp", "rdma_server_name": "",
           "tcp_data_host": "127.0.0.1", "tcp_data_port": 15962, "tcp_proto_version": 2,
           "timestamp": "2026-11-29 10:15:40.988347"})
}

fn start(handler: Arc<TestHandler>) -> RpcServer {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    RpcServer::start(listener, handler, MAX, LIMITS).expect("start server")
}

fn client() -> RpcClient {
    RpcClient::new(Duration::from_secs(5), MAX)
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect((HOST, port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Reads until EOF (a reset also ends the stream) and returns what arrived.
fn read_all(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return out,
            Err(e) => panic!("read failed (no EOF from server?): {e}"),
        }
    }
}

/// Sends raw bytes, half-closes, and returns everything the server sent back.
fn raw_exchange(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut s = connect(port);
    // The server may already have rejected the frame and reset the connection.
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    read_all(&mut s)
}

fn typed(ty: u8, json: &[u8]) -> Vec<u8> {
    let mut v = (json.len() as u64 + 1).to_le_bytes().to_vec();
    v.push(ty);
    v.extend_from_slice(json);
    v
}

fn untyped(json: &[u8]) -> Vec<u8> {
    let mut v = (json.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(json);
    v
}

/// A one-shot fake peer: accepts one connection, records the request bytes (until the
/// client's frame is complete), answers `reply`, closes. Returns (port, request bytes).
fn fake_peer(reply: Vec<u8>) -> (u16, thread::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let h = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut head = [0u8; 8];
        s.read_exact(&mut head).unwrap();
        let mut body = vec![0u8; u64::from_le_bytes(head) as usize];
        s.read_exact(&mut body).unwrap();
        s.write_all(&reply).unwrap();
        let mut req = head.to_vec();
        req.extend_from_slice(&body);
        req
    });
    (port, h)
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn probe_request_bytes_are_exact() {
    let (port, peer) = fake_peer(typed(3, b"{\"status\":\"success\"}\n"));
    client().probe(HOST, port).unwrap();
    assert_eq!(
        peer.join().unwrap(),
        vec![0x04, 0, 0, 0, 0, 0, 0, 0, 0x03, 0x7b, 0x7d, 0x0a]
    );
}

#[test]
fn notify_request_and_reply_bytes_are_exact() {
    // Client side: the request frame.
    let (port, peer) = fake_peer(typed(2, b"{\"name\":\"\",\"notify_msg\":\"success\"}\n"));
    client().send_notify(HOST, port, "seg-a", "hello").unwrap();
    assert_eq!(
        peer.join().unwrap(),
        typed(2, b"{\"name\":\"seg-a\",\"notify_msg\":\"hello\"}\n")
    );

    // Server side: the reply frame.
    let handler = Arc::new(TestHandler::default());
    let server = start(Arc::clone(&handler));
    let got = raw_exchange(
        server.local_port(),
        &typed(2, b"{\"name\":\"peer\",\"notify_msg\":\"m1\"}\n"),
    );
    let json = b"{\"name\":\"\",\"notify_msg\":\"success\"}\n";
    let mut expect = vec![0x24, 0, 0, 0, 0, 0, 0, 0, 0x02];
    expect.extend_from_slice(json);
    assert_eq!(json.len() + 1, 0x24);
    assert_eq!(got, expect);
    assert_eq!(
        *handler.notifies.lock(),
        vec![("peer".to_string(), "m1".to_string())]
    );
}

#[test]
fn server_probe_and_metadata_replies_are_exact() {
    let handler = Arc::new(TestHandler {
        descriptor: Some(descriptor()),
        ..Default::default()
    });
    let server = start(handler);
    let port = server.local_port();
    assert_eq!(
        raw_exchange(port, &[4, 0, 0, 0, 0, 0, 0, 0, 3, b'{', b'}', b'\n']),
        typed(3, b"{\"status\":\"success\"}\n")
    );
    let body = "{\"buffers\":[{\"addr\":139756792971264,\"length\":100663296,\"name\":\"127.0.0.1:12345\"}],\"name\":\"127.0.0.1:12345\",\"protocol\":\"tcp\",\"rdma_server_name\":\"\",\"tcp_data_host\":\"127.0.0.1\",\"tcp_data_port\":15962,\"tcp_proto_version\":2,\"timestamp\":\"2026-11-29 10:15:40.988347\"}\n";
    assert_eq!(
        raw_exchange(port, &typed(1, b"{}\n")),
        typed(1, body.as_bytes())
    );
}

#[test]
fn client_server_all_four_types() {
    let handler = Arc::new(TestHandler {
        descriptor: Some(descriptor()),
        ..Default::default()
    });
    let server = start(Arc::clone(&handler));
    let port = server.local_port();
    let c = client();

    c.probe(HOST, port).unwrap();

    let own = json!({"name": "me", "protocol": "tcp", "buffers": []});
    assert_eq!(c.exchange_metadata(HOST, port, &own).unwrap(), descriptor());

    c.send_notify(HOST, port, "me", "done").unwrap();
    c.send_notify(HOST, port, "me", "").unwrap();
    assert_eq!(
        *handler.notifies.lock(),
        vec![
            ("me".to_string(), "done".to_string()),
            ("me".to_string(), String::new())
        ]
    );

    let req = json!({"local_nic_path": "a@mlx5_0", "peer_nic_path": "b@mlx5_0",
                     "qp_num": [1u32, 2u32], "local_lid": 7, "local_gid": "", "payload": "",
                     "reply_msg": ""});
    let reply = c.handshake(HOST, port, &req, SECOND * 30).unwrap();
    assert_eq!(reply["reply_msg"], "");
    assert_eq!(reply["qp_num"], json!([]));
    assert_eq!(*handler.connections.lock(), vec![req]);
}

#[test]
fn metadata_null_reply_is_an_error() {
    let server = start(Arc::new(TestHandler::default()));
    let port = server.local_port();
    assert_eq!(raw_exchange(port, &typed(1, b"{}\n")), typed(1, b"null\n"));
    let err = client()
        .exchange_metadata(HOST, port, &json!({}))
        .unwrap_err();
    assert!(matches!(err, Error::MalformedJson(_)), "{err:?}");
}

#[test]
fn notify_field_defaults_to_empty_strings() {
    let handler = Arc::new(TestHandler::default());
    let server = start(Arc::clone(&handler));
    let got = raw_exchange(server.local_port(), &typed(2, b"{\"name\":5}\n"));
    assert_eq!(
        got,
        typed(2, b"{\"name\":\"\",\"notify_msg\":\"success\"}\n")
    );
    assert_eq!(
        *handler.notifies.lock(),
        vec![(String::new(), String::new())]
    );
}

#[test]
fn legacy_untyped_frame_gets_untyped_reply() {
    let handler = Arc::new(TestHandler::default());
    let server = start(Arc::clone(&handler));
    let got = raw_exchange(server.local_port(), &untyped(b"{\"payload\":\"x\"}\n"));
    let json = b"{\"local_gid\":\"\",\"local_lid\":0,\"local_nic_path\":\"\",\"payload\":\"\",\"peer_nic_path\":\"\",\"qp_num\":[],\"reply_msg\":\"\"}\n";
    assert_eq!(got, untyped(json));
    assert_eq!(got[8], b'{');
    assert_eq!(*handler.connections.lock(), vec![json!({"payload": "x"})]);
}

#[test]
fn bad_lengths_close_without_reply() {
    let handler = Arc::new(TestHandler::default());
    let server = start(Arc::clone(&handler));
    let port = server.local_port();
    // Zero length.
    assert!(raw_exchange(port, &0u64.to_le_bytes()).is_empty());
    // One byte over the maximum, followed by a well-formed probe body.
    let mut over = (MAX + 1).to_le_bytes().to_vec();
    over.extend_from_slice(&[3, b'{', b'}', b'\n']);
    assert!(raw_exchange(port, &over).is_empty());
    // Absurd length.
    assert!(raw_exchange(port, &u64::MAX.to_le_bytes()).is_empty());
    // An HTTP request's first 8 bytes decode as a huge length.
    assert!(raw_exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").is_empty());
    // Type byte only: empty JSON does not parse.
    assert!(raw_exchange(port, &typed(3, b"")).is_empty());
    // The daemon still serves.
    client().probe(HOST, port).unwrap();
    assert!(handler.notifies.lock().is_empty());
}

#[test]
fn frame_of_exactly_max_length_is_served() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let handler = Arc::new(TestHandler::default());
    let server = RpcServer::start(listener, handler.clone(), 64, LIMITS).unwrap();
    // {"name":"<pad>","notify_msg":"m"}\n with length field exactly 64.
    let fixed = "{\"name\":\"\",\"notify_msg\":\"m\"}\n".len() + 1;
    let name = "n".repeat(64 - fixed);
    let json = format!("{{\"name\":\"{name}\",\"notify_msg\":\"m\"}}\n");
    assert_eq!(json.len() + 1, 64);
    assert!(!raw_exchange(server.local_port(), &typed(2, json.as_bytes())).is_empty());
    let json = format!("{{\"name\":\"{name}n\",\"notify_msg\":\"m\"}}\n");
    assert!(raw_exchange(server.local_port(), &typed(2, json.as_bytes())).is_empty());
    assert_eq!(handler.notifies.lock().len(), 1);
}

#[test]
fn truncated_frame_and_garbage_json_fail_only_their_connection() {
    let handler = Arc::new(TestHandler::default());
    let server = start(Arc::clone(&handler));
    let port = server.local_port();

    // Truncated: claims 100 bytes, sends 10, stays open.
    let mut truncated = connect(port);
    let mut partial = 100u64.to_le_bytes().to_vec();
    partial.extend_from_slice(&[2, b'{', b'"', b'n', b'a', b'm', b'e', b'"', b':', b'"']);
    truncated.write_all(&partial).unwrap();

    // Garbage JSON in a well-formed frame, stays open.
    let mut garbage = connect(port);
    garbage.write_all(&typed(2, b"{not json at all\n")).unwrap();

    // Meanwhile a good client is served.
    client().probe(HOST, port).unwrap();
    client().send_notify(HOST, port, "good", "ok").unwrap();

    // Garbage: closed without a reply (we have not closed our side).
    assert!(read_all(&mut garbage).is_empty());
    // Truncated: end it early; closed without a reply.
    truncated.shutdown(Shutdown::Write).unwrap();
    assert!(read_all(&mut truncated).is_empty());

    assert_eq!(
        *handler.notifies.lock(),
        vec![("good".to_string(), "ok".to_string())]
    );
    client().probe(HOST, port).unwrap();
}

#[test]
fn slow_clients_do_not_block_others() {
    let server = start(Arc::new(TestHandler::default()));
    let port = server.local_port();
    // Connect and send nothing.
    let silent: Vec<TcpStream> = (0..3).map(|_| connect(port)).collect();
    // One that sends half a header.
    let mut half = connect(port);
    half.write_all(&[4, 0, 0]).unwrap();
    for _ in 0..5 {
        client().probe(HOST, port).unwrap();
    }
    drop(silent);
    drop(half);
    client().probe(HOST, port).unwrap();
}

#[test]
fn many_concurrent_clients_are_served() {
    let handler = Arc::new(TestHandler::default());
    let server = start(Arc::clone(&handler));
    let port = server.local_port();
    let threads: Vec<_> = (0..16)
        .map(|i| {
            thread::spawn(move || {
                let c = client();
                for j in 0..5 {
                    c.send_notify(HOST, port, &format!("t{i}"), &format!("{j}"))
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(handler.notifies.lock().len(), 80);
}

#[test]
fn server_waits_for_peer_eof_after_half_close() {
    let server = start(Arc::new(TestHandler::default()));
    let mut s = connect(server.local_port());
    s.write_all(&typed(3, b"{}\n")).unwrap();
    // The reply arrives followed by EOF (server half-closed) while our side is still open.
    assert_eq!(read_all(&mut s), typed(3, b"{\"status\":\"success\"}\n"));
    drop(s);
}

#[test]
fn stop_is_prompt_idempotent_and_refuses_new_connections() {
    let mut server = start(Arc::new(TestHandler::default()));
    let port = server.local_port();
    // A connection sitting in a worker does not hold up stop().
    let mut idle = connect(port);
    client().probe(HOST, port).unwrap();
    server.stop();
    server.stop();
    assert!(read_all(&mut idle).is_empty());
    wait_until("listener to close", || client().probe(HOST, port).is_err());
    let err = client().probe(HOST, port).unwrap_err();
    assert_eq!(err.kind(), TeErrorKind::Socket, "{err:?}");
}

#[test]
fn client_errors_map_to_upstream_kinds() {
    // DNS failure.
    let err = client().probe("nonexistent-host.invalid", 1).unwrap_err();
    assert!(matches!(err, Error::Dns(_)), "{err:?}");

    // Connection refused.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let err = client().probe(HOST, port).unwrap_err();
    assert_eq!(err.kind(), TeErrorKind::Socket, "{err:?}");

    // Wrong reply type.
    let (port, peer) = fake_peer(typed(1, b"{\"status\":\"success\"}\n"));
    let err = client().probe(HOST, port).unwrap_err();
    assert_eq!(err.kind(), TeErrorKind::Socket, "{err:?}");
    peer.join().unwrap();

    // Untyped (legacy) reply to a typed request of another type.
    let (port, peer) = fake_peer(untyped(b"{\"status\":\"success\"}\n"));
    let err = client().probe(HOST, port).unwrap_err();
    assert_eq!(err.kind(), TeErrorKind::Socket, "{err:?}");
    peer.join().unwrap();

    // Short reply.
    let mut short = 50u64.to_le_bytes().to_vec();
    short.extend_from_slice(&[3, b'{']);
    let (port, peer) = fake_peer(short);
    let err = client().probe(HOST, port).unwrap_err();
    assert_eq!(err.kind(), TeErrorKind::Socket, "{err:?}");
    peer.join().unwrap();

    // Malformed reply JSON.
    let (port, peer) = fake_peer(typed(3, b"{oops\n"));
    let err = client().probe(HOST, port).unwrap_err();
    assert!(matches!(err, Error::MalformedJson(_)), "{err:?}");
    peer.join().unwrap();

    // Notify rejected: empty notify_msg.
    let (port, peer) = fake_peer(typed(2, b"{\"name\":\"\",\"notify_msg\":\"\"}\n"));
    let err = client().send_notify(HOST, port, "a", "b").unwrap_err();
    assert!(matches!(err, Error::Metadata(_)), "{err:?}");
    peer.join().unwrap();

    // Metadata reply that is not an object.
    let (port, peer) = fake_peer(typed(1, b"[1,2]\n"));
    let err = client()
        .exchange_metadata(HOST, port, &json!({}))
        .unwrap_err();
    assert!(matches!(err, Error::MalformedJson(_)), "{err:?}");
    peer.join().unwrap();

    // Reply larger than the client's cap.
    let (port, peer) = fake_peer(typed(3, &[b' '; 100]));
    let err = RpcClient::new(Duration::from_secs(5), 64)
        .probe(HOST, port)
        .unwrap_err();
    assert_eq!(err.kind(), TeErrorKind::Socket, "{err:?}");
    peer.join().unwrap();
}

#[test]
fn ipv6_loopback_when_available() {
    let Ok(listener) = TcpListener::bind("[::1]:0") else {
        return; // no IPv6 on this host
    };
    let server = RpcServer::start(listener, Arc::new(TestHandler::default()), MAX, LIMITS).unwrap();
    let port = server.local_port();
    client().probe("::1", port).unwrap();
    client().probe("[::1]", port).unwrap();
}

#[test]
fn frame_api_matches_wire() {
    let f = Frame::from_value(MsgType::Probe, &json!({}));
    assert_eq!(
        f.encode(),
        vec![4, 0, 0, 0, 0, 0, 0, 0, 3, b'{', b'}', b'\n']
    );
    let back = Frame::read_from(&mut &f.encode()[..], MAX).unwrap();
    assert_eq!(back, f);
    assert!(!back.legacy);
}

/// The upstream peer (installed by `scripts/upstream-peer.sh`), run as a Python script.
const UPSTREAM_PEER_SCRIPT: &str = r#"
import sys, ctypes
from mooncake.engine import TransferEngine
our_port = int(sys.argv[1])
te = TransferEngine()
assert te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
buf = ctypes.create_string_buffer(1 << 20)
addr = ctypes.addressof(buf)
assert te.register_memory(addr, 1 << 20) == 0
peer = f"127.0.0.1:{our_port}"
print("PROBE", te.send_probe(peer), flush=True)
print("FIRST", te.get_first_buffer_address(peer), flush=True)
print("PORT", te.get_rpc_port(), addr, flush=True)
sys.stdin.readline()
for n in te.get_notifies():
    print("NOTIFY", n.name, n.msg, flush=True)
print("DONE", flush=True)
"#;

/// Kills the child process if the test fails midway.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Interop with the real upstream daemon, both directions, using the peer virtualenv
/// (`MOONCAKE_PEER_VENV`, default `~/.cache/mooncake-peer/venv`). Skipped only with
/// `MOONCAKE_SKIP_INTEROP=1`.
#[test]
fn upstream_peer_interop() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};

    if std::env::var_os("MOONCAKE_SKIP_INTEROP").is_some() {
        eprintln!("skipping: MOONCAKE_SKIP_INTEROP is set");
        return;
    }
    let venv = std::env::var("MOONCAKE_PEER_VENV").unwrap_or_else(|_| {
        format!(
            "{}/.cache/mooncake-peer/venv",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let python = format!("{venv}/bin/python");
    assert!(
        std::path::Path::new(&python).exists(),
        "upstream peer not found at {venv}: run `bash scripts/upstream-peer.sh` \
         or set MOONCAKE_SKIP_INTEROP=1"
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let our_port = listener.local_addr().unwrap().port();
    let our_name = format!("127.0.0.1:{our_port}");
    let handler = Arc::new(TestHandler {
        descriptor: Some(json!({
            "buffers": [{"addr": 0x7f00_0000_1000u64, "length": 4096, "name": our_name}],
            "name": our_name, "protocol": "tcp", "rdma_server_name": "",
            "tcp_data_host": "127.0.0.1", "tcp_data_port": 1, "tcp_proto_version": 2,
            "timestamp": "2026-01-01 00:00:00.000000"})),
        ..Default::default()
    });
    let _server = RpcServer::start(listener, handler, MAX, LIMITS).unwrap();

    let mut child = KillOnDrop(
        Command::new(python)
            .args(["-c", UPSTREAM_PEER_SCRIPT, &our_port.to_string()])
            .env("MC_FORCE_TCP", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn upstream peer"),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(60))
            .expect("line from upstream peer")
    };

    // Upstream client -> our server: probe (type 3) and segment fetch (type 1).
    assert_eq!(next(), "PROBE 0");
    assert_eq!(next(), format!("FIRST {}", 0x7f00_0000_1000u64));

    // Our client -> upstream server: all four types.
    let line = next();
    let mut words = line.split_whitespace().skip(1);
    let port: u16 = words.next().unwrap().parse().unwrap();
    let addr: u64 = words.next().unwrap().parse().unwrap();
    let c = client();
    c.probe(HOST, port).unwrap();
    let desc = c
        .exchange_metadata(HOST, port, &json!({"name": our_name, "protocol": "tcp"}))
        .unwrap();
    assert_eq!(desc["name"], format!("127.0.0.1:{port}"));
    assert_eq!(desc["buffers"][0]["addr"], addr);
    c.send_notify(HOST, port, "rs-peer", "hello upstream")
        .unwrap();
    let reply = c
        .handshake(
            HOST,
            port,
            &json!({"local_nic_path": "", "peer_nic_path": "",
                                       "qp_num": [], "reply_msg": ""}),
            SECOND * 30,
        )
        .unwrap();
    assert_eq!(reply["reply_msg"], "");

    let stdin = child.0.stdin.as_mut().unwrap();
    stdin.write_all(b"\n").unwrap();
    stdin.flush().unwrap();
    assert_eq!(next(), "NOTIFY rs-peer hello upstream");
    assert_eq!(next(), "DONE");
}
