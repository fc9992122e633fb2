//! The master RPC codec against upstream's captured traffic (spec store.md §3.3,
//! `spec/golden/`, copied under `tests/data/wire_golden/`):
//!
//! * every request/response type literal and hash in `type_table.txt`, plus the six
//!   hashes derived and validated in §3.3, recomputed from our types;
//! * every captured frame of both sessions replayed: headers parsed, bodies decoded
//!   into the typed arguments/results (request type from the function id, response
//!   type from the request with the same seq on the same connection), re-encoded, and
//!   compared byte for byte with the capture once its metainfo and type literal are
//!   stripped (our encoder, like upstream's release builds, omits them).

use mooncake::wire::codec;
use mooncake::wire::coro_rpc::{self, FrameHeader, Method, RequestHeader, ResponseHeader};
use mooncake::wire::struct_pack::{self, literal_hash};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/wire_golden")
}

fn read(name: &str) -> String {
    let p = data_dir().join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
}

fn hex_u32(s: &str) -> u32 {
    u32::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex u32")
}

/// FNV-1a, 64 bit: a fingerprint of a vendored file.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The vendored copies are byte for byte the spec's captures (length and FNV-1a
/// recorded when they were copied), so a replay against an edited file cannot pass.
#[test]
fn vendored_golden_files_match_spec() {
    for (f, len, hash) in [
        ("type_table.txt", 2981, 0xf213_932a_f16e_b990_u64),
        ("golden_frames_session1.txt", 6873, 0x96a4_b1ad_94ea_2ccc),
        ("golden_frames_session2.txt", 9833, 0x6a33_d6ca_7400_13a8),
    ] {
        let bytes = read(f).into_bytes();
        assert_eq!(
            (bytes.len(), fnv1a(&bytes)),
            (len, hash),
            "{f} differs from the spec's capture"
        );
    }
}

#[test]
fn type_table_hashes_recomputed() {
    let table = read("type_table.txt");
    let mut seen = 0;
    for line in table.lines().filter(|l| !l.trim().is_empty()) {
        let name = line.split_whitespace().next().unwrap();
        let m = Method::from_name(name).unwrap_or_else(|| panic!("unknown method {name}"));
        let (req, rsp) = line.split_once('|').expect("req | rsp");
        if req.contains("<empty body>") {
            assert_eq!(codec::request_literal(m), None, "{name}: zero-argument");
        } else {
            let lit = codec::request_literal(m).expect("request literal");
            assert_eq!(hex(&lit), field(req, "req_ti"), "{name}: request literal");
            assert_eq!(
                literal_hash(&lit),
                hex_u32(field(req, "req_hash")),
                "{name}: req hash"
            );
        }
        let lit = codec::response_literal(m);
        assert_eq!(hex(&lit), field(rsp, "rsp_ti"), "{name}: response literal");
        assert_eq!(
            literal_hash(&lit),
            hex_u32(field(rsp, "rsp_hash")),
            "{name}: rsp hash"
        );
        seen += 1;
    }
    assert_eq!(seen, 21, "type_table.txt lists the 21 captured RPCs");

    // Derived from the grammar and validated against the wheel master (§3.3).
    let derived = [
        (Method::PutRevoke, 0x1b7a228a),
        (Method::UpsertRevoke, 0x1b7a228a),
        (Method::BatchPutRevoke, 0x94ee5d44),
        (Method::GetReplicaListByRegex, 0x7cf91ed8),
        (Method::BatchQueryIp, 0xa1eea206),
        (Method::BatchReplicaClear, 0x472b2fa2),
        (Method::GracefulUnmountSegment, 0x8e092e9c),
    ];
    for (m, h) in derived {
        let lit = codec::request_literal(m).unwrap();
        assert_eq!(literal_hash(&lit), h, "{}: derived request hash", m.name());
    }
}

/// One captured frame.
struct Frame {
    conn: u32,
    seq: u32,
    fid: Option<u32>,
    err: u8,
    body: Vec<u8>,
    line: String,
}

fn parse_session(text: &str) -> (Vec<Frame>, Vec<Frame>) {
    let (mut reqs, mut rsps) = (Vec::new(), Vec::new());
    let mut conn = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("=== conn ") {
            conn = rest.split_whitespace().next().unwrap().parse().unwrap();
            continue;
        }
        let kind = line.split_whitespace().next().unwrap_or("");
        if kind != "REQ" && kind != "RSP" {
            continue;
        }
        assert_eq!(field(line, "magic"), "21", "{line}");
        assert_eq!(field(line, "ver"), "0", "{line}");
        assert_eq!(field(line, "att"), "0", "{line}");
        let body = unhex(line.split("body=").nth(1).unwrap_or("").trim());
        assert_eq!(
            body.len(),
            field(line, "len").parse::<usize>().unwrap(),
            "{line}"
        );
        let seq = field(line, "seq").parse().unwrap();
        let f = if kind == "REQ" {
            let fid = field(line, "fid");
            let (id, name) = fid.split_once('(').unwrap();
            let id = hex_u32(id);
            let m = Method::from_id(id).unwrap_or_else(|| panic!("unknown id in {line}"));
            assert_eq!(m.name(), name.trim_end_matches(')'), "{line}");
            assert_eq!(field(line, "ser"), "0");
            Frame {
                conn,
                seq,
                fid: Some(id),
                err: 0,
                body,
                line: line.to_string(),
            }
        } else {
            Frame {
                conn,
                seq,
                fid: None,
                err: field(line, "err").parse().unwrap(),
                body,
                line: line.to_string(),
            }
        };
        if kind == "REQ" {
            reqs.push(f)
        } else {
            rsps.push(f)
        }
    }
    (reqs, rsps)
}

/// What our encoder must produce for a captured message: its hash (bit 0 set only when
/// lengths are wider than one byte), a metainfo byte with just the length width in
/// that case, then the captured payload.
fn stripped(captured: &[u8], want_literal: &[u8], what: &str) -> Vec<u8> {
    let h = struct_pack::split(captured).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(h.hash, literal_hash(want_literal), "{what}: hash");
    if let Some(t) = h.type_literal {
        assert_eq!(hex(t), hex(want_literal), "{what}: embedded type literal");
    }
    let mut out;
    if h.width == 1 {
        out = h.hash.to_le_bytes().to_vec();
    } else {
        out = (h.hash | 1).to_le_bytes().to_vec();
        out.push(h.metainfo.unwrap() & struct_pack::META_LEN_MASK);
    }
    out.extend_from_slice(h.payload);
    out
}

fn replay(session: &str) -> usize {
    let (reqs, rsps) = parse_session(&read(session));
    assert!(!reqs.is_empty() && !rsps.is_empty(), "{session}: no frames");
    let mut by_seq: HashMap<(u32, u32), Method> = HashMap::new();
    for r in &reqs {
        let m = Method::from_id(r.fid.unwrap()).unwrap();
        // The header round-trips through our codec.
        let hdr = RequestHeader::new(r.seq, r.fid.unwrap(), r.body.len() as u32);
        assert_eq!(RequestHeader::parse(&hdr.to_bytes()), Some(hdr));
        assert!(by_seq.insert((r.conn, r.seq), m).is_none(), "duplicate seq");
        match codec::request_literal(m) {
            None => assert!(r.body.is_empty(), "{}: zero-argument body", r.line),
            Some(lit) => {
                let want = stripped(&r.body, &lit, &r.line);
                let ours = codec::reencode_request(m, &r.body)
                    .unwrap_or_else(|e| panic!("{}: decode: {e}", r.line));
                assert_eq!(hex(&ours), hex(&want), "{}: re-encoded request", r.line);
                // And our type-info-free form decodes back to the same bytes.
                assert_eq!(codec::reencode_request(m, &ours).unwrap(), ours);
            }
        }
    }
    for r in &rsps {
        let m = by_seq
            .get(&(r.conn, r.seq))
            .copied()
            .unwrap_or_else(|| panic!("{}: no request with this seq", r.line));
        assert_eq!(r.err, coro_rpc::ERR_OK, "{}", r.line);
        let hdr = ResponseHeader::new(r.seq, r.err, r.body.len() as u32);
        assert_eq!(ResponseHeader::parse(&hdr.to_bytes()), Some(hdr));
        let lit = codec::response_literal(m);
        let want = stripped(&r.body, &lit, &r.line);
        let ours = codec::reencode_response(m, &r.body)
            .unwrap_or_else(|e| panic!("{}: decode: {e}", r.line));
        assert_eq!(hex(&ours), hex(&want), "{}: re-encoded response", r.line);
        assert_eq!(codec::reencode_response(m, &ours).unwrap(), ours);
    }
    assert_eq!(
        reqs.len(),
        rsps.len(),
        "{session}: one response per request"
    );
    reqs.len() + rsps.len()
}

#[test]
fn replay_session1() {
    assert!(replay("golden_frames_session1.txt") > 40);
}

#[test]
fn replay_session2() {
    assert!(replay("golden_frames_session2.txt") > 40);
}

/// Typed spot checks on decoded captures (values, not just bytes).
#[test]
fn decoded_values() {
    use mooncake::wire::master_api::*;
    let ready = unhex("35ccb31c0487800c01000105322e302e30");
    let v: Result<String, ErrorCode> = struct_pack::deserialize(&ready).unwrap();
    assert_eq!(v.as_deref(), Ok(SERVICE_VERSION));
    let ping = unhex("538f2a740487fd0301ff010001000000000000000002000000");
    let p: Result<PingResponse, ErrorCode> = struct_pack::deserialize(&ping).unwrap();
    assert_eq!(
        p,
        Ok(PingResponse {
            view_version_id: 0,
            client_status: ClientStatus::NeedRemount
        })
    );
    // BatchRemove reply: [Ok, Err(-704)].
    let br = unhex("cf52fc39048487fa010002010040fdffff");
    let v: Vec<Result<(), ErrorCode>> = struct_pack::deserialize(&br).unwrap();
    assert_eq!(v, vec![Ok(()), Err(ErrorCode::OBJECT_NOT_FOUND)]);
    let all = unhex("356866860403000200000000000000");
    assert_eq!(struct_pack::deserialize::<i64>(&all), Ok(2));
}
