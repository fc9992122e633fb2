//! TCP target side: accepts data connections and serves v1/v2 requests straight
//! between the socket and registered memory, validating every address first.
//!
//! Bounded: at most [`Config::inbound_limits`] connections (in all and per peer host;
//! more are closed at accept), a request must keep making progress
//! (`MC_TCP_PROGRESS_TIMEOUT_SEC`), and a connection idle between requests for
//! `MC_TCP_IDLE_TIMEOUT_SEC` is closed (the initiator reconnects on its next slice).

use super::io::{send_all, send_buf};
use super::reader::SocketReader;
use super::wire::{encode_status, Header, HEADER_LEN, STATUS_LEN, STATUS_OK, STATUS_REJECTED};
use crate::config::Config;
use crate::runtime::tcp_acceptor::{StreamTimeouts, TcpAcceptor};
use crate::te::memory::{MemoryRegistry, Region};
use crate::te::transport::request::Op;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Shared {
    memory: Arc<MemoryRegistry>,
    /// Raised by the acceptor when the target stops.
    stopping: Arc<AtomicBool>,
    idle_timeout: Option<Duration>,
}

/// The data listener and its connection threads.
pub struct TcpTarget {
    acceptor: TcpAcceptor,
}

impl TcpTarget {
    /// Starts serving `listener` over the regions of `memory`, with the timeouts and
    /// limits of `config`.
    pub fn start(
        listener: TcpListener,
        memory: Arc<MemoryRegistry>,
        config: &Config,
    ) -> std::io::Result<TcpTarget> {
        let progress_timeout = Duration::from_secs(config.tcp_progress_timeout_secs);
        let stopping = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            memory,
            stopping: stopping.clone(),
            idle_timeout: config.tcp_idle_timeout(),
        });
        let acceptor = TcpAcceptor::start(
            listener,
            "mc-tcp-serve",
            config.inbound_limits(),
            StreamTimeouts {
                read: Some(progress_timeout),
                write: Some(progress_timeout),
            },
            move |stream, peer| {
                let _ = stream.set_nodelay(true);
                if let Err(e) = serve(stream, &shared) {
                    log::debug!("tcp data connection from {peer} closed: {e}");
                }
            },
        )?
        .raising_on_stop(stopping);
        Ok(TcpTarget { acceptor })
    }

    /// The data port peers connect to.
    pub fn port(&self) -> u16 {
        self.acceptor.local_addr().port()
    }

    /// Stops accepting, closes every connection and joins every thread, so no
    /// registered memory is touched after this returns.
    pub fn stop(&mut self) {
        self.acceptor.stop();
    }
}

/// OK frames owed to the peer, sent together when nothing else is waiting to be read.
struct PendingAcks {
    count: usize,
}

impl PendingAcks {
    const MAX: usize = 64;

    fn flush(&mut self, fd: i32) -> std::io::Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let mut frames = [0u8; STATUS_LEN * Self::MAX];
        for frame in frames.chunks_exact_mut(STATUS_LEN).take(self.count) {
            frame.copy_from_slice(&encode_status(STATUS_OK));
        }
        let n = self.count * STATUS_LEN;
        self.count = 0;
        send_buf(fd, &frames[..n])
    }
}

/// Most READ replies gathered into one send.
const MAX_READS_PER_SEND: usize = 16;

fn serve(stream: &TcpStream, shared: &Shared) -> std::io::Result<()> {
    let fd = stream.as_raw_fd();
    let mut reader = SocketReader::new(fd);
    let mut acks = PendingAcks { count: 0 };
    loop {
        if reader.buffered() < HEADER_LEN {
            acks.flush(fd)?;
        }
        let idle_until = shared.idle_timeout.map(|t| Instant::now() + t);
        let keep_waiting = || {
            !shared.stopping.load(Ordering::SeqCst)
                && idle_until.map_or(true, |until| Instant::now() < until)
        };
        if !reader.wait_for(HEADER_LEN, keep_waiting)? || !keep_waiting() {
            return Ok(());
        }
        let header = Header::decode(&reader.take::<HEADER_LEN>());
        let Some(region) = shared.memory.accessible(header.addr, header.size) else {
            return reject(fd, &mut acks, &header);
        };
        match header.op {
            Op::Write => {
                let Some(_pin) = region.pin() else {
                    return reject(fd, &mut acks, &header);
                };
                if region.device.is_some() {
                    receive_into_gpu(&mut reader, &header)?;
                } else {
                    // SAFETY: the pinned region contains [addr, addr+size) and stays
                    // registered (its memory valid) while `_pin` is held.
                    unsafe {
                        reader.read_raw(header.addr as usize as *mut u8, header.size as usize)?
                    };
                }
                if header.v2 {
                    acks.count += 1;
                    if acks.count == PendingAcks::MAX {
                        acks.flush(fd)?;
                    }
                }
            }
            Op::Read => {
                acks.flush(fd)?;
                let mut reads = vec![(header, region)];
                while reads.len() < MAX_READS_PER_SEND {
                    let Some(raw) = reader.peek::<HEADER_LEN>() else {
                        break;
                    };
                    let next = Header::decode(&raw);
                    let Some(region) = (next.op == Op::Read)
                        .then(|| shared.memory.accessible(next.addr, next.size))
                        .flatten()
                    else {
                        break;
                    };
                    reader.take::<HEADER_LEN>();
                    reads.push((next, region));
                }
                send_reads(fd, &reads)?;
            }
        }
    }
}

/// Sends the replies to consecutive READ requests in one `sendmsg` where possible;
/// a region unregistered meanwhile ends the run with a rejection.
fn send_reads(fd: i32, reads: &[(Header, Arc<Region>)]) -> std::io::Result<()> {
    let ok = encode_status(STATUS_OK);
    let pins: Vec<_> = reads.iter().map_while(|(_, region)| region.pin()).collect();
    // GPU memory is sent from host copies, made first.
    let mut staged: Vec<Vec<u8>> = Vec::new();
    for (header, region) in &reads[..pins.len()] {
        if region.device.is_some() {
            staged.push(copy_from_gpu(header)?);
        }
    }
    let mut staged_iter = staged.iter();
    let mut pieces = Vec::with_capacity(pins.len() * 2);
    for (header, region) in &reads[..pins.len()] {
        if header.v2 {
            pieces.push((ok.as_ptr(), ok.len()));
        }
        let host = region.device.and_then(|_| staged_iter.next());
        match host {
            Some(host) => pieces.push((host.as_ptr(), host.len())),
            None => pieces.push((header.addr as usize as *const u8, header.size as usize)),
        }
    }
    // SAFETY: every region is pinned for the whole send and contains its request.
    unsafe { send_all(fd, &mut pieces)? };
    let pinned = pins.len();
    drop(pins);
    match reads.get(pinned) {
        Some((header, _)) => reject(fd, &mut PendingAcks { count: 0 }, header),
        None => Ok(()),
    }
}

/// Largest piece of a WRITE into GPU memory received before it is copied over.
const GPU_CHUNK: usize = 4 << 20;

/// Receives a WRITE's payload for GPU memory through a host buffer.
fn receive_into_gpu(reader: &mut SocketReader, header: &Header) -> std::io::Result<()> {
    let gpu = crate::sys::cuda::system()
        .ok_or_else(|| std::io::Error::other("GPU memory without a GPU runtime"))?;
    let total = header.size as usize;
    let mut host = vec![0u8; total.min(GPU_CHUNK)];
    let mut done = 0;
    while done < total {
        let n = (total - done).min(GPU_CHUNK);
        // SAFETY: `host` holds at least `n` bytes.
        unsafe { reader.read_raw(host.as_mut_ptr(), n)? };
        gpu.copy(header.addr + done as u64, host.as_ptr() as u64, n as u64)
            .map_err(std::io::Error::other)?;
        done += n;
    }
    Ok(())
}

/// A host copy of the GPU memory a READ asks for.
fn copy_from_gpu(header: &Header) -> std::io::Result<Vec<u8>> {
    let gpu = crate::sys::cuda::system()
        .ok_or_else(|| std::io::Error::other("GPU memory without a GPU runtime"))?;
    let mut host = vec![0u8; header.size as usize];
    gpu.copy(host.as_mut_ptr() as u64, header.addr, header.size)
        .map_err(std::io::Error::other)?;
    Ok(host)
}

/// Answers a request that failed validation (v2: the reject frame) and ends the
/// connection, as upstream does.
fn reject(fd: i32, acks: &mut PendingAcks, header: &Header) -> std::io::Result<()> {
    acks.flush(fd)?;
    if header.v2 {
        send_buf(fd, &encode_status(STATUS_REJECTED))?;
    }
    Err(std::io::Error::other(format!(
        "rejected {:?} of {} bytes at {:#x}: outside every remotely accessible region",
        header.op, header.size, header.addr
    )))
}
