//! Unix stream socket helpers: passing open files between processes (`SCM_RIGHTS`,
//! attached to the first bytes of a message), the peer's credentials, and whether an
//! idle connection's peer closed it.

use std::io::{self, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// Most files one message carries (more are closed on receipt).
pub const MAX_FDS: usize = 4;

/// Writes all of `bytes` with `files` (at most [`MAX_FDS`]) attached to the first of them.
pub fn send_with_fds(stream: &UnixStream, bytes: &[u8], files: &[&OwnedFd]) -> io::Result<()> {
    if files.is_empty() || files.len() > MAX_FDS || bytes.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "one to four files, with at least one byte",
        ));
    }
    let fds_len = std::mem::size_of_val(&[0 as libc::c_int; MAX_FDS][..files.len()]);
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(fds_len as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` points at `control`, which has room for one header and the fds.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fds_len as u32) as _;
        let data = libc::CMSG_DATA(cmsg).cast::<libc::c_int>();
        for (i, f) in files.iter().enumerate() {
            std::ptr::write_unaligned(data.add(i), f.as_raw_fd());
        }
    }
    let sent = loop {
        // SAFETY: every pointer in `msg` is valid for the lengths given.
        let n = unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    (&*stream).write_all(&bytes[sent..])
}

/// Reads up to `buf.len()` bytes (0 at end of stream) and the files attached to them;
/// anything beyond [`MAX_FDS`] files is closed.
pub fn recv_with_fds(stream: &UnixStream, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space =
        unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<libc::c_int>()) as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = [IoSliceMut::new(buf)];
    // SAFETY: an all-zero msghdr is valid; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr().cast();
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let got = loop {
        // SAFETY: every pointer in `msg` is valid for the lengths given.
        let n = unsafe { libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut files = Vec::new();
    // SAFETY: walking the control data the kernel wrote, within `msg_controllen`; each
    // descriptor it passed is new to this process and owned from here on.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let bytes =
                    ((*cmsg).cmsg_len as usize).saturating_sub(data as usize - cmsg as usize);
                for i in 0..bytes / std::mem::size_of::<libc::c_int>() {
                    let fd = std::ptr::read_unaligned(data.cast::<libc::c_int>().add(i));
                    if fd >= 0 {
                        files.push(OwnedFd::from_raw_fd(fd));
                    }
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((got, files))
}

/// Fills `buf` and returns the files attached to its first bytes; `None` when the
/// peer closed the connection before sending any.
pub fn read_exact_with_fds(
    stream: &UnixStream,
    buf: &mut [u8],
) -> io::Result<Option<Vec<OwnedFd>>> {
    let (got, files) = recv_with_fds(stream, buf)?;
    if got == 0 && !buf.is_empty() {
        return Ok(None);
    }
    (&*stream).read_exact(&mut buf[got..])?;
    Ok(Some(files))
}

/// The pid and user of the process at the other end, as the kernel recorded them (for
/// a connecting side: the listener's, at `listen`).
pub fn peer_credentials(stream: &UnixStream) -> io::Result<libc::ucred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred)
}

/// Whether the other end of an idle connection closed it (or wrote to it, which the
/// peer of an idle connection never does); does not wait.
pub fn hung_up(conn: &UnixStream) -> bool {
    let mut poll = libc::pollfd {
        fd: conn.as_raw_fd(),
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd for an open descriptor; no waiting.
    let rc = unsafe { libc::poll(&mut poll, 1, 0) };
    rc != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_travel_with_the_first_bytes() {
        let (a, b) = UnixStream::pair().unwrap();
        let one = crate::host::mapping::Mapping::shared(4096).unwrap();
        let two = crate::host::mapping::Mapping::shared(8192).unwrap();
        let files = [one.shared_file().unwrap(), two.shared_file().unwrap()];
        send_with_fds(&a, b"hello", &files).unwrap();
        (&a).write_all(b"!").unwrap();
        let mut buf = [0u8; 5];
        let (n, got) = recv_with_fds(&b, &mut buf).unwrap();
        assert_eq!((n, &buf), (5, b"hello"));
        assert_eq!(got.len(), 2);
        let mapped =
            crate::host::mapping::Mapping::from_shared_file(got.into_iter().nth(1).unwrap(), 8192);
        assert!(mapped.is_ok());
        let mut rest = [0u8; 1];
        assert!(read_exact_with_fds(&b, &mut rest)
            .unwrap()
            .unwrap()
            .is_empty());
        assert_eq!(&rest, b"!");
        assert!(send_with_fds(&a, b"", &files).is_err());
        let cred = peer_credentials(&a).unwrap();
        assert_eq!(cred.pid as u32, std::process::id());
        drop(a);
        assert_eq!(recv_with_fds(&b, &mut buf).unwrap().0, 0);
    }
}
