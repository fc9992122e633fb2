//! A MessagePack encoder over the `rmp` crate: nil, integers, strings, array and map
//! headers; what the master's KV-event payload needs, nothing more.
//!
//! Every value is written in its smallest form, as msgpack-c's packer writes it (and as
//! `rmp` does), so a payload is byte for byte what upstream sends: a non-negative
//! integer as a positive fixint or uint 8/16/32/64 (even when the source type is
//! signed), a negative one as a negative fixint or int 8/16/32/64, a string as fixstr or
//! str 8/16/32 (never bin).

use rmp::encode::{self, ByteBuf, ValueWriteError};
use std::convert::Infallible;

/// Writes MessagePack values into a growing buffer.
#[derive(Debug, Default)]
pub struct Encoder {
    buf: ByteBuf,
}

/// A write into a [`ByteBuf`], which cannot fail (its error type has no values).
fn infallible<T>(written: Result<T, ValueWriteError<Infallible>>) {
    match written {
        Ok(_) => {}
        Err(ValueWriteError::InvalidMarkerWrite(e) | ValueWriteError::InvalidDataWrite(e)) => {
            match e {}
        }
    }
}

impl Encoder {
    /// An empty buffer.
    pub fn new() -> Encoder {
        Encoder::default()
    }

    /// The bytes written so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf.into_vec()
    }

    /// `nil`.
    pub fn nil(&mut self) {
        match encode::write_nil(&mut self.buf) {
            Ok(()) => {}
            Err(e) => match e {},
        }
    }

    /// An unsigned integer, smallest form.
    pub fn uint(&mut self, v: u64) {
        infallible(encode::write_uint(&mut self.buf, v));
    }

    /// A signed integer, smallest form (non-negative values as [`Encoder::uint`]).
    pub fn int(&mut self, v: i64) {
        infallible(encode::write_sint(&mut self.buf, v));
    }

    /// A UTF-8 string. A string longer than the format allows (4 GiB) is cut at that
    /// length, so the output stays well formed; no caller comes near it (keys arrive in
    /// RPC frames of at most 64 MiB).
    pub fn str(&mut self, s: &str) {
        let bytes = &s.as_bytes()[..s.len().min(u32::MAX as usize)];
        infallible(encode::write_str_len(&mut self.buf, bytes.len() as u32));
        self.buf.as_mut_vec().extend_from_slice(bytes);
    }

    /// The header of an array of `len` values (the values follow).
    pub fn array(&mut self, len: u32) {
        infallible(encode::write_array_len(&mut self.buf, len));
    }

    /// The header of a map of `len` key/value pairs (keys and values follow, in turn).
    pub fn map(&mut self, len: u32) {
        infallible(encode::write_map_len(&mut self.buf, len));
    }
}

#[cfg(test)]
mod tests {
    use super::Encoder;

    fn bytes(f: impl FnOnce(&mut Encoder)) -> Vec<u8> {
        let mut e = Encoder::new();
        f(&mut e);
        e.into_bytes()
    }

    #[test]
    fn integers_take_their_smallest_form() {
        assert_eq!(bytes(|e| e.uint(0)), [0x00]);
        assert_eq!(bytes(|e| e.uint(127)), [0x7f]);
        assert_eq!(bytes(|e| e.uint(128)), [0xcc, 0x80]);
        assert_eq!(bytes(|e| e.uint(255)), [0xcc, 0xff]);
        assert_eq!(bytes(|e| e.uint(256)), [0xcd, 0x01, 0x00]);
        assert_eq!(bytes(|e| e.uint(65_535)), [0xcd, 0xff, 0xff]);
        assert_eq!(bytes(|e| e.uint(65_536)), [0xce, 0, 1, 0, 0]);
        assert_eq!(
            bytes(|e| e.uint(u32::MAX.into())),
            [0xce, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(bytes(|e| e.uint(1 << 32)), [0xcf, 0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(
            bytes(|e| e.uint(u64::MAX)),
            [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
        // Signed values that are not negative are written as unsigned ones.
        assert_eq!(bytes(|e| e.int(200)), [0xcc, 200]);
        assert_eq!(
            bytes(|e| e.int(1_700_000_000_000)),
            [0xcf, 0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00]
        );
        assert_eq!(bytes(|e| e.int(-1)), [0xff]);
        assert_eq!(bytes(|e| e.int(-32)), [0xe0]);
        assert_eq!(bytes(|e| e.int(-33)), [0xd0, 0xdf]);
        assert_eq!(bytes(|e| e.int(-128)), [0xd0, 0x80]);
        assert_eq!(bytes(|e| e.int(-129)), [0xd1, 0xff, 0x7f]);
        assert_eq!(bytes(|e| e.int(-32_768)), [0xd1, 0x80, 0x00]);
        assert_eq!(bytes(|e| e.int(-32_769)), [0xd2, 0xff, 0xff, 0x7f, 0xff]);
        assert_eq!(bytes(|e| e.int(i32::MIN.into())), [0xd2, 0x80, 0, 0, 0]);
        assert_eq!(
            bytes(|e| e.int(i64::from(i32::MIN) - 1)),
            [0xd3, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff]
        );
        assert_eq!(
            bytes(|e| e.int(i64::MIN)),
            [0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn strings_and_headers() {
        assert_eq!(bytes(|e| e.str("")), [0xa0]);
        assert_eq!(bytes(|e| e.str("cpu")), [0xa3, b'c', b'p', b'u']);
        let s31 = "a".repeat(31);
        assert_eq!(bytes(|e| e.str(&s31))[0], 0xbf);
        let s32 = "a".repeat(32);
        assert_eq!(&bytes(|e| e.str(&s32))[..2], [0xd9, 32]);
        let s256 = "a".repeat(256);
        assert_eq!(&bytes(|e| e.str(&s256))[..3], [0xda, 1, 0]);
        let s64k = "a".repeat(65_536);
        let b = bytes(|e| e.str(&s64k));
        assert_eq!(&b[..5], [0xdb, 0, 1, 0, 0]);
        assert_eq!(b.len(), 5 + 65_536);
        assert_eq!(bytes(|e| e.nil()), [0xc0]);
        assert_eq!(bytes(|e| e.array(0)), [0x90]);
        assert_eq!(bytes(|e| e.array(3)), [0x93]);
        assert_eq!(bytes(|e| e.array(16)), [0xdc, 0, 16]);
        assert_eq!(bytes(|e| e.array(65_536)), [0xdd, 0, 1, 0, 0]);
        assert_eq!(bytes(|e| e.map(15)), [0x8f]);
        assert_eq!(bytes(|e| e.map(20)), [0xde, 0, 20]);
        assert_eq!(bytes(|e| e.map(17)), [0xde, 0, 17]);
        assert_eq!(bytes(|e| e.map(70_000)), [0xdf, 0, 1, 0x11, 0x70]);
    }
}
