//! [`WireArg`]: how a master RPC argument converts between its Rust form (`&str`,
//! `&[T]`, `&T`, or a small value) and the owned form its request tuple carries
//! (`String`, `Vec<T>`, `T`). The client stubs and the dispatch arms that
//! [`super::master_rpcs`] generates call it for every argument.

use super::master_api::{
    ObjectMeta, ReplicaType, ReplicateConfig, Segment, TaskCompleteRequest, Uuid,
};

/// An RPC argument in its Rust form, and the wire form it travels in.
pub trait WireArg<'a>: Sized {
    /// The owned form in the request's argument tuple.
    type Wire;
    /// The wire form (the client encodes it).
    fn to_wire(self) -> Self::Wire;
    /// The Rust form, borrowed from a decoded request (the server calls with it).
    fn from_wire(wire: &'a Self::Wire) -> Self;
}

impl<'a> WireArg<'a> for &'a str {
    type Wire = String;
    fn to_wire(self) -> String {
        self.to_string()
    }
    fn from_wire(wire: &'a String) -> &'a str {
        wire
    }
}

impl<'a, T: Clone> WireArg<'a> for &'a [T] {
    type Wire = Vec<T>;
    fn to_wire(self) -> Vec<T> {
        self.to_vec()
    }
    fn from_wire(wire: &'a Vec<T>) -> &'a [T] {
        wire
    }
}

macro_rules! by_reference {
    ($($t:ty),*) => {$(
        impl<'a> WireArg<'a> for &'a $t {
            type Wire = $t;
            fn to_wire(self) -> $t {
                self.clone()
            }
            fn from_wire(wire: &'a $t) -> &'a $t {
                wire
            }
        }
    )*};
}

macro_rules! by_value {
    ($($t:ty),*) => {$(
        impl<'a> WireArg<'a> for $t {
            type Wire = $t;
            fn to_wire(self) -> $t {
                self
            }
            fn from_wire(wire: &'a $t) -> $t {
                *wire
            }
        }
    )*};
}

by_reference!(Segment, ReplicateConfig, ObjectMeta, TaskCompleteRequest);
by_value!(Uuid, u64, i64, bool, ReplicaType);
