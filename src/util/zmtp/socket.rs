//! A ZeroMQ PUB socket bound to a TCP address: an acceptor thread, and per subscriber a
//! reader (handshake, then subscriptions and PINGs) and a writer draining the
//! subscriber's own bounded queue.
//!
//! [`PubSocket::send`] never blocks: a message goes to the queue of every subscriber
//! whose filters match its first frame, and a subscriber whose queue is full (it reads
//! slower than messages come, up to the high-water mark) loses the message, as with
//! libzmq's PUB at `ZMQ_SNDHWM`. Messages are encoded once and shared by the queues,
//! so the memory held is bounded by the high-water mark, not by the number of
//! subscribers. Queued messages are discarded when the socket closes (linger 0).

use std::io::{self, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use parking_lot::Mutex;

use super::codec::{self, MAX_FRAME};
use super::session::{self, Filters, PeerInput, Request};
use crate::util::conn_threads::{ConnLimits, ConnThreads};

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
    /// Set while its queue is full (logged once per episode).
    dropping: AtomicBool,
}

struct Shared {
    limits: PubLimits,
    stopping: AtomicBool,
    connections: ConnThreads<TcpStream>,
    subscribers: Mutex<Vec<(u64, Arc<Subscriber>)>>,
    next_id: AtomicU64,
}

/// A bound PUB socket; dropping it closes every connection and joins every thread.
pub struct PubSocket {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl PubSocket {
    /// Binds `addr` (port 0 picks a free port) and starts accepting subscribers.
    pub fn bind(addr: SocketAddr, limits: PubLimits) -> io::Result<PubSocket> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            limits: PubLimits {
                high_water_mark: limits.high_water_mark.max(1),
                ..limits
            },
            stopping: AtomicBool::new(false),
            connections: ConnThreads::new(limits.connections),
            subscribers: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
        });
        let acceptor_shared = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("mc-zmtp-accept".into())
            .spawn(move || accept_loop(listener, acceptor_shared))?;
        Ok(PubSocket {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// The bound address (with the port the system picked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
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
            match s.queue.try_send(msg.clone()) {
                Ok(()) => {
                    queued += 1;
                    if s.dropping.swap(false, Ordering::Relaxed) {
                        log::info!("zmtp pub: a subscriber is keeping up again");
                    }
                }
                Err(TrySendError::Full(_)) => {
                    if !s.dropping.swap(true, Ordering::Relaxed) {
                        log::warn!(
                            "zmtp pub: a subscriber has {} messages unread; it misses \
                             messages until it catches up",
                            self.shared.limits.high_water_mark
                        );
                    }
                }
                Err(TrySendError::Disconnected(_)) => {}
            }
        }
        queued
    }

    /// Stops accepting, closes every connection and joins every thread (idempotent).
    pub fn close(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => [127, 0, 0, 1].into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        let _ = acceptor.join();
        self.shared.connections.close_all();
    }
}

impl Drop for PubSocket {
    fn drop(&mut self) {
        self.close();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let accepted = listener.accept();
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                log::warn!("zmtp pub: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let conn_shared = shared.clone();
        let spawned = shared
            .connections
            .spawn("mc-zmtp-sub", stream, move |stream| {
                if let Err(e) = serve(stream, &conn_shared) {
                    log::debug!("zmtp pub: subscriber {peer} closed: {e}");
                }
            });
        if let Err((_, why)) = spawned {
            log::warn!("zmtp pub: refusing {peer}: {why}");
        }
    }
}

/// Serves one subscriber: handshake, then a writer thread drains its queue while this
/// thread reads its subscriptions until it leaves, breaks the protocol or the socket
/// closes.
fn serve(stream: &TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut reader = BufReader::new(stream);
    session::handshake(&mut reader, &mut &*stream)?;
    stream.set_read_timeout(None)?;
    let (tx, rx) = crossbeam_channel::bounded(shared.limits.high_water_mark);
    let filters = Arc::new(Mutex::new(Filters::default()));
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let write_lock = Mutex::new(());
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("mc-zmtp-out".into())
            .spawn_scoped(scope, || write_loop(stream, &write_lock, rx))?;
        shared.subscribers.lock().push((
            id,
            Arc::new(Subscriber {
                filters: filters.clone(),
                queue: tx,
                dropping: AtomicBool::new(false),
            }),
        ));
        let result = read_loop(&mut reader, stream, &write_lock, &filters);
        // Dropping the queue's sender ends the writer; the shutdown ends a write
        // blocked on a peer that stopped reading.
        shared.subscribers.lock().retain(|(i, _)| *i != id);
        let _ = stream.shutdown(Shutdown::Both);
        result
    })
}

/// Applies the subscriber's requests until it closes or breaks the protocol.
fn read_loop(
    reader: &mut BufReader<&TcpStream>,
    stream: &TcpStream,
    write_lock: &Mutex<()>,
    filters: &Mutex<Filters>,
) -> io::Result<()> {
    let mut input = PeerInput::default();
    loop {
        let frame = codec::read_frame(reader, MAX_FRAME)?;
        match input.on_frame(&frame)? {
            Request::Subscribe(topic) => filters.lock().add(topic)?,
            Request::Cancel(topic) => filters.lock().remove(topic),
            Request::Pong(context) => {
                let _held = write_lock.lock();
                (&*stream).write_all(&codec::pong(context))?;
            }
            Request::Close => return Ok(()),
            Request::Nothing => {}
        }
    }
}

/// Writes queued messages, several per `write` when they are waiting, until the queue
/// closes or the peer is gone.
fn write_loop(stream: &TcpStream, write_lock: &Mutex<()>, rx: Receiver<Arc<Message>>) {
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
        let _held = write_lock.lock();
        if (&*stream).write_all(&buf).is_err() {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::time::Instant;

    const DEADLINE: Duration = Duration::from_secs(30);

    fn limits(hwm: usize) -> PubLimits {
        PubLimits {
            high_water_mark: hwm,
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

    /// A subscriber speaking raw ZMTP.
    struct Sub {
        stream: TcpStream,
        reader: BufReader<TcpStream>,
    }

    impl Sub {
        fn connect(addr: SocketAddr, minor: u8) -> Sub {
            let stream = TcpStream::connect(addr).unwrap();
            stream.set_read_timeout(Some(DEADLINE)).unwrap();
            let mut g = codec::greeting();
            g[11] = minor;
            (&stream).write_all(&g).unwrap();
            (&stream).write_all(&codec::ready("SUB")).unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut theirs = [0u8; codec::GREETING_LEN];
            reader.read_exact(&mut theirs).unwrap();
            assert_eq!(codec::parse_greeting(&theirs).unwrap().major, 3);
            let ready = codec::read_frame(&mut reader, MAX_FRAME).unwrap();
            assert!(ready.command);
            assert_eq!(
                codec::parse_command(&ready.body).unwrap(),
                codec::Command::Ready(vec![(&b"Socket-Type"[..], &b"PUB"[..])])
            );
            Sub { stream, reader }
        }

        fn send(&self, bytes: &[u8]) {
            (&self.stream).write_all(bytes).unwrap();
        }

        /// Subscribes with a ZMTP 3.1 command, or a 3.0 message.
        fn subscribe(&mut self, topic: &[u8], as_command: bool) {
            let mut body = Vec::new();
            if as_command {
                body.push(9);
                body.extend_from_slice(b"SUBSCRIBE");
                body.extend_from_slice(topic);
                self.send(&[&[0x04, body.len() as u8][..], &body].concat());
            } else {
                body.push(1);
                body.extend_from_slice(topic);
                self.send(&codec::encode_message(&[&body]));
            }
            self.sync();
        }

        /// PING, then waits for the PONG: everything sent before has been applied.
        fn sync(&mut self) {
            self.send(b"\x04\x09\x04PING\x00\x00ok");
            let pong = codec::read_frame(&mut self.reader, MAX_FRAME).unwrap();
            assert_eq!(pong.body, b"\x04PONGok");
        }

        fn recv(&mut self) -> Vec<Vec<u8>> {
            let mut frames = Vec::new();
            loop {
                let f = codec::read_frame(&mut self.reader, 1 << 20).unwrap();
                assert!(!f.command);
                frames.push(f.body);
                if !f.more {
                    return frames;
                }
            }
        }

        /// Whether the server closed the connection.
        fn closed(&mut self) -> bool {
            let mut b = [0u8; 256];
            loop {
                match self.reader.read(&mut b) {
                    Ok(0) => return true,
                    Ok(_) => continue,
                    Err(e) => {
                        return e.kind() != io::ErrorKind::WouldBlock
                            && e.kind() != io::ErrorKind::TimedOut
                    }
                }
            }
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
    fn garbage_and_wrong_peers_are_disconnected() {
        let socket = PubSocket::bind("127.0.0.1:0".parse().unwrap(), limits(8)).unwrap();
        let addr = socket.local_addr();
        let raw = |bytes: &[u8]| {
            let s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(DEADLINE)).unwrap();
            let _ = (&s).write_all(bytes);
            Sub {
                reader: BufReader::new(s.try_clone().unwrap()),
                stream: s,
            }
        };
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
