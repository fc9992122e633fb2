//! Wire codecs that several protocols share: ZMTP (the KV-event transport), msgpack
//! (KV-event payloads) and base64 (etcd's JSON gateway). Pure encoding and decoding;
//! the ZMTP sockets run on [`crate::runtime`].

pub mod base64;
pub mod msgpack;
pub mod msgpack_decode;
pub mod zmtp;
