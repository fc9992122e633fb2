//! Listening sockets on a random port of a range, and the advertised local IP.

use crate::error::{Error, ErrorKind, Result};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};

/// A cheap per-process pseudo-random number (xorshift seeded by time, pid and a counter).
pub fn random_u64() -> u64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x = STATE.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        ^ nanos
        ^ (u64::from(std::process::id()) << 32);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// Binds a listener on all interfaces at a random free port in `[min, max]`.
pub fn bind_in_range(min: u16, max: u16, ipv6: bool) -> Result<TcpListener> {
    let span = u64::from(max.saturating_sub(min)) + 1;
    let mut last_err = None;
    for _ in 0..500 {
        let port = min + (random_u64() % span) as u16;
        match bind_port(port, ipv6) {
            Ok(l) => return Ok(l),
            Err(e) => last_err = Some(e),
        }
    }
    Err(match last_err {
        Some(e) => Error::os(
            ErrorKind::Socket,
            format_args!("no free port in {min}-{max}"),
            e,
        ),
        None => Error::Socket(format!("no free port in {min}-{max}: no attempt")),
    })
}

/// Binds a listener on all interfaces at `port`.
pub fn bind_port(port: u16, ipv6: bool) -> std::io::Result<TcpListener> {
    let addr = if ipv6 {
        SocketAddr::from((Ipv6Addr::UNSPECIFIED, port))
    } else {
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))
    };
    TcpListener::bind(addr)
}

/// A connected pair of loopback TCP streams, (client, server): the tests' socket.
#[cfg(test)]
pub(crate) fn loopback_pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

/// The first UP and RUNNING non-loopback interface address (IPv4, or IPv6 when asked).
pub fn first_interface_ip(ipv6: bool) -> Option<String> {
    interface_ip(None, ipv6)
}

/// The address of interface `name` (IPv4, or IPv6 when asked), if it is up.
pub fn named_interface_ip(name: &str, ipv6: bool) -> Option<String> {
    interface_ip(Some(name), ipv6)
}

/// The first address of an UP and RUNNING interface: the one named `name`, or any
/// non-loopback one.
fn interface_ip(name: Option<&str>, ipv6: bool) -> Option<String> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list returned by getifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        let flags = ifa.ifa_flags;
        let up = flags & libc::IFF_UP as u32 != 0 && flags & libc::IFF_RUNNING as u32 != 0;
        let loopback = flags & libc::IFF_LOOPBACK as u32 != 0;
        if !up || ifa.ifa_addr.is_null() || (name.is_none() && loopback) {
            continue;
        }
        if let Some(want) = name {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let have = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
            if have.to_bytes() != want.as_bytes() {
                continue;
            }
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr of the given family.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        if !ipv6 && family == libc::AF_INET {
            // SAFETY: family AF_INET means a sockaddr_in.
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            found = Some(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).to_string());
            break;
        }
        if ipv6 && family == libc::AF_INET6 {
            // SAFETY: family AF_INET6 means a sockaddr_in6.
            let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
            found = Some(Ipv6Addr::from(sin6.sin6_addr.s6_addr).to_string());
            break;
        }
    }
    // SAFETY: `head` came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_inside_the_range() {
        let l = bind_in_range(20000, 20999, false).unwrap();
        let port = l.local_addr().unwrap().port();
        assert!((20000..=20999).contains(&port));
    }

    #[test]
    fn a_taken_range_fails_with_the_errno_of_the_last_bind() {
        let held = bind_port(0, false).unwrap();
        let port = held.local_addr().unwrap().port();
        let e = bind_in_range(port, port, false).unwrap_err();
        assert_eq!(e.errno(), libc::EADDRINUSE);
        assert_eq!((e.err_code(), e.status_code()), (-102, 102));
        assert!(e
            .to_string()
            .starts_with(&format!("socket: no free port in {port}-{port}: ")));
    }
}
