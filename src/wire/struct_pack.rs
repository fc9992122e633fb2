//! A small subset of yalantinglibs' struct_pack (spec store.md §3.2): the codec the
//! master's coro_rpc bodies use.
//!
//! A message is `u32 LE type hash` (bit 0 = "a metainfo byte follows"), an optional
//! metainfo byte (bits 0-1 compatible-size width, bit 2 type literal follows terminated by
//! `0x00`, bits 3-4 width of every container length prefix: 1/2/4/8 bytes), then the
//! payload: fixed-width little-endian scalars, length-prefixed strings and sequences,
//! `u8` tags for optionals, variants and expecteds, structs as their fields in order.
//!
//! The type hash is the first four bytes of MD5 of the type's *literal* (a byte string
//! derived from the type's shape), read big-endian, with bit 0 cleared. Literals are
//! derived here from the Rust types, never pasted.
//!
//! Length width: a reader that finds no metainfo byte uses **1-byte** length prefixes
//! (upstream `size_type_ = 0`), and upstream writers add a metainfo byte only when some
//! container holds 256 or more elements. [`serialize`] does the same: no metainfo while
//! every container is below 256 elements, otherwise a metainfo byte carrying the
//! narrowest width (2, 4 or 8 bytes) that fits the largest container.
//!
//! Readers never panic and never trust a length: every length is checked against the
//! bytes that remain before anything is allocated.

use md5::{Digest, Md5};
use parking_lot::RwLock;
use std::any::TypeId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

/// Type-literal code of `i32`.
pub const T_I32: u8 = 0x01;
/// Type-literal code of `u32`.
pub const T_U32: u8 = 0x02;
/// Type-literal code of `i64`.
pub const T_I64: u8 = 0x03;
/// Type-literal code of `u64`.
pub const T_U64: u8 = 0x04;
/// Type-literal code of `i8`.
pub const T_I8: u8 = 0x05;
/// Type-literal code of `u8`.
pub const T_U8: u8 = 0x06;
/// Type-literal code of `i16`.
pub const T_I16: u8 = 0x07;
/// Type-literal code of `u16`.
pub const T_U16: u8 = 0x08;
/// Type-literal code of `bool`.
pub const T_BOOL: u8 = 0x0b;
/// Type-literal code of `char` (the element of a string).
pub const T_CHAR: u8 = 0x0c;
/// Type-literal code of a string (followed by its element code).
pub const T_STRING: u8 = 0x80;
/// Type-literal code of a map (followed by key and value literals).
pub const T_MAP: u8 = 0x82;
/// Type-literal code of a vector (followed by its element literal).
pub const T_VECTOR: u8 = 0x84;
/// Type-literal code of an optional (followed by its value literal).
pub const T_OPTIONAL: u8 = 0x85;
/// Type-literal code of a variant (alternatives, then [`T_END`]).
pub const T_VARIANT: u8 = 0x86;
/// Type-literal code of an expected (value literal, then error literal).
pub const T_EXPECTED: u8 = 0x87;
/// Type-literal code of `void` / `std::monostate`.
pub const T_VOID: u8 = 0xfa;
/// Type-literal code opening a struct (or tuple).
pub const T_STRUCT: u8 = 0xfd;
/// Type-literal code closing a struct or variant.
pub const T_END: u8 = 0xff;

/// Metainfo bit: a type literal follows, terminated by `0x00`.
pub const META_TYPE_INFO: u8 = 0b100;
/// Metainfo bits: the compatible-size width (unsupported: our types have no
/// compatible fields).
pub const META_COMPATIBLE_MASK: u8 = 0b11;
/// Metainfo bits: log2 of the container length prefix width.
pub const META_LEN_MASK: u8 = 0b11000;

/// The literal struct_pack appends for a size or alignment `n < 127` (`n + 129`); used
/// for trivially copyable structs such as `std::pair<u64, u64>`.
pub const fn size_literal(n: u8) -> u8 {
    n + 129
}

/// Why a struct_pack message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The message ended early.
    Truncated,
    /// The type hash names another type.
    HashMismatch {
        /// Hash of the type we expected.
        expected: u32,
        /// Hash found in the message (bit 0 cleared).
        found: u32,
    },
    /// The embedded type literal differs from ours.
    TypeInfoMismatch,
    /// A feature this subset does not implement (compatible fields).
    Unsupported(&'static str),
    /// A value is out of range (bad tag, enum value, UTF-8, length).
    Invalid(&'static str),
    /// Bytes remain after the value.
    Trailing(usize),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "struct_pack: message truncated"),
            DecodeError::HashMismatch { expected, found } => write!(
                f,
                "struct_pack: type hash {found:#010x}, expected {expected:#010x}"
            ),
            DecodeError::TypeInfoMismatch => write!(f, "struct_pack: type literal mismatch"),
            DecodeError::Unsupported(what) => write!(f, "struct_pack: unsupported {what}"),
            DecodeError::Invalid(what) => write!(f, "struct_pack: invalid {what}"),
            DecodeError::Trailing(n) => write!(f, "struct_pack: {n} trailing bytes"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Result of decoding.
pub type DecodeResult<T> = Result<T, DecodeError>;

/// Appends a payload; all container lengths use one width.
#[derive(Debug)]
pub struct Writer {
    buf: Vec<u8>,
    width: usize,
    max_len: u64,
}

impl Writer {
    /// A writer whose container length prefixes are `width` bytes (1, 2, 4 or 8;
    /// anything else is treated as 8).
    pub fn new(width: usize) -> Writer {
        let width = match width {
            1 | 2 | 4 => width,
            _ => 8,
        };
        Writer {
            buf: Vec::new(),
            width,
            max_len: 0,
        }
    }

    /// Appends one byte.
    pub fn put_u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// Appends raw bytes.
    pub fn put_bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// Appends a container length in this writer's width (truncated if it does not
    /// fit; [`serialize`] picks a width that fits) and records the largest length.
    pub fn put_len(&mut self, n: usize) {
        let n = n as u64;
        self.max_len = self.max_len.max(n);
        self.buf.extend_from_slice(&n.to_le_bytes()[..self.width]);
    }

    /// The largest container length written so far.
    pub fn max_len(&self) -> u64 {
        self.max_len
    }

    /// The bytes written.
    pub fn into_inner(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads a payload; never reads past the end, never allocates beyond what remains.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    width: usize,
}

/// Upper bound on the element count of a sequence of zero-sized elements.
const MAX_ZERO_SIZED: u64 = 1 << 16;

impl<'a> Reader<'a> {
    /// A reader over `buf` whose container length prefixes are `width` bytes.
    pub fn new(buf: &'a [u8], width: usize) -> Reader<'a> {
        let width = match width {
            1 | 2 | 4 => width,
            _ => 8,
        };
        Reader { buf, pos: 0, width }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Takes the next `n` bytes.
    pub fn take(&mut self, n: usize) -> DecodeResult<&'a [u8]> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Takes the next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> DecodeResult<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> DecodeResult<u8> {
        Ok(self.array::<1>()?[0])
    }

    /// Reads a `0`/`1` flag (bool, optional and expected tags).
    pub fn flag(&mut self) -> DecodeResult<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Invalid("bool / tag byte")),
        }
    }

    /// Reads a container length prefix in this reader's width.
    pub fn read_len(&mut self) -> DecodeResult<u64> {
        let mut a = [0u8; 8];
        a[..self.width].copy_from_slice(self.take(self.width)?);
        Ok(u64::from_le_bytes(a))
    }

    /// Reads a length of elements that each take at least `min_elem` bytes, and checks
    /// that many elements can still be present.
    pub fn seq_len(&mut self, min_elem: usize) -> DecodeResult<usize> {
        let n = self.read_len()?;
        if min_elem == 0 {
            if n > MAX_ZERO_SIZED {
                return Err(DecodeError::Invalid("container length"));
            }
        } else if !n
            .checked_mul(min_elem as u64)
            .is_some_and(|b| b <= self.remaining() as u64)
        {
            return Err(DecodeError::Truncated);
        }
        Ok(n as usize)
    }
}

/// A type with a struct_pack encoding.
pub trait Pack: Sized {
    /// The fewest payload bytes a value takes (bounds element counts when decoding).
    const MIN_SIZE: usize;
    /// True only for `()`: a zero-argument call, whose request body is empty.
    const IS_VOID: bool = false;
    /// Appends this type's literal.
    fn type_literal(out: &mut Vec<u8>);
    /// Appends the payload of `self`.
    fn pack(&self, w: &mut Writer);
    /// Reads a value.
    fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self>;
}

/// A map (`std::map` / `std::unordered_map`) as its entries in wire order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Map<K, V>(pub Vec<(K, V)>);

impl<K: Pack, V: Pack> Pack for Map<K, V> {
    const MIN_SIZE: usize = 1;
    fn type_literal(out: &mut Vec<u8>) {
        out.push(T_MAP);
        K::type_literal(out);
        V::type_literal(out);
    }
    /// The entries as a vector of (key, value) pairs: what a map is on the wire.
    fn pack(&self, w: &mut Writer) {
        self.0.pack(w);
    }
    fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
        Vec::<(K, V)>::unpack(r).map(Map)
    }
}

/// The type literal of `T`.
pub fn literal<T: Pack>() -> Vec<u8> {
    let mut out = Vec::new();
    T::type_literal(&mut out);
    out
}

/// The 31-bit type hash of a literal: MD5's first four bytes, big-endian, bit 0 clear.
pub fn literal_hash(literal: &[u8]) -> u32 {
    let d = Md5::digest(literal);
    u32::from_be_bytes([d[0], d[1], d[2], d[3]]) & !1
}

/// The type hash of `T`, computed once per type (an MD5 per message would show up in
/// profiles of both the master and the client).
pub fn type_hash<T: Pack + 'static>() -> u32 {
    thread_local! {
        /// This thread's copy, so threads serving requests share no lock.
        static LOCAL: RefCell<foldhash::HashMap<TypeId, u32>> = RefCell::default();
    }
    static HASHES: OnceLock<RwLock<HashMap<TypeId, u32>>> = OnceLock::new();
    let id = TypeId::of::<T>();
    if let Some(h) = LOCAL.with(|l| l.borrow().get(&id).copied()) {
        return h;
    }
    let hashes = HASHES.get_or_init(Default::default);
    let known = hashes.read().get(&id).copied();
    let h = known.unwrap_or_else(|| {
        let h = literal_hash(&literal::<T>());
        hashes.write().insert(id, h);
        h
    });
    LOCAL.with(|l| l.borrow_mut().insert(id, h));
    h
}

/// The narrowest length width (1/2/4/8) that holds `max_len`.
fn width_for(max_len: u64) -> usize {
    match max_len {
        0..=0xff => 1,
        0x100..=0xffff => 2,
        0x1_0000..=0xffff_ffff => 4,
        _ => 8,
    }
}

/// log2 of a width, as metainfo bits 3-4.
fn len_bits(width: usize) -> u8 {
    (width.trailing_zeros() as u8) << 3
}

fn payload<T: Pack>(v: &T) -> (usize, Vec<u8>) {
    let mut w = Writer::new(1);
    v.pack(&mut w);
    let width = width_for(w.max_len());
    if width == 1 {
        return (1, w.into_inner());
    }
    let mut w = Writer::new(width);
    v.pack(&mut w);
    (width, w.into_inner())
}

/// Encodes `v` as upstream's release builds do: the hash, a metainfo byte only when a
/// container needs length prefixes wider than one byte, then the payload.
pub fn serialize<T: Pack + 'static>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    serialize_into(v, &mut out);
    out
}

/// [`serialize`], appending to `out`: a message whose containers all fit one-byte
/// length prefixes (most replies) is packed in place, with no buffer of its own.
pub fn serialize_into<T: Pack + 'static>(v: &T, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&type_hash::<T>().to_le_bytes());
    let mut w = Writer {
        buf: std::mem::take(out),
        width: 1,
        max_len: 0,
    };
    v.pack(&mut w);
    let w_max_len = w.max_len();
    *out = w.into_inner();
    if width_for(w_max_len) == 1 {
        return;
    }
    // The first pass measured the longest container: pack once more at its width.
    out.truncate(start);
    let width = width_for(w_max_len);
    out.extend_from_slice(&(type_hash::<T>() | 1).to_le_bytes());
    out.push(len_bits(width));
    let mut w = Writer {
        buf: std::mem::take(out),
        width,
        max_len: 0,
    };
    v.pack(&mut w);
    *out = w.into_inner();
}

/// Encodes `v` as upstream's debug builds do: always a metainfo byte, with the type
/// literal (terminated by `0x00`) before the payload.
pub fn serialize_with_type_info<T: Pack>(v: &T) -> Vec<u8> {
    let (width, body) = payload(v);
    let lit = literal::<T>();
    let mut out = Vec::with_capacity(body.len() + lit.len() + 6);
    out.extend_from_slice(&(literal_hash(&lit) | 1).to_le_bytes());
    out.push(META_TYPE_INFO | len_bits(width));
    out.extend_from_slice(&lit);
    out.push(0);
    out.extend_from_slice(&body);
    out
}

/// The parts of a message before its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header<'a> {
    /// The type hash with bit 0 cleared.
    pub hash: u32,
    /// The metainfo byte, when present.
    pub metainfo: Option<u8>,
    /// The embedded type literal (without its `0x00` terminator), when present.
    pub type_literal: Option<&'a [u8]>,
    /// Width of the container length prefixes.
    pub width: usize,
    /// The payload.
    pub payload: &'a [u8],
}

/// Splits a message into hash, metainfo, type literal and payload without knowing
/// its type. A type literal runs up to the first `0x00` (literals never contain one).
pub fn split(buf: &[u8]) -> DecodeResult<Header<'_>> {
    let mut r = Reader::new(buf, 1);
    let raw = u32::from_le_bytes(r.array()?);
    let mut h = Header {
        hash: raw & !1,
        metainfo: None,
        type_literal: None,
        width: 1,
        payload: &[],
    };
    if raw & 1 == 1 {
        let meta = r.u8()?;
        h.metainfo = Some(meta);
        if meta & META_COMPATIBLE_MASK != 0 {
            return Err(DecodeError::Unsupported("compatible fields"));
        }
        if meta & META_TYPE_INFO != 0 {
            let rest = &buf[r.pos..];
            let end = rest
                .iter()
                .position(|&b| b == 0)
                .ok_or(DecodeError::Truncated)?;
            h.type_literal = Some(&rest[..end]);
            r.take(end + 1)?;
        }
        h.width = 1 << ((meta & META_LEN_MASK) >> 3);
    }
    h.payload = &buf[r.pos..];
    Ok(h)
}

/// Decodes a whole message as a `T`: checks the hash, and the type literal when one
/// is embedded; accepts messages with or without metainfo; rejects trailing bytes.
pub fn deserialize<T: Pack + 'static>(buf: &[u8]) -> DecodeResult<T> {
    let h = split(buf)?;
    let expected = type_hash::<T>();
    if h.hash != expected {
        return Err(DecodeError::HashMismatch {
            expected,
            found: h.hash,
        });
    }
    if let Some(t) = h.type_literal {
        if t != literal::<T>().as_slice() {
            return Err(DecodeError::TypeInfoMismatch);
        }
    }
    let mut r = Reader::new(h.payload, h.width);
    let v = T::unpack(&mut r)?;
    match r.remaining() {
        0 => Ok(v),
        n => Err(DecodeError::Trailing(n)),
    }
}
