//! RPC framing (spec §3.1), byte-exact with upstream.
//!
//! ```text
//! u64 length  little-endian; 1 + len(json) for typed frames, len(json) for legacy frames
//! u8  type    0 Connection, 1 Metadata, 2 Notify, 3 Probe (absent in legacy frames)
//! ... json    compact, keys sorted, ending in "\n"
//! ```
//!
//! A legacy ("old protocol") frame has no type byte; a reader recognises it because the
//! first body byte is greater than 3 (JSON starts with `{`). It means Connection, and the
//! reply to it is written without a type byte too.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::msg_type::MsgType;
use crate::error::{Error, Result};

/// Upstream's default `MC_HANDSHAKE_MAX_LENGTH`: the largest accepted frame length (1 MiB).
pub const DEFAULT_MAX_FRAME_LEN: u64 = 1 << 20;

/// Size of the length prefix.
const LEN_BYTES: usize = 8;

/// Initial body buffer; larger bodies grow as bytes actually arrive, so a peer that
/// claims a large length cannot make us allocate it up front.
const INITIAL_BODY_CAPACITY: u64 = 64 * 1024;

/// One RPC frame: its message type, whether it is a legacy untyped frame, and its JSON
/// bytes (without the type byte).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The message type; always [`MsgType::Connection`] for legacy frames.
    pub msg_type: MsgType,
    /// True for an old-protocol frame that carries no type byte.
    pub legacy: bool,
    /// The JSON text (normally ending in `"\n"`).
    pub json: Vec<u8>,
}

impl Frame {
    /// A typed frame.
    pub fn typed(msg_type: MsgType, json: Vec<u8>) -> Frame {
        Frame {
            msg_type,
            legacy: false,
            json,
        }
    }

    /// A legacy untyped frame (always a Connection message).
    pub fn legacy(json: Vec<u8>) -> Frame {
        Frame {
            msg_type: MsgType::Connection,
            legacy: true,
            json,
        }
    }

    /// A typed frame whose body is `value` written by [`encode_json`].
    pub fn from_value(msg_type: MsgType, value: &Value) -> Frame {
        Frame::typed(msg_type, encode_json(value))
    }

    /// The value of the length field for this frame.
    pub fn length_field(&self) -> u64 {
        self.json.len() as u64 + u64::from(!self.legacy)
    }

    /// The frame's wire bytes: length, type byte (unless legacy), JSON.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(LEN_BYTES + 1 + self.json.len());
        out.extend_from_slice(&self.length_field().to_le_bytes());
        if !self.legacy {
            out.push(self.msg_type.code());
        }
        out.extend_from_slice(&self.json);
        out
    }

    /// Writes the frame with a single `write_all`, so header and body leave together.
    pub fn write_to<W: Write>(&self, writer: &mut W) -> io::Result<()> {
        writer.write_all(&self.encode())?;
        writer.flush()
    }

    /// Reads one frame. The length is validated (`1 ..= max_len`) before anything is
    /// allocated; a bad length, a short read or a read error is a socket error
    /// ([`ErrorKind::Socket`](crate::error::ErrorKind::Socket)).
    pub fn read_from<R: Read>(reader: &mut R, max_len: u64) -> Result<Frame> {
        let mut len_buf = [0u8; LEN_BYTES];
        reader
            .read_exact(&mut len_buf)
            .map_err(|e| Error::socket("reading RPC frame length", e))?;
        let len = u64::from_le_bytes(len_buf);
        if len == 0 || len > max_len {
            return Err(Error::Socket(format!(
                "invalid RPC frame length {len} (accepted 1..={max_len})"
            )));
        }
        let mut first = [0u8; 1];
        reader
            .read_exact(&mut first)
            .map_err(|e| Error::socket("reading RPC frame body", e))?;
        let (msg_type, legacy, rest) = match MsgType::from_code(first[0]) {
            Some(t) => (t, false, len - 1),
            None => (MsgType::Connection, true, len - 1),
        };
        let mut json = Vec::with_capacity(rest.min(INITIAL_BODY_CAPACITY) as usize + 1);
        if legacy {
            json.push(first[0]);
        }
        let got = reader
            .take(rest)
            .read_to_end(&mut json)
            .map_err(|e| Error::socket("reading RPC frame body", e))?;
        if got as u64 != rest {
            return Err(Error::Socket(format!(
                "short read: RPC frame body has {got} of {rest} bytes"
            )));
        }
        Ok(Frame {
            msg_type,
            legacy,
            json,
        })
    }
}

/// Writes `value` as upstream's `Json::FastWriter` does: compact, object keys sorted
/// bytewise at every level (regardless of serde_json's map ordering), then `"\n"`.
pub fn encode_json(value: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec(&Sorted(value)).unwrap_or_else(|_| b"null".to_vec());
    out.push(b'\n');
    out
}

/// Serializes a JSON value with object keys in sorted order.
struct Sorted<'a>(&'a Value);

impl Serialize for Sorted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                let mut m = serializer.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    m.serialize_entry(k, &Sorted(v))?;
                }
                m.end()
            }
            Value::Array(items) => {
                let mut s = serializer.serialize_seq(Some(items.len()))?;
                for v in items {
                    s.serialize_element(&Sorted(v))?;
                }
                s.end()
            }
            other => other.serialize(serializer),
        }
    }
}

/// A reader over a TCP stream with a per-read timeout and an overall deadline; each read
/// waits at most `min(per_read, time left)`, so a peer trickling bytes cannot hold the
/// reader past the deadline.
pub(crate) struct DeadlineReader<'a> {
    stream: &'a TcpStream,
    per_read: Duration,
    deadline: Instant,
}

impl<'a> DeadlineReader<'a> {
    /// A reader that gives up `total` from now.
    pub(crate) fn new(stream: &'a TcpStream, per_read: Duration, total: Duration) -> Self {
        let now = Instant::now();
        DeadlineReader {
            stream,
            per_read,
            deadline: now.checked_add(total).unwrap_or(now + per_read),
        }
    }
}

impl Read for DeadlineReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "read deadline passed",
            ));
        }
        // A zero timeout means "block forever" to the OS; never pass one.
        let timeout = left.min(self.per_read).max(Duration::from_millis(1));
        self.stream.set_read_timeout(Some(timeout))?;
        let mut stream = self.stream;
        stream.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn probe_request_is_byte_exact() {
        let f = Frame::from_value(MsgType::Probe, &json!({}));
        assert_eq!(
            f.encode(),
            [4, 0, 0, 0, 0, 0, 0, 0, 3, b'{', b'}', b'\n'].to_vec()
        );
    }

    #[test]
    fn keys_are_sorted_and_compact() {
        let v = json!({"z": 1, "a": {"y": [ {"b": 2, "a": 1} ], "x": null}, "m": "s"});
        assert_eq!(
            encode_json(&v),
            b"{\"a\":{\"x\":null,\"y\":[{\"a\":1,\"b\":2}]},\"m\":\"s\",\"z\":1}\n".to_vec()
        );
        assert_eq!(encode_json(&Value::Null), b"null\n".to_vec());
        assert_eq!(
            encode_json(&json!({"addr": u64::MAX})),
            format!("{{\"addr\":{}}}\n", u64::MAX).into_bytes()
        );
    }

    #[test]
    fn legacy_frame_round_trips() {
        let f = Frame::legacy(b"{\"a\":1}\n".to_vec());
        let bytes = f.encode();
        assert_eq!(&bytes[..8], &8u64.to_le_bytes());
        assert_eq!(bytes[8], b'{');
        let back = Frame::read_from(&mut &bytes[..], DEFAULT_MAX_FRAME_LEN).unwrap();
        assert_eq!(back, f);
        assert_eq!(back.msg_type, MsgType::Connection);
    }

    #[test]
    fn rejects_bad_lengths_and_truncation() {
        let zero = 0u64.to_le_bytes();
        let err = Frame::read_from(&mut &zero[..], 16).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Socket);
        let mut big = 17u64.to_le_bytes().to_vec();
        big.extend_from_slice(&[3; 17]);
        assert!(Frame::read_from(&mut &big[..], 16).is_err());
        let huge = u64::MAX.to_le_bytes();
        assert!(Frame::read_from(&mut &huge[..], u64::MAX - 1).is_err());
        let mut short = 10u64.to_le_bytes().to_vec();
        short.extend_from_slice(&[2, b'{']);
        assert!(Frame::read_from(&mut &short[..], 16).is_err());
        assert!(Frame::read_from(&mut &[1u8, 0, 0][..], 16).is_err());
        // A length claiming the maximum with no body must fail without allocating it.
        let claim = u64::MAX.to_le_bytes();
        assert!(Frame::read_from(&mut &claim[..], u64::MAX).is_err());
    }

    #[test]
    fn max_length_is_inclusive() {
        let f = Frame::typed(MsgType::Notify, vec![b'x'; 15]);
        let bytes = f.encode();
        assert_eq!(Frame::read_from(&mut &bytes[..], 16).unwrap(), f);
        assert!(Frame::read_from(&mut &bytes[..], 15).is_err());
        // Type byte only: a valid frame with empty JSON (the server then fails to parse it).
        let bare = Frame::typed(MsgType::Probe, Vec::new()).encode();
        assert_eq!(bare, vec![1, 0, 0, 0, 0, 0, 0, 0, 3]);
        assert!(Frame::read_from(&mut &bare[..], 16)
            .unwrap()
            .json
            .is_empty());
    }

    proptest! {
        #[test]
        fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64),
                                max_len in any::<u64>()) {
            let _ = Frame::read_from(&mut &bytes[..], max_len);
        }

        #[test]
        fn decoder_never_panics_on_plausible_headers(len in 0u64..80, ty in 0u8..8,
                                                     body in proptest::collection::vec(any::<u8>(), 0..80)) {
            let mut bytes = len.to_le_bytes().to_vec();
            bytes.push(ty);
            bytes.extend_from_slice(&body);
            if let Ok(f) = Frame::read_from(&mut &bytes[..], 64) {
                prop_assert!((1..=64).contains(&len));
                prop_assert_eq!(f.length_field(), len);
                prop_assert_eq!(f.legacy, ty > 3);
            }
        }

        #[test]
        fn typed_frames_round_trip(ty in 0u8..4, json in proptest::collection::vec(any::<u8>(), 0..200)) {
            let f = Frame::typed(MsgType::from_code(ty).unwrap(), json);
            let bytes = f.encode();
            prop_assert_eq!(Frame::read_from(&mut &bytes[..], DEFAULT_MAX_FRAME_LEN).unwrap(), f);
        }

        #[test]
        fn legacy_frames_round_trip(first in 4u8.., rest in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut json = vec![first];
            json.extend_from_slice(&rest);
            let f = Frame::legacy(json);
            let bytes = f.encode();
            prop_assert_eq!(Frame::read_from(&mut &bytes[..], DEFAULT_MAX_FRAME_LEN).unwrap(), f);
        }
    }
}
