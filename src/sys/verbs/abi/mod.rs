//! The libibverbs C ABI this crate uses (rdma-core 44+, LP64 Linux), written out by
//! hand so that building needs no rdma-core headers. `tests/rust/verbs_layout.rs`
//! compares every size and offset here with the system's `<infiniband/verbs.h>` when
//! it is installed.
//!
//! Only what the RDMA transport touches is spelled out; unions whose other arms are
//! never used are kept as opaque, correctly sized padding.
//!
//! * [`structs`]: the structs, in `<infiniband/verbs.h>`'s layout.
//! * [`constants`]: the enum and flag values passed to the library.
//! * [`layout`]: every size and offset relied on, for the layout test.

pub mod constants;
pub mod layout;
pub mod structs;

pub use constants::*;
pub use layout::layout_table;
pub use structs::*;
