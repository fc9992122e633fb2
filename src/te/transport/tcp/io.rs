//! Sending straight from raw registered memory to a socket (no staging copy).
//! Raw pointers are used so no Rust reference ever aliases memory the host owns.

use std::io;
use std::os::fd::RawFd;

/// Sends every byte of the given (pointer, length) pieces, using `sendmsg` with
/// several pieces per call.
///
/// # Safety
/// Every piece must be valid for reads for the duration of the call.
pub unsafe fn send_all(fd: RawFd, pieces: &mut [(*const u8, usize)]) -> io::Result<()> {
    const MAX_IOV: usize = 64;
    let mut first = 0usize;
    while first < pieces.len() {
        if pieces[first].1 == 0 {
            first += 1;
            continue;
        }
        // SAFETY: `iovec` is plain old data; all-zero bytes are a valid value.
        let mut iov: [libc::iovec; MAX_IOV] = unsafe { std::mem::zeroed() };
        let mut count = 0;
        for &(p, l) in pieces[first..].iter().filter(|(_, l)| *l > 0).take(MAX_IOV) {
            iov[count] = libc::iovec {
                iov_base: p as *mut libc::c_void,
                iov_len: l,
            };
            count += 1;
        }
        // SAFETY: `msghdr` is plain old data; all-zero bytes are a valid (empty) value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = count as _;
        // SAFETY: forwarded contract: the caller guarantees every piece is readable for
        // the call; `msg` points at `count` initialised entries of `iov`, which outlives it.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        let mut sent = n as usize;
        while sent > 0 && first < pieces.len() {
            let (p, l) = pieces[first];
            if sent >= l {
                sent -= l;
                first += 1;
            } else {
                // SAFETY: `sent < l`, so the offset stays inside the piece the caller
                // guaranteed valid.
                pieces[first] = (unsafe { p.add(sent) }, l - sent);
                sent = 0;
            }
        }
    }
    Ok(())
}

/// Receives exactly `len` bytes into `ptr` (the socket's receive timeout applies).
///
/// # Safety
/// `[ptr, ptr+len)` must be valid for writes for the duration of the call.
pub unsafe fn recv_exact(fd: RawFd, ptr: *mut u8, len: usize) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        // SAFETY: forwarded contract: the caller guarantees `[ptr, ptr+len)` is writable;
        // `done < len`, so `[ptr+done, ptr+len)` lies inside it.
        let n = unsafe { libc::recv(fd, ptr.add(done).cast(), len - done, 0) };
        if n > 0 {
            done += n as usize;
        } else if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed mid-reply",
            ));
        } else {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
    Ok(())
}

/// Sends an owned buffer completely.
pub fn send_buf(fd: RawFd, buf: &[u8]) -> io::Result<()> {
    // SAFETY: `buf` is a live slice.
    unsafe { send_all(fd, &mut [(buf.as_ptr(), buf.len())]) }
}
