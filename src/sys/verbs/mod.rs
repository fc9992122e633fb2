//! RDMA verbs behind one narrow trait, [`Verbs`]: the RDMA transport calls nothing
//! else. [`system`] loads libibverbs at run time (no `NEEDED` entry, no build-time
//! headers) and [`fake::FakeVerbs`] is an in-process provider for tests.
//!
//! Objects are opaque handles ([`Ctx`], [`Pd`], [`Cq`], [`Qp`], [`Mr`]); a handle is
//! valid from the call that made it to the call that destroys it, and the transport
//! never uses one afterwards.

pub mod abi;
mod error;
pub mod fake;
pub mod fake_state;
mod real;
mod real_functions;
mod real_mr;
mod seam;
mod sysfs;
mod types;

pub use error::{LoadError, VResult, VerbsError};
pub use seam::Verbs;
pub use sysfs::parse_gid;
pub use types::{
    mtu_bytes, mtu_code, wc, Access, Completion, Cq, Ctx, DeviceAttr, Dmabuf, GidEntry, GidKind,
    Mr, MrKeys, Pd, PortAttr, Qp, QpCaps, QpInfo, QpTransition, RdmaOp, RemotePath, WorkRequest,
};

use std::sync::{Arc, OnceLock};

/// The system's libibverbs, loaded on first use; the error says why it is unusable
/// (not installed, or the library misses a function).
pub fn system() -> Result<Arc<dyn Verbs>, LoadError> {
    static SYSTEM: OnceLock<Result<Arc<dyn Verbs>, LoadError>> = OnceLock::new();
    SYSTEM
        .get_or_init(|| real::RealVerbs::load().map(|v| Arc::new(v) as Arc<dyn Verbs>))
        .clone()
}
