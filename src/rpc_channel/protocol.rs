//! The wire of upstream's `RpcInterface` (spec rpc-interface §2): coro_rpc frames to
//! two functions of `mooncake::RpcCommunicator`. Data up to [`INLINE_MAX`] bytes
//! travels in the body as a struct_pack string; larger data, and tensors, as the
//! frame's attachment. Replies are a struct_pack `void`.

use crate::wire::coro_rpc::function_id_of;
use crate::wire::struct_pack::{
    self, serialize_with_type_info, DecodeResult, Pack, Reader, Writer,
};

/// `handleDataTransfer(string_view)`.
pub const DATA_FUNCTION: &str = "mooncake::RpcCommunicator::handleDataTransfer";
/// `handleTensorTransfer()`: the tensor's bytes in the attachment.
pub const TENSOR_FUNCTION: &str = "mooncake::RpcCommunicator::handleTensorTransfer";
/// The largest payload sent in the body; larger ones go as the attachment.
pub const INLINE_MAX: usize = 1024;
/// The reply attachment to data received as an attachment.
pub const OK_ATTACHMENT: &[u8] = b"ok";

/// What a send carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `send_data`.
    Data,
    /// `send_tensor`.
    Tensor,
}

impl Kind {
    /// The function id of the call.
    pub fn function_id(self) -> u32 {
        match self {
            Kind::Data => function_id_of(DATA_FUNCTION),
            Kind::Tensor => function_id_of(TENSOR_FUNCTION),
        }
    }

    /// The call a function id names.
    pub fn of(function_id: u32) -> Option<Kind> {
        [Kind::Data, Kind::Tensor]
            .into_iter()
            .find(|k| k.function_id() == function_id)
    }
}

/// The `string_view` upstream's data call takes: any bytes, typed as a string.
struct Bytes(Vec<u8>);

impl Pack for Bytes {
    const MIN_SIZE: usize = 1;
    fn type_literal(out: &mut Vec<u8>) {
        String::type_literal(out);
    }
    fn pack(&self, w: &mut Writer) {
        w.put_len(self.0.len());
        w.put_bytes(&self.0);
    }
    fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let n = r.seq_len(1)?;
        Ok(Bytes(r.take(n)?.to_vec()))
    }
}

/// The body and attachment of a send of `payload`, as upstream's client writes them.
pub fn request_parts(kind: Kind, payload: &[u8]) -> (Vec<u8>, &[u8]) {
    match kind {
        Kind::Tensor => (Vec::new(), payload),
        Kind::Data if payload.len() <= INLINE_MAX => {
            (serialize_with_type_info(&Bytes(payload.to_vec())), &[])
        }
        Kind::Data => (serialize_with_type_info(&Bytes(Vec::new())), payload),
    }
}

/// The payload of a received call: the attachment when there is one, else the body's
/// string (a tensor call has no body). `None` for a body that is not a string.
pub fn request_payload(kind: Kind, body: &[u8], attachment: Vec<u8>) -> Option<Vec<u8>> {
    if !attachment.is_empty() || kind == Kind::Tensor {
        return Some(attachment);
    }
    struct_pack::deserialize::<Bytes>(body).ok().map(|b| b.0)
}

/// The reply body: struct_pack `void` with its type, as upstream's server sends it.
pub fn void_body() -> Vec<u8> {
    serialize_with_type_info(&())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_upstreams_bytes() {
        assert_eq!(Kind::Data.function_id(), 0x25764c34);
        assert_eq!(Kind::Tensor.function_id(), 0x01697aab);
        assert_eq!(void_body(), [0xeb, 0xcf, 0x01, 0x89, 0x04, 0xfa, 0x00]);
        let (body, att) = request_parts(Kind::Data, b"hello");
        assert_eq!(
            body,
            [0x77, 0xfa, 0xcf, 0x9d, 0x04, 0x80, 0x0c, 0x00, 0x05, b'h', b'e', b'l', b'l', b'o']
        );
        assert!(att.is_empty());
        let long = vec![b'a'; 1024];
        let (body, _) = request_parts(Kind::Data, &long);
        assert_eq!(
            &body[..10],
            [0x77, 0xfa, 0xcf, 0x9d, 0x0c, 0x80, 0x0c, 0x00, 0x00, 0x04]
        );
        let big = vec![7u8; 2051];
        let (body, att) = request_parts(Kind::Data, &big);
        assert_eq!(body, [0x77, 0xfa, 0xcf, 0x9d, 0x04, 0x80, 0x0c, 0x00, 0x00]);
        assert_eq!(att.len(), 2051);
        assert_eq!(
            request_payload(Kind::Data, &body, att.to_vec()).unwrap(),
            big
        );
        let (body, att) = request_parts(Kind::Data, &[0xff, 0xfe]);
        assert_eq!(
            request_payload(Kind::Data, &body, att.to_vec()).unwrap(),
            [0xff, 0xfe]
        );
        let hello = request_parts(Kind::Data, b"hello").0;
        assert_eq!(
            request_payload(Kind::Data, &hello, Vec::new()).unwrap(),
            b"hello"
        );
        // Upstream's minimal form (no metainfo) is read too; garbage is not.
        let mut bare = vec![0x76, 0xfa, 0xcf, 0x9d, 0x02];
        bare.extend_from_slice(b"hi");
        assert_eq!(
            request_payload(Kind::Data, &bare, Vec::new()).unwrap(),
            b"hi"
        );
        assert!(request_payload(Kind::Data, b"junk", Vec::new()).is_none());
        assert_eq!(
            request_payload(Kind::Tensor, b"", vec![1, 2]).unwrap(),
            [1, 2]
        );
    }
}
