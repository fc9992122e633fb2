//! Copies between this process and another one with `process_vm_readv` /
//! `process_vm_writev`: one system call per gigabyte at most, partial transfers
//! continued, errors as `io::Error` (`PermissionDenied` when the kernel refuses).

use super::wire::Request;
use crate::te::transport::request::Op;
use std::io;

/// Largest piece handed to one system call.
const MAX_PIECE: u64 = 1 << 30;

/// Which way the bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the other process into ours.
    Pull,
    /// From ours into the other process.
    Push,
}

/// Moves `len` bytes between `ours` (in this process) and `theirs` (in process `pid`).
///
/// # Safety
/// `[ours, ours + len)` must be valid for the direction's access (written by a pull,
/// read by a push) for the duration of the call.
pub unsafe fn copy(pid: i32, dir: Direction, ours: u64, theirs: u64, len: u64) -> io::Result<()> {
    let mut done = 0u64;
    while done < len {
        let piece = (len - done).min(MAX_PIECE) as usize;
        let local = libc::iovec {
            iov_base: (ours + done) as usize as *mut libc::c_void,
            iov_len: piece,
        };
        let remote = libc::iovec {
            iov_base: (theirs + done) as usize as *mut libc::c_void,
            iov_len: piece,
        };
        // SAFETY: one iovec each; the local range is valid per this function's
        // contract; the kernel checks the remote range in the other process.
        let n = unsafe {
            match dir {
                Direction::Pull => libc::process_vm_readv(pid, &local, 1, &remote, 1, 0),
                Direction::Push => libc::process_vm_writev(pid, &local, 1, &remote, 1, 0),
            }
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "nothing copied",
            ));
        }
        done += n as u64;
    }
    Ok(())
}

/// Moves one same-host request between this process and the target `pid`, in the
/// request's direction.
///
/// # Safety
/// The request's local range must be valid for its direction (written by a read,
/// read by a write) for the duration of the call.
pub unsafe fn copy_request(pid: i32, r: &Request) -> io::Result<()> {
    let dir = match r.op {
        Op::Write => Direction::Push,
        Op::Read => Direction::Pull,
    };
    // SAFETY: the local range is valid per this function's contract.
    unsafe { copy(pid, dir, r.local, r.remote, r.len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_within_this_process_both_ways() {
        let pid = std::process::id() as i32;
        let src: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        // A pull writes "ours" from "theirs"; a push writes "theirs" from "ours".
        for dir in [Direction::Pull, Direction::Push] {
            let mut dst = vec![0u8; src.len()];
            let (ours, theirs) = match dir {
                Direction::Pull => (dst.as_mut_ptr() as u64, src.as_ptr() as u64),
                Direction::Push => (src.as_ptr() as u64, dst.as_mut_ptr() as u64),
            };
            // SAFETY: both buffers live for the call; the written one is `dst`.
            unsafe { copy(pid, dir, ours, theirs, src.len() as u64) }.unwrap();
            assert_eq!(dst, src, "{dir:?}");
        }
        // An unmapped remote range is an error, not a crash.
        let mut one = [0u8; 16];
        // SAFETY: `one` is writable.
        let r = unsafe { copy(pid, Direction::Pull, one.as_mut_ptr() as u64, 8, 16) };
        assert!(r.is_err());
    }
}
