//! struct_pack encodings of the standard types: fixed-width little-endian integers,
//! `bool`, strings, vectors, optionals, expecteds (`Result`), `void` (`()`) and tuples
//! (argument lists; a single argument is flattened).

use super::struct_pack::{
    DecodeError, DecodeResult, Pack, Reader, Writer, T_BOOL, T_CHAR, T_END, T_EXPECTED, T_I16,
    T_I32, T_I64, T_I8, T_OPTIONAL, T_STRING, T_STRUCT, T_U16, T_U32, T_U64, T_U8, T_VECTOR,
    T_VOID,
};

macro_rules! pack_int {
    ($($t:ty => $code:expr),* $(,)?) => {$(
        impl Pack for $t {
            const MIN_SIZE: usize = std::mem::size_of::<$t>();
            fn type_literal(out: &mut Vec<u8>) {
                out.push($code);
            }
            fn pack(&self, w: &mut Writer) {
                w.put_bytes(&self.to_le_bytes());
            }
            fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
                Ok(<$t>::from_le_bytes(r.array()?))
            }
        }
    )*};
}

pack_int!(i32 => T_I32, u32 => T_U32, i64 => T_I64, u64 => T_U64, i8 => T_I8, u8 => T_U8,
    i16 => T_I16, u16 => T_U16);

impl Pack for bool {
    const MIN_SIZE: usize = 1;
    fn type_literal(out: &mut Vec<u8>) {
        out.push(T_BOOL);
    }
    fn pack(&self, w: &mut Writer) {
        w.put_u8(*self as u8);
    }
    fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
        r.flag()
    }
}

impl Pack for String {
    const MIN_SIZE: usize = 1;
    fn type_literal(out: &mut Vec<u8>) {
        out.extend_from_slice(&[T_STRING, T_CHAR]);
    }
    fn pack(&self, w: &mut Writer) {
        w.put_len(self.len());
        w.put_bytes(self.as_bytes());
    }
    fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let n = r.seq_len(1)?;
        let b = r.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError::Invalid("UTF-8 string"))
    }
}

impl<T: Pack> Pack for Vec<T> {
    const MIN_SIZE: usize = 1;
    fn type_literal(out: &mut Vec<u8>) {
        out.push(T_VECTOR);
        T::type_literal(out);
    }
    fn pack(&self, w: &mut Writer) {
        w.put_len(self.len());
        for v in self {
            v.pack(w);
        }
    }
    fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let n = r.seq_len(T::MIN_SIZE)?;
        let mut v = Vec::with_capacity(n.min(r.remaining()));
        for _ in 0..n {
            v.push(T::unpack(r)?);
        }
        Ok(v)
    }
}

impl<T: Pack> Pack for Option<T> {
    const MIN_SIZE: usize = 1;
    fn type_literal(out: &mut Vec<u8>) {
        out.push(T_OPTIONAL);
        T::type_literal(out);
    }
    fn pack(&self, w: &mut Writer) {
        match self {
            Some(v) => {
                w.put_u8(1);
                v.pack(w);
            }
            None => w.put_u8(0),
        }
    }
    fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
        if r.flag()? {
            Ok(Some(T::unpack(r)?))
        } else {
            Ok(None)
        }
    }
}

/// `tl::expected<T, E>`: `u8 has_value`, then the value or the error.
impl<T: Pack, E: Pack> Pack for Result<T, E> {
    const MIN_SIZE: usize = 1;
    fn type_literal(out: &mut Vec<u8>) {
        out.push(T_EXPECTED);
        T::type_literal(out);
        E::type_literal(out);
    }
    fn pack(&self, w: &mut Writer) {
        match self {
            Ok(v) => {
                w.put_u8(1);
                v.pack(w);
            }
            Err(e) => {
                w.put_u8(0);
                e.pack(w);
            }
        }
    }
    fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
        if r.flag()? {
            Ok(Ok(T::unpack(r)?))
        } else {
            Ok(Err(E::unpack(r)?))
        }
    }
}

/// `void` (in `expected<void, E>`) / `std::monostate`; as an argument list, "no
/// arguments".
impl Pack for () {
    const MIN_SIZE: usize = 0;
    const IS_VOID: bool = true;
    fn type_literal(out: &mut Vec<u8>) {
        out.push(T_VOID);
    }
    fn pack(&self, _w: &mut Writer) {}
    fn unpack(_r: &mut Reader<'_>) -> DecodeResult<Self> {
        Ok(())
    }
}

/// A single-argument list is flattened: its literal and payload are the argument's.
impl<A: Pack> Pack for (A,) {
    const MIN_SIZE: usize = A::MIN_SIZE;
    fn type_literal(out: &mut Vec<u8>) {
        A::type_literal(out);
    }
    fn pack(&self, w: &mut Writer) {
        self.0.pack(w);
    }
    fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
        Ok((A::unpack(r)?,))
    }
}

macro_rules! pack_tuple {
    ($($n:tt : $t:ident),+) => {
        /// A tuple (argument list, pair): a struct of its elements.
        impl<$($t: Pack),+> Pack for ($($t,)+) {
            const MIN_SIZE: usize = 0 $(+ $t::MIN_SIZE)+;
            fn type_literal(out: &mut Vec<u8>) {
                out.push(T_STRUCT);
                $($t::type_literal(out);)+
                out.push(T_END);
            }
            fn pack(&self, w: &mut Writer) {
                $(self.$n.pack(w);)+
            }
            fn unpack(r: &mut Reader<'_>) -> DecodeResult<Self> {
                Ok(($($t::unpack(r)?,)+))
            }
        }
    };
}

pack_tuple!(0: A, 1: B);
pack_tuple!(0: A, 1: B, 2: C);
pack_tuple!(0: A, 1: B, 2: C, 3: D);
pack_tuple!(0: A, 1: B, 2: C, 3: D, 4: E);
pack_tuple!(0: A, 1: B, 2: C, 3: D, 4: E, 5: F);
pack_tuple!(0: A, 1: B, 2: C, 3: D, 4: E, 5: F, 6: G);
