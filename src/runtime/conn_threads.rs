//! One thread per accepted connection, within limits on how many connections a server
//! serves at once and how many of them one peer may hold, tracked so that a server can
//! shut every connection down and join every thread when it stops.
//!
//! The per-peer limit is what keeps a flood of connections from one host (or one local
//! process) from starving everybody else: the flood is refused at accept, the other
//! peers keep their share.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Who is at the other end of a connection, for the per-peer limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// A TCP peer's address (every port of one host counts together).
    Host(IpAddr),
    /// A Unix-socket peer's process id.
    Process(i32),
    /// A peer that could not be identified; such peers share one allowance.
    Unknown,
}

/// A connected socket a server thread serves.
pub trait Connection: Send + Sized + 'static {
    /// A second handle to the same socket.
    fn duplicate(&self) -> io::Result<Self>;
    /// Shuts both directions down (a blocked reader returns).
    fn close(&self);
    /// The peer, for the per-peer limit.
    fn peer(&self) -> Peer;
}

/// Implements [`Connection`] for a std stream type (`try_clone`, `shutdown`), with
/// `$peer` saying who `$stream` is connected to.
macro_rules! std_connection {
    ($ty:ty, |$stream:ident| $peer:expr) => {
        impl Connection for $ty {
            fn duplicate(&self) -> io::Result<Self> {
                self.try_clone()
            }
            fn close(&self) {
                let _ = self.shutdown(Shutdown::Both);
            }
            fn peer(&self) -> Peer {
                let $stream = self;
                $peer
            }
        }
    };
}

std_connection!(TcpStream, |s| s
    .peer_addr()
    .map_or(Peer::Unknown, |a| Peer::Host(a.ip())));
std_connection!(UnixStream, |s| crate::host::fd_passing::peer_credentials(s)
    .map_or(Peer::Unknown, |c| Peer::Process(c.pid)));

/// How many connections one listening socket serves at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Connections served at once; further ones are refused.
    pub max_connections: usize,
    /// Connections one peer may hold at once; further ones from it are refused.
    pub max_per_peer: usize,
}

impl ConnLimits {
    /// Limits of `max_connections` in all and `max_per_peer` per peer (each at least 1).
    pub fn new(max_connections: usize, max_per_peer: usize) -> ConnLimits {
        let max_connections = max_connections.max(1);
        ConnLimits {
            max_connections,
            max_per_peer: max_per_peer.clamp(1, max_connections),
        }
    }
}

/// Why a connection was not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The server already serves its maximum.
    Full,
    /// This peer already holds its maximum.
    PeerFull,
    /// No thread or file descriptor could be had for it.
    NoResources,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Full => "too many connections",
            Refusal::PeerFull => "too many connections from this peer",
            Refusal::NoResources => "no thread or file descriptor for it",
        })
    }
}

struct Live<S> {
    stream: S,
    peer: Peer,
    handle: Option<JoinHandle<()>>,
}

type LiveMap<S> = Arc<Mutex<HashMap<u64, Live<S>>>>;

/// The live connections of one server.
pub struct ConnThreads<S: Connection> {
    limits: ConnLimits,
    next: AtomicU64,
    live: LiveMap<S>,
}

impl<S: Connection> ConnThreads<S> {
    /// No connections yet; at most `limits` at once.
    pub fn new(limits: ConnLimits) -> ConnThreads<S> {
        ConnThreads {
            limits,
            next: AtomicU64::new(0),
            live: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The limits this server applies.
    pub fn limits(&self) -> ConnLimits {
        self.limits
    }

    /// Connections being served now.
    pub fn len(&self) -> usize {
        self.live.lock().len()
    }

    /// Whether no connection is being served.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Serves `stream` with `serve` on a new thread called `name`; the socket is shut
    /// down when `serve` returns. Over a limit (or without a thread) the stream is
    /// handed back with the reason, for the caller to answer or drop.
    pub fn spawn(
        &self,
        name: &str,
        stream: S,
        serve: impl FnOnce(&S) + Send + 'static,
    ) -> Result<(), (S, Refusal)> {
        let peer = stream.peer();
        let Ok(control) = stream.duplicate() else {
            return Err((stream, Refusal::NoResources));
        };
        let mut conns = self.live.lock();
        if conns.len() >= self.limits.max_connections {
            return Err((stream, Refusal::Full));
        }
        if conns.values().filter(|c| c.peer == peer).count() >= self.limits.max_per_peer {
            return Err((stream, Refusal::PeerFull));
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        conns.insert(
            id,
            Live {
                stream: control,
                peer,
                handle: None,
            },
        );
        let live = self.live.clone();
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                serve(&stream);
                // The slot is freed before the peer can see the close, so a peer at
                // its limit that reconnects on seeing it is never refused for it.
                let entry = live.lock().remove(&id);
                stream.close();
                drop(entry);
            });
        match spawned {
            Ok(handle) => {
                // The thread removes its entry when done, possibly before we get here.
                if let Some(entry) = conns.get_mut(&id) {
                    entry.handle = Some(handle);
                }
                Ok(())
            }
            Err(_) => {
                let entry = conns.remove(&id);
                drop(conns);
                let stream = entry.map(|e| e.stream);
                match stream {
                    Some(s) => Err((s, Refusal::NoResources)),
                    None => Ok(()),
                }
            }
        }
    }

    /// Shuts every connection down and joins its thread.
    pub fn close_all(&self) {
        let conns: Vec<_> = self.live.lock().drain().collect();
        for (_, conn) in conns {
            conn.stream.close();
            if let Some(handle) = conn.handle {
                if handle.thread().id() != std::thread::current().id() {
                    let _ = handle.join();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{SocketAddr, TcpListener};

    /// A connection from `source` (any 127/8 address) to `listener`, and the accepted end.
    fn pair(listener: &TcpListener, source: [u8; 4]) -> (TcpStream, TcpStream) {
        use std::os::fd::FromRawFd;
        let SocketAddr::V4(to) = listener.local_addr().unwrap() else {
            unreachable!()
        };
        let sockaddr = |ip: [u8; 4], port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(ip),
            },
            sin_zero: [0; 8],
        };
        let (from, to) = (sockaddr(source, 0), sockaddr(to.ip().octets(), to.port()));
        let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
        // SAFETY: plain socket calls on a socket we own, with valid sockaddr_in values of
        // the length given; the fd is handed to the TcpStream, which closes it.
        let client = unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            assert!(fd >= 0);
            let stream = TcpStream::from_raw_fd(fd);
            assert_eq!(
                libc::bind(fd, (&from as *const libc::sockaddr_in).cast(), len),
                0
            );
            assert_eq!(
                libc::connect(fd, (&to as *const libc::sockaddr_in).cast(), len),
                0
            );
            stream
        };
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    fn hold(stream: &TcpStream) {
        let mut b = [0u8; 1];
        let _ = (&*stream).read(&mut b);
    }

    #[test]
    fn refuses_over_the_peer_and_total_limits_and_frees_slots() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let threads = ConnThreads::new(ConnLimits::new(3, 2));
        let mut clients = Vec::new();
        for _ in 0..2 {
            let (c, s) = pair(&listener, [127, 0, 0, 1]);
            threads.spawn("t", s, hold).unwrap();
            clients.push(c);
        }
        let (_c, s) = pair(&listener, [127, 0, 0, 1]);
        assert_eq!(
            threads.spawn("t", s, hold).unwrap_err().1,
            Refusal::PeerFull
        );
        // Another peer still gets its share, up to the total.
        let (c, s) = pair(&listener, [127, 0, 0, 2]);
        threads.spawn("t", s, hold).unwrap();
        clients.push(c);
        let (_c, s) = pair(&listener, [127, 0, 0, 3]);
        assert_eq!(threads.spawn("t", s, hold).unwrap_err().1, Refusal::Full);
        // A peer that leaves frees its slot.
        drop(clients.remove(0));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while threads.len() > 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let (c, s) = pair(&listener, [127, 0, 0, 1]);
        threads.spawn("t", s, hold).unwrap();
        clients.push(c);
        assert_eq!(threads.len(), 3);
        threads.close_all();
        assert!(threads.is_empty());
    }

    #[test]
    fn a_connection_closed_by_the_server_frees_its_slot_before_the_peer_sees_it() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let threads = ConnThreads::new(ConnLimits::new(4, 1));
        // Each connection is served (closed at once) only if the one before it, whose
        // close its peer has seen, no longer holds the peer's single slot.
        for _ in 0..50 {
            let (mut c, s) = pair(&listener, [127, 0, 0, 1]);
            threads.spawn("t", s, |_| {}).unwrap();
            let mut b = [0u8; 1];
            assert_eq!(c.read(&mut b).unwrap(), 0, "the server closed it");
        }
        threads.close_all();
    }

    #[test]
    fn limits_are_at_least_one_and_per_peer_at_most_the_total() {
        assert_eq!(ConnLimits::new(0, 0), ConnLimits::new(1, 1));
        assert_eq!(ConnLimits::new(4, 9).max_per_peer, 4);
    }
}
