//! ZeroMQ's publish/subscribe, spoken directly: ZMTP 3.1 (accepting 3.0 peers) with
//! the NULL security mechanism, a PUB socket bound to a TCP endpoint, without libzmq.
//!
//! Enough for any ZeroMQ SUB or XSUB socket (libzmq, pyzmq, JeroMQ, zmq.rs) to
//! connect, subscribe by topic prefix (ZMTP 3.1 SUBSCRIBE/CANCEL commands or 3.0
//! subscription messages) and receive multipart messages; PINGs are answered. Not
//! here: CURVE/PLAIN security, other socket types, `ipc://` and `inproc://`.
//!
//! [`codec`] holds the wire pieces, [`session`] one subscriber's protocol (no
//! sockets), [`endpoint`] the `tcp://host:port` syntax, [`PubSocket`] the threads, and
//! [`sub`] the subscribing side of one connection.

pub mod codec;
pub mod endpoint;
pub mod session;
mod socket;
pub mod sub;
#[cfg(test)]
pub(crate) mod test_sub;

pub use socket::{PubLimits, PubSocket};
