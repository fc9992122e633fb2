//! System libraries the engine uses when present, loaded at run time so that
//! `libmooncake.so` has no `NEEDED` entry for them: RDMA verbs ([`verbs`]) and the CUDA
//! driver ([`cuda`]); and [`memmove`], the raw copy between two of this process's
//! addresses that the transports and the fakes share.

pub mod cuda;
pub mod dl;
pub mod memmove;
pub mod verbs;
