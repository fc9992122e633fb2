//! A socket reader that batches small reads and moves large payloads straight into
//! their destination: replies and headers that arrive back to back are taken with one
//! `recv`, while a payload larger than the read-ahead buffer bypasses it.

use std::io;
use std::os::fd::RawFd;

const CAPACITY: usize = 16 << 10;

/// Buffered reader over a connected socket.
pub struct SocketReader {
    fd: RawFd,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl SocketReader {
    /// Wraps a connected socket; the caller keeps it open while the reader lives.
    pub fn new(fd: RawFd) -> SocketReader {
        SocketReader {
            fd,
            buf: vec![0u8; CAPACITY].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// Bytes already read ahead.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// One `recv` into the free tail of the buffer; returns the count (0 = EOF).
    fn fill(&mut self) -> io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let free = &mut self.buf[self.end..];
        loop {
            // SAFETY: `free` is a live, exclusively borrowed slice.
            let n = unsafe { libc::recv(self.fd, free.as_mut_ptr().cast(), free.len(), 0) };
            if n >= 0 {
                self.end += n as usize;
                return Ok(n as usize);
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }

    /// Waits for at least `len` (≤ capacity) buffered bytes with no overall deadline:
    /// a receive timeout with nothing buffered yet just keeps waiting, unless
    /// `keep_waiting` says to stop. `Ok(false)` on a clean EOF with nothing buffered.
    pub fn wait_for(&mut self, len: usize, keep_waiting: impl Fn() -> bool) -> io::Result<bool> {
        while self.buffered() < len {
            match self.fill() {
                Ok(0) if self.buffered() == 0 => return Ok(false),
                Ok(0) => return Err(eof()),
                Ok(_) => {}
                Err(e) if is_timeout(&e) && self.buffered() == 0 && keep_waiting() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Takes `N` buffered bytes (after [`SocketReader::wait_for`]).
    pub fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buf[self.start..self.start + N]);
        self.start += N;
        out
    }

    /// The next `N` buffered bytes without consuming them, if that many are buffered.
    pub fn peek<const N: usize>(&self) -> Option<[u8; N]> {
        let bytes = self.buf.get(self.start..self.start + N)?;
        (self.start + N <= self.end).then(|| {
            let mut out = [0u8; N];
            out.copy_from_slice(bytes);
            out
        })
    }

    /// Reads exactly `N` bytes.
    pub fn read_array<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        if !self.wait_for(N, || false)? {
            return Err(eof());
        }
        Ok(self.take())
    }

    /// Reads exactly `len` bytes into `ptr`.
    ///
    /// # Safety
    /// `[ptr, ptr+len)` must be valid for writes for the duration of the call.
    pub unsafe fn read_raw(&mut self, ptr: *mut u8, len: usize) -> io::Result<()> {
        let mut done = self.buffered().min(len);
        // SAFETY: `done <= buffered()`, so the source `[start, start+done)` lies inside
        // `buf`; forwarded contract: the caller guarantees `[ptr, ptr+len)` is writable and
        // `done <= len`; the caller's memory is not our boxed buffer, so they don't overlap.
        unsafe { std::ptr::copy_nonoverlapping(self.buf.as_ptr().add(self.start), ptr, done) };
        self.start += done;
        while done < len {
            let left = len - done;
            if left >= CAPACITY / 2 {
                // SAFETY: forwarded contract: the caller guarantees `[ptr, ptr+len)` is
                // writable; `[ptr+done, ptr+done+left)` is its unfilled tail.
                let n = unsafe { libc::recv(self.fd, ptr.add(done).cast(), left, 0) };
                match n {
                    0 => return Err(eof()),
                    n if n > 0 => done += n as usize,
                    _ => {
                        let err = io::Error::last_os_error();
                        if err.kind() != io::ErrorKind::Interrupted {
                            return Err(err);
                        }
                    }
                }
            } else {
                if self.fill()? == 0 {
                    return Err(eof());
                }
                let n = self.buffered().min(left);
                // SAFETY: `n <= buffered()` keeps the source inside `buf`, and `n <= left`
                // keeps the destination inside the caller's `[ptr, ptr+len)` (forwarded
                // contract); the two regions are distinct allocations.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.buf.as_ptr().add(self.start),
                        ptr.add(done),
                        n,
                    )
                };
                self.start += n;
                done += n;
            }
        }
        Ok(())
    }
}

fn eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed mid-frame")
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn mixes_small_and_large_reads() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let writer = std::thread::spawn(move || {
            tx.write_all(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
            tx.write_all(&big).unwrap();
            tx.write_all(&[9; 24]).unwrap();
            big
        });
        let mut r = SocketReader::new(rx.as_raw_fd());
        assert_eq!(r.read_array::<8>().unwrap(), [1, 2, 3, 4, 5, 6, 7, 8]);
        let mut out = vec![0u8; 100_000];
        // SAFETY: `out` is a live Vec of exactly `out.len()` writable bytes.
        unsafe { r.read_raw(out.as_mut_ptr(), out.len()).unwrap() };
        assert!(r.wait_for(24, || true).unwrap());
        assert_eq!(r.take::<24>(), [9; 24]);
        assert_eq!(out, writer.join().unwrap());
        assert!(!r.wait_for(1, || true).unwrap(), "clean EOF");
    }
}
