//! A ZeroMQ PUB socket bound to a TCP address: an acceptor thread, and per subscriber a
//! reader (handshake, then subscriptions and PINGs) and a writer draining the
//! subscriber's own bounded queue.
//!
//! [`PubSocket::send`] never blocks: a message goes to the queue of every subscriber
//! whose filters match its first frame, and a subscriber whose queue is full (it reads
//! slower than messages come) loses the message, as with libzmq's PUB at
//! `ZMQ_SNDHWM`. A queue is full at the high-water mark (messages) or, unlike libzmq,
//! at a byte bound, so a stalled subscriber holds a bounded amount of memory whatever
//! the message sizes. Messages are encoded once and shared by the queues that hold
//! them. Queued messages are discarded when the socket closes, unless
//! [`PubSocket::linger`] waited for them first.

use std::io::{self, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use parking_lot::Mutex;

use super::codec;
use super::session::{self, Filters};
use crate::runtime::conn_threads::ConnLimits;
use crate::runtime::tcp_acceptor::{StreamTimeouts, TcpAcceptor};

/// How long a connecting peer has for its greeting and READY.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most bytes of queued messages a writer puts in one `write`.
const WRITE_CHUNK: usize = 256 << 10;

/// How a [`PubSocket`] bounds its subscribers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PubLimits {
    /// Messages queued per subscriber before it loses new ones (`ZMQ_SNDHWM`; at
    /// least 1).
    pub high_water_mark: usize,
    /// Bytes queued per subscriber before it loses new ones (a message larger than
    /// this still goes to an empty queue).
    pub max_queued_bytes: usize,
    /// Subscriber connections in all and per peer host.
    pub connections: ConnLimits,
}

/// A message as it goes on the wire, shared by the subscribers' queues.
struct Message {
    topic: Vec<u8>,
    wire: Vec<u8>,
}

/// A subscriber past its handshake.
struct Subscriber {
    filters: Arc<Mutex<Filters>>,
    queue: Sender<Arc<Message>>,
    /// Bytes of messages queued and not yet written to the socket.
    unwritten: Arc<AtomicUsize>,
    /// Set while its queue is full (logged once per episode).
    dropping: AtomicBool,
}

struct Shared {
    limits: PubLimits,
    subscribers: Mutex<Vec<(u64, Arc<Subscriber>)>>,
    next_id: AtomicU64,
}

/// A bound PUB socket; dropping it closes every connection and joins every thread.
pub struct PubSocket {
    shared: Arc<Shared>,
    acceptor: TcpAcceptor,
}

impl PubSocket {
    /// Binds `addr` (port 0 picks a free port) and starts accepting subscribers.
    pub fn bind(addr: SocketAddr, limits: PubLimits) -> io::Result<PubSocket> {
        let listener = TcpListener::bind(addr)?;
        let shared = Arc::new(Shared {
            limits: PubLimits {
                high_water_mark: limits.high_water_mark.max(1),
                ..limits
            },
            subscribers: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
        });
        let conn_shared = shared.clone();
        let acceptor = TcpAcceptor::start(
            listener,
            "mc-zmtp-sub",
            limits.connections,
            StreamTimeouts::default(),
            move |stream, peer| {
                if let Err(e) = serve(stream, &conn_shared) {
                    log::debug!("zmtp pub: subscriber {peer} closed: {e}");
                }
            },
        )?;
        Ok(PubSocket { shared, acceptor })
    }

    /// The bound address (with the port the system picked).
    pub fn local_addr(&self) -> SocketAddr {
        self.acceptor.local_addr()
    }

    /// Subscribers past their handshake.
    pub fn subscribers(&self) -> usize {
        self.shared.subscribers.lock().len()
    }

    /// Queues the multipart message `frames` for every subscriber whose filters match
    /// its first frame; never blocks. Returns how many subscribers it was queued for.
    pub fn send(&self, frames: &[&[u8]]) -> usize {
        let subscribers: Vec<Arc<Subscriber>> = self
            .shared
            .subscribers
            .lock()
            .iter()
            .map(|(_, s)| s.clone())
            .collect();
        if subscribers.is_empty() || frames.is_empty() {
            return 0;
        }
        let msg = Arc::new(Message {
            topic: frames[0].to_vec(),
            wire: codec::encode_message(frames),
        });
        let mut queued = 0;
        for s in subscribers {
            if !s.filters.lock().matches(&msg.topic) {
                continue;
            }
            let len = msg.wire.len();
            let before = s.unwritten.fetch_add(len, Ordering::SeqCst);
            let sent = if before > 0 && before + len > self.shared.limits.max_queued_bytes {
                Err(TrySendError::Full(()))
            } else {
                s.queue.try_send(msg.clone()).map_err(|e| match e {
                    TrySendError::Full(_) => TrySendError::Full(()),
                    TrySendError::Disconnected(_) => TrySendError::Disconnected(()),
                })
            };
            if sent.is_err() {
                s.unwritten.fetch_sub(len, Ordering::SeqCst);
            }
            match sent {
                Ok(()) => {
                    queued += 1;
                    if s.dropping.swap(false, Ordering::Relaxed) {
                        log::info!("zmtp pub: a subscriber is keeping up again");
                    }
                }
                Err(TrySendError::Full(_)) => {
                    if !s.dropping.swap(true, Ordering::Relaxed) {
                        log::warn!(
                            "zmtp pub: a subscriber has {} messages ({} bytes) unread; it \
                             misses messages until it catches up",
                            s.queue.len(),
                            s.unwritten.load(Ordering::Relaxed)
                        );
                    }
                }
                Err(TrySendError::Disconnected(_)) => {}
            }
        }
        queued
    }

    /// Waits until every subscriber's queued messages are written to its socket, for
    /// at most `limit` (a subscriber that stopped reading holds it that long).
    pub fn linger(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let unwritten = self
                .shared
                .subscribers
                .lock()
                .iter()
                .any(|(_, s)| s.unwritten.load(Ordering::SeqCst) > 0);
            if !unwritten {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops accepting, closes every connection and joins every thread (idempotent).
    pub fn close(&mut self) {
        self.acceptor.stop();
    }
}

impl Drop for PubSocket {
    fn drop(&mut self) {
        self.close();
    }
}

/// Serves one subscriber: handshake, then a writer thread drains its queue while this
/// thread reads its subscriptions until it leaves, breaks the protocol or the socket
/// closes.
fn serve(stream: &TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut reader = BufReader::new(stream);
    let version = session::handshake(&mut reader, &mut &*stream)?;
    log::debug!(
        "zmtp pub: subscriber {:?} speaks ZMTP {}.{}",
        stream.peer_addr().ok(),
        version.major,
        version.minor
    );
    stream.set_read_timeout(None)?;
    let (tx, rx) = crossbeam_channel::bounded(shared.limits.high_water_mark);
    let filters = Arc::new(Mutex::new(Filters::default()));
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let write_lock = Mutex::new(());
    let unwritten = Arc::new(AtomicUsize::new(0));
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("mc-zmtp-out".into())
            .spawn_scoped(scope, || write_loop(stream, &write_lock, rx, &unwritten))?;
        shared.subscribers.lock().push((
            id,
            Arc::new(Subscriber {
                filters: filters.clone(),
                queue: tx,
                unwritten: unwritten.clone(),
                dropping: AtomicBool::new(false),
            }),
        ));
        let result = session::serve_requests(&mut reader, &filters, |context| {
            let _held = write_lock.lock();
            (&*stream).write_all(&codec::pong(context))
        });
        // Dropping the queue's sender ends the writer; the shutdown ends a write
        // blocked on a peer that stopped reading.
        shared.subscribers.lock().retain(|(i, _)| *i != id);
        let _ = stream.shutdown(Shutdown::Both);
        result
    })
}

/// Writes queued messages, several per `write` when they are waiting, until the queue
/// closes or the peer is gone.
fn write_loop(
    stream: &TcpStream,
    write_lock: &Mutex<()>,
    rx: Receiver<Arc<Message>>,
    unwritten: &AtomicUsize,
) {
    let mut buf = Vec::new();
    while let Ok(first) = rx.recv() {
        buf.clear();
        buf.extend_from_slice(&first.wire);
        while buf.len() < WRITE_CHUNK {
            match rx.try_recv() {
                Ok(m) => buf.extend_from_slice(&m.wire),
                Err(_) => break,
            }
        }
        let held = write_lock.lock();
        let written = (&*stream).write_all(&buf);
        drop(held);
        unwritten.fetch_sub(buf.len(), Ordering::SeqCst);
        if written.is_err() {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_sub::{Sub, DEADLINE};
    use super::*;

    fn limits(hwm: usize) -> PubLimits {
        PubLimits {
            high_water_mark: hwm,
            max_queued_bytes: usize::MAX,
            connections: ConnLimits::new(16, 16),
        }
    }

    fn eventually(what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + DEADLINE;
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn delivers_by_topic_prefix_to_30_and_31_subscribers() {
        let socket = PubSocket::bind("127.0.0.1:0".parse().unwrap(), limits(100)).unwrap();
        assert_eq!(socket.send(&[b"", b"nobody"]), 0);
        let mut all = Sub::connect(socket.local_addr(), 1);
        let mut some = Sub::connect(socket.local_addr(), 0);
        all.subscribe(b"", true);
        some.subscribe(b"x", false);
        assert_eq!(socket.subscribers(), 2);
        let seq = 1u64.to_be_bytes();
        assert_eq!(socket.send(&[b"", &seq, b"first"]), 1);
        assert_eq!(socket.send(&[b"xyz", b"second"]), 2);
        assert_eq!(all.recv(), [b"".to_vec(), seq.to_vec(), b"first".to_vec()]);
        assert_eq!(all.recv(), [b"xyz".to_vec(), b"second".to_vec()]);
        assert_eq!(some.recv(), [b"xyz".to_vec(), b"second".to_vec()]);
        // CANCEL (3.1 command) stops it.
        some.send(b"\x04\x08\x06CANCELx");
        some.sync();
        assert_eq!(socket.send(&[b"xyz", b"third"]), 1);
        drop(some);
        eventually("the subscriber that left is gone", || {
            socket.subscribers() == 1
        });
    }

    #[test]
    fn a_stalled_subscriber_loses_messages_and_blocks_nobody() {
        let socket = PubSocket::bind("127.0.0.1:0".parse().unwrap(), limits(8)).unwrap();
        let mut stalled = Sub::connect(socket.local_addr(), 1);
        stalled.subscribe(b"", true);
        let mut reader = Sub::connect(socket.local_addr(), 1);
        reader.subscribe(b"", true);
        let payload = vec![7u8; 100 << 10];
        let mut last = 0;
        // 30 MB: more than the kernel buffers of the stalled connection hold.
        for i in 0..300u64 {
            last = socket.send(&[b"", &i.to_be_bytes(), &payload]);
            let got = reader.recv();
            assert_eq!(got[1], i.to_be_bytes());
        }
        assert_eq!(last, 1, "the stalled subscriber's queue is full");
        drop(stalled);
    }

    #[test]
    fn the_byte_bound_also_fills_a_queue() {
        let socket = PubSocket::bind(
            "127.0.0.1:0".parse().unwrap(),
            PubLimits {
                max_queued_bytes: 1 << 20,
                ..limits(1_000_000)
            },
        )
        .unwrap();
        let mut stalled = Sub::connect(socket.local_addr(), 1);
        stalled.subscribe(b"", true);
        let big = vec![1u8; 4 << 20];
        // An oversized message still goes to an empty queue.
        assert_eq!(socket.send(&[b"", &big]), 1);
        let small = vec![2u8; 64 << 10];
        let mut refused = 0;
        for _ in 0..1000 {
            if socket.send(&[b"", &small]) == 0 {
                refused += 1;
            }
        }
        // 64 MB offered, at most the kernel buffers and 1 MiB queued: most refused.
        assert!(refused > 500, "{refused}");
        drop(stalled);
    }

    #[test]
    fn garbage_and_wrong_peers_are_disconnected() {
        let socket = PubSocket::bind("127.0.0.1:0".parse().unwrap(), limits(8)).unwrap();
        let addr = socket.local_addr();
        let raw = |bytes: &[u8]| Sub::raw(addr, bytes);
        let mut http = raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(4).as_slice());
        assert!(http.closed());
        let mut rep = codec::greeting().to_vec();
        rep.extend_from_slice(&codec::ready("REP"));
        assert!(raw(&rep).closed());
        // After a good handshake: reserved flag bits, an oversized frame.
        let mut sub = Sub::connect(addr, 1);
        sub.send(&[0x80, 0x00]);
        assert!(sub.closed());
        let mut sub = Sub::connect(addr, 1);
        sub.send(&[0x02, 0, 0, 0, 1, 0, 0, 0, 0]);
        assert!(sub.closed());
        eventually("no subscriber is left", || socket.subscribers() == 0);
        // The socket still serves.
        let mut ok = Sub::connect(addr, 1);
        ok.subscribe(b"", true);
        assert_eq!(socket.send(&[b"", b"x"]), 1);
        assert_eq!(ok.recv()[1], b"x");
    }

    #[test]
    fn linger_lets_subscribers_take_what_was_sent_before_close() {
        let mut socket = PubSocket::bind("127.0.0.1:0".parse().unwrap(), limits(1000)).unwrap();
        let mut sub = Sub::connect(socket.local_addr(), 1);
        sub.subscribe(b"", true);
        for i in 0..500u64 {
            assert_eq!(socket.send(&[b"", &i.to_be_bytes()]), 1);
        }
        socket.linger(DEADLINE);
        socket.close();
        for i in 0..500u64 {
            assert_eq!(sub.recv()[1], i.to_be_bytes());
        }
        assert!(sub.closed());
    }

    #[test]
    fn close_returns_with_peers_mid_handshake() {
        let mut socket = PubSocket::bind("127.0.0.1:0".parse().unwrap(), limits(8)).unwrap();
        let silent = TcpStream::connect(socket.local_addr()).unwrap();
        let mut sub = Sub::connect(socket.local_addr(), 1);
        sub.subscribe(b"", true);
        socket.close();
        assert!(sub.closed());
        drop(silent);
    }
}
