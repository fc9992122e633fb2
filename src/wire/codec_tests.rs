//! Unit and property tests of the master RPC codec: literals from the spec, round trips
//! of every message type, and decoders fed arbitrary bytes.

use super::codec::{self, rpc, Expected, Rpc};
use super::coro_rpc::Method;
use super::master_api::*;
use super::struct_pack::{self, literal, literal_hash, Map, Pack};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use std::fmt::Debug;

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

const UUID: &str = "fd04048989ff";
const RC: &str = "fd 04 04 04 06 8504 0b 84800c 800c 84800c 0b 06 800c 85 84800c ff";

fn desc() -> String {
    format!(
        "fd 04 86 fdfd0404800c800cffff fdfd0404800c800cffff fd800c04ff fd{UUID}04800cff \
         fd800c04040401ff ff 01 ff"
    )
}

#[test]
fn literals_match_spec() {
    assert_eq!(literal::<Uuid>(), unhex(UUID));
    assert_eq!(literal::<ReplicateConfig>(), unhex(RC));
    assert_eq!(literal::<ReplicaDescriptor>(), unhex(&desc()));
    assert_eq!(
        literal::<GetReplicaListResponse>(),
        unhex(&format!("fd 84 {} 04 8504 ff", desc()))
    );
    assert_eq!(literal::<PingResponse>(), unhex("fd0301ff"));
    assert_eq!(literal::<StorageConfig>(), unhex("fd800c0b04ff"));
    assert_eq!(
        literal::<TaskAssignment>(),
        unhex(&format!("fd{UUID}01800c0302ff"))
    );
    assert_eq!(literal::<ObjectMeta>(), unhex("fd800c8504ff"));
    assert_eq!(
        literal::<Segment>(),
        unhex(&format!("fd{UUID}800c0404800c800c800cff"))
    );
}

#[test]
fn derived_hashes_match_spec() {
    let req = |m: Method| literal_hash(&codec::request_literal(m).unwrap());
    assert_eq!(req(Method::PutRevoke), 0x1b7a228a);
    assert_eq!(req(Method::UpsertRevoke), 0x1b7a228a);
    assert_eq!(req(Method::BatchPutRevoke), 0x94ee5d44);
    assert_eq!(req(Method::GetReplicaListByRegex), 0x7cf91ed8);
    assert_eq!(req(Method::BatchQueryIp), 0xa1eea206);
    assert_eq!(req(Method::BatchReplicaClear), 0x472b2fa2);
    assert_eq!(req(Method::GracefulUnmountSegment), 0x8e092e9c);
    assert_eq!(
        codec::response_literal(Method::BatchQueryIp),
        unhex(&format!("87 82 {UUID} 84800c 01"))
    );
    assert!(codec::response_literal(Method::GetReplicaListByRegex)
        .starts_with(&unhex(&format!("87 82 800c 84 {}", desc()))));
    assert_eq!(codec::request_literal(Method::ServiceReady), None);
}

#[test]
fn task_rpcs_match_spec() {
    let req = |m: Method| literal_hash(&codec::request_literal(m).unwrap());
    let rsp = |m: Method| literal_hash(&codec::response_literal(m));
    let table = [
        (Method::CreateCopyTask, 0x7801dba0, 0x5e43cb12, 0x8f9bae8a),
        (Method::CreateMoveTask, 0x97200d2c, 0x311dab7a, 0x8f9bae8a),
        (Method::QueryTask, 0x07816a74, 0x3c6d83e0, 0x02d57de6),
        (Method::FetchTasks, 0xdf141844, 0x759a9b84, 0x59e14526),
        (
            Method::MarkTaskToComplete,
            0xa7060015,
            0x22069e02,
            0xaf2868cc,
        ),
        (Method::CopyStart, 0x29836d38, 0xb5bddd1a, 0x7c1668cc),
        (Method::CopyEnd, 0xf696f1d9, 0x6a2101f4, 0xaf2868cc),
        (Method::CopyRevoke, 0x1f558b5c, 0x6a2101f4, 0xaf2868cc),
        (Method::MoveStart, 0x458e4ce0, 0xef2ee70c, 0x3e9ed4b8),
        (Method::MoveEnd, 0x636a8b47, 0x6a2101f4, 0xaf2868cc),
        (Method::MoveRevoke, 0x919b315f, 0x6a2101f4, 0xaf2868cc),
        (
            Method::DynamicReplicaCopyStart,
            0x21118d62,
            0x4e78be0e,
            0x7c1668cc,
        ),
        (
            Method::DynamicReplicaCopyEnd,
            0x4f22bba4,
            0xa1da4cba,
            0xaf2868cc,
        ),
        (
            Method::DynamicReplicaCopyRevoke,
            0x99768752,
            0xa1da4cba,
            0xaf2868cc,
        ),
    ];
    for (m, id, q, r) in table {
        assert_eq!((m.id(), req(m), rsp(m)), (id, q, r), "{}", m.name());
    }
    assert_eq!(
        codec::response_literal(Method::QueryTask),
        unhex(&format!("87 fd {UUID} 01 01 03 03 {UUID} 800c ff 01"))
    );
    assert_eq!(
        codec::response_literal(Method::MoveStart),
        unhex(&format!("87 fd {} 85 {} ff 01", desc(), desc()))
    );
}

#[test]
fn disk_tier_hashes_match_spec() {
    let req = |m: Method| literal_hash(&codec::request_literal(m).unwrap());
    let rsp = |m: Method| literal_hash(&codec::response_literal(m));
    let table = [
        (Method::MountLocalDiskSegment, 0xbfd50c0e, 0xaf2868cc),
        (Method::UnmountLocalDiskSegment, 0x3c6d83e0, 0xaf2868cc),
        (Method::OffloadObjectHeartbeat, 0xbfd50c0e, 0x724674e6),
        (Method::PollRemoveAll, 0x3c6d83e0, 0x90e800d2),
        (Method::ReportSsdCapacity, 0x70a841e4, 0xaf2868cc),
        (Method::NotifyOffloadSuccess, 0xd4e79a92, 0xaf2868cc),
        (Method::PromotionObjectHeartbeat, 0x3c6d83e0, 0x724674e6),
        (Method::PromotionAllocStart, 0xc6e729cc, 0x5c032896),
        (Method::NotifyPromotionSuccess, 0x6a2101f4, 0xaf2868cc),
        (Method::NotifyPromotionFailure, 0x6a2101f4, 0xaf2868cc),
        (Method::EvictDiskReplica, 0xf47f2e6a, 0xaf2868cc),
        (Method::BatchEvictDiskReplica, 0xd1251872, 0x39fc52ce),
    ];
    for (m, q, r) in table {
        assert_eq!((req(m), rsp(m)), (q, r), "{}", m.name());
    }
    assert_eq!(
        codec::request_literal(Method::NotifyOffloadSuccess).unwrap(),
        unhex(&format!(
            "fd {UUID} 84 fd 800c 800c 03 ff 84 fd 03 03 03 03 800c ff ff"
        ))
    );
    assert_eq!(
        codec::response_literal(Method::OffloadObjectHeartbeat),
        unhex("87 84 fd 800c 800c 03 ff 01")
    );
}

fn s() -> impl Strategy<Value = String> {
    "[a-z0-9:./_-]{0,12}"
}

fn uuid() -> impl Strategy<Value = Uuid> {
    (any::<u64>(), any::<u64>()).prop_map(|(first, second)| Uuid { first, second })
}

fn err() -> impl Strategy<Value = ErrorCode> {
    any::<i32>().prop_map(ErrorCode)
}

fn expected<T: Debug>(v: impl Strategy<Value = T>) -> impl Strategy<Value = Expected<T>> {
    prop_oneof![v.prop_map(Ok), err().prop_map(Err)]
}

fn segment() -> impl Strategy<Value = Segment> {
    (uuid(), s(), any::<u64>(), any::<u64>(), s(), s(), s()).prop_map(
        |(id, name, base, size, te_endpoint, protocol, host_id)| Segment {
            id,
            name,
            base,
            size,
            te_endpoint,
            protocol,
            host_id,
        },
    )
}

fn config() -> impl Strategy<Value = ReplicateConfig> {
    (
        (
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            select(SoftPinAction::ALL),
            option::of(any::<u64>()),
        ),
        (
            any::<bool>(),
            vec(s(), 0..3),
            s(),
            vec(s(), 0..2),
            any::<bool>(),
        ),
        (any::<u8>(), s(), option::of(vec(s(), 0..3))),
    )
        .prop_map(
            |((a, b, c, pin, ttl), (hard, ps, p, pn, same), (dt, host, groups))| ReplicateConfig {
                replica_num: a,
                nof_replica_num: b,
                dfs_replica_num: c,
                soft_pin_action: pin,
                soft_pin_ttl_ms: ttl,
                with_hard_pin: hard,
                preferred_segments: ps,
                preferred_segment: p,
                preferred_nof_segments: pn,
                prefer_alloc_in_same_node: same,
                data_type: dt,
                host_id: host,
                group_ids: groups,
            },
        )
}

fn buffer() -> impl Strategy<Value = BufferDescriptor> {
    (any::<u64>(), any::<u64>(), s(), s()).prop_map(|(size, buffer_address, protocol, te)| {
        BufferDescriptor {
            size,
            buffer_address,
            protocol,
            transport_endpoint: te,
        }
    })
}

fn location() -> impl Strategy<Value = ReplicaLocation> {
    prop_oneof![
        buffer().prop_map(ReplicaLocation::Memory),
        buffer().prop_map(ReplicaLocation::Nof),
        (s(), any::<u64>()).prop_map(|(file_path, object_size)| ReplicaLocation::Disk {
            file_path,
            object_size
        }),
        (uuid(), any::<u64>(), s()).prop_map(|(client_id, object_size, transport_endpoint)| {
            ReplicaLocation::LocalDisk {
                client_id,
                object_size,
                transport_endpoint,
            }
        }),
        (s(), any::<u64>(), any::<u64>(), any::<u64>(), any::<i32>()).prop_map(
            |(file_path, offset, object_size, aligned_size, shard_idx)| ReplicaLocation::Dfs {
                file_path,
                offset,
                object_size,
                aligned_size,
                shard_idx,
            }
        ),
    ]
}

fn status() -> impl Strategy<Value = ReplicaStatus> {
    select(ReplicaStatus::ALL)
}

fn descriptor() -> impl Strategy<Value = ReplicaDescriptor> {
    (any::<u64>(), location(), status()).prop_map(|(id, location, status)| ReplicaDescriptor {
        id,
        location,
        status,
    })
}

fn grlr() -> impl Strategy<Value = GetReplicaListResponse> {
    (
        vec(descriptor(), 0..3),
        any::<u64>(),
        option::of(any::<u64>()),
    )
        .prop_map(
            |(replicas, lease_ttl_ms, checksum)| GetReplicaListResponse {
                replicas,
                lease_ttl_ms,
                checksum,
            },
        )
}

fn meta() -> impl Strategy<Value = ObjectMeta> {
    (s(), option::of(any::<u64>())).prop_map(|(key, checksum)| ObjectMeta { key, checksum })
}

fn kind() -> impl Strategy<Value = ReplicaType> {
    select(ReplicaType::ALL)
}

fn ping() -> impl Strategy<Value = PingResponse> {
    (any::<i64>(), select(ClientStatus::ALL)).prop_map(|(v, client_status)| PingResponse {
        view_version_id: v,
        client_status,
    })
}

fn task() -> impl Strategy<Value = TaskAssignment> {
    (uuid(), any::<i32>(), s(), any::<i64>(), any::<u32>()).prop_map(
        |(id, task_type, payload, created_at_ms, max_retry)| TaskAssignment {
            id,
            task_type,
            payload,
            created_at_ms,
            max_retry,
        },
    )
}

/// Round trip with and without type info; decoding a truncated or corrupted copy never
/// panics; the re-encoding through the method table is stable.
fn check<T: Pack + PartialEq + Debug + 'static>(v: &T, flip: usize) {
    let plain = struct_pack::serialize(v);
    assert_eq!(&struct_pack::deserialize::<T>(&plain).unwrap(), v);
    let rich = struct_pack::serialize_with_type_info(v);
    assert_eq!(&struct_pack::deserialize::<T>(&rich).unwrap(), v);
    for cut in 0..plain.len() {
        assert!(struct_pack::deserialize::<T>(&plain[..cut]).is_err());
    }
    let mut bad = plain.clone();
    let i = 4 + flip % (bad.len() - 3).max(1);
    if i < bad.len() {
        bad[i] ^= 0xa5;
        let _ = struct_pack::deserialize::<T>(&bad);
    }
}

fn check_rpc<R: Rpc>(args: &R::Args, ret: &R::Ret, flip: usize)
where
    R::Args: PartialEq + Debug,
    R::Ret: PartialEq + Debug,
{
    check(args, flip);
    check(ret, flip);
    let body = codec::encode_args(args);
    assert_eq!(codec::reencode_request(R::METHOD, &body).unwrap(), body);
    let reply = struct_pack::serialize(ret);
    assert_eq!(codec::reencode_response(R::METHOD, &reply).unwrap(), reply);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn roundtrip_every_message(
        sg in vec(segment(), 0..3), c in uuid(), k in vec(s(), 0..4), t in s(),
        cfg in config(), n in any::<u64>(), m in vec(meta(), 0..3), kd in kind(),
        g in vec(expected(grlr()), 0..3), d in expected(vec(descriptor(), 0..3)),
        p in expected(ping()), ts in expected(vec(task(), 0..3)), f in any::<bool>(),
        flip in any::<usize>(), e in expected(Just(())), b in vec(expected(any::<bool>()), 0..4),
        lens in vec(any::<u64>(), 0..4), ips in vec((uuid(), vec(s(), 0..2)), 0..3),
    ) {
        let seg = sg.first().cloned().unwrap_or_default();
        check_rpc::<rpc::ServiceReady>(&(), &Ok(t.clone()), flip);
        check_rpc::<rpc::GetStorageConfig>(&(), &Ok(StorageConfig {
            fsdir: t.clone(), enable_disk_eviction: f, quota_bytes: n }), flip);
        check_rpc::<rpc::MountSegment>(&(seg, c), &e, flip);
        check_rpc::<rpc::ReMountSegment>(&(sg.clone(), c), &e, flip);
        check_rpc::<rpc::GracefulUnmountSegment>(&(c, c, n), &e, flip);
        check_rpc::<rpc::Ping>(&(c,), &p, flip);
        check_rpc::<rpc::FetchTasks>(&(c, n), &ts, flip);
        check_rpc::<rpc::BatchExistKey>(&(k.clone(), t.clone()), &b, flip);
        check_rpc::<rpc::GetReplicaList>(&(t.clone(), t.clone()),
            &g.first().cloned().unwrap_or(Err(ErrorCode(-704))), flip);
        check_rpc::<rpc::BatchGetReplicaList>(&(k.clone(), t.clone()), &g, flip);
        let by_regex = d.clone().map(|v| Map(k.iter().cloned().map(|x| (x, v.clone())).collect()));
        check_rpc::<rpc::GetReplicaListByRegex>(&(t.clone(), t.clone()), &by_regex, flip);
        check_rpc::<rpc::PutStart>(&(c, t.clone(), n, cfg.clone(), t.clone()), &d, flip);
        check_rpc::<rpc::PutEnd>(&(c, m.first().cloned().unwrap_or(ObjectMeta {
            key: t.clone(), checksum: None }), kd, t.clone()), &e, flip);
        check_rpc::<rpc::PutRevoke>(&(c, t.clone(), kd, t.clone()), &e, flip);
        check_rpc::<rpc::BatchPutStart>(&(c, k.clone(), lens, cfg, t.clone()), &vec![d; k.len()], flip);
        check_rpc::<rpc::BatchPutEnd>(&(c, m.clone(), kd, t.clone()), &vec![e; m.len()], flip);
        check_rpc::<rpc::BatchUpsertEnd>(&(c, m, t.clone()), &vec![e; 2], flip);
        check_rpc::<rpc::BatchUpsertRevoke>(&(c, k.clone(), t.clone()), &vec![e; 1], flip);
        check_rpc::<rpc::RemoveByRegex>(&(t.clone(), f, t.clone()), &Ok(n as i64), flip);
        check_rpc::<rpc::RemoveAll>(&(f, t.clone()), &(n as i64), flip);
        check_rpc::<rpc::BatchRemove>(&(k.clone(), f, t.clone()), &vec![e; k.len()], flip);
        check_rpc::<rpc::BatchQueryIp>(&(ips.iter().map(|x| x.0).collect(),), &Ok(Map(ips)), flip);
        check_rpc::<rpc::BatchReplicaClear>(&(k.clone(), c, t), &Ok(k), flip);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        raw in vec(any::<u8>(), 0..96), meta in any::<u8>(), which in any::<bool>(),
    ) {
        for &m in Method::ALL {
            let _ = codec::reencode_request(m, &raw);
            let _ = codec::reencode_response(m, &raw);
            // With the right hash in front, so the payload decoders are exercised too.
            let lit = if which { codec::request_literal(m) } else { Some(codec::response_literal(m)) };
            let Some(lit) = lit else { continue };
            let mut framed = literal_hash(&lit).to_le_bytes().to_vec();
            framed.extend_from_slice(&raw);
            let mut with_meta = (literal_hash(&lit) | 1).to_le_bytes().to_vec();
            with_meta.push(meta & !0b111);
            with_meta.extend_from_slice(&raw);
            for body in [&framed, &with_meta] {
                if which {
                    let _ = codec::reencode_request(m, body);
                } else {
                    let _ = codec::reencode_response(m, body);
                }
            }
        }
    }
}
