//! Wire codecs that several protocols share: ZMTP (the KV-event transport), msgpack
//! (KV-event payloads), base64 (etcd's JSON gateway) and `code_enum!` (integer
//! code enums). Pure encoding and decoding; the ZMTP sockets run on [`crate::runtime`].

pub mod base64;
pub(crate) mod code_enum;
pub mod msgpack;
pub mod msgpack_decode;
pub mod zmtp;
