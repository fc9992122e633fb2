//! Waiting for a socket to become readable by busy-polling it for a short budget
//! before sleeping in `poll(2)`. A thread that expects a reply within microseconds
//! then never pays for being put to sleep and woken again, which on a VM costs as
//! much as the round trip itself.
//!
//! Busy-polling only pays while a CPU is free for the thread that will send the
//! reply, so at most half the CPUs (at least one) busy-poll at a time per process;
//! other waiters sleep at once. A spinning thread yields its CPU between polls, so
//! any thread with work on that CPU (the one that will send the reply, often) runs
//! first instead of waiting for the spin to end.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Threads of this process busy-polling right now.
static SPINNING: AtomicUsize = AtomicUsize::new(0);

/// How many threads may busy-poll at once: half the CPUs, at least one.
fn max_spinning() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get() / 2)
            .max(1)
    })
}

/// A busy-poll slot, released on drop; `None` when enough threads already spin.
struct SpinSlot;

impl SpinSlot {
    fn take() -> Option<SpinSlot> {
        let max = max_spinning();
        SPINNING
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| SpinSlot)
    }
}

impl Drop for SpinSlot {
    fn drop(&mut self) {
        SPINNING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Waits until `fd` is readable (data, EOF or an error pending), busy-polling for up
/// to `spin` first. `Ok(false)` when `deadline` passes first; `None` waits forever.
pub fn wait_readable(fd: RawFd, spin: Duration, deadline: Option<Instant>) -> io::Result<bool> {
    if spin_until_readable(fd, spin, deadline)? {
        return Ok(true);
    }
    loop {
        // Round up so a sub-millisecond remainder still waits; a passed deadline
        // still checks once.
        let timeout_ms = deadline.map_or(-1, |d| {
            let left = d.saturating_duration_since(Instant::now());
            left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
        });
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `p` is one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if n > 0 {
            return Ok(true);
        }
        if n == 0 && timeout_ms >= 0 && deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(false);
        }
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

/// Busy-polls `fd` for up to `spin` (or until `deadline`); whether it became readable.
/// Returns `false` at once when too many threads already busy-poll. A blocking read
/// after a `false` keeps the socket's own receive timeout.
pub fn spin_until_readable(
    fd: RawFd,
    spin: Duration,
    deadline: Option<Instant>,
) -> io::Result<bool> {
    spin_until_readable_while(fd, spin, deadline, || true)
}

/// [`spin_until_readable`], giving up as soon as `worth_it` says spinning no longer
/// pays (checked between polls).
pub fn spin_until_readable_while(
    fd: RawFd,
    spin: Duration,
    deadline: Option<Instant>,
    worth_it: impl Fn() -> bool,
) -> io::Result<bool> {
    if spin.is_zero() {
        return Ok(false);
    }
    let Some(_slot) = SpinSlot::take() else {
        return Ok(false);
    };
    let start = Instant::now();
    loop {
        if peek_ready(fd)? {
            return Ok(true);
        }
        let now = Instant::now();
        if now.duration_since(start) >= spin || deadline.is_some_and(|d| now >= d) || !worth_it() {
            return Ok(false);
        }
        std::thread::yield_now();
    }
}

/// Whether a read on `fd` would not block, without consuming anything.
fn peek_ready(fd: RawFd) -> io::Result<bool> {
    let mut byte = 0u8;
    // SAFETY: one writable byte; MSG_PEEK leaves the data queued.
    let n = unsafe {
        libc::recv(
            fd,
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n >= 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    match err.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(false),
        // A pending error: the read reports it.
        _ => Ok(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::net::loopback_pair;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn ready_on_data_and_eof_times_out_otherwise() {
        let (mut tx, rx) = loopback_pair();
        let fd = rx.as_raw_fd();
        let soon = || Some(Instant::now() + Duration::from_millis(20));
        assert!(!wait_readable(fd, Duration::from_micros(50), soon()).unwrap());
        assert!(!wait_readable(fd, Duration::ZERO, soon()).unwrap());
        tx.write_all(b"x").unwrap();
        assert!(wait_readable(fd, Duration::from_micros(50), None).unwrap());
        assert!(wait_readable(fd, Duration::ZERO, None).unwrap());
        drop(tx);
        let (other, rx2) = loopback_pair();
        other.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(wait_readable(rx2.as_raw_fd(), Duration::ZERO, soon()).unwrap());
        let passed = Some(Instant::now());
        assert!(wait_readable(rx2.as_raw_fd(), Duration::ZERO, passed).unwrap());
    }

    #[test]
    fn spinning_stops_when_no_longer_worth_it() {
        let (mut tx, rx) = loopback_pair();
        let fd = rx.as_raw_fd();
        // With an hour's budget and nothing to read, only `worth_it` ends the spin.
        let hour = Duration::from_secs(3600);
        let asked = std::cell::Cell::new(0);
        let give_up_third_time = || {
            asked.set(asked.get() + 1);
            asked.get() < 3
        };
        assert!(!spin_until_readable_while(fd, hour, None, give_up_third_time).unwrap());
        assert_eq!(asked.get(), 3);
        tx.write_all(b"x").unwrap();
        assert!(spin_until_readable_while(fd, hour, None, || false).unwrap());
    }
}
