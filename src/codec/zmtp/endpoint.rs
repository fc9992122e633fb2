//! ZeroMQ bind endpoints of the TCP transport, read the way `zmq_bind` reads them:
//! `tcp://<host>:<port>` where the host is `*` (every IPv4 interface), an IPv4
//! address, a bracketed IPv6 address or an interface name, and the port a number, or
//! `*` / `0` for one the system picks. Host names are not resolved (libzmq does not
//! resolve them for a bind either).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The host part of a bind endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindHost {
    /// `*`: every IPv4 interface.
    Any,
    /// An IP address.
    Ip(IpAddr),
    /// An interface name, to be looked up.
    Interface(String),
}

/// A parsed bind endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindEndpoint {
    /// Where to bind.
    pub host: BindHost,
    /// The port; 0 lets the system pick.
    pub port: u16,
}

impl BindEndpoint {
    /// Parses `tcp://host:port`.
    pub fn parse(endpoint: &str) -> Result<BindEndpoint, String> {
        let rest = endpoint.strip_prefix("tcp://").ok_or_else(|| {
            let scheme = endpoint.split_once("://").map_or("", |(s, _)| s);
            if scheme.is_empty() {
                format!("{endpoint:?} is not a tcp://host:port endpoint")
            } else {
                format!("the {scheme}:// transport is not supported (only tcp://)")
            }
        })?;
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("{endpoint:?} has no port"))?;
        let port = match port {
            "*" => 0,
            p => p
                .parse::<u16>()
                .map_err(|_| format!("{endpoint:?}: {p:?} is not a port"))?,
        };
        let host = if host == "*" {
            BindHost::Any
        } else if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            BindHost::Ip(
                v6.parse()
                    .map_err(|_| format!("{endpoint:?}: {v6:?} is not an IPv6 address"))?,
            )
        } else if let Ok(ip) = host.parse::<IpAddr>() {
            BindHost::Ip(ip)
        } else if !host.is_empty() && !host.contains([':', '[', ']', '/']) {
            BindHost::Interface(host.to_string())
        } else {
            return Err(format!(
                "{endpoint:?}: {host:?} is not an address or interface"
            ));
        };
        Ok(BindEndpoint { host, port })
    }

    /// The socket address to bind; `interface_ip` looks an interface name up.
    pub fn socket_addr(
        &self,
        interface_ip: impl Fn(&str) -> Option<IpAddr>,
    ) -> Result<SocketAddr, String> {
        let ip = match &self.host {
            BindHost::Any => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            BindHost::Ip(ip) => *ip,
            BindHost::Interface(name) => interface_ip(name)
                .ok_or_else(|| format!("no interface {name:?} with an IPv4 address is up"))?,
        };
        Ok(SocketAddr::new(ip, self.port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<BindEndpoint, String> {
        BindEndpoint::parse(s)
    }

    #[test]
    fn endpoints_zmq_binds() {
        let any = parse("tcp://*:5557").unwrap();
        assert_eq!(any.host, BindHost::Any);
        assert_eq!(any.port, 5557);
        assert_eq!(
            any.socket_addr(|_| None).unwrap(),
            "0.0.0.0:5557".parse().unwrap()
        );
        let all = parse("tcp://0.0.0.0:5557").unwrap();
        assert_eq!(all.socket_addr(|_| None), any.socket_addr(|_| None));
        assert_eq!(parse("tcp://127.0.0.1:0").unwrap().port, 0);
        assert_eq!(parse("tcp://127.0.0.1:*").unwrap().port, 0);
        assert_eq!(
            parse("tcp://[::1]:9").unwrap().host,
            BindHost::Ip("::1".parse().unwrap())
        );
        let eth = parse("tcp://eth0:1").unwrap();
        assert_eq!(eth.host, BindHost::Interface("eth0".into()));
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(
            eth.socket_addr(|n| (n == "eth0").then_some(lo)).unwrap(),
            "127.0.0.1:1".parse().unwrap()
        );
        assert!(eth.socket_addr(|_| None).unwrap_err().contains("eth0"));
    }

    #[test]
    fn endpoints_refused() {
        for bad in [
            "",
            "127.0.0.1:5557",
            "ipc:///tmp/x",
            "inproc://x",
            "tcp://127.0.0.1",
            "tcp://127.0.0.1:",
            "tcp://127.0.0.1:65536",
            "tcp://127.0.0.1:-1",
            "tcp://:5557",
            "tcp://[::1:5557",
            "tcp://[nope]:5557",
            "tcp://a/b:1",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse("ipc:///tmp/x").unwrap_err().contains("ipc://"));
    }
}
