//! A MessagePack decoder into a value tree, for payloads that arrive from the network
//! (KV events): every length is checked against the bytes left before anything is
//! allocated, nesting is bounded, and nothing panics on any input.

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
    let mut r = Reader { bytes, pos: 0 };
    let v = r.value(0)?;
    match bytes.len() - r.pos {
        0 => Ok(v),
        n => Err(DecodeError::Trailing(n)),
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated)?;
        let s = self
            .bytes
            .get(self.pos..end)
            .ok_or(DecodeError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |a, b| (a << 8) | u64::from(*b)))
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// A count of elements each taking at least `min_bytes`, checked against the input.
    fn count(&mut self, n: usize, min_bytes: usize) -> Result<usize, DecodeError> {
        let len = self.be(n)? as usize;
        if len.saturating_mul(min_bytes) > self.left() {
            return Err(DecodeError::Truncated);
        }
        Ok(len)
    }

    fn value(&mut self, depth: usize) -> Result<Value, DecodeError> {
        let b = self.take(1)?[0];
        Ok(match b {
            0x00..=0x7f => Value::UInt(u64::from(b)),
            0x80..=0x8f => self.map((b & 0x0f) as usize, depth)?,
            0x90..=0x9f => self.array((b & 0x0f) as usize, depth)?,
            0xa0..=0xbf => self.str((b & 0x1f) as usize)?,
            0xc0 => Value::Nil,
            0xc1 => return Err(DecodeError::Reserved(b)),
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4..=0xc6 => {
                let n = self.count(1 << (b - 0xc4), 1)?;
                Value::Bin(self.take(n)?.to_vec())
            }
            0xc7..=0xc9 => {
                let n = self.count(1 << (b - 0xc7), 1)?;
                let ty = self.take(1)?[0] as i8;
                Value::Ext(ty, self.take(n)?.to_vec())
            }
            0xca => Value::Float(f64::from(f32::from_bits(self.be(4)? as u32))),
            0xcb => Value::Float(f64::from_bits(self.be(8)?)),
            0xcc..=0xcf => Value::UInt(self.be(1 << (b - 0xcc))?),
            0xd0 => Value::Int(i64::from(self.be(1)? as u8 as i8)),
            0xd1 => Value::Int(i64::from(self.be(2)? as u16 as i16)),
            0xd2 => Value::Int(i64::from(self.be(4)? as u32 as i32)),
            0xd3 => Value::Int(self.be(8)? as i64),
            0xd4..=0xd8 => {
                let ty = self.take(1)?[0] as i8;
                Value::Ext(ty, self.take(1 << (b - 0xd4))?.to_vec())
            }
            0xd9..=0xdb => {
                let n = self.count(1 << (b - 0xd9), 1)?;
                self.str(n)?
            }
            0xdc | 0xdd => {
                let n = self.count(2 << (b - 0xdc), 1)?;
                self.array(n, depth)?
            }
            0xde | 0xdf => {
                let n = self.count(2 << (b - 0xde), 2)?;
                self.map(n, depth)?
            }
            0xe0..=0xff => Value::Int(i64::from(b as i8)),
        })
        .map(|v| match v {
            // Non-negative values of signed types read as unsigned, as msgpack-c does.
            Value::Int(i) if i >= 0 => Value::UInt(i as u64),
            v => v,
        })
    }

    fn str(&mut self, n: usize) -> Result<Value, DecodeError> {
        Ok(Value::Str(
            String::from_utf8_lossy(self.take(n)?).into_owned(),
        ))
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value, DecodeError> {
        if depth >= MAX_DEPTH {
            return Err(DecodeError::TooDeep);
        }
        if n > self.left() {
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
        if n.saturating_mul(2) > self.left() {
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
