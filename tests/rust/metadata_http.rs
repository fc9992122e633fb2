//! HTTP metadata client against the HTTP metadata server (spec §2.4).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use mooncake::error::Error;
use mooncake::metadata::http::HttpMetadataStore;
use mooncake::metadata::http_server::HttpMetadataServer;
use mooncake::metadata::MetadataStore;

fn server() -> HttpMetadataServer {
    HttpMetadataServer::start("127.0.0.1:0".parse().unwrap()).expect("start server")
}

fn client(s: &HttpMetadataServer) -> HttpMetadataStore {
    HttpMetadataStore::new(&format!("http://{}/metadata", s.local_addr())).expect("client")
}

/// Sends raw bytes on a fresh connection and returns (status, body) of the first response.
fn raw(addr: SocketAddr, request: &[u8]) -> (u16, Vec<u8>) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    parse_response(&out)
}

fn parse_response(out: &[u8]) -> (u16, Vec<u8>) {
    let text = String::from_utf8_lossy(out);
    let status: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad response {text:?}"));
    let at = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of head");
    (status, out[at + 4..].to_vec())
}

fn simple(addr: SocketAddr, method: &str, target: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let mut req = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    raw(addr, &req)
}

#[test]
fn round_trip() {
    let s = server();
    let c = client(&s);
    let body = br#"{"ip_or_host_name":"127.0.0.1","rpc_port":15988}"#;
    c.set("mooncake/ram/a", body).unwrap();
    assert_eq!(c.get("mooncake/ram/a").unwrap().as_deref(), Some(&body[..]));
    c.set("mooncake/ram/a", b"{}").unwrap();
    assert_eq!(
        c.get("mooncake/ram/a").unwrap().as_deref(),
        Some(&b"{}"[..])
    );
    c.remove("mooncake/ram/a").unwrap();
    assert_eq!(c.get("mooncake/ram/a").unwrap(), None);
    assert!(s.table().is_empty());
}

#[test]
fn awkward_keys_round_trip() {
    let s = server();
    let c = client(&s);
    let keys = [
        "mooncake/rpc_meta/127.0.0.1:12345",
        "mooncake/ram/host name:123?x=1&y=2",
        "mooncake/cluster/nvmeof/a+b%2F~._-",
        "mooncake/ram/é",
    ];
    for (i, k) in keys.iter().enumerate() {
        let v = format!("{{\"i\":{i}}}");
        c.set(k, v.as_bytes()).unwrap();
        assert_eq!(s.table().get(k).as_deref(), Some(v.as_bytes()), "{k}");
        assert_eq!(c.get(k).unwrap().as_deref(), Some(v.as_bytes()), "{k}");
    }
    assert_eq!(s.table().len(), keys.len());
    for k in keys {
        c.remove(k).unwrap();
    }
    assert!(s.table().is_empty());
}

#[test]
fn wire_form_matches_upstream() {
    let s = server();
    let c = client(&s);
    c.set("mooncake/rpc_meta/127.0.0.1:12345", b"{\"a\":1}")
        .unwrap();
    let (st, body) = simple(
        s.local_addr(),
        "GET",
        "/metadata?key=mooncake%2Frpc_meta%2F127.0.0.1%3A12345",
        b"",
    );
    assert_eq!((st, body.as_slice()), (200, &b"{\"a\":1}"[..]));
}

#[test]
fn missing_and_errors() {
    let s = server();
    let c = client(&s);
    assert_eq!(c.get("mooncake/ram/nope").unwrap(), None);
    match c.remove("mooncake/ram/nope") {
        Err(Error::Metadata(m)) => {
            assert!(m.contains("404") && m.contains("mooncake/ram/nope"), "{m}")
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn rpc_meta_duplicates() {
    let s = server();
    let c = client(&s);
    let k = "mooncake/rpc_meta/10.0.0.1:12384";
    let a = br#"{"ip_or_host_name":"10.0.0.1","rpc_port":15228}"#;
    let b = br#"{"ip_or_host_name":"10.0.0.1","rpc_port":16000}"#;
    c.set(k, a).unwrap();
    c.set(k, a).unwrap(); // identical: "metadata unchanged"
    match c.set(k, b) {
        Err(Error::Metadata(m)) => assert!(
            m.contains("400") && m.contains("Duplicate rpc_meta key not allowed"),
            "{m}"
        ),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(c.get(k).unwrap().as_deref(), Some(&a[..]));
    let (st, body) = simple(
        s.local_addr(),
        "PUT",
        "/metadata?key=mooncake%2Frpc_meta%2F10.0.0.1%3A12384",
        a,
    );
    assert_eq!((st, body.as_slice()), (200, &b"metadata unchanged"[..]));
    // After a delete the key may be published with a new body.
    c.remove(k).unwrap();
    c.set(k, b).unwrap();
}

#[test]
fn raw_routes() {
    let s = server();
    let addr = s.local_addr();
    let (st, body) = simple(addr, "GET", "/health", b"");
    assert_eq!((st, body.as_slice()), (200, &b"OK"[..]));
    assert_eq!(simple(addr, "GET", "/metadata", b"").0, 400);
    assert_eq!(simple(addr, "PUT", "/metadata?key=", b"{}").0, 400);
    assert_eq!(simple(addr, "DELETE", "/metadata?other=1", b"").0, 400);
    assert_eq!(simple(addr, "POST", "/metadata?key=a", b"{}").0, 405);
    assert_eq!(simple(addr, "PATCH", "/metadata?key=a", b"{}").0, 405);
    assert_eq!(simple(addr, "GET", "/nope?key=a", b"").0, 404);
    let (st, body) = simple(addr, "GET", "/metadata?key=absent", b"");
    assert_eq!((st, body.as_slice()), (404, &b"metadata not found"[..]));
    assert_eq!(simple(addr, "DELETE", "/metadata?key=absent", b"").0, 404);
    // ureq directly, too.
    let resp = ureq::get(&format!("http://{addr}/health")).call().unwrap();
    assert_eq!(resp.status(), 200);
    match ureq::request("POST", &format!("http://{addr}/metadata?key=a")).call() {
        Err(ureq::Error::Status(405, _)) => {}
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn keep_alive_chunked_and_continue() {
    let s = server();
    let addr = s.local_addr();
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Chunked PUT, then a GET on the same connection, then close.
    c.write_all(
        b"PUT /metadata?key=k1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
          3\r\n{\"a\r\n4;ext=1\r\n\":1}\r\n0\r\nTrailer: x\r\n\r\n\
          GET /metadata?key=k1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    assert!(text.ends_with("\r\n\r\n{\"a\":1}"), "{text}");
    assert_eq!(text.matches("HTTP/1.1 200").count(), 2, "{text}");

    // Expect: 100-continue gets an interim response before the body is sent.
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(
        b"PUT /metadata?key=k2 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\
          Expect: 100-continue\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut interim = [0u8; 25];
    c.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.write_all(b"{}").unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).unwrap();
    assert_eq!(parse_response(&out).0, 200);
    assert_eq!(s.table().get("k2").as_deref(), Some(&b"{}"[..]));
}

#[test]
fn hostile_requests_do_not_hurt() {
    let s = server();
    let addr = s.local_addr();
    // A huge declared body is refused up front (tiny_http 0.12 would abort here).
    let (st, _) = raw(
        addr,
        b"PUT /metadata?key=a HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000000\r\n\r\nhi",
    );
    assert_eq!(st, 413);
    let (st, _) = raw(
        addr,
        b"PUT /metadata?key=a HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
    );
    assert_eq!(st, 413);
    let (st, _) = raw(
        addr,
        b"PUT /metadata?key=a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffff\r\n",
    );
    assert_eq!(st, 413);
    assert_eq!(raw(addr, b"garbage\r\n\r\n").0, 400);
    assert_eq!(raw(addr, b"GET / HTTP/9.9\r\n\r\n").0, 505);
    // Truncated body, then the peer goes away.
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"PUT /metadata?key=t HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc")
        .unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    assert!(out.is_empty());
    assert_eq!(s.table().get("t"), None);
    // Still serving.
    assert_eq!(simple(addr, "GET", "/health", b"").0, 200);
}

#[test]
fn big_values_and_concurrency() {
    let s = server();
    let prefix = format!("http://{}/metadata", s.local_addr());
    let big: Vec<u8> = (0..(2 << 20)).map(|i| b'a' + (i % 26) as u8).collect();
    let c = HttpMetadataStore::new(&prefix).unwrap();
    c.set("mooncake/ram/big", &big).unwrap();
    assert_eq!(
        c.get("mooncake/ram/big").unwrap().as_deref(),
        Some(&big[..])
    );
    std::thread::scope(|sc| {
        for t in 0..4 {
            let prefix = prefix.clone();
            sc.spawn(move || {
                let c = HttpMetadataStore::new(&prefix).unwrap();
                for i in 0..50 {
                    let k = format!("mooncake/ram/t{t}:{i}");
                    c.set(&k, k.as_bytes()).unwrap();
                    assert_eq!(c.get(&k).unwrap().as_deref(), Some(k.as_bytes()));
                    c.remove(&k).unwrap();
                }
            });
        }
    });
    assert_eq!(s.table().len(), 1);
}

#[test]
fn prefix_with_query() {
    let s = server();
    let c = HttpMetadataStore::new(&format!("http://{}/metadata?x=1", s.local_addr())).unwrap();
    c.set("mooncake/ram/q", b"1").unwrap();
    assert_eq!(s.table().get("mooncake/ram/q").as_deref(), Some(&b"1"[..]));
}

#[test]
fn closed_port_fails_fast() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = HttpMetadataStore::new(&format!("http://127.0.0.1:{port}/metadata")).unwrap();
    let t = Instant::now();
    assert!(matches!(c.get("k"), Err(Error::Metadata(_))));
    assert!(matches!(c.set("k", b"{}"), Err(Error::Metadata(_))));
    assert!(matches!(c.remove("k"), Err(Error::Metadata(_))));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

#[test]
fn silent_server_times_out() {
    // Accepts but never answers: the client gives up after about 3 s.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c =
        HttpMetadataStore::new(&format!("http://{}/metadata", l.local_addr().unwrap())).unwrap();
    let t = Instant::now();
    assert!(matches!(c.get("k"), Err(Error::Metadata(_))));
    let e = t.elapsed();
    assert!(
        e >= Duration::from_millis(2500) && e < Duration::from_secs(6),
        "{e:?}"
    );
}

#[test]
fn https_is_not_implemented() {
    match HttpMetadataStore::new("https://127.0.0.1:1/metadata") {
        Err(Error::NotImplemented(m)) => assert!(m.contains("TLS")),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn stop_with_idle_connections_is_prompt() {
    let s = server();
    let c = client(&s);
    c.set("mooncake/ram/x", b"1").unwrap(); // leaves a keep-alive connection open
    let idle = TcpStream::connect(s.local_addr()).unwrap();
    let t = Instant::now();
    s.stop();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    drop(idle);
    assert!(matches!(c.get("mooncake/ram/x"), Err(Error::Metadata(_))));
}

#[test]
fn table_is_shareable() {
    use mooncake::metadata::http_server::MetadataTable;
    use std::sync::Arc;
    let table = Arc::new(MetadataTable::new());
    table.put("pre", b"1".to_vec());
    let s = HttpMetadataServer::start_with_table("127.0.0.1:0".parse().unwrap(), table.clone())
        .unwrap();
    let c = client(&s);
    assert_eq!(c.get("pre").unwrap().as_deref(), Some(&b"1"[..]));
    c.set("post", b"2").unwrap();
    drop(s);
    assert_eq!(table.get("post").as_deref(), Some(&b"2"[..]));
}
