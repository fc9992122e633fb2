//! Where a dummy finds its real client: the abstract Unix socket named after the real
//! client's RPC port.

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
    use super::{port_of, socket_name};

    #[test]
    fn ports_come_from_addresses() {
        for (address, port) in [
            ("127.0.0.1:50052", Some(50052)),
            ("[::1]:7", Some(7)),
            ("9000", Some(9000)),
            ("localhost", None),
            ("host:0", None),
        ] {
            assert_eq!(port_of(address), port, "{address}");
        }
        assert_eq!(socket_name(50052), "mooncake_client_50052.sock");
    }
}
