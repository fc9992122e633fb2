//! The memcpy ceiling for the same-host benchmark (`bench/same_host_bench.sh`):
//! `--threads` threads each copy `--block_size` blocks from one buffer to another
//! (`--buffer_size` each, walked block by block so caches do not flatter the figure)
//! for `--duration` seconds. Prints `memcpy: <GB/s> GB/s`.

use std::time::{Duration, Instant};

fn flag(name: &str, default: u64) -> u64 {
    std::env::args()
        .find_map(|a| {
            a.strip_prefix(&format!("--{name}="))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(default)
}

fn main() {
    let threads = flag("threads", 2).max(1);
    let block = flag("block_size", 1 << 20).max(1) as usize;
    let buffer = (flag("buffer_size", 256 << 20) as usize).max(block);
    let duration = Duration::from_secs(flag("duration", 5).max(1));
    let start = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                let src = vec![t as u8 + 1; buffer];
                let mut dst = vec![0u8; buffer];
                let blocks = buffer / block;
                let mut moved = 0u64;
                let mut i = 0;
                while start.elapsed() < duration {
                    let at = (i % blocks) * block;
                    dst[at..at + block].copy_from_slice(&src[at..at + block]);
                    std::hint::black_box(&dst);
                    moved += block as u64;
                    i += 1;
                }
                moved
            })
        })
        .collect();
    let total: u64 = workers.into_iter().map(|w| w.join().unwrap_or(0)).sum();
    let secs = start.elapsed().as_secs_f64();
    println!("memcpy: {:.2} GB/s", total as f64 / secs / 1e9);
}
