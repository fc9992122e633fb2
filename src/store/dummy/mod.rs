//! Dummy and real clients (upstream's `DummyClient` / `mooncake_client`): several
//! processes of one host share one real client, which owns the segment, the Transfer
//! Engine and the master connection. Dummies forward their operations over a Unix
//! socket; their data moves through shared memory both map ([`DummyServer`] on the
//! real client's side, [`DummyClient`] in each dummy process).
//!
//! The protocol is this project's own (`wire.rs`): upstream's dummy speaks coro_rpc
//! over TCP with ~45 handlers and cannot talk to this real client, nor ours to
//! upstream's.

mod client;
mod server;
pub mod wire;

pub use client::DummyClient;
pub use server::DummyServer;

/// The abstract socket name (without `@`) of the real client whose RPC port is `port`
/// (upstream's name for its IPC socket).
pub fn socket_name(port: u16) -> String {
    format!("mooncake_client_{port}.sock")
}

/// The port in a real client's address: `host:port`, `[v6]:port` or a bare port.
pub fn port_of(server_address: &str) -> Option<u16> {
    let s = server_address.trim();
    let port = s.rsplit_once(':').map_or(s, |(_, p)| p);
    port.parse().ok().filter(|&p| p != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_addresses() {
        assert_eq!(port_of("127.0.0.1:50052"), Some(50052));
        assert_eq!(port_of("[::1]:7"), Some(7));
        assert_eq!(port_of("9000"), Some(9000));
        assert_eq!(port_of("localhost"), None);
        assert_eq!(port_of("host:0"), None);
        assert_eq!(socket_name(50052), "mooncake_client_50052.sock");
    }
}
