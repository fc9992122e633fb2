//! System libraries the engine uses when present, loaded at run time so that
//! `libmooncake.so` has no `NEEDED` entry for them: RDMA verbs ([`verbs`]).

pub mod dl;
pub mod verbs;
