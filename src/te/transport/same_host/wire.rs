//! The same-host exchange, little-endian throughout:
//!
//! 1. initiator: a batch header (`u32` count, 1 to [`MAX_BATCH`], and four zero
//!    bytes), then that many 32-byte requests: `op` (0 read, 1 write, seen from the
//!    initiator), seven zero bytes, the target address, the initiator's address, the
//!    length;
//! 2. target: one TCP v2 status frame per request, [`OK`] (granted: the region is
//!    pinned), [`REJECTED`] or [`USE_TCP`];
//! 3. initiator: copies the granted ones itself, then sends [`RELEASE`] (a status
//!    frame), after which the target unpins them.
//!
//! Or, to reach a region without asking per batch: the initiator sends a share header
//! (count 0, [`SHARE_MARK`] in the fifth byte) and the `u64` address it wants; the
//! target answers with a [`ShareReply`] and two files beside it (`SCM_RIGHTS`) when it
//! maps or leases the region holding that address: a shared region's own file and the
//! epoch table ([`ShareKind::Mapped`]), or the epoch table and this connection's pin
//! table ([`ShareKind::Leased`], see `te::region_leases`). A lease lasts as long as
//! the connection it was answered on.
//!
//! The decoders refuse anything else and never panic.

use crate::te::transport::request::Op;

/// Size of a request.
pub const REQUEST_LEN: usize = 32;
/// Size of a batch header.
pub const BATCH_HEADER_LEN: usize = 8;
/// Most requests in one batch.
pub const MAX_BATCH: u32 = 4096;
/// Granted: the target range is pinned until [`RELEASE`].
pub const OK: u32 = 0;
/// The target range is not inside one remotely accessible region (as over TCP).
pub const REJECTED: u32 = 1;
/// The range is in memory this path cannot reach (GPU memory): send it over TCP.
pub const USE_TCP: u32 = 2;
/// The initiator is done with the granted ranges of the batch.
pub const RELEASE: u32 = 0xFFFF;

/// Fifth byte of a share header.
pub const SHARE_MARK: u8 = b'S';
/// Size of a share request (header and address).
pub const SHARE_REQUEST_LEN: usize = BATCH_HEADER_LEN + 8;
/// Size of a share reply.
pub const SHARE_REPLY_LEN: usize = 48;

/// What a header announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// A batch of that many requests.
    Batch(u32),
    /// A share request (its address follows).
    Share,
}

/// A share request for the region holding `addr`.
pub fn encode_share_request(addr: u64) -> [u8; SHARE_REQUEST_LEN] {
    let mut out = [0u8; SHARE_REQUEST_LEN];
    out[4] = SHARE_MARK;
    out[8..].copy_from_slice(&addr.to_le_bytes());
    out
}

/// Decodes a header: a batch of 1..=[`MAX_BATCH`] requests or a share request.
pub fn decode_header(b: &[u8; BATCH_HEADER_LEN]) -> Option<Header> {
    if b[..4] == [0; 4] && b[4] == SHARE_MARK && b[5..] == [0; 3] {
        return Some(Header::Share);
    }
    decode_batch(b).map(Header::Batch)
}

/// How the target lets the initiator reach a region without a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareKind {
    /// It does not (or the address is in no remotely accessible region): batches.
    No,
    /// Through its file, mapped by the initiator.
    Mapped,
    /// With `process_vm_*`, pinned in the connection's pin table.
    Leased,
}

/// The answer to a share request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareReply {
    /// How the region may be reached; the files come with `Mapped` and `Leased`.
    pub kind: ShareKind,
    /// The region's base address in the target (0 when the address is in no
    /// remotely accessible region).
    pub base: u64,
    /// Its length.
    pub len: u64,
    /// Offset of its first byte in its file.
    pub offset: u64,
    /// Its slot in the epoch table.
    pub slot: u64,
    /// Its generation there.
    pub gen: u64,
}

impl ShareReply {
    /// The wire form.
    pub fn encode(&self) -> [u8; SHARE_REPLY_LEN] {
        let mut out = [0u8; SHARE_REPLY_LEN];
        out[0] = match self.kind {
            ShareKind::No => 0,
            ShareKind::Mapped => 1,
            ShareKind::Leased => 2,
        };
        for (i, v) in [self.base, self.len, self.offset, self.slot, self.gen]
            .into_iter()
            .enumerate()
        {
            out[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// Decodes a reply; `None` for an unknown kind, non-zero padding or a range that
    /// wraps.
    pub fn decode(b: &[u8; SHARE_REPLY_LEN]) -> Option<ShareReply> {
        let kind = match b[0] {
            0 => ShareKind::No,
            1 => ShareKind::Mapped,
            2 => ShareKind::Leased,
            _ => return None,
        };
        if b[1..8].iter().any(|x| *x != 0) {
            return None;
        }
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[8 + 8 * i..16 + 8 * i]);
            u64::from_le_bytes(w)
        };
        let r = ShareReply {
            kind,
            base: word(0),
            len: word(1),
            offset: word(2),
            slot: word(3),
            gen: word(4),
        };
        (r.base.checked_add(r.len).is_some() && r.offset.checked_add(r.len).is_some()).then_some(r)
    }
}

/// A status frame (as TCP v2's) carrying `code`.
pub fn encode_status_frame(code: u32) -> [u8; crate::te::transport::tcp::wire::STATUS_LEN] {
    crate::te::transport::tcp::wire::encode_status(code)
}

/// Encodes a batch header.
pub fn encode_batch(count: u32) -> [u8; BATCH_HEADER_LEN] {
    let mut out = [0u8; BATCH_HEADER_LEN];
    out[..4].copy_from_slice(&count.to_le_bytes());
    out
}

/// Decodes a batch header: the count when it is within 1..=[`MAX_BATCH`].
pub fn decode_batch(b: &[u8; BATCH_HEADER_LEN]) -> Option<u32> {
    let count = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    (b[4..].iter().all(|x| *x == 0) && (1..=MAX_BATCH).contains(&count)).then_some(count)
}

/// One request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Read or write, seen from the initiator.
    pub op: Op,
    /// Address in the target.
    pub remote: u64,
    /// Address in the initiator.
    pub local: u64,
    /// Bytes.
    pub len: u64,
}

impl Request {
    /// The wire form.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut out = [0u8; REQUEST_LEN];
        out[0] = match self.op {
            Op::Read => 0,
            Op::Write => 1,
        };
        out[8..16].copy_from_slice(&self.remote.to_le_bytes());
        out[16..24].copy_from_slice(&self.local.to_le_bytes());
        out[24..32].copy_from_slice(&self.len.to_le_bytes());
        out
    }

    /// Decodes a request; `None` for an unknown op or non-zero padding.
    pub fn decode(b: &[u8; REQUEST_LEN]) -> Option<Request> {
        let op = match b[0] {
            0 => Op::Read,
            1 => Op::Write,
            _ => return None,
        };
        if b[1..8].iter().any(|x| *x != 0) {
            return None;
        }
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        Some(Request {
            op,
            remote: word(8),
            local: word(16),
            len: word(24),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_refusals() {
        let r = Request {
            op: Op::Write,
            remote: 0x7f00_0000_1000,
            local: 0x5555_0000,
            len: 4 << 20,
        };
        assert_eq!(Request::decode(&r.encode()), Some(r));
        let mut bad = r.encode();
        bad[0] = 2;
        assert_eq!(Request::decode(&bad), None);
        let mut bad = r.encode();
        bad[5] = 1;
        assert_eq!(Request::decode(&bad), None);
        assert_eq!(decode_batch(&encode_batch(16)), Some(16));
        assert_eq!(decode_batch(&encode_batch(0)), None);
        assert_eq!(decode_batch(&encode_batch(MAX_BATCH + 1)), None);
        let mut b = encode_batch(3);
        b[7] = 1;
        assert_eq!(decode_batch(&b), None);
        assert_eq!(decode_header(&encode_batch(3)), Some(Header::Batch(3)));
        let share = encode_share_request(0x1234);
        let mut head = [0u8; BATCH_HEADER_LEN];
        head.copy_from_slice(&share[..BATCH_HEADER_LEN]);
        assert_eq!(decode_header(&head), Some(Header::Share));
        assert_eq!(u64::from_le_bytes(share[8..].try_into().unwrap()), 0x1234);
        head[6] = 1;
        assert_eq!(decode_header(&head), None);
        let reply = ShareReply {
            kind: ShareKind::Mapped,
            base: 0x7f00_0000_0000,
            len: 1 << 30,
            offset: 0,
            slot: 3,
            gen: 7,
        };
        assert_eq!(ShareReply::decode(&reply.encode()), Some(reply));
        let leased = ShareReply {
            kind: ShareKind::Leased,
            ..reply
        };
        assert_eq!(ShareReply::decode(&leased.encode()), Some(leased));
        let mut bad = reply.encode();
        bad[0] = 3;
        assert_eq!(ShareReply::decode(&bad), None);
        let wraps = ShareReply {
            base: u64::MAX,
            ..reply
        };
        assert_eq!(ShareReply::decode(&wraps.encode()), None);
    }

    /// `bytes` (`N` of them) do not decode, or decode to what encodes back to them.
    fn round_trips<T, const N: usize>(
        bytes: &[u8],
        decode: impl Fn(&[u8; N]) -> Option<T>,
        encode: impl Fn(&T) -> [u8; N],
    ) -> Result<(), TestCaseError> {
        let mut b = [0u8; N];
        b.copy_from_slice(bytes);
        if let Some(r) = decode(&b) {
            prop_assert_eq!(encode(&r), b);
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn share_reply_decode_is_total(bytes in proptest::collection::vec(any::<u8>(), SHARE_REPLY_LEN)) {
            round_trips(&bytes, ShareReply::decode, ShareReply::encode)?;
        }

        #[test]
        fn decode_is_total(bytes in proptest::collection::vec(any::<u8>(), REQUEST_LEN)) {
            round_trips(&bytes, Request::decode, Request::encode)?;
        }
    }
}
