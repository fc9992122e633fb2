//! struct_pack encodings of the master's RPC types ([`super::master_api`]) and the
//! signature of every master RPC ([`Rpc`], one marker type per method in [`rpc`]).
//!
//! Literals follow upstream's declarations (spec store.md §3.3); `Uuid` is
//! `std::pair<u64, u64>`, a trivially copyable struct whose literal carries its packing
//! and alignment (`fd 04 04 89 89 ff`). Enums travel as their underlying integer.

use super::coro_rpc::Method;
use super::disk_tier_api::*;
use super::master_api::*;
use super::master_rpcs::master_rpcs;
use super::offload_rpc::BatchGetOffloadObjectResponse;
use super::struct_pack::{
    self, size_literal, DecodeError, DecodeResult, Map, Pack, Reader, Writer, T_END, T_I32,
    T_STRUCT, T_U64, T_VARIANT,
};

impl Pack for ErrorCode {
    const MIN_SIZE: usize = 4;
    fn type_literal(out: &mut Vec<u8>) {
        out.push(T_I32);
    }
    fn pack(&self, w: &mut Writer) {
        self.0.pack(w);
    }
    fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
        Ok(ErrorCode(i32::unpack(r)?))
    }
}

impl Pack for Uuid {
    const MIN_SIZE: usize = 16;
    fn type_literal(out: &mut Vec<u8>) {
        out.extend_from_slice(&[
            T_STRUCT,
            T_U64,
            T_U64,
            size_literal(8),
            size_literal(8),
            T_END,
        ]);
    }
    fn pack(&self, w: &mut Writer) {
        self.first.pack(w);
        self.second.pack(w);
    }
    fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
        Ok(Uuid {
            first: u64::unpack(r)?,
            second: u64::unpack(r)?,
        })
    }
}

/// A struct: `fd <fields> ff`, fields in declaration (wire) order.
macro_rules! pack_struct {
    ($ty:ident { $($f:ident : $t:ty),+ $(,)? }) => {
        impl Pack for $ty {
            const MIN_SIZE: usize = 0 $(+ <$t as Pack>::MIN_SIZE)+;
            fn type_literal(out: &mut Vec<u8>) {
                out.push(T_STRUCT);
                $(<$t as Pack>::type_literal(out);)+
                out.push(T_END);
            }
            fn pack(&self, w: &mut Writer) {
                $(self.$f.pack(w);)+
            }
            fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
                Ok($ty { $($f: <$t as Pack>::unpack(r)?,)+ })
            }
        }
    };
}

/// A `code_enum!` enum as its code; unknown codes do not decode.
macro_rules! pack_enum {
    ($($ty:ident as $int:ty),+ $(,)?) => {$(
        impl Pack for $ty {
            const MIN_SIZE: usize = std::mem::size_of::<$int>();
            fn type_literal(out: &mut Vec<u8>) {
                <$int as Pack>::type_literal(out);
            }
            fn pack(&self, w: &mut Writer) {
                self.code().pack(w);
            }
            fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
                $ty::from_code(<$int as Pack>::unpack(r)?)
                    .ok_or(DecodeError::Invalid(concat!("enum ", stringify!($ty))))
            }
        }
    )+};
}

pack_enum!(
    SoftPinAction as u8,
    ReplicaStatus as i32,
    ReplicaType as i32,
    ClientStatus as i32,
);

pack_struct!(Segment {
    id: Uuid,
    name: String,
    base: u64,
    size: u64,
    te_endpoint: String,
    protocol: String,
    host_id: String,
});

pack_struct!(ReplicateConfig {
    replica_num: u64,
    nof_replica_num: u64,
    dfs_replica_num: u64,
    soft_pin_action: SoftPinAction,
    soft_pin_ttl_ms: Option<u64>,
    with_hard_pin: bool,
    preferred_segments: Vec<String>,
    preferred_segment: String,
    preferred_nof_segments: Vec<String>,
    prefer_alloc_in_same_node: bool,
    data_type: u8,
    host_id: String,
    group_ids: Option<Vec<String>>,
});

pack_struct!(BufferDescriptor {
    size: u64,
    buffer_address: u64,
    protocol: String,
    transport_endpoint: String,
});

pack_struct!(GetReplicaListResponse {
    replicas: Vec<ReplicaDescriptor>,
    lease_ttl_ms: u64,
    checksum: Option<u64>,
});

pack_struct!(ObjectMeta {
    key: String,
    checksum: Option<u64>,
});

pack_struct!(PingResponse {
    view_version_id: i64,
    client_status: ClientStatus,
});

pack_struct!(StorageConfig {
    fsdir: String,
    enable_disk_eviction: bool,
    quota_bytes: u64,
});

pack_struct!(TaskAssignment {
    id: Uuid,
    task_type: i32,
    payload: String,
    created_at_ms: i64,
    max_retry: u32,
});

pack_struct!(TaskCompleteRequest {
    id: Uuid,
    status: i32,
    message: String,
});

pack_struct!(QueryTaskResponse {
    id: Uuid,
    task_type: i32,
    status: i32,
    created_at_ms: i64,
    last_updated_at_ms: i64,
    assigned_client: Uuid,
    message: String,
});

pack_struct!(CopyStartResponse {
    source: ReplicaDescriptor,
    targets: Vec<ReplicaDescriptor>,
});

pack_struct!(MoveStartResponse {
    source: ReplicaDescriptor,
    target: Option<ReplicaDescriptor>,
});

/// Appends `fd <lits> ff`.
fn struct_literal(out: &mut Vec<u8>, fields: &[fn(&mut Vec<u8>)]) {
    out.push(T_STRUCT);
    for f in fields {
        f(out);
    }
    out.push(T_END);
}

/// `variant<MemoryDescriptor{buffer}, NoFDescriptor{buffer}, DiskDescriptor{file_path,
/// object_size}, LocalDiskDescriptor{client_id, object_size, transport_endpoint},
/// DistributedFSDescriptor{file_path, offset, object_size, aligned_size, shard_idx}>`.
impl Pack for ReplicaLocation {
    const MIN_SIZE: usize = 1;
    fn type_literal(out: &mut Vec<u8>) {
        out.push(T_VARIANT);
        struct_literal(out, &[BufferDescriptor::type_literal]);
        struct_literal(out, &[BufferDescriptor::type_literal]);
        struct_literal(out, &[String::type_literal, u64::type_literal]);
        struct_literal(
            out,
            &[Uuid::type_literal, u64::type_literal, String::type_literal],
        );
        struct_literal(
            out,
            &[
                String::type_literal,
                u64::type_literal,
                u64::type_literal,
                u64::type_literal,
                i32::type_literal,
            ],
        );
        out.push(T_END);
    }
    fn pack(&self, w: &mut Writer) {
        match self {
            ReplicaLocation::Memory(b) => {
                w.put_u8(0);
                b.pack(w);
            }
            ReplicaLocation::Nof(b) => {
                w.put_u8(1);
                b.pack(w);
            }
            ReplicaLocation::Disk {
                file_path,
                object_size,
            } => {
                w.put_u8(2);
                file_path.pack(w);
                object_size.pack(w);
            }
            ReplicaLocation::LocalDisk {
                client_id,
                object_size,
                transport_endpoint,
            } => {
                w.put_u8(3);
                client_id.pack(w);
                object_size.pack(w);
                transport_endpoint.pack(w);
            }
            ReplicaLocation::Dfs {
                file_path,
                offset,
                object_size,
                aligned_size,
                shard_idx,
            } => {
                w.put_u8(4);
                file_path.pack(w);
                offset.pack(w);
                object_size.pack(w);
                aligned_size.pack(w);
                shard_idx.pack(w);
            }
        }
    }
    fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
        Ok(match r.u8()? {
            0 => ReplicaLocation::Memory(BufferDescriptor::unpack(r)?),
            1 => ReplicaLocation::Nof(BufferDescriptor::unpack(r)?),
            2 => ReplicaLocation::Disk {
                file_path: String::unpack(r)?,
                object_size: u64::unpack(r)?,
            },
            3 => ReplicaLocation::LocalDisk {
                client_id: Uuid::unpack(r)?,
                object_size: u64::unpack(r)?,
                transport_endpoint: String::unpack(r)?,
            },
            4 => ReplicaLocation::Dfs {
                file_path: String::unpack(r)?,
                offset: u64::unpack(r)?,
                object_size: u64::unpack(r)?,
                aligned_size: u64::unpack(r)?,
                shard_idx: i32::unpack(r)?,
            },
            _ => return Err(DecodeError::Invalid("variant index")),
        })
    }
}

pack_struct!(ReplicaDescriptor {
    id: u64,
    location: ReplicaLocation,
    status: ReplicaStatus,
});

pack_struct!(OffloadTaskItem {
    tenant_id: String,
    key: String,
    size: i64,
});

pack_struct!(StorageObjectMetadata {
    bucket_id: i64,
    offset: i64,
    key_size: i64,
    data_size: i64,
    transport_endpoint: String,
});

pack_struct!(BatchGetOffloadObjectResponse {
    batch_id: u64,
    pointers: Vec<u64>,
    transfer_engine_addr: String,
    gc_ttl_ms: u64,
});

pack_struct!(PromotionAllocation {
    memory_descriptor: ReplicaDescriptor,
});

/// The signature of one master RPC.
pub trait Rpc {
    /// Which method.
    const METHOD: Method;
    /// The argument tuple (`()` for none: an empty request body).
    type Args: Pack + 'static;
    /// The return type.
    type Ret: Pack + 'static;
}

/// `expected<T, ErrorCode>`.
pub type Expected<T> = Result<T, ErrorCode>;

/// The codec's half of the RPC table ([`master_rpcs!`]): one marker type per RPC
/// and the type-literal and re-encoding functions.
macro_rules! rpcs {
    (all [$({
        $(#[$doc:meta])* $m:ident: $args:ty => $ret:ty;
        [$($kind:tt)*] fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $api_ret:ty;
    })+] master [$($master:tt)*] tier [$($tier:tt)*]) => {
        /// One marker type per master RPC, named after the method.
        pub mod rpc {
            use super::*;
            $(
                #[doc = concat!("`", stringify!($m), "`.")]
                #[derive(Debug, Clone, Copy)]
                pub struct $m;
                impl Rpc for $m {
                    const METHOD: Method = Method::$m;
                    type Args = $args;
                    type Ret = $ret;
                }
            )+
        }

        /// The request type literal of `m` (`None` for a zero-argument method, whose body
        /// is empty).
        pub fn request_literal(m: Method) -> Option<Vec<u8>> {
            match m {
                $(Method::$m => args_literal::<$args>(),)+
            }
        }

        /// The response type literal of `m`.
        pub fn response_literal(m: Method) -> Vec<u8> {
            match m {
                $(Method::$m => struct_pack::literal::<$ret>(),)+
            }
        }

        /// Decodes a request body of `m` and encodes the arguments again (no metainfo).
        pub fn reencode_request(m: Method, body: &[u8]) -> DecodeResult<Vec<u8>> {
            match m {
                $(Method::$m => Ok(encode_args(&decode_args::<$args>(body)?)),)+
            }
        }

        /// Decodes a response body of `m` and encodes the result again (no metainfo).
        pub fn reencode_response(m: Method, body: &[u8]) -> DecodeResult<Vec<u8>> {
            match m {
                $(Method::$m => Ok(struct_pack::serialize(
                    &struct_pack::deserialize::<$ret>(body)?)),)+
            }
        }
    };
}

master_rpcs!(rpcs);

fn args_literal<A: Pack>() -> Option<Vec<u8>> {
    (!A::IS_VOID).then(struct_pack::literal::<A>)
}

/// The request body of an argument tuple: empty for `()`, else its struct_pack message.
pub fn encode_args<A: Pack + 'static>(args: &A) -> Vec<u8> {
    if A::IS_VOID {
        Vec::new()
    } else {
        struct_pack::serialize(args)
    }
}

/// Decodes a request body into an argument tuple; for `()` any body is accepted and
/// ignored (as upstream does for zero-argument methods).
pub fn decode_args<A: Pack + 'static>(body: &[u8]) -> DecodeResult<A> {
    if A::IS_VOID {
        A::unpack(&mut Reader::new(&[], 1))
    } else {
        struct_pack::deserialize(body)
    }
}
