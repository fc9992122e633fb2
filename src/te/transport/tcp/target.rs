//! TCP target side: accepts data connections and serves v1/v2 requests straight
//! between the socket and registered memory, validating every address first.

use super::io::{recv_buf, recv_exact, send_all, send_buf};
use super::wire::{encode_status, Header, Op, HEADER_LEN, STATUS_OK, STATUS_REJECTED};
use crate::te::memory::MemoryRegistry;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

struct Shared {
    memory: Arc<MemoryRegistry>,
    stopping: AtomicBool,
    progress_timeout: Duration,
    connections: Mutex<HashMap<u64, (TcpStream, JoinHandle<()>)>>,
    next_conn: AtomicU64,
}

/// The data listener and its connection threads.
pub struct TcpTarget {
    shared: Arc<Shared>,
    port: u16,
    acceptor: Option<JoinHandle<()>>,
}

impl TcpTarget {
    /// Starts serving `listener` over the regions of `memory`.
    pub fn start(
        listener: TcpListener,
        memory: Arc<MemoryRegistry>,
        progress_timeout: Duration,
    ) -> std::io::Result<TcpTarget> {
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            memory,
            stopping: AtomicBool::new(false),
            progress_timeout,
            connections: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(0),
        });
        let acceptor_shared = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("mc-tcp-accept".into())
            .spawn(move || accept_loop(listener, acceptor_shared))?;
        Ok(TcpTarget {
            shared,
            port,
            acceptor: Some(acceptor),
        })
    }

    /// The data port peers connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops accepting, closes every connection and joins every thread, so no
    /// registered memory is touched after this returns.
    pub fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], self.port)),
            Duration::from_secs(1),
        );
        let _ = acceptor.join();
        let conns: Vec<_> = self.shared.connections.lock().drain().collect();
        for (_, (stream, handle)) in conns {
            let _ = stream.shutdown(Shutdown::Both);
            let _ = handle.join();
        }
    }
}

impl Drop for TcpTarget {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let accepted = listener.accept();
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok((stream, peer)) = accepted else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(shared.progress_timeout));
        let _ = stream.set_write_timeout(Some(shared.progress_timeout));
        let Ok(control) = stream.try_clone() else {
            continue;
        };
        let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        let conn_shared = shared.clone();
        let mut conns = shared.connections.lock();
        let spawned = std::thread::Builder::new()
            .name("mc-tcp-serve".into())
            .spawn(move || {
                if let Err(e) = serve(&stream, &conn_shared) {
                    log::debug!("tcp data connection from {peer} closed: {e}");
                }
                let _ = stream.shutdown(Shutdown::Both);
                conn_shared.connections.lock().remove(&id);
            });
        if let Ok(handle) = spawned {
            conns.insert(id, (control, handle));
        }
        conns.retain(|_, (_, h)| !h.is_finished());
    }
}

/// Waits until the socket is readable (or closed), without a timeout.
fn wait_readable(fd: i32) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    while unsafe { libc::poll(&mut pfd, 1, -1) } < 0 {
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

fn serve(stream: &TcpStream, shared: &Shared) -> std::io::Result<()> {
    let fd = stream.as_raw_fd();
    let mut raw = [0u8; HEADER_LEN];
    loop {
        wait_readable(fd);
        if shared.stopping.load(Ordering::SeqCst) || !recv_buf(fd, &mut raw, true)? {
            return Ok(());
        }
        let header = Header::decode(&raw);
        let region = (header.size > 0)
            .then(|| shared.memory.find(header.addr, header.size))
            .flatten()
            .filter(|r| r.remote_accessible);
        let pin = region.as_ref().and_then(|r| r.pin());
        let (Some(_pin), Ok(len)) = (pin, usize::try_from(header.size)) else {
            if header.v2 {
                send_buf(fd, &encode_status(STATUS_REJECTED))?;
            }
            return Err(std::io::Error::other(format!(
                "rejected {:?} of {} bytes at {:#x}: outside every remotely accessible region",
                header.op, header.size, header.addr
            )));
        };
        let ptr = header.addr as usize as *mut u8;
        match header.op {
            Op::Write => {
                // SAFETY: the pinned region contains [addr, addr+size) and stays
                // registered (its memory valid) while `_pin` is held.
                unsafe { recv_exact(fd, ptr, len, false)? };
                if header.v2 {
                    send_buf(fd, &encode_status(STATUS_OK))?;
                }
            }
            Op::Read => {
                let ok = encode_status(STATUS_OK);
                let status: &[u8] = if header.v2 { &ok } else { &[] };
                // SAFETY: as above; the region is pinned for the whole send.
                unsafe { send_all(fd, &mut [(status.as_ptr(), status.len()), (ptr, len)])? };
            }
        }
    }
}
