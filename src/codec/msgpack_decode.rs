//! A MessagePack decoder into a value tree, for payloads that arrive from the network
//! (KV events). The `rmp` crate reads the markers and their fixed-width data; this
//! module adds the limits: every length is checked against the bytes left before
//! anything is allocated, nesting is bounded, and nothing panics on any input.

use rmp::decode::{read_marker, RmpRead};
use rmp::Marker;
use std::fmt;

/// Deepest nesting of arrays and maps accepted.
pub const MAX_DEPTH: usize = 32;

/// A decoded value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `nil`.
    Nil,
    /// `true` / `false`.
    Bool(bool),
    /// A non-negative integer.
    UInt(u64),
    /// A negative integer.
    Int(i64),
    /// A float32 or float64.
    Float(f64),
    /// A string (invalid UTF-8 replaced).
    Str(String),
    /// A binary blob.
    Bin(Vec<u8>),
    /// An array.
    Array(Vec<Value>),
    /// A map, in wire order.
    Map(Vec<(Value, Value)>),
    /// An extension type and its bytes.
    Ext(i8, Vec<u8>),
}

impl Value {
    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer as a u64 (negative ones wrapped, as a C cast does).
    pub fn as_u64_wrapping(&self) -> Option<u64> {
        match *self {
            Value::UInt(v) => Some(v),
            Value::Int(v) => Some(v as u64),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(v) => Some(v),
            _ => None,
        }
    }

    /// The value under string key `key`, if this is a map holding it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Why bytes are not one MessagePack value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The input ended inside a value.
    Truncated,
    /// A byte no MessagePack value starts with (0xc1).
    Reserved(u8),
    /// Arrays and maps nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Bytes left after the value.
    Trailing(usize),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "msgpack: input ends inside a value"),
            DecodeError::Reserved(b) => write!(f, "msgpack: reserved type byte {b:#04x}"),
            DecodeError::TooDeep => write!(f, "msgpack: nested deeper than {MAX_DEPTH}"),
            DecodeError::Trailing(n) => write!(f, "msgpack: {n} bytes after the value"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Decodes exactly one value filling `bytes`.
pub fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
    let mut r = Reader { rest: bytes };
    let v = r.value(0)?;
    match r.rest.len() {
        0 => Ok(v),
        n => Err(DecodeError::Trailing(n)),
    }
}

/// The bytes not read yet.
struct Reader<'a> {
    rest: &'a [u8],
}

/// Any short read of fixed-width data is the input ending inside a value.
impl<E: rmp::decode::RmpReadErr> From<rmp::decode::ValueReadError<E>> for DecodeError {
    fn from(_: rmp::decode::ValueReadError<E>) -> Self {
        DecodeError::Truncated
    }
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.rest.len() {
            return Err(DecodeError::Truncated);
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(taken)
    }

    /// A count of elements each taking at least `min_bytes`, checked against the input.
    fn count(&self, len: u32, min_bytes: usize) -> Result<usize, DecodeError> {
        let len = len as usize;
        if len.saturating_mul(min_bytes) > self.rest.len() {
            return Err(DecodeError::Truncated);
        }
        Ok(len)
    }

    fn value(&mut self, depth: usize) -> Result<Value, DecodeError> {
        let marker = read_marker(&mut self.rest).map_err(|_| DecodeError::Truncated)?;
        let rd = &mut self.rest;
        Ok(match marker {
            Marker::FixPos(v) => Value::UInt(u64::from(v)),
            Marker::FixNeg(v) => Value::Int(i64::from(v)),
            Marker::Null => Value::Nil,
            Marker::Reserved => return Err(DecodeError::Reserved(0xc1)),
            Marker::False => Value::Bool(false),
            Marker::True => Value::Bool(true),
            Marker::U8 => Value::UInt(u64::from(rd.read_data_u8()?)),
            Marker::U16 => Value::UInt(u64::from(rd.read_data_u16()?)),
            Marker::U32 => Value::UInt(u64::from(rd.read_data_u32()?)),
            Marker::U64 => Value::UInt(rd.read_data_u64()?),
            Marker::I8 => signed(i64::from(rd.read_data_i8()?)),
            Marker::I16 => signed(i64::from(rd.read_data_i16()?)),
            Marker::I32 => signed(i64::from(rd.read_data_i32()?)),
            Marker::I64 => signed(rd.read_data_i64()?),
            Marker::F32 => Value::Float(f64::from(rd.read_data_f32()?)),
            Marker::F64 => Value::Float(rd.read_data_f64()?),
            Marker::FixStr(n) => self.str(usize::from(n))?,
            Marker::Str8 => self.sized(1, 1, Self::str)?,
            Marker::Str16 => self.sized(2, 1, Self::str)?,
            Marker::Str32 => self.sized(4, 1, Self::str)?,
            Marker::Bin8 => self.sized(1, 1, Self::bin)?,
            Marker::Bin16 => self.sized(2, 1, Self::bin)?,
            Marker::Bin32 => self.sized(4, 1, Self::bin)?,
            Marker::FixExt1 => self.ext(1)?,
            Marker::FixExt2 => self.ext(2)?,
            Marker::FixExt4 => self.ext(4)?,
            Marker::FixExt8 => self.ext(8)?,
            Marker::FixExt16 => self.ext(16)?,
            Marker::Ext8 => self.sized(1, 1, Self::ext)?,
            Marker::Ext16 => self.sized(2, 1, Self::ext)?,
            Marker::Ext32 => self.sized(4, 1, Self::ext)?,
            Marker::FixArray(n) => self.array(usize::from(n), depth)?,
            Marker::Array16 => self.sized(2, 1, |r, n| r.array(n, depth))?,
            Marker::Array32 => self.sized(4, 1, |r, n| r.array(n, depth))?,
            Marker::FixMap(n) => self.map(usize::from(n), depth)?,
            Marker::Map16 => self.sized(2, 2, |r, n| r.map(n, depth))?,
            Marker::Map32 => self.sized(4, 2, |r, n| r.map(n, depth))?,
        })
    }

    /// A value whose big-endian length of `width` bytes comes first, that length
    /// checked as a [`count`](Self::count) of `min_bytes` elements; `read` reads the rest.
    fn sized(
        &mut self,
        width: usize,
        min_bytes: usize,
        read: impl FnOnce(&mut Self, usize) -> Result<Value, DecodeError>,
    ) -> Result<Value, DecodeError> {
        let len = self
            .take(width)?
            .iter()
            .fold(0u32, |n, &b| (n << 8) | u32::from(b));
        let n = self.count(len, min_bytes)?;
        read(self, n)
    }

    fn bin(&mut self, n: usize) -> Result<Value, DecodeError> {
        Ok(Value::Bin(self.take(n)?.to_vec()))
    }

    fn str(&mut self, n: usize) -> Result<Value, DecodeError> {
        Ok(Value::Str(
            String::from_utf8_lossy(self.take(n)?).into_owned(),
        ))
    }

    /// An extension: its type byte, then `n` bytes.
    fn ext(&mut self, n: usize) -> Result<Value, DecodeError> {
        let ty = self.take(1)?[0] as i8;
        Ok(Value::Ext(ty, self.take(n)?.to_vec()))
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value, DecodeError> {
        if depth >= MAX_DEPTH {
            return Err(DecodeError::TooDeep);
        }
        if n > self.rest.len() {
            return Err(DecodeError::Truncated);
        }
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.value(depth + 1)?);
        }
        Ok(Value::Array(items))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, DecodeError> {
        if depth >= MAX_DEPTH {
            return Err(DecodeError::TooDeep);
        }
        if n.saturating_mul(2) > self.rest.len() {
            return Err(DecodeError::Truncated);
        }
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.value(depth + 1)?;
            let v = self.value(depth + 1)?;
            entries.push((k, v));
        }
        Ok(Value::Map(entries))
    }
}

/// A signed integer; non-negative ones read as unsigned, as msgpack-c does.
fn signed(v: i64) -> Value {
    if v >= 0 {
        Value::UInt(v as u64)
    } else {
        Value::Int(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::msgpack::Encoder;

    #[test]
    fn decodes_what_the_encoder_writes() {
        let mut e = Encoder::new();
        e.array(4);
        e.int(-5);
        e.uint(u64::MAX);
        e.map(1);
        e.str("k");
        e.nil();
        e.str(&"x".repeat(300));
        let v = decode(&e.into_bytes()).unwrap();
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Int(-5),
                Value::UInt(u64::MAX),
                Value::Map(vec![(Value::Str("k".into()), Value::Nil)]),
                Value::Str("x".repeat(300)),
            ])
        );
        assert_eq!(v.as_array().unwrap()[2].get("k"), Some(&Value::Nil));
    }

    #[test]
    fn reads_floats_bins_and_signed_forms() {
        assert_eq!(
            decode(&[0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0]),
            Ok(Value::Float(1.5))
        );
        assert_eq!(decode(&[0xc4, 2, 1, 2]), Ok(Value::Bin(vec![1, 2])));
        assert_eq!(decode(&[0xd0, 0x05]), Ok(Value::UInt(5)));
        assert_eq!(decode(&[0xd1, 0xff, 0xfe]), Ok(Value::Int(-2)));
        assert_eq!(Value::Int(-1).as_u64_wrapping(), Some(u64::MAX));
    }

    #[test]
    fn refuses_lies_about_lengths_without_allocating_them() {
        assert_eq!(
            decode(&[0xdd, 0xff, 0xff, 0xff, 0xff]),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            decode(&[0xdf, 0x7f, 0xff, 0xff, 0xff, 1]),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            decode(&[0xc6, 0xff, 0xff, 0xff, 0xff]),
            Err(DecodeError::Truncated)
        );
        assert_eq!(decode(&[0x92, 1]), Err(DecodeError::Truncated));
        assert_eq!(decode(&[0xc1]), Err(DecodeError::Reserved(0xc1)));
        assert_eq!(decode(&[1, 2]), Err(DecodeError::Trailing(1)));
        assert_eq!(decode(&[0x91; 100]), Err(DecodeError::TooDeep));
    }
}
