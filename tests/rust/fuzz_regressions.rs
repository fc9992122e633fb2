//! The fuzz targets' checks on stable: every seed under `fuzz/seeds/<target>/` (encoder
//! output, upstream's golden frames, and every input a fuzzer ever crashed on) is
//! replayed through its target's check, and each crash found is pinned by name below.
//!
//! `cargo test --test fuzz_regressions -- --ignored write_seeds` rewrites the generated
//! seeds (`gen-*`) from the encoders and `tests/data/wire_golden/`.

#[path = "../../fuzz/src/checks.rs"]
mod checks;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fs;
use std::path::{Path, PathBuf};

use mooncake::fuzzing;

use mooncake::codec::zmtp::codec as zmtp;
use mooncake::master::ha::record::Record;
use mooncake::master::ha::record::{DiskReplicaState, ObjectState, ReplicaState};
use mooncake::store::dummy::wire::Op;
use mooncake::store::{ErrorCode, ReplicateConfig};
use mooncake::te::rpc::{encode_json, Frame, MsgType};
use mooncake::te::transport::rdma::handshake::HandShake;
use mooncake::te::transport::same_host::wire as shm;
use mooncake::te::transport::tcp::wire as tcp;
use mooncake::wire::coro_rpc::{self, Method};
use mooncake::wire::master_api::{ReplicaStatus, Segment, SoftPinAction, Uuid};
use mooncake::wire::struct_pack::{self, Map};
use serde_json::json;

/// Records the largest single allocation made on each thread.
struct Counting;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|c| c.set(c.get().max(size)));
}

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded contract: the caller upholds `GlobalAlloc::alloc`'s rules.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded contract: the caller upholds `GlobalAlloc::alloc_zeroed`'s rules.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: forwarded contract: `ptr` came from this allocator, i.e. from `System`,
        // and the caller upholds `GlobalAlloc::realloc`'s rules.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract: `ptr` came from this allocator, i.e. from `System`,
        // with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The largest single allocation `f` made on this thread.
fn largest_allocation(f: impl FnOnce()) -> usize {
    LARGEST.with(|c| c.set(0));
    f();
    LARGEST.with(Cell::get)
}

fn seeds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds")
}

#[test]
fn every_seed_passes_its_check() {
    for (name, check) in checks::TARGETS {
        let dir = seeds_dir().join(name);
        let mut files: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no seeds for {name}");
        for f in files {
            check(&fs::read(&f).unwrap());
        }
    }
}

#[test]
fn every_target_has_a_fuzz_target_file() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/fuzz_targets");
    for (name, _) in checks::TARGETS {
        assert!(dir.join(format!("{name}.rs")).is_file(), "{name}");
    }
}

/// Found by `resp_reply` in its first 30 s (seed `crash-63458313…`): a reply line that
/// is a bare CRLF was sliced `line[1..0]`, panicking the thread of whoever asked Redis
/// (metadata store or HA backend). It is a malformed reply now.
#[test]
fn resp_bare_crlf_is_malformed() {
    let replies = fuzzing::resp_replies(b"\r\n");
    assert_eq!(replies.len(), 1);
    assert!(replies[0].as_ref().unwrap_err().contains("malformed"));
    let crash = seeds_dir().join("resp_reply/crash-63458313b1403781ee7b94e96bb4c9109f27938d");
    let replies = fuzzing::resp_replies(&fs::read(crash).unwrap());
    assert!(matches!(replies.last(), Some(Err(_))), "{replies:?}");
}

/// A Redis bulk, an HTTP Content-Length or an HTTP chunk announced (up to the 64 MiB
/// caps) but not sent is refused without allocating what it announced: memory grows
/// with the bytes that arrive (both allocated the whole length up front before).
#[test]
fn announced_lengths_are_not_allocated_up_front() {
    const LIMIT: usize = 1 << 20;
    let big = largest_allocation(|| {
        let replies = fuzzing::resp_replies(b"$67108000\r\nabc");
        assert!(matches!(replies.as_slice(), [Err(_)]), "{replies:?}");
    });
    assert!(big < LIMIT, "{big} bytes allocated");
    for request in [
        &b"PUT /k HTTP/1.1\r\nContent-Length: 67108000\r\n\r\nabc"[..],
        b"PUT /k HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3fff000\r\nabc",
    ] {
        let big = largest_allocation(|| assert!(fuzzing::http_requests(request).is_empty()));
        assert!(big < LIMIT, "{big} bytes allocated");
    }
    // What is sent is still read.
    let ok = fuzzing::http_requests(b"PUT /k HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(ok, vec![Ok(("PUT".into(), "/k".into(), b"abc".to_vec()))]);
    let chunked = b"PUT /k HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    assert_eq!(
        fuzzing::http_requests(chunked)[0].as_ref().unwrap().2,
        b"abc"
    );
    assert_eq!(
        fuzzing::resp_replies(b"$3\r\nabc\r\n"),
        vec![Ok("Bulk(Some([97, 98, 99]))".to_string())]
    );
}

/// One REQ/RSP line of a golden file: method (requests; responses get theirs from the
/// request with the same connection and sequence number), header fields, body.
struct GoldenFrame {
    request: bool,
    conn: String,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

impl GoldenFrame {
    fn field(&self, name: &str) -> &str {
        let v = &self.fields.iter().find(|(k, _)| k == name).unwrap().1;
        v.split('(').next().unwrap()
    }

    fn num(&self, name: &str) -> u32 {
        let v = self.field(name);
        match v.strip_prefix("0x") {
            Some(hex) => u32::from_str_radix(hex, 16).unwrap(),
            None => v.parse().unwrap(),
        }
    }

    /// The frame as it was on the wire.
    fn wire(&self) -> Vec<u8> {
        let (seq, len) = (self.num("seq"), self.num("len"));
        let mut out = vec![
            self.num("magic") as u8,
            self.num("ver") as u8,
            self.num(if self.request { "ser" } else { "err" }) as u8,
            self.num("msg") as u8,
        ];
        out.extend_from_slice(&seq.to_le_bytes());
        if self.request {
            out.extend_from_slice(&self.num("fid").to_le_bytes());
        }
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&self.num("att").to_le_bytes());
        out.extend_from_slice(&self.body);
        out
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn golden_frames(file: &str) -> Vec<GoldenFrame> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/wire_golden")
        .join(file);
    let mut conn = String::new();
    let mut out = Vec::new();
    for line in fs::read_to_string(path).unwrap().lines() {
        if let Some(rest) = line.strip_prefix("=== conn ") {
            conn = rest.split(' ').next().unwrap().to_string();
            continue;
        }
        let request = line.starts_with("REQ ");
        if !request && !line.starts_with("RSP ") {
            continue;
        }
        let mut fields = Vec::new();
        let mut body = Vec::new();
        for kv in line[4..].split(' ') {
            let (k, v) = kv.split_once('=').unwrap();
            if k == "body" {
                body = hex(v);
            } else {
                fields.push((k.to_string(), v.to_string()));
            }
        }
        out.push(GoldenFrame {
            request,
            conn: conn.clone(),
            fields,
            body,
        });
    }
    out
}

/// Writes the generated seeds of every target (`gen-*`; other files are kept).
#[test]
#[ignore = "writes fuzz/seeds; run by hand after changing an encoder"]
fn write_seeds() {
    let mut seeds: Vec<(&str, String, Vec<u8>)> = Vec::new();
    let mut add = |target: &'static str, name: &str, bytes: Vec<u8>| {
        seeds.push((target, name.to_string(), bytes));
    };

    for (i, (size, addr, op, v2)) in [
        (4096u64, 0x7f00_0000_1000u64, mooncake::te::Op::Write, true),
        (1 << 20, 0x7f00_0010_0000, mooncake::te::Op::Read, true),
        (64, 0x1000, mooncake::te::Op::Read, false),
    ]
    .into_iter()
    .enumerate()
    {
        let h = tcp::Header { size, addr, op, v2 };
        add("tcp_header", &format!("header{i}"), h.encode().to_vec());
    }
    for (i, (kind, epoch, total, offset, len)) in [
        (3u32, 0u64, 8u64, 0u64, 8u32),
        (5, 7, 4 << 20, 512 << 10, 512 << 10),
        (1, 2, 0, 0, 0),
    ]
    .into_iter()
    .enumerate()
    {
        let mut bytes = vec![0u8; mooncake::pg::link::Header::LEN];
        mooncake::pg::link::Header {
            kind,
            epoch,
            total,
            offset,
            len,
        }
        .encode(&mut bytes);
        add("pg_chunk_header", &format!("chunk{i}"), bytes);
    }
    add(
        "tcp_header",
        "status_ok",
        tcp::encode_status(tcp::STATUS_OK).to_vec(),
    );
    add(
        "tcp_header",
        "status_rejected",
        tcp::encode_status(tcp::STATUS_REJECTED).to_vec(),
    );

    add("same_host_wire", "batch1", shm::encode_batch(1).to_vec());
    add(
        "same_host_wire",
        "batch_max",
        shm::encode_batch(shm::MAX_BATCH).to_vec(),
    );
    add(
        "same_host_wire",
        "share",
        shm::encode_share_request(0x7f00_0000_1000).to_vec(),
    );
    let reply = shm::ShareReply {
        kind: shm::ShareKind::Mapped,
        base: 0x7f00_0000_0000,
        len: 1 << 30,
        offset: 0,
        slot: 3,
        gen: 9,
    };
    add("same_host_wire", "share_reply", reply.encode().to_vec());
    let leased = shm::ShareReply {
        kind: shm::ShareKind::Leased,
        ..reply
    };
    add(
        "same_host_wire",
        "share_reply_leased",
        leased.encode().to_vec(),
    );
    let req = shm::Request {
        op: mooncake::te::Op::Write,
        remote: 0x7f00_0000_1000,
        local: 0x5500_0000_0000,
        len: 4096,
    };
    add("same_host_wire", "request", req.encode().to_vec());

    let handshake = HandShake {
        local_nic_path: "10.0.0.1:15000@mlx5_0".into(),
        local_lid: 7,
        local_gid: "fe:80:00:00:00:00:00:00:02:42:ac:ff:fe:11:00:02".into(),
        peer_nic_path: "10.0.0.2:15001@mlx5_1".into(),
        qp_num: vec![17, 18],
        ready_ack_supported: true,
        ..HandShake::default()
    };
    let descriptor = json!({"buffers":[{"addr":139756792971264u64,"length":100663296,"name":"127.0.0.1:12345"}],
        "name":"127.0.0.1:12345","protocol":"tcp","rdma_server_name":"","tcp_data_host":"127.0.0.1",
        "tcp_data_port":15962,"tcp_proto_version":2,"timestamp":"2026-11-29 10:15:40.988347"});
    let rdma_descriptor = json!({"name":"10.0.0.1:15000","protocol":"rdma",
        "devices":[{"gid":"00:00:00:00:00:00:00:00:00:00:ff:ff:7f:00:00:01","lid":0,"name":"rxe0"}],
        "buffers":[{"addr":140000000000000u64,"length":1048576,"lkey":[513],"name":"cpu:0","rkey":[513]}],
        "priority_matrix":{"cpu:0":[["rxe0"],[]]}});
    add(
        "rdma_handshake",
        "request",
        encode_json(&handshake.to_value()),
    );
    add(
        "rdma_handshake",
        "rejection",
        encode_json(&HandShake::rejection("no such NIC").to_value()),
    );
    add("segment_desc", "tcp", encode_json(&descriptor));
    add("segment_desc", "rdma", encode_json(&rdma_descriptor));
    add("rdma_topology", "two_numa", br#"{"cpu:0":[["mlx5_0","mlx5_1"],["mlx5_2"]],"cpu:1":[["mlx5_2"],["mlx5_0","mlx5_1"]],"cuda:0":[["mlx5_0"],[]]}"#.to_vec());
    add("rdma_topology", "empty", b"{}".to_vec());
    let frames = [
        ("probe", Frame::from_value(MsgType::Probe, &json!({}))),
        (
            "notify",
            Frame::from_value(
                MsgType::Notify,
                &json!({"name": "seg", "notify_msg": "hello"}),
            ),
        ),
        (
            "metadata",
            Frame::from_value(MsgType::Metadata, &descriptor),
        ),
        (
            "metadata_rdma",
            Frame::from_value(MsgType::Metadata, &rdma_descriptor),
        ),
        (
            "connection",
            Frame::from_value(MsgType::Connection, &handshake.to_value()),
        ),
        ("legacy", Frame::legacy(encode_json(&handshake.to_value()))),
    ];
    for (name, f) in &frames {
        add("rpc_frame", name, f.encode());
    }

    // Upstream's captured master traffic: method-selected bodies, whole frames, bodies.
    for file in ["golden_frames_session1.txt", "golden_frames_session2.txt"] {
        let session = &file[14..22];
        let frames = golden_frames(file);
        for (i, f) in frames.iter().enumerate() {
            let method = if f.request {
                Method::from_id(f.num("fid"))
            } else {
                frames
                    .iter()
                    .find(|q| q.request && q.conn == f.conn && q.num("seq") == f.num("seq"))
                    .and_then(|q| Method::from_id(q.num("fid")))
            };
            let Some(m) = method else { continue };
            let index = Method::ALL.iter().position(|x| *x == m).unwrap() as u8;
            let name = format!("{session}_{i:03}_{}", m.name());
            let mut selected = vec![index];
            selected.extend_from_slice(&f.body);
            let target = if f.request {
                "master_request"
            } else {
                "master_response"
            };
            add(target, &name, selected);
            add("coro_rpc_frame", &name, f.wire());
            if !f.body.is_empty() {
                add("struct_pack", &name, f.body.clone());
            }
        }
    }
    let empty = |m: Method| vec![Method::ALL.iter().position(|x| *x == m).unwrap() as u8];
    add("master_request", "remove_all", {
        let mut b = empty(Method::RemoveAll);
        b.extend(struct_pack::serialize(&(true, String::new())));
        b
    });
    add(
        "coro_rpc_frame",
        "error_reply",
        coro_rpc::encode_response(
            7,
            coro_rpc::ERR_INVALID_ARGUMENTS,
            &coro_rpc::error_body(coro_rpc::MSG_INVALID_ARGUMENTS),
        ),
    );
    add(
        "struct_pack",
        "strings",
        struct_pack::serialize(&vec!["a".to_string(), "bc".to_string()]),
    );
    add(
        "struct_pack",
        "map",
        struct_pack::serialize(&Map(vec![("k".to_string(), vec![1u64, 2])])),
    );
    add(
        "struct_pack",
        "tuple",
        struct_pack::serialize(&Some((1u8, -2i16, 3u32, -4i64, true))),
    );
    add(
        "struct_pack",
        "typeinfo",
        struct_pack::serialize_with_type_info(&vec!["a".to_string()]),
    );

    let op = |op: Op, body: Vec<u8>| {
        let mut b = vec![op as u8];
        b.extend(body);
        b
    };
    let keys = vec!["key0".to_string(), "key1".to_string()];
    let pieces = vec![
        vec![(0x7f00_0000_1000u64, 4096u64)],
        vec![(0x7f00_0000_2000, 100)],
    ];
    add(
        "dummy_wire",
        "hello",
        op(Op::Hello, struct_pack::serialize(&(1u32, 42u64))),
    );
    add(
        "dummy_wire",
        "map",
        op(
            Op::Map,
            struct_pack::serialize(&(0x7f00_0000_0000u64, 4096u64, 0u64)),
        ),
    );
    add(
        "dummy_wire",
        "write",
        op(
            Op::Write,
            struct_pack::serialize(&(
                false,
                keys.clone(),
                pieces.clone(),
                ReplicateConfig::default(),
            )),
        ),
    );
    add(
        "dummy_wire",
        "read",
        op(Op::Read, struct_pack::serialize(&(keys.clone(), pieces))),
    );
    add(
        "dummy_wire",
        "ranges",
        op(
            Op::Ranges,
            struct_pack::serialize(&vec![(
                1u64,
                vec![("key0".to_string(), vec![(1u64, 2u64, 3u64)])],
            )]),
        ),
    );
    add(
        "dummy_wire",
        "remove",
        op(Op::Remove, struct_pack::serialize(&(keys.clone(), true))),
    );
    add(
        "dummy_wire",
        "fetch",
        op(
            Op::Fetch,
            struct_pack::serialize(&(keys, vec![(0x7f00_0000_0000u64, 1u64 << 20)])),
        ),
    );
    add(
        "dummy_wire",
        "hello_reply",
        op(
            Op::Health,
            struct_pack::serialize(&Ok::<(String, bool), ErrorCode>(("host".into(), true))),
        ),
    );

    let client = Uuid {
        first: 1,
        second: 2,
    };
    let segment = Segment {
        id: Uuid {
            first: 3,
            second: 4,
        },
        name: "10.0.0.1:12345".into(),
        base: 0x7f00_0000_0000,
        size: 1 << 30,
        te_endpoint: "10.0.0.1:12345".into(),
        protocol: "tcp".into(),
        host_id: "h".into(),
    };
    let state = ObjectState {
        client,
        age_ns: 5,
        size: 4096,
        replicas: vec![ReplicaState {
            id: 9,
            segment: segment.id,
            addr: 0x7f00_0000_1000,
            size: 4096,
            status: ReplicaStatus::Complete,
        }],
        hard_pin: false,
        soft_pin_left_ns: Some(1000),
        pending_pin: Some((SoftPinAction::default(), 30)),
        checksum: Some(77),
        group_id: String::new(),
        disk_replicas: Vec::new(),
    };
    let on_disk = ObjectState {
        replicas: Vec::new(),
        disk_replicas: vec![DiskReplicaState {
            id: 10,
            client,
            size: 4096,
            endpoint: "10.0.0.1:40123".into(),
        }],
        ..state.clone()
    };
    add(
        "ha_record",
        "mount",
        Record::Mount { segment, client }.encode(),
    );
    add(
        "ha_record",
        "unmount",
        Record::Unmount { id: client }.encode(),
    );
    add(
        "ha_record",
        "object",
        Record::Object {
            tenant: "t".into(),
            key: "k".into(),
            state,
        }
        .encode(),
    );
    add(
        "ha_record",
        "object_on_disk",
        Record::Object {
            tenant: "t".into(),
            key: "d".into(),
            state: on_disk,
        }
        .encode(),
    );
    add(
        "ha_record",
        "removed",
        Record::Removed {
            tenant: String::new(),
            key: "k".into(),
        }
        .encode(),
    );
    add("ha_record", "dump_done", Record::DumpDone.encode());

    for (name, text) in [
        ("get", "GET /metadata?key=mooncake%2Fram%2Fseg HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("put", "PUT /metadata?key=k HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"),
        ("chunked", "POST /api HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n"),
        ("pipelined", "GET /a HTTP/1.1\r\n\r\nDELETE /metadata?key=k HTTP/1.1\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\n\r\n"),
        ("expect", "PUT /k HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi"),
        ("http10", "\r\nHEAD /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
    ] {
        add("http_request", name, text.as_bytes().to_vec());
    }
    for (name, text) in [
        ("status", "+OK\r\n"),
        ("error", "-ERR unknown command\r\n"),
        ("integer", ":1\r\n"),
        ("bulk", "$5\r\nhello\r\n"),
        ("nil", "$-1\r\n"),
        ("sequence", "+OK\r\n$3\r\nabc\r\n:0\r\n$0\r\n\r\n"),
    ] {
        add("resp_reply", name, text.as_bytes().to_vec());
    }
    for (name, frames) in zmtp_sessions() {
        let mut bytes = zmtp::greeting().to_vec();
        bytes.extend(zmtp::ready("SUB"));
        frames.iter().for_each(|f| bytes.extend(f));
        add("zmtp_subscriber", name, bytes);
    }
    for (name, text) in [
        ("any", "tcp://*:5557"),
        ("v6", "tcp://[::1]:0"),
        ("eth", "tcp://eth0:*"),
    ] {
        add("zmtp_subscriber", name, text.as_bytes().to_vec());
    }
    for (name, text) in [
        (
            "grant",
            r#"{"header":{"cluster_id":"1","member_id":"2","revision":"5","raft_term":"2"},"ID":"7587862254382513166","TTL":"3"}"#,
        ),
        (
            "keepalive",
            r#"{"result":{"header":{"revision":"5"},"ID":"7587862254382513166","TTL":"3"}}"#,
        ),
        (
            "keepalive_gone",
            r#"{"error":{"grpc_code":5,"http_code":404,"message":"requested lease not found","http_status":"Not Found"}}"#,
        ),
        (
            "txn",
            r#"{"header":{"revision":"12"},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"12"}}}]}"#,
        ),
        (
            "range",
            r#"{"header":{"revision":"12"},"kvs":[{"key":"a2V5","create_revision":"3","mod_revision":"12","version":"4","value":"dmFsdWU="}],"count":"1"}"#,
        ),
        (
            "endpoints",
            "etcd://10.0.0.1:2379,10.0.0.2:2379;10.0.0.3:2379",
        ),
    ] {
        add("etcd_reply", name, text.as_bytes().to_vec());
    }
    for (name, text) in [
        ("flags", "--port=50051\0-v\0--enable_ha\0--noenable_ha\0--default_kv_lease_ttl\0--eviction_ratio=0.1\0pos\0--\0rest"),
        ("config_file", r#"{"default_kv_lease_ttl":"5s","eviction_ratio":0.05,"eviction_high_watermark_ratio":0.95,"enable_multi_tenants":true,"client_ttl":10,"allocation_strategy":"free_ratio_first"}"#),
        ("etcd", "etcd://10.0.0.1:2379,10.0.0.2:2379"),
        ("redis", "redis://127.0.0.1:6379"),
        ("p2p", "P2PHANDSHAKE"),
        ("http", "http://127.0.0.1:8080/metadata"),
        ("v6", "[::1]:12345"),
    ] {
        add("config_flags", name, text.as_bytes().to_vec());
    }
    for (name, text) in [
        "4 GB",
        "1.5g",
        "512MB",
        "16 KiB",
        "0",
        "30s",
        "100ms",
        " 2H ",
        "aGVsbG8gd29ybGQ=",
        "true",
    ]
    .into_iter()
    .enumerate()
    {
        add(
            "size_strings",
            &format!("s{name}"),
            text.as_bytes().to_vec(),
        );
    }

    for (target, name, bytes) in seeds {
        let dir = seeds_dir().join(target);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(format!("gen-{name}")), bytes).unwrap();
    }
}

/// The generated ZMTP seeds get past the handshake into the subscriber session (so the
/// fuzzer starts from inputs that reach the frame decoder).
#[test]
fn zmtp_seeds_reach_the_session() {
    let outcome = |name: &str| {
        let bytes = fs::read(
            seeds_dir()
                .join("zmtp_subscriber")
                .join(format!("gen-{name}")),
        );
        fuzzing::zmtp_subscriber(&bytes.expect("seed written by write_seeds"))
    };
    assert_eq!(
        outcome("subscribe_all"),
        "end: UnexpectedEof, prefixes: 1, pongs: 0"
    );
    assert_eq!(
        outcome("subscribe_cancel"),
        "end: UnexpectedEof, prefixes: 0, pongs: 1"
    );
    assert_eq!(
        outcome("zmtp30_messages"),
        "end: UnexpectedEof, prefixes: 0, pongs: 0"
    );
}

/// A ZMTP command frame (short form): flags 0x04, size, name length, name, data.
fn zmtp_command(name: &str, data: &[u8]) -> Vec<u8> {
    let mut body = vec![name.len() as u8];
    body.extend(name.as_bytes());
    body.extend(data);
    let mut frame = vec![0x04, body.len() as u8];
    frame.extend(body);
    frame
}

/// Subscriber sessions after the handshake: 3.1 commands, 3.0 messages, PINGs.
fn zmtp_sessions() -> Vec<(&'static str, Vec<Vec<u8>>)> {
    vec![
        ("subscribe_all", vec![zmtp_command("SUBSCRIBE", b"")]),
        (
            "subscribe_cancel",
            vec![
                zmtp_command("SUBSCRIBE", b"kv"),
                zmtp_command("CANCEL", b"kv"),
                zmtp_command("PING", b"\x00\x64ctx"),
            ],
        ),
        (
            "zmtp30_messages",
            vec![
                zmtp::encode_message(&[b"\x01"]),
                zmtp::encode_message(&[b"\x00"]),
            ],
        ),
    ]
}
