//! Idle and garbage connections on every listening port of the soak: each round opens
//! a few connections that send nothing and are held for a while, one that sends half
//! a request and stalls, and one that sends random bytes and closes.

use parking_lot::Mutex;
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Connections held per port at most.
const HELD_PER_PORT: usize = 8;
/// How long a held connection is kept.
const HOLD: Duration = Duration::from_secs(20);

/// The ports under abuse, by label; the driver keeps it current.
#[derive(Default)]
pub struct Ports {
    /// `(label, port)` on 127.0.0.1.
    pub list: Mutex<Vec<(String, u16)>>,
}

/// Connections made by the abuser.
#[derive(Default)]
pub struct AbuseTally {
    /// Connections opened and held idle.
    pub idle: AtomicU64,
    /// Connections that sent garbage.
    pub garbage: AtomicU64,
}

/// Runs rounds every `every` until `stop`.
pub fn run(ports: &Ports, tally: &AbuseTally, every: Duration, stop: &AtomicBool) {
    let mut held: Vec<(Instant, String, TcpStream)> = Vec::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    while !stop.load(Ordering::Relaxed) {
        held.retain(|(since, _, _)| since.elapsed() < HOLD);
        let list = ports.list.lock().clone();
        for (label, port) in list {
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let connect = || TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok();
            if held.iter().filter(|(_, l, _)| *l == label).count() < HELD_PER_PORT {
                if let Some(s) = connect() {
                    tally.idle.fetch_add(1, Ordering::Relaxed);
                    held.push((Instant::now(), label.clone(), s));
                }
                if let Some(mut s) = connect() {
                    // Half of a plausible request, then silence.
                    let _ = s.write_all(&[16, 0, 0, 0, 0, 0, 0, 0, 3]);
                    tally.idle.fetch_add(1, Ordering::Relaxed);
                    held.push((Instant::now(), label.clone(), s));
                }
            }
            if let Some(mut s) = connect() {
                let len = 1 + next() as usize % 4096;
                let junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                let _ = s.write_all(&junk);
                tally.garbage.fetch_add(1, Ordering::Relaxed);
            }
        }
        let until = Instant::now() + every;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
