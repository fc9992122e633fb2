//! The ceilings for the same-host benchmark (`bench/same_host_bench.sh`):
//! `--threads` threads each copy `--block_size` blocks from one buffer to another
//! (`--buffer_size` each, walked block by block so caches do not flatter the figure)
//! for `--duration` seconds. Prints `memcpy: <GB/s> GB/s`.
//!
//! With `--process_vm=write` (or `read`) the other buffer is in a second process (this
//! program again, holding it) and each thread moves its whole buffer per system call,
//! one range per block, with `process_vm_writev` (`readv`): what the kernel allows the
//! same-host path between processes. Prints `process_vm: <GB/s> GB/s`.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn flag(name: &str, default: u64) -> u64 {
    std::env::args()
        .find_map(|a| {
            a.strip_prefix(&format!("--{name}="))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(default)
}

fn text_flag(name: &str) -> Option<String> {
    std::env::args().find_map(|a| a.strip_prefix(&format!("--{name}=")).map(str::to_string))
}

/// The holder process: allocates `bytes` and writes them (so that reads find real
/// pages, not the kernel's shared zero page, as in the bench's target buffer), prints
/// their address, waits for stdin to close.
fn hold(bytes: usize) {
    let mut memory = vec![1u8; bytes];
    println!("{}", memory.as_mut_ptr() as u64);
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    std::hint::black_box(&memory);
}

fn main() {
    let threads = flag("threads", 2).max(1);
    let block = flag("block_size", 1 << 20).max(1) as usize;
    let buffer = (flag("buffer_size", 256 << 20) as usize).max(block);
    let duration = Duration::from_secs(flag("duration", 5).max(1));
    if let Some(bytes) = text_flag("hold").and_then(|v| v.parse().ok()) {
        return hold(bytes);
    }
    let process_vm = text_flag("process_vm");
    let mut holder = None;
    let mut remote = 0u64;
    if process_vm.is_some() {
        let exe = std::env::current_exe().expect("own path");
        let mut child = Command::new(exe)
            .arg(format!("--hold={}", buffer * threads as usize))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("holder process");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("holder address");
        remote = line.trim().parse().expect("holder address");
        holder = Some(child);
    }
    let pid = holder.as_ref().map_or(0, |c| c.id() as i32);
    let write = process_vm.as_deref() != Some("read");
    let start = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                let src = vec![t as u8 + 1; buffer];
                let mut dst = vec![0u8; buffer];
                let blocks = buffer / block;
                let mut moved = 0u64;
                let mut i = 0;
                let theirs = remote + t * buffer as u64;
                let ranges = |base: u64| -> Vec<libc::iovec> {
                    (0..blocks)
                        .map(|b| libc::iovec {
                            iov_base: (base as usize + b * block) as *mut libc::c_void,
                            iov_len: block,
                        })
                        .collect()
                };
                let here = ranges(if write {
                    src.as_ptr() as u64
                } else {
                    dst.as_mut_ptr() as u64
                });
                let there = ranges(theirs);
                while start.elapsed() < duration {
                    if pid != 0 {
                        let n = here.len() as libc::c_ulong;
                        // SAFETY: both iovec arrays describe `blocks` ranges: ours are
                        // live buffers of this thread, the kernel checks the holder's.
                        let done = unsafe {
                            if write {
                                libc::process_vm_writev(pid, here.as_ptr(), n, there.as_ptr(), n, 0)
                            } else {
                                libc::process_vm_readv(pid, here.as_ptr(), n, there.as_ptr(), n, 0)
                            }
                        };
                        if done <= 0 {
                            eprintln!("process_vm: {}", std::io::Error::last_os_error());
                            return 0;
                        }
                        moved += done as u64;
                        continue;
                    }
                    let at = (i % blocks) * block;
                    dst[at..at + block].copy_from_slice(&src[at..at + block]);
                    std::hint::black_box(&dst);
                    moved += block as u64;
                    i += 1;
                }
                std::hint::black_box(&dst);
                moved
            })
        })
        .collect();
    let total: u64 = workers.into_iter().map(|w| w.join().unwrap_or(0)).sum();
    let secs = start.elapsed().as_secs_f64();
    if let Some(mut child) = holder {
        drop(child.stdin.take());
        let _ = child.wait();
    }
    let name = if pid != 0 { "process_vm" } else { "memcpy" };
    println!("{name}: {:.2} GB/s", total as f64 / secs / 1e9);
}
