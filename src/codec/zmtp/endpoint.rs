//! ZeroMQ bind endpoints of the TCP transport, read the way `zmq_bind` reads them:
//! `tcp://<host>:<port>` where the host is `*` (every IPv4 interface), an IPv4
//! address, a bracketed IPv6 address or an interface name, and the port a number, or
//! `*` / `0` for one the system picks. Host names are not resolved (libzmq does not
//! resolve them for a bind either).

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Why an endpoint could not be read, or its address found.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// Not of the form `tcp://host:port`.
    #[error("{endpoint:?} is not a tcp://host:port endpoint")]
    NotTcp {
        /// The endpoint as given.
        endpoint: String,
    },
    /// A ZeroMQ transport other than `tcp://`.
    #[error("the {scheme}:// transport is not supported (only tcp://)")]
    Transport {
        /// The transport's scheme (`ipc`, `inproc`, ...).
        scheme: String,
    },
    /// No `:port` after the host.
    #[error("{endpoint:?} has no port")]
    NoPort {
        /// The endpoint as given.
        endpoint: String,
    },
    /// The port is not a port number.
    #[error("{endpoint:?}: {port:?} is not a port")]
    BadPort {
        /// The endpoint as given.
        endpoint: String,
        /// Its port part.
        port: String,
    },
    /// A bracketed host that is not an IPv6 address.
    #[error("{endpoint:?}: {host:?} is not an IPv6 address")]
    BadIpv6 {
        /// The endpoint as given.
        endpoint: String,
        /// The text between the brackets.
        host: String,
    },
    /// A host that is neither an address nor an interface name.
    #[error("{endpoint:?}: {host:?} is not an address or interface")]
    BadHost {
        /// The endpoint as given.
        endpoint: String,
        /// Its host part.
        host: String,
    },
    /// The named interface is not up with an IPv4 address.
    #[error("no interface {name:?} with an IPv4 address is up")]
    NoInterface {
        /// The interface name.
        name: String,
    },
    /// The host did not resolve.
    #[error("{endpoint:?}: {source}")]
    Resolve {
        /// The endpoint as given.
        endpoint: String,
        /// What the resolver said.
        source: io::Error,
    },
    /// The host resolved to no address.
    #[error("{endpoint:?}: no address")]
    NoAddress {
        /// The endpoint as given.
        endpoint: String,
    },
}

/// The binaries and the conductor's HTTP API keep their errors as text.
impl From<EndpointError> for String {
    fn from(e: EndpointError) -> String {
        e.to_string()
    }
}

/// The `host` and `port` text of `tcp://host:port`.
pub(super) fn tcp_host_port(endpoint: &str) -> Result<(&str, &str), EndpointError> {
    let rest = endpoint
        .strip_prefix("tcp://")
        .ok_or_else(|| EndpointError::NotTcp {
            endpoint: endpoint.to_string(),
        })?;
    rest.rsplit_once(':').ok_or_else(|| EndpointError::NoPort {
        endpoint: endpoint.to_string(),
    })
}

/// The error for port text `port` of `endpoint`.
pub(super) fn bad_port(endpoint: &str, port: &str) -> EndpointError {
    EndpointError::BadPort {
        endpoint: endpoint.to_string(),
        port: port.to_string(),
    }
}

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
    pub fn parse(endpoint: &str) -> Result<BindEndpoint, EndpointError> {
        if let Some((scheme, _)) = endpoint.split_once("://") {
            if !scheme.is_empty() && scheme != "tcp" {
                let scheme = scheme.to_string();
                return Err(EndpointError::Transport { scheme });
            }
        }
        let (host, port) = tcp_host_port(endpoint)?;
        let port = match port {
            "*" => 0,
            p => p.parse::<u16>().map_err(|_| bad_port(endpoint, p))?,
        };
        let host = if host == "*" {
            BindHost::Any
        } else if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            BindHost::Ip(v6.parse().map_err(|_| EndpointError::BadIpv6 {
                endpoint: endpoint.to_string(),
                host: v6.to_string(),
            })?)
        } else if let Ok(ip) = host.parse::<IpAddr>() {
            BindHost::Ip(ip)
        } else if !host.is_empty() && !host.contains([':', '[', ']', '/']) {
            BindHost::Interface(host.to_string())
        } else {
            return Err(EndpointError::BadHost {
                endpoint: endpoint.to_string(),
                host: host.to_string(),
            });
        };
        Ok(BindEndpoint { host, port })
    }

    /// The socket address to bind; `interface_ip` looks an interface name up.
    pub fn socket_addr(
        &self,
        interface_ip: impl Fn(&str) -> Option<IpAddr>,
    ) -> Result<SocketAddr, EndpointError> {
        let ip = match &self.host {
            BindHost::Any => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            BindHost::Ip(ip) => *ip,
            BindHost::Interface(name) => interface_ip(name)
                .ok_or_else(|| EndpointError::NoInterface { name: name.clone() })?,
        };
        Ok(SocketAddr::new(ip, self.port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<BindEndpoint, EndpointError> {
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
        assert_eq!(
            all.socket_addr(|_| None).unwrap(),
            any.socket_addr(|_| None).unwrap()
        );
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
        let no_eth = eth.socket_addr(|_| None).unwrap_err().to_string();
        assert_eq!(no_eth, "no interface \"eth0\" with an IPv4 address is up");
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
        assert_eq!(
            parse("ipc:///tmp/x").unwrap_err().to_string(),
            "the ipc:// transport is not supported (only tcp://)"
        );
    }
}
