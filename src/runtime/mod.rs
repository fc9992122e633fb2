//! The blocking server runtime every listener of the library uses: a TCP acceptor with
//! per-port limits, connection threads, a Unix-socket server, an HTTP/1.1 server,
//! stoppable background threads and the binaries' shutdown signal; and the latency
//! histogram the servers' metrics share.

pub mod conn_threads;
pub mod http_server;
pub mod latency_histogram;
pub mod signals;
pub mod stoppable;
pub mod tcp_acceptor;
pub mod unix_server;
