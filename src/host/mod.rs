//! Host and network helpers: address parsing, listening sockets and the advertised IP,
//! memory mappings, file-descriptor passing, socket waits, an idle clock, large copies
//! shared with helper threads and the binaries' logger.

pub mod addr;
pub mod busy_poll;
pub mod fd_passing;
pub mod idle;
pub mod logger;
pub mod mapping;
pub mod net;
pub mod parallel_copy;
