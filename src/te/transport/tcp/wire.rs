//! TCP data-plane framing (spec §4.2-§4.3): the 24-byte request header and the v2
//! status frame. Byte-exact with upstream; decoders never panic.

use crate::te::transport::request::Op;

/// Size of a request header on the wire.
pub const HEADER_LEN: usize = 24;
/// Size of a v2 status frame.
pub const STATUS_LEN: usize = 8;
/// Opcode bit selecting v2 (acknowledged) framing.
pub const V2_FLAG: u8 = 0x80;
/// Magic in the high 32 bits of a status frame ("MCTV").
pub const STATUS_MAGIC: u32 = 0x4D43_5456;
/// Status code: request accepted.
pub const STATUS_OK: u32 = 0;
/// Status code: address rejected.
pub const STATUS_REJECTED: u32 = 1;

/// A decoded request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Payload length.
    pub size: u64,
    /// Absolute address in the target process.
    pub addr: u64,
    /// Read or write.
    pub op: Op,
    /// Whether the v2 flag was set.
    pub v2: bool,
}

impl Header {
    /// Encodes to the 24-byte wire form (padding zeroed).
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..8].copy_from_slice(&self.size.to_le_bytes());
        out[8..16].copy_from_slice(&self.addr.to_le_bytes());
        let op = match self.op {
            Op::Read => 0,
            Op::Write => 1,
        };
        out[16] = op | if self.v2 { V2_FLAG } else { 0 };
        out
    }

    /// Decodes a header. Like upstream, any opcode other than WRITE is a READ.
    pub fn decode(bytes: &[u8; HEADER_LEN]) -> Header {
        let mut size = [0u8; 8];
        let mut addr = [0u8; 8];
        size.copy_from_slice(&bytes[..8]);
        addr.copy_from_slice(&bytes[8..16]);
        let opcode = bytes[16];
        Header {
            size: u64::from_le_bytes(size),
            addr: u64::from_le_bytes(addr),
            op: if opcode & !V2_FLAG == 1 {
                Op::Write
            } else {
                Op::Read
            },
            v2: opcode & V2_FLAG != 0,
        }
    }
}

/// Encodes a v2 status frame.
pub fn encode_status(code: u32) -> [u8; STATUS_LEN] {
    ((u64::from(STATUS_MAGIC) << 32) | u64::from(code)).to_le_bytes()
}

/// Decodes a v2 status frame: `Some(code)` when the magic matches.
pub fn decode_status(bytes: &[u8; STATUS_LEN]) -> Option<u32> {
    let v = u64::from_le_bytes(*bytes);
    ((v >> 32) as u32 == STATUS_MAGIC).then_some(v as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn matches_upstream_capture() {
        let h = Header {
            size: 4096,
            addr: 0x1_0000_1000,
            op: Op::Write,
            v2: true,
        };
        let expected: [u8; 24] = [
            0x00, 0x10, 0, 0, 0, 0, 0, 0, 0x00, 0x10, 0, 0, 1, 0, 0, 0, 0x81, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(h.encode(), expected);
        assert_eq!(Header::decode(&expected), h);
        assert_eq!(encode_status(0), [0, 0, 0, 0, 0x56, 0x54, 0x43, 0x4D]);
        assert_eq!(encode_status(1), [1, 0, 0, 0, 0x56, 0x54, 0x43, 0x4D]);
        assert_eq!(decode_status(&encode_status(1)), Some(1));
        assert_eq!(decode_status(&[0; 8]), None);
    }

    #[test]
    fn unknown_opcodes_are_reads() {
        let mut b = [0u8; 24];
        b[16] = 0x85;
        let h = Header::decode(&b);
        assert_eq!((h.op, h.v2), (Op::Read, true));
    }

    proptest! {
        #[test]
        fn header_decode_total(bytes in proptest::array::uniform24(any::<u8>())) {
            let h = Header::decode(&bytes);
            let again = Header::decode(&h.encode());
            prop_assert_eq!(h, again);
        }

        #[test]
        fn status_decode_total(bytes in proptest::array::uniform8(any::<u8>())) {
            if let Some(code) = decode_status(&bytes) {
                prop_assert_eq!(encode_status(code), bytes);
            }
        }
    }
}
