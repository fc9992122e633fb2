//! A TCP link the test can cut: [`CutLink::to`] listens on a free 127.0.0.1 port and
//! relays every connection to a target port; [`CutLink::cut`] stops relaying in both
//! directions (bytes wait in the buffers and nothing answers, as across a network
//! partition: no reset, the peer's own timeouts decide) and [`CutLink::heal`] resumes.
//! Dropping it closes every connection and joins every thread.
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a relay looks at the cut and stop flags.
const TICK: Duration = Duration::from_millis(20);

/// A relay from a local port to a target port that can be cut.
pub struct CutLink {
    port: u16,
    cut: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl CutLink {
    /// A link to 127.0.0.1:`target`, relaying.
    pub fn to(target: u16) -> CutLink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a link port");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let port = listener.local_addr().expect("its address").port();
        let cut = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let (cut, stop) = (cut.clone(), stop.clone());
            std::thread::spawn(move || accept(listener, target, &cut, &stop))
        };
        CutLink {
            port,
            cut,
            stop,
            acceptor: Some(acceptor),
        }
    }

    /// The port to connect to instead of the target's.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops relaying: nothing crosses until [`CutLink::heal`].
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    /// Relays again.
    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for CutLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn accept(listener: TcpListener, target: u16, cut: &Arc<AtomicBool>, stop: &Arc<AtomicBool>) {
    let mut relays = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (Ok(from), Ok(to)) = (from.try_clone(), to.try_clone()) else {
                        continue;
                    };
                    let (cut, stop) = (cut.clone(), stop.clone());
                    relays.push(std::thread::spawn(move || relay(from, to, &cut, &stop)));
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(TICK),
            Err(_) => std::thread::sleep(TICK),
        }
    }
    for relay in relays {
        let _ = relay.join();
    }
}

/// Copies `from` to `to` while the link is not cut, until either side closes or the
/// link stops.
fn relay(mut from: TcpStream, mut to: TcpStream, cut: &AtomicBool, stop: &AtomicBool) {
    let _ = from.set_nonblocking(false);
    let _ = from.set_read_timeout(Some(TICK));
    let mut buf = vec![0u8; 64 << 10];
    while !stop.load(Ordering::SeqCst) {
        if cut.load(Ordering::SeqCst) {
            std::thread::sleep(TICK);
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}
