//! One check per fuzz target: feeds the input to the decoder as its socket or file reader
//! would and asserts what must hold (no panic, round trips, bounds). Shared by the fuzz
//! targets (`fuzz_targets/*.rs`) and, through `#[path]`, by the stable regression test
//! `tests/rust/fuzz_regressions.rs`, which replays every seed under `fuzz/seeds/`.
//! Kept to Rust 1.80 so the regression test builds on the crate's MSRV.

use std::io::Cursor;

use mooncake::codec::base64;
use mooncake::codec::msgpack_decode;
use mooncake::codec::zmtp::endpoint::BindEndpoint;
use mooncake::conductor::api::Api;
use mooncake::conductor::events::{decode_batch, BlockEvent, KeyReader};
use mooncake::conductor::{Conductor, ConductorConfig};
use mooncake::config::flags::{parse_bool, parse_byte_size, FlagKind, Flags};
use mooncake::fuzzing;
use mooncake::host::addr::parse_host_port;
use mooncake::master::config::{config_pairs, parse_duration_ms, MasterConfig};
use mooncake::master::ha::record::Record;
use mooncake::metadata::descriptor::SegmentDesc;
use mooncake::metadata::{etcd, MetadataSource};
use mooncake::pg::link::Header as PgHeader;
use mooncake::runtime::http_server::HttpHandler;
use mooncake::store::dummy::wire::{self as dummy, Op, WireRangedRead};
use mooncake::store::{ErrorCode, Pieces, ReplicateConfig};
use mooncake::te::rpc::{Frame, MsgType};
use mooncake::te::transport::rdma::handshake::{split_nic_path, HandShake};
use mooncake::te::transport::rdma::{gid, topology::Topology};
use mooncake::te::transport::same_host::wire as shm;
use mooncake::te::transport::tcp::wire as tcp;
use mooncake::wire::codec;
use mooncake::wire::coro_rpc::{self, FrameHeader, Method, RequestHeader, ResponseHeader};
use mooncake::wire::master_api::{QueryTaskResponse, Uuid};
use mooncake::wire::offload_rpc;
use mooncake::wire::struct_pack::{self, Map};
use serde_json::Value;

/// A check: the input must be handled without a panic and keep its properties.
pub type Check = fn(&[u8]);

/// Every target by name, as `fuzz/fuzz_targets/<name>.rs` and `fuzz/seeds/<name>/`.
pub const TARGETS: &[(&str, Check)] = &[
    ("tcp_header", tcp_header),
    ("same_host_wire", same_host_wire),
    ("rpc_frame", rpc_frame),
    ("rdma_handshake", rdma_handshake),
    ("segment_desc", segment_desc),
    ("rdma_topology", rdma_topology),
    ("master_request", master_request),
    ("master_response", master_response),
    ("coro_rpc_frame", coro_rpc_frame),
    ("struct_pack", struct_pack_any),
    ("dummy_wire", dummy_wire),
    ("ha_record", ha_record),
    ("http_request", http_request),
    ("resp_reply", resp_reply),
    ("etcd_reply", etcd_reply),
    ("config_flags", config_flags),
    ("size_strings", size_strings),
    ("zmtp_subscriber", zmtp_subscriber),
    ("kv_event_payload", kv_event_payload),
    ("conductor_api", conductor_api),
    ("pg_chunk_header", pg_chunk_header),
];

fn head<const N: usize>(data: &[u8]) -> Option<&[u8; N]> {
    data.get(..N).and_then(|b| b.try_into().ok())
}

/// The master method an input's first byte selects, and the rest of the input.
pub fn method_and_body(data: &[u8]) -> Option<(Method, &[u8])> {
    let (&first, body) = data.split_first()?;
    Some((Method::ALL[usize::from(first) % Method::ALL.len()], body))
}

/// Mooncake PG: a chunk header a peer wrote into this rank's mailbox.
pub fn pg_chunk_header(data: &[u8]) {
    if let Some(h) = PgHeader::decode(data) {
        assert!(data.len() >= PgHeader::LEN);
        let mut out = [0u8; PgHeader::LEN];
        h.encode(&mut out);
        assert_eq!(PgHeader::decode(&out), Some(h));
    }
}

/// TCP data plane: the 24-byte request header and the v2 status frame.
pub fn tcp_header(data: &[u8]) {
    if let Some(b) = head::<{ tcp::HEADER_LEN }>(data) {
        let h = tcp::Header::decode(b);
        assert_eq!(tcp::Header::decode(&h.encode()), h);
    }
    if let Some(b) = head::<{ tcp::STATUS_LEN }>(data) {
        if let Some(code) = tcp::decode_status(b) {
            assert_eq!(&tcp::encode_status(code), b);
        }
    }
}

/// Same-host transport: batch/share header, share reply, request.
pub fn same_host_wire(data: &[u8]) {
    if let Some(b) = head::<{ shm::BATCH_HEADER_LEN }>(data) {
        match shm::decode_header(b) {
            Some(shm::Header::Batch(n)) => {
                assert!((1..=shm::MAX_BATCH).contains(&n));
                assert_eq!(&shm::encode_batch(n), b);
            }
            Some(shm::Header::Share) => {}
            None => {}
        }
    }
    if let Some(b) = head::<{ shm::SHARE_REPLY_LEN }>(data) {
        if let Some(r) = shm::ShareReply::decode(b) {
            assert_eq!(&r.encode(), b);
        }
    }
    if let Some(b) = head::<{ shm::REQUEST_LEN }>(data) {
        if let Some(r) = shm::Request::decode(b) {
            assert_eq!(&r.encode(), b);
        }
    }
}

/// RPC daemon: frames as the server and the client read them, then their JSON as the
/// server answers it (handshake, metadata, notify, probe) and the client reads it.
pub fn rpc_frame(data: &[u8]) {
    const MAX: u64 = 1 << 16;
    let mut reader = Cursor::new(data);
    while let Ok(frame) = Frame::read_from(&mut reader, MAX) {
        assert!((1..=MAX).contains(&frame.length_field()));
        let again = Frame::read_from(&mut frame.encode().as_slice(), MAX).unwrap();
        assert_eq!(again, frame);
        let Ok(value) = serde_json::from_slice::<Value>(&frame.json) else {
            continue;
        };
        match frame.msg_type {
            MsgType::Connection => rdma_handshake_value(&value),
            MsgType::Metadata => segment_desc_value(&value),
            MsgType::Notify => {
                let _ = (value.get("name"), value.get("notify_msg"));
            }
            MsgType::Probe => {}
        }
    }
}

/// The RDMA QP handshake JSON (`HandShakeDesc`).
pub fn rdma_handshake(data: &[u8]) {
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        rdma_handshake_value(&value);
    }
}

fn rdma_handshake_value(value: &Value) {
    let h = HandShake::from_value(value);
    assert_eq!(HandShake::from_value(&h.to_value()), h);
    for path in [&h.local_nic_path, &h.peer_nic_path] {
        if let Some((server, device)) = split_nic_path(path) {
            assert!(!server.is_empty() && !device.is_empty());
            let _ = parse_host_port(server, 12001);
        }
    }
    if let Some(g) = gid::from_text(&h.local_gid) {
        assert_eq!(gid::from_text(&gid::to_text(&g)), Some(g));
    }
}

/// Segment descriptors (metadata stores and the P2P exchange), RDMA part included.
pub fn segment_desc(data: &[u8]) {
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        segment_desc_value(&value);
    }
    let _ = SegmentDesc::from_slice(data);
}

fn segment_desc_value(value: &Value) {
    if let Ok(d) = SegmentDesc::from_json(value) {
        let again = SegmentDesc::from_json(&d.to_json()).expect("re-encoded descriptor");
        assert_eq!(again, d);
    }
}

/// The RDMA NIC topology JSON (`MC_CUSTOM_TOPO_JSON`, descriptors).
pub fn rdma_topology(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(t) = Topology::parse(text) {
        let again = Topology::from_value(&t.to_value()).expect("re-encoded topology");
        assert_eq!(again, t);
        let _ = t.nic_order();
        for loc in t.locations().map(str::to_string).collect::<Vec<_>>() {
            let _ = t.select(&loc, 0, 7);
        }
    }
}

/// A master request body, the method chosen by the first byte: what the master decodes
/// (and what a disk owner's offload port decodes).
pub fn master_request(data: &[u8]) {
    let Some((m, body)) = method_and_body(data) else {
        return;
    };
    if let Ok(bytes) = codec::reencode_request(m, body) {
        assert_eq!(codec::reencode_request(m, &bytes).as_ref(), Ok(&bytes));
    }
    // A disk owner's offload RPC requests, as its offload port decodes them.
    if let Ok(args) = struct_pack::deserialize::<offload_rpc::BatchGetArgs>(body) {
        let bytes = struct_pack::serialize(&args);
        assert_eq!(
            struct_pack::deserialize::<offload_rpc::BatchGetArgs>(&bytes),
            Ok(args)
        );
    }
    let _ = struct_pack::deserialize::<(u64,)>(body);
}

/// A master response body, the method chosen by the first byte: what the client decodes.
pub fn master_response(data: &[u8]) {
    let Some((m, body)) = method_and_body(data) else {
        return;
    };
    if let Ok(bytes) = codec::reencode_response(m, body) {
        assert_eq!(codec::reencode_response(m, &bytes).as_ref(), Ok(&bytes));
    }
    let _ = coro_rpc::error_message(body);
    // A disk owner's staging reply, as a reader of LOCAL_DISK replicas decodes it.
    if let Ok(reply) = struct_pack::deserialize::<offload_rpc::BatchGetReply>(body) {
        let bytes = struct_pack::serialize(&reply);
        assert_eq!(
            struct_pack::deserialize::<offload_rpc::BatchGetReply>(&bytes),
            Ok(reply)
        );
    }
}

/// coro_rpc frames as the master and the client read them off the socket.
pub fn coro_rpc_frame(data: &[u8]) {
    const MAX: usize = 1 << 16;
    if let Some(b) = head::<{ coro_rpc::REQ_HEADER_LEN }>(data) {
        if let Some(h) = RequestHeader::parse(b) {
            assert_eq!(&h.to_bytes(), b);
        }
    }
    if let Some(b) = head::<{ coro_rpc::RESP_HEADER_LEN }>(data) {
        if let Some(h) = ResponseHeader::parse(b) {
            assert_eq!(&h.to_bytes(), b);
        }
    }
    let mut reader = Cursor::new(data);
    while let Ok(Some((h, body))) = coro_rpc::read_request(&mut reader, MAX) {
        assert_eq!(body.len(), h.body_len as usize);
        if let Some(m) = Method::from_id(h.function_id) {
            let _ = codec::reencode_request(m, &body);
        }
    }
    let mut reader = Cursor::new(data);
    while let Ok(Some((h, body))) = coro_rpc::read_response(&mut reader, MAX) {
        assert_eq!(body.len(), h.body_len as usize);
        let _ = coro_rpc::error_message(&body);
    }
}

/// struct_pack without a known type, then as a few generic types.
pub fn struct_pack_any(data: &[u8]) {
    if let Ok(h) = struct_pack::split(data) {
        assert!(h.payload.len() <= data.len());
        assert!([1, 2, 4, 8].contains(&h.width));
    }
    round_trip::<Vec<String>>(data);
    round_trip::<Map<String, Vec<u64>>>(data);
    round_trip::<Option<(u8, i16, u32, i64, bool)>>(data);
    round_trip::<Result<Vec<Vec<u8>>, ErrorCode>>(data);
}

fn round_trip<T: struct_pack::Pack + PartialEq + std::fmt::Debug + 'static>(data: &[u8]) {
    if let Ok(v) = struct_pack::deserialize::<T>(data) {
        let again = struct_pack::deserialize::<T>(&struct_pack::serialize(&v)).unwrap();
        assert_eq!(again, v);
    }
}

/// The dummy-client protocol: a request body, the operation chosen by the first byte,
/// decoded as the real client's server does; and the replies a dummy decodes.
pub fn dummy_wire(data: &[u8]) {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let _ = match Op::from_byte(first) {
        Some(Op::Hello) => dummy::decode::<(u32, u64)>(body).map(drop),
        Some(Op::Map) => dummy::decode::<(u64, u64, u64)>(body).map(drop),
        Some(Op::Unmap) => dummy::decode::<u64>(body).map(drop),
        Some(Op::Write) => {
            dummy::decode::<(bool, Vec<String>, Vec<Pieces>, ReplicateConfig)>(body).map(drop)
        }
        Some(Op::Read) => dummy::decode::<(Vec<String>, Vec<Pieces>)>(body).map(drop),
        Some(Op::Ranges) => dummy::decode::<Vec<WireRangedRead>>(body).map(drop),
        Some(Op::Exist | Op::Size | Op::Replicas) => dummy::decode::<Vec<String>>(body).map(drop),
        Some(Op::Remove) => dummy::decode::<(Vec<String>, bool)>(body).map(drop),
        Some(Op::RemoveRegex) => dummy::decode::<(String, bool)>(body).map(drop),
        Some(Op::RemoveAll | Op::Segments) => dummy::decode::<bool>(body).map(drop),
        Some(Op::ReplicaClear) => dummy::decode::<(Vec<String>, String)>(body).map(drop),
        Some(Op::Fetch) => dummy::decode::<(Vec<String>, Vec<(u64, u64)>)>(body).map(drop),
        Some(Op::CreateCopyTask) => dummy::decode::<(String, Vec<String>)>(body).map(drop),
        Some(Op::CreateMoveTask) => dummy::decode::<(String, String, String)>(body).map(drop),
        Some(Op::QueryTask) => dummy::decode::<Uuid>(body).map(drop),
        Some(Op::Health | Op::Done) | None => Ok(()),
    };
    let _ = dummy::decode::<Result<(String, bool), ErrorCode>>(body);
    let _ = dummy::decode::<Vec<(u64, u64)>>(body);
    let _ = dummy::decode::<Vec<dummy::FetchResult>>(body);
    let _ = dummy::decode::<Result<QueryTaskResponse, ErrorCode>>(body);
}

/// An HA replication record (the standby's stream and the snapshot journal).
pub fn ha_record(data: &[u8]) {
    if let Some(r) = Record::decode(data) {
        assert_eq!(Record::decode(&r.encode()), Some(r));
    }
}

/// The HTTP/1.1 request parser of the metadata server and the master's admin port.
pub fn http_request(data: &[u8]) {
    for r in fuzzing::http_requests(data).into_iter().flatten() {
        assert!(!r.0.is_empty() && !r.1.is_empty());
    }
}

/// Redis (RESP) replies to the metadata store and the HA backend.
pub fn resp_reply(data: &[u8]) {
    let _ = fuzzing::resp_replies(data);
}

/// etcd JSON gateway replies; and endpoint lists.
pub fn etcd_reply(data: &[u8]) {
    let _ = fuzzing::etcd_reply(data);
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(list) = etcd::parse_endpoints(text) {
            assert!(!list.is_empty());
        }
    }
}

/// Command lines (NUL-separated arguments), the master's config file and flags, and
/// metadata connection strings.
pub fn config_flags(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let kind = |name: &str| match name {
        "port" | "config_path" | "metadata_server" => Some(FlagKind::Value),
        "enable_ha" | "v" => Some(FlagKind::Bool),
        _ => None,
    };
    if let Ok(flags) = Flags::parse(text.split('\0').map(str::to_string), kind) {
        let mut config = MasterConfig::default();
        for (name, value) in flags.iter() {
            let _ = config.set(name, value);
        }
        let _ = config.validate();
    }
    if let Ok(pairs) = config_pairs(text) {
        let mut config = MasterConfig::default();
        for (name, value) in &pairs {
            let _ = config.set(name, value);
        }
        let _ = config.validate();
    }
    let _ = MetadataSource::parse(text);
    let _ = parse_host_port(text, 12001);
}

/// Size, duration and boolean strings (flags, config files, the Python-facing
/// configuration) and base64 (etcd values).
pub fn size_strings(data: &[u8]) {
    if let Some(decoded) = std::str::from_utf8(data).ok().and_then(base64::decode) {
        assert_eq!(base64::decode(&base64::encode(&decoded)), Some(decoded));
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(n) = parse_byte_size("size", text) {
        assert_eq!(parse_byte_size("size", &n.to_string()), Ok(n));
    }
    if let Ok(d) = parse_duration_ms(text) {
        let ms = d.as_millis().to_string();
        assert_eq!(parse_duration_ms(&ms), Ok(d));
    }
    let _ = parse_bool("flag", text);
}

/// What a KV-event subscriber sends the PUB socket: the greeting, READY, then frames
/// (SUBSCRIBE, CANCEL and PING commands, ZMTP 3.0 subscription messages); and the
/// socket's bind endpoint syntax.
pub fn zmtp_subscriber(data: &[u8]) {
    let _ = fuzzing::zmtp_subscriber(data);
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(endpoint) = BindEndpoint::parse(text) {
            assert!(text.starts_with("tcp://"));
            let _ = endpoint.socket_addr(|_| None);
        }
    }
}

/// A KV-event payload as a conductor's subscription reads it from a publisher: the
/// msgpack envelope with Mooncake maps or vLLM tagged arrays. Every event read names
/// at least one block.
pub fn kv_event_payload(data: &[u8]) {
    let _ = msgpack_decode::decode(data);
    if let Ok(batch) = decode_batch(data, &KeyReader::default()) {
        for event in &batch.events {
            match event {
                BlockEvent::Stored { hashes, .. } | BlockEvent::Removed { hashes, .. } => {
                    assert!(!hashes.is_empty())
                }
                BlockEvent::Cleared => {}
            }
        }
    }
}

/// A request body to the conductor's HTTP API (the first byte picks the endpoint), on
/// a conductor with one prefill and one decode instance: every answer is one of the
/// contract's statuses with a JSON body.
pub fn conductor_api(data: &[u8]) {
    const CALLS: [(&str, &str); 8] = [
        ("POST", "/v1/instances"),
        ("POST", "/v1/events"),
        ("POST", "/v1/schedule"),
        ("POST", "/v1/complete"),
        ("POST", "/query"),
        ("POST", "/query_by_hash"),
        ("POST", "/unregister"),
        ("DELETE", "/v1/instances/p0"),
    ];
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let api = Api(Conductor::new(ConductorConfig::default()));
    for spec in [
        &br#"{"id":"p0","role":"prefill","kv_capacity_blocks":16,"max_batch":0}"#[..],
        &br#"{"id":"d0","role":"decode","kv_capacity_blocks":16,"max_batch":2}"#[..],
    ] {
        assert_eq!(api.handle("POST", "/v1/instances", spec).status, 201);
    }
    let (method, path) = CALLS[usize::from(first) % CALLS.len()];
    let reply = api.handle(method, path, body);
    assert!(
        [200, 201, 400, 404, 409, 429, 503].contains(&reply.status),
        "{path}: {}",
        reply.status
    );
    assert!(serde_json::from_slice::<Value>(&reply.body).is_ok());
}
