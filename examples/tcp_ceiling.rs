//! Raw single-stream loopback TCP throughput: the ceiling a TCP transfer engine is
//! measured against.
//!
//! One sender thread writes `--block_size` chunks over one 127.0.0.1 connection for
//! `--duration` seconds; a receiver thread reads them into a buffer of the same size.
//! Prints `raw tcp single stream: X GB/s` (GB = 1e9 bytes).
//!
//! Usage: `cargo run --release --example tcp_ceiling -- [--block_size=1048576] [--duration=3]`

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "\
Usage: tcp_ceiling [--block_size BYTES] [--duration SECONDS]

Measures raw single-stream TCP throughput over 127.0.0.1.
  --block_size  bytes per write (default 1048576)
  --duration    seconds to send for (default 3)";

/// Command-line settings.
#[derive(Debug, PartialEq, Eq)]
struct Args {
    block_size: usize,
    duration: u64,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut args = Args {
        block_size: 1 << 20,
        duration: 3,
    };
    while let Some(arg) = it.next() {
        let body = arg.trim_start_matches('-');
        if body == arg {
            return Err(format!("unexpected argument '{arg}'"));
        }
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        if matches!(name, "help" | "h") {
            return Ok(None);
        }
        if !matches!(name, "block_size" | "duration") {
            eprintln!("warning: unknown flag '{arg}' (ignored)");
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => it
                .next()
                .ok_or_else(|| format!("flag '{arg}' is missing its value"))?,
        };
        let n: u64 = value
            .parse()
            .map_err(|_| format!("illegal value '{value}' for --{name}"))?;
        if n == 0 {
            return Err(format!("--{name} must be at least 1"));
        }
        if name == "block_size" {
            args.block_size =
                usize::try_from(n).map_err(|_| format!("--block_size {n} is too large"))?;
        } else {
            args.duration = n;
        }
    }
    Ok(Some(args))
}

fn measure(args: &Args) -> std::io::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let block = args.block_size;
    let receiver = std::thread::spawn(move || -> std::io::Result<(u64, Duration)> {
        let (mut sock, _) = listener.accept()?;
        let mut buf = vec![0u8; block];
        let mut total = 0u64;
        let start = Instant::now();
        loop {
            match sock.read(&mut buf)? {
                0 => return Ok((total, start.elapsed())),
                n => total += n as u64,
            }
        }
    });
    let mut sock = TcpStream::connect(addr)?;
    sock.set_nodelay(true)?;
    let chunk = vec![0xa5u8; block];
    let deadline = Instant::now() + Duration::from_secs(args.duration);
    while Instant::now() < deadline {
        sock.write_all(&chunk)?;
    }
    sock.shutdown(Shutdown::Write)?;
    let (bytes, elapsed) = receiver
        .join()
        .map_err(|_| std::io::Error::other("receiver thread panicked"))??;
    Ok(bytes as f64 / elapsed.as_secs_f64() / 1e9)
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match measure(&args) {
        Ok(gbps) => {
            println!("raw tcp single stream: {gbps:.2} GB/s");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Option<Args>, String> {
        parse_args(v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn flags() {
        assert_eq!(
            parse(&[]).unwrap(),
            Some(Args {
                block_size: 1 << 20,
                duration: 3
            })
        );
        assert_eq!(
            parse(&["--block_size=65536", "-duration", "2"]).unwrap(),
            Some(Args {
                block_size: 65536,
                duration: 2
            })
        );
        assert_eq!(parse(&["--help"]).unwrap(), None);
        assert!(parse(&["--duration=0"]).is_err());
        assert!(parse(&["--block_size=x"]).is_err());
        assert!(parse(&["stray"]).is_err());
    }
}
