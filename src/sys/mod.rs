//! System libraries the engine uses when present, loaded at run time so that
//! `libmooncake.so` has no `NEEDED` entry for them: RDMA verbs ([`verbs`]) and the CUDA
//! driver ([`cuda`]).

pub mod cuda;
pub mod dl;
pub mod verbs;
