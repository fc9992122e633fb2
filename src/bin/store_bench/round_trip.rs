//! `round_trip`: what one small call costs on this host at best without busy-polling:
//! `--ops` 64-byte ping-pongs over loopback TCP between two threads that block in
//! `read`, each answer waking the other thread. Prints `ROUND_TRIP p50=<us>
//! p99=<us>`; `bench/store_bench.sh` shows it beside the 4 KiB rows, which are one or
//! two such calls each.

use crate::settings::Settings;
use crate::stats::Samples;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Instant;

/// Bytes per message, about a small master call's size.
const MESSAGE: usize = 64;
/// Round trips when `--ops` is not given.
const DEFAULT_ROUND_TRIPS: usize = 20_000;

/// Runs the ping-pong and prints its latency percentiles.
pub fn run(s: &Settings) -> Result<(), String> {
    let round_trips = s.ops.unwrap_or(DEFAULT_ROUND_TRIPS).max(1);
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| format!("bind: {e}"))?;
    let echo = thread::spawn(move || echo_one(&listener));
    let measured = ping(addr, round_trips);
    let echoed = echo
        .join()
        .map_err(|_| "the echo thread panicked".to_string())?;
    let mut samples = measured.map_err(|e| format!("ping: {e}"))?;
    echoed.map_err(|e| format!("echo: {e}"))?;
    println!(
        "ROUND_TRIP p50={:.1} p99={:.1} round_trips={round_trips}",
        samples.percentile_us(0.50),
        samples.percentile_us(0.99)
    );
    Ok(())
}

/// Sends `round_trips` messages one at a time, each after the previous answer.
fn ping(addr: std::net::SocketAddr, round_trips: usize) -> io::Result<Samples> {
    let mut conn = TcpStream::connect(addr)?;
    conn.set_nodelay(true)?;
    let mut message = [0u8; MESSAGE];
    let mut samples = Samples::default();
    for _ in 0..round_trips {
        let started = Instant::now();
        conn.write_all(&message)?;
        conn.read_exact(&mut message)?;
        samples.push(started.elapsed());
    }
    Ok(samples)
}

/// Accepts one connection and echoes its messages until it closes.
fn echo_one(listener: &TcpListener) -> io::Result<()> {
    let (mut conn, _) = listener.accept()?;
    conn.set_nodelay(true)?;
    let mut message = [0u8; MESSAGE];
    loop {
        match conn.read_exact(&mut message) {
            Ok(()) => conn.write_all(&message)?,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}
