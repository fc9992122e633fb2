//! Wire codecs that several protocols share: ZMTP (the KV-event transport), msgpack
//! (KV-event payloads), base64 (etcd's JSON gateway), `code_enum!` (integer code
//! enums) and `debug_by_field!` (`Debug` by one value). Pure encoding and decoding;
//! the ZMTP sockets run on [`crate::runtime`].

pub mod base64;
pub(crate) mod code_enum;
pub(crate) mod debug_by_field;
pub mod msgpack;
pub mod msgpack_decode;
pub mod zmtp;
