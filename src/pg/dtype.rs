//! Element types and reduction operators of the collectives, and the kernels that fold
//! one buffer into another.
//!
//! Reductions work on byte slices of whole elements in native byte order; aligned
//! slices take a typed loop the compiler vectorizes, unaligned ones an element-wise
//! one. `bf16` and `f16` are widened to `f32` for each operation and rounded back
//! (to nearest, ties to even), as torch does on CPU.

use crate::codec::code_enum::code_enum;
use half::{bf16, f16};

code_enum! {
    /// The element type of a buffer (the numbering of `mooncake_ext.h`'s
    /// `MOONCAKE_PG_DTYPE_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum DType: i32 {
        /// 32-bit IEEE float.
        F32 = 0,
        /// 64-bit IEEE float.
        F64 = 1,
        /// bfloat16.
        Bf16 = 2,
        /// 16-bit IEEE float.
        F16 = 3,
        /// Signed 32-bit integer.
        I32 = 4,
        /// Signed 64-bit integer.
        I64 = 5,
        /// Unsigned byte.
        U8 = 6,
    }
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::Bf16 | DType::F16 => 2,
            DType::U8 => 1,
        }
    }

    /// The name numpy and torch use.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::Bf16 => "bfloat16",
            DType::F16 => "float16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
        }
    }
}

code_enum! {
    /// How an all-reduce, reduce or reduce-scatter combines the ranks' elements (the
    /// numbering of `MOONCAKE_PG_OP_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ReduceOp: i32 {
        /// Sum.
        Sum = 0,
        /// Product.
        Prod = 1,
        /// Minimum.
        Min = 2,
        /// Maximum.
        Max = 3,
        /// Sum divided by the number of ranks taking part (integers: truncated).
        Avg = 4,
    }
}

/// One element type's arithmetic.
trait Element: Copy {
    fn combine(self, other: Self, op: ReduceOp) -> Self;
    fn divide(self, n: usize) -> Self;
}

macro_rules! float_element {
    ($t:ty) => {
        impl Element for $t {
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => self + other,
                    ReduceOp::Prod => self * other,
                    ReduceOp::Min => self.min(other),
                    ReduceOp::Max => self.max(other),
                }
            }
            fn divide(self, n: usize) -> Self {
                self / n as $t
            }
        }
    };
}
float_element!(f32);
float_element!(f64);

macro_rules! int_element {
    ($t:ty) => {
        impl Element for $t {
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => self.wrapping_add(other),
                    ReduceOp::Prod => self.wrapping_mul(other),
                    ReduceOp::Min => self.min(other),
                    ReduceOp::Max => self.max(other),
                }
            }
            fn divide(self, n: usize) -> Self {
                // A group has at most a few thousand ranks: `n` fits every type but u8,
                // where a divisor past 255 leaves 0, as the true quotient does.
                <$t>::try_from(n).map_or(0, |n| self / n)
            }
        }
    };
}
int_element!(i32);
int_element!(i64);
int_element!(u8);

macro_rules! half_element {
    ($t:ty) => {
        impl Element for $t {
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                <$t>::from_f32(self.to_f32().combine(other.to_f32(), op))
            }
            fn divide(self, n: usize) -> Self {
                <$t>::from_f32(self.to_f32() / n as f32)
            }
        }
    };
}
half_element!(bf16);
half_element!(f16);

/// Reads element `i` of `bytes` (native order), any alignment.
fn load<T: Copy>(bytes: &[u8], i: usize) -> T {
    let size = std::mem::size_of::<T>();
    let src = &bytes[i * size..(i + 1) * size];
    // SAFETY: `src` holds exactly `size_of::<T>()` bytes, and every element type here
    // (plain numbers) is valid for any bit pattern; read_unaligned allows any address.
    unsafe { std::ptr::read_unaligned(src.as_ptr().cast::<T>()) }
}

/// Writes element `i` of `bytes` (native order), any alignment.
fn store<T: Copy>(bytes: &mut [u8], i: usize, value: T) {
    let size = std::mem::size_of::<T>();
    let dst = &mut bytes[i * size..(i + 1) * size];
    // SAFETY: `dst` holds exactly `size_of::<T>()` writable bytes; write_unaligned
    // allows any address.
    unsafe { std::ptr::write_unaligned(dst.as_mut_ptr().cast::<T>(), value) }
}

/// `acc[i] = acc[i] op other[i]` over whole elements of `T`.
fn fold_typed<T: Element + bytemuck_free::Plain>(acc: &mut [u8], other: &[u8], op: ReduceOp) {
    // SAFETY: `T` is a plain number type (any bit pattern valid), so viewing the
    // aligned middle of a byte slice as `T`s is sound; align_to only yields whole,
    // aligned elements.
    let (head, mid, tail) = unsafe { acc.align_to_mut::<T>() };
    // SAFETY: as above.
    let (ohead, omid, otail) = unsafe { other.align_to::<T>() };
    if head.is_empty() && ohead.is_empty() && tail.len() == otail.len() {
        for (a, b) in mid.iter_mut().zip(omid) {
            *a = a.combine(*b, op);
        }
        return;
    }
    let n = acc.len() / std::mem::size_of::<T>();
    for i in 0..n {
        let a: T = load(acc, i);
        let b: T = load(other, i);
        store(acc, i, a.combine(b, op));
    }
}

/// `acc[i] = acc[i] / n` over whole elements of `T`.
fn divide_typed<T: Element + bytemuck_free::Plain>(acc: &mut [u8], n: usize) {
    let count = acc.len() / std::mem::size_of::<T>();
    for i in 0..count {
        let a: T = load(acc, i);
        store(acc, i, a.divide(n));
    }
}

/// Marks the element types that may be viewed from raw bytes.
mod bytemuck_free {
    /// A type valid for every bit pattern, with no padding.
    pub trait Plain {}
    impl Plain for f32 {}
    impl Plain for f64 {}
    impl Plain for i32 {}
    impl Plain for i64 {}
    impl Plain for u8 {}
    impl Plain for half::bf16 {}
    impl Plain for half::f16 {}
}

/// Folds `other` into `acc` element by element: `acc = acc op other`. Both hold the
/// same whole number of `dtype` elements (callers check lengths).
pub fn fold(dtype: DType, op: ReduceOp, acc: &mut [u8], other: &[u8]) {
    debug_assert_eq!(acc.len(), other.len());
    match dtype {
        DType::F32 => fold_typed::<f32>(acc, other, op),
        DType::F64 => fold_typed::<f64>(acc, other, op),
        DType::Bf16 => fold_typed::<bf16>(acc, other, op),
        DType::F16 => fold_typed::<f16>(acc, other, op),
        DType::I32 => fold_typed::<i32>(acc, other, op),
        DType::I64 => fold_typed::<i64>(acc, other, op),
        DType::U8 => fold_typed::<u8>(acc, other, op),
    }
}

/// Divides every element of `acc` by `n` (the last step of an average).
pub fn divide(dtype: DType, acc: &mut [u8], n: usize) {
    match dtype {
        DType::F32 => divide_typed::<f32>(acc, n),
        DType::F64 => divide_typed::<f64>(acc, n),
        DType::Bf16 => divide_typed::<bf16>(acc, n),
        DType::F16 => divide_typed::<f16>(acc, n),
        DType::I32 => divide_typed::<i32>(acc, n),
        DType::I64 => divide_typed::<i64>(acc, n),
        DType::U8 => divide_typed::<u8>(acc, n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of<T: Copy>(v: &[T]) -> Vec<u8> {
        let mut out = vec![0u8; std::mem::size_of_val(v)];
        for (i, x) in v.iter().enumerate() {
            store(&mut out, i, *x);
        }
        out
    }

    #[test]
    fn every_operator_on_floats_and_integers() {
        let a = bytes_of(&[1.0f32, -2.0, 3.5]);
        let b = bytes_of(&[4.0f32, 5.0, -1.5]);
        let cases = [
            (ReduceOp::Sum, [5.0f32, 3.0, 2.0]),
            (ReduceOp::Prod, [4.0, -10.0, -5.25]),
            (ReduceOp::Min, [1.0, -2.0, -1.5]),
            (ReduceOp::Max, [4.0, 5.0, 3.5]),
        ];
        for (op, want) in cases {
            let mut acc = a.clone();
            fold(DType::F32, op, &mut acc, &b);
            assert_eq!(acc, bytes_of(&want), "{op:?}");
        }
        let mut acc = bytes_of(&[7i64, -9]);
        fold(DType::I64, ReduceOp::Avg, &mut acc, &bytes_of(&[1i64, 2]));
        divide(DType::I64, &mut acc, 2);
        assert_eq!(acc, bytes_of(&[4i64, -3]));
        let mut acc = vec![250u8, 3];
        fold(DType::U8, ReduceOp::Sum, &mut acc, &[10, 4]);
        assert_eq!(acc, vec![4, 7], "u8 sums wrap");
    }

    #[test]
    fn half_types_round_through_f32() {
        let a = bytes_of(&[bf16::from_f32(1.5), bf16::from_f32(-3.0)]);
        let b = bytes_of(&[bf16::from_f32(2.25), bf16::from_f32(0.5)]);
        let mut acc = a.clone();
        fold(DType::Bf16, ReduceOp::Sum, &mut acc, &b);
        assert_eq!(acc, bytes_of(&[bf16::from_f32(3.75), bf16::from_f32(-2.5)]));
        let mut acc = bytes_of(&[f16::from_f32(6.0)]);
        fold(
            DType::F16,
            ReduceOp::Max,
            &mut acc,
            &bytes_of(&[f16::from_f32(7.0)]),
        );
        divide(DType::F16, &mut acc, 2);
        assert_eq!(acc, bytes_of(&[f16::from_f32(3.5)]));
    }

    #[test]
    fn unaligned_slices_fold_like_aligned_ones() {
        let a: Vec<f64> = (0..33).map(|i| i as f64 * 0.5).collect();
        let b: Vec<f64> = (0..33).map(|i| 100.0 - i as f64).collect();
        let mut aligned = bytes_of(&a);
        fold(DType::F64, ReduceOp::Sum, &mut aligned, &bytes_of(&b));
        let mut shifted = vec![0u8; 1];
        shifted.extend(bytes_of(&a));
        let mut other = vec![0u8; 3];
        other.extend(bytes_of(&b));
        fold(DType::F64, ReduceOp::Sum, &mut shifted[1..], &other[3..]);
        assert_eq!(&shifted[1..], &aligned[..]);
    }

    #[test]
    fn codes_round_trip() {
        for (i, d) in DType::ALL.iter().enumerate() {
            assert_eq!(DType::from_code(i as i32), Some(*d));
        }
        assert_eq!(DType::from_code(7), None);
        assert_eq!(DType::from_code(-1), None);
        assert_eq!(ReduceOp::from_code(4), Some(ReduceOp::Avg));
        assert_eq!(ReduceOp::from_code(5), None);
    }
}
