//! `host:port` names as upstream parses and prints them (spec §1.5).

/// Splits `host:port` the way upstream does (spec §1.5): `[v6]:port`, a bare IPv6
/// address (no port), or a split at the last `:`. A missing or invalid port yields
/// `default_port`. The returned host is never bracketed.
pub fn parse_host_port(name: &str, default_port: u16) -> (String, u16) {
    if let Some(rest) = name.strip_prefix('[') {
        if let Some((host, tail)) = rest.split_once(']') {
            let port = tail.strip_prefix(':').and_then(|p| p.parse().ok());
            return (host.to_string(), port.unwrap_or(default_port));
        }
    }
    if name.matches(':').count() > 1 && name.parse::<std::net::Ipv6Addr>().is_ok() {
        return (name.to_string(), default_port);
    }
    match name.rsplit_once(':') {
        Some((host, port)) => match port.parse::<u16>() {
            Ok(p) if p != 0 => (host.to_string(), p),
            _ => (host.to_string(), default_port),
        },
        None => (name.to_string(), default_port),
    }
}

/// Upstream's `getHostNameWithoutPort`: the host of `[v6]:port` (unbracketed), else
/// everything before the last `:` (the whole name when there is none). Unlike
/// [`parse_host_port`], a bare IPv6 address loses its last group, as upstream's does.
pub fn host_without_port(ep: &str) -> String {
    if let Some(rest) = ep.strip_prefix('[') {
        if let Some((host, _)) = rest.split_once(']') {
            return host.to_string();
        }
    }
    match ep.rfind(':') {
        Some(i) => ep[..i].to_string(),
        None => ep.to_string(),
    }
}

/// Formats `host:port`, bracketing IPv6 hosts.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_upstream() {
        assert_eq!(
            parse_host_port("127.0.0.1:1234", 1),
            ("127.0.0.1".into(), 1234)
        );
        assert_eq!(parse_host_port("node01", 12001), ("node01".into(), 12001));
        assert_eq!(parse_host_port("h:notaport", 12001), ("h".into(), 12001));
        assert_eq!(parse_host_port("[::1]:80", 1), ("::1".into(), 80));
        assert_eq!(parse_host_port("fe80::1", 7), ("fe80::1".into(), 7));
        assert_eq!(
            parse_host_port("fe80::1%eth0:99", 7),
            ("fe80::1%eth0".into(), 99)
        );
        assert_eq!(host_without_port("10.0.0.1:1234"), "10.0.0.1");
        assert_eq!(host_without_port("[::1]:80"), "::1");
        assert_eq!(host_without_port("localhost"), "localhost");
        assert_eq!(host_without_port("fe80::1"), "fe80:");
        assert_eq!(join_host_port("::1", 5), "[::1]:5");
        assert_eq!(join_host_port("10.0.0.1", 5), "10.0.0.1:5");
    }
}
