//! Same-host transfers: between two engines on one host (same boot, user, pid and
//! network namespaces, see [`identity`]) bytes are copied directly between the two
//! processes' memory instead of through loopback TCP.
//!
//! The target publishes an abstract Unix socket in its segment descriptor
//! (`mc_same_host`, ignored by upstream readers). The initiator sends each batch of
//! requests there; the target checks every range against its remotely accessible
//! regions exactly as over TCP and pins the granted ones; the initiator copies them
//! with `process_vm_readv`/`process_vm_writev` (the target's pid comes from the
//! kernel, `SO_PEERCRED`) and releases them. The target never writes into the
//! initiator, so an initiator that gives up on a stalled target risks nothing.
//! Regions the target shares as files (its store segments) are mapped here once and
//! copied with plain loads and stores, checked against the target's epoch table
//! (`mapped.rs`); other registered host memory is leased once instead, and copied
//! with `process_vm_*` without a round trip, pinned in a table the target waits on
//! before it lets the region go (`leased.rs`, `te::region_leases`).
//!
//! Permission: the kernel's ptrace access check on the target, so the initiator must
//! run as the same user (or hold `CAP_SYS_PTRACE`); with Yama `ptrace_scope=1` the
//! target allows it with `PR_SET_PTRACER_ANY` when its listener starts (scope 2 or 3,
//! a seccomp profile that forbids the calls, or another user make the copy fail with
//! `EPERM`). A peer whose socket cannot be reached or whose copies are refused is
//! reached over TCP from then on, with one log line.

mod copy;
pub mod identity;
mod leased;
mod mapped;
mod premap;
pub mod target;
pub mod transport;
pub mod wire;

use crate::host::fd_passing;
use crate::te::transport::tcp::wire::{decode_status, STATUS_LEN};
use leased::{LeasedRegion, Outcome};
use mapped::{Copied, Lookup, MappedPeers};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Once;
use std::time::Duration;
pub use wire::Request;

/// Idle connections kept per peer.
const POOL_MAX: usize = 16;
/// Peers remembered as reached over TCP (then forgotten all at once: each of them
/// costs one more try and log line).
const MAX_UNAVAILABLE: usize = 1024;

/// Whether a process with this pid exists (one we may not signal exists too).
fn process_exists(pid: i32) -> bool {
    // SAFETY: signal 0 only checks the pid; nothing is delivered.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Why a same-host transfer did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SameHostError {
    /// The path cannot be used with this peer (no socket, permission refused): use
    /// TCP. Nothing was moved.
    Unavailable(String),
    /// The target refused the address, as it would over TCP.
    Rejected,
    /// Send this request over TCP: the target asks for it (its memory is on a GPU),
    /// or did not grant the batch in time.
    UseTcp,
    /// The transfer failed (the peer died, a range was not mapped).
    Failed(String),
}

/// The initiator side: pooled connections per peer socket, and the peers sent to
/// TCP.
pub struct SameHostInitiator {
    /// Idle connections per socket, with the target's pid.
    pools: Mutex<HashMap<String, Vec<(UnixStream, i32)>>>,
    unavailable: Mutex<HashSet<String>>,
    io_timeout: Duration,
    moved: AtomicU64,
    /// Peers' shared regions mapped here.
    mapped: MappedPeers,
    /// Bytes moved through those mappings (a part of `moved`).
    moved_mapped: AtomicU64,
    /// Bytes moved through leases (a part of `moved`).
    moved_leased: AtomicU64,
    /// One share request at a time (a peer's leases must all come on one connection).
    share_lock: Mutex<()>,
}

impl SameHostInitiator {
    /// An initiator whose batches are granted within `io_timeout` or sent over TCP
    /// (a healthy target answers in microseconds: keep it short, the submitting thread
    /// waits for it).
    pub fn new(io_timeout: Duration) -> SameHostInitiator {
        SameHostInitiator {
            pools: Mutex::new(HashMap::new()),
            unavailable: Mutex::new(HashSet::new()),
            io_timeout,
            moved: AtomicU64::new(0),
            mapped: MappedPeers::default(),
            moved_mapped: AtomicU64::new(0),
            moved_leased: AtomicU64::new(0),
            share_lock: Mutex::new(()),
        }
    }

    /// Bytes moved through regions peers leased to this process (no round trip to
    /// the peer), a part of [`SameHostInitiator::bytes_moved`].
    pub fn bytes_moved_leased(&self) -> u64 {
        self.moved_leased.load(Ordering::Relaxed)
    }

    /// Bytes moved through peers' shared regions mapped here (no round trip to the
    /// peer), a part of [`SameHostInitiator::bytes_moved`].
    pub fn bytes_moved_mapped(&self) -> u64 {
        self.moved_mapped.load(Ordering::Relaxed)
    }

    /// Bytes of peers' shared regions mapped into this process's page tables ahead of
    /// the copies (see `premap.rs`).
    pub fn bytes_premapped(&self) -> u64 {
        self.mapped.bytes_premapped()
    }

    /// Bytes moved over the same-host path so far.
    pub fn bytes_moved(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }

    /// Whether `socket` was found unusable (its peer goes over TCP).
    pub fn is_unavailable(&self, socket: &str) -> bool {
        self.unavailable.lock().contains(socket)
    }

    /// Moves every request to the target at `socket`. Requests into a region the
    /// target shared (a file mapped here once; asked for the first time a region is
    /// met) are copied directly, checking the region is still registered before and
    /// after; requests into a region it leased are copied with `process_vm_*`, the
    /// region pinned and checked. The others go as one batch on one connection: the
    /// target grants (pins) or refuses each, this thread copies the granted ones with
    /// `process_vm_readv/writev`, then releases them. Blocks until done; one result
    /// per request, in order. Local ranges are the caller's memory, valid for the
    /// transfer, as for every transport.
    pub fn transfer_all(&self, socket: &str, reqs: &[Request]) -> Vec<Result<(), SameHostError>> {
        if self.mapped.sweep() {
            self.close_connections_to_exited_peers();
        }
        let mut done: Vec<Option<Result<(), SameHostError>>> = vec![None; reqs.len()];
        let mut moved = 0;
        let mut leased: Vec<(usize, Arc<LeasedRegion>)> = Vec::new();
        // A peer that exited must not look written to or read from through its file.
        let alive = self.mapped.peer_alive(socket);
        for ((i, slot), r) in done.iter_mut().enumerate().zip(reqs) {
            if !alive {
                break;
            }
            if r.len == 0 {
                continue;
            }
            let mut known = self.mapped.lookup(socket, r.remote, r.len);
            if matches!(known, Lookup::Unknown) {
                self.ask_share(socket, r.remote);
                known = self.mapped.lookup(socket, r.remote, r.len);
            }
            if let Lookup::Leased(region) = known {
                leased.push((i, region));
                continue;
            }
            if let Lookup::Mapped(region) = known {
                // SAFETY: the region holds the whole target range (lookup); the local
                // range is the caller's memory, valid for the transfer.
                match unsafe { mapped::copy(&region, r) } {
                    Copied::Done => {
                        moved += r.len;
                        *slot = Some(Ok(()));
                    }
                    Copied::Stale => self.mapped.forget(socket, &region),
                    Copied::Failed(e) => {
                        *slot = Some(Err(SameHostError::Failed(format!("same-host copy: {e}"))))
                    }
                }
            }
        }
        let moved_mapped = moved;
        let moved_leased = self.copy_leased(socket, reqs, &leased, &mut done);
        moved += moved_leased;
        if moved > 0 && !self.mapped.peer_alive(socket) {
            // It exited while this batch was copied: nothing of it is claimed.
            for slot in done.iter_mut().filter(|d| matches!(d, Some(Ok(())))) {
                *slot = Some(Err(SameHostError::Failed(format!(
                    "same-host peer {socket} exited during the transfer"
                ))));
            }
            moved = 0;
        }
        self.moved.fetch_add(moved, Ordering::Relaxed);
        if moved > 0 {
            self.moved_mapped.fetch_add(moved_mapped, Ordering::Relaxed);
            self.moved_leased.fetch_add(moved_leased, Ordering::Relaxed);
        }
        let rest: Vec<usize> = (0..reqs.len()).filter(|&i| done[i].is_none()).collect();
        for chunk in rest.chunks(wire::MAX_BATCH as usize) {
            let batch: Vec<Request> = chunk.iter().map(|&i| reqs[i]).collect();
            for (&i, r) in chunk.iter().zip(self.transfer_batch(socket, &batch)) {
                done[i] = Some(r);
            }
        }
        done.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(SameHostError::Failed("no result".into()))))
            .collect()
    }

    /// Copies the requests into leased regions (`leased`: index and region), filling
    /// their results; a lease found ended leaves its requests to the grant path. The
    /// bytes moved.
    fn copy_leased(
        &self,
        socket: &str,
        reqs: &[Request],
        leased: &[(usize, Arc<LeasedRegion>)],
        done: &mut [Option<Result<(), SameHostError>>],
    ) -> u64 {
        let Some(pid) = self.mapped.peer_pid(socket).filter(|_| !leased.is_empty()) else {
            return 0;
        };
        let items: Vec<(Arc<LeasedRegion>, Request)> =
            leased.iter().map(|(i, r)| (r.clone(), reqs[*i])).collect();
        // SAFETY: the requests name the caller's memory at `local`, valid for the
        // transfer as for every transport; each target range lies in its region.
        let outcomes = unsafe { leased::copy_all(pid, &items) };
        let mut moved = 0;
        for ((i, region), outcome) in leased.iter().zip(outcomes) {
            match outcome {
                Outcome::Done => {
                    moved += reqs[*i].len;
                    done[*i] = Some(Ok(()));
                }
                Outcome::Stale => self.mapped.forget_leased(socket, region),
                Outcome::Failed(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    self.mapped.forget_peer(socket);
                    done[*i] = Some(Err(
                        self.give_up(socket, format!("the kernel refused the copy: {e}"))
                    ));
                }
                Outcome::Failed(e) => {
                    done[*i] = Some(Err(SameHostError::Failed(format!("same-host copy: {e}"))))
                }
            }
        }
        moved
    }

    /// Asks the target to share or lease the region holding `addr` and records the
    /// answer; failures only mean the grant path is used. A peer that leased a region
    /// is asked on the connection its leases live on.
    fn ask_share(&self, socket: &str, addr: u64) {
        let _one = self.share_lock.lock();
        if !matches!(self.mapped.lookup(socket, addr, 1), Lookup::Unknown) {
            return;
        }
        let (conn, pid, on_lease) = match self.mapped.lease_connection(socket) {
            Some((conn, pid)) => (conn, pid, true),
            None => match self.take(socket) {
                Ok((conn, pid)) => (conn, pid, false),
                Err(_) => return,
            },
        };
        let asked = (&conn)
            .write_all(&wire::encode_share_request(addr))
            .and_then(|()| read_share_reply(&conn));
        match asked {
            Ok((reply, files)) => {
                let back =
                    self.mapped
                        .record(socket, pid, &reply, files, (!on_lease).then_some(conn));
                if let Some(conn) = back {
                    self.give_back(socket, conn, pid);
                }
            }
            Err(e) => {
                log::debug!("same-host peer {socket}: share request failed: {e}");
                if on_lease {
                    // The lease connection may be out of step: start again with a new
                    // one (copies under way keep the old one open until they end).
                    self.mapped.forget_peer(socket);
                }
            }
        }
    }

    fn transfer_batch(&self, socket: &str, reqs: &[Request]) -> Vec<Result<(), SameHostError>> {
        let fail = |why: String| -> Vec<Result<(), SameHostError>> {
            reqs.iter()
                .map(|_| {
                    Err(SameHostError::Failed(format!(
                        "same-host peer {socket}: {why}"
                    )))
                })
                .collect()
        };
        let (mut conn, pid) = match self.take(socket) {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                // Nobody listens there any more: the peer is gone (a restarted one
                // listens on a new socket), and so is all that was kept about it.
                self.pools.lock().remove(socket);
                self.mapped.forget_peer(socket);
                let err = SameHostError::Unavailable(format!("connect: {e}"));
                return reqs.iter().map(|_| Err(err.clone())).collect();
            }
            Err(e) => {
                let err = self.give_up(socket, format!("connect: {e}"));
                return reqs.iter().map(|_| Err(err.clone())).collect();
            }
        };
        let mut out = Vec::with_capacity(wire::BATCH_HEADER_LEN + reqs.len() * wire::REQUEST_LEN);
        out.extend_from_slice(&wire::encode_batch(reqs.len() as u32));
        for r in reqs {
            out.extend_from_slice(&r.encode());
        }
        let mut grants = vec![0u8; reqs.len() * STATUS_LEN];
        if let Err(e) = conn
            .write_all(&out)
            .and_then(|()| conn.read_exact(&mut grants))
        {
            // Nothing was copied; the connection is dropped (the target unpins). A
            // target that is slow to answer (stopped, overloaded) gets this batch over
            // TCP, whose transfers run in the background under the caller's deadline.
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) {
                log::debug!("same-host peer {socket} did not answer in time; batch sent over TCP");
                return reqs.iter().map(|_| Err(SameHostError::UseTcp)).collect();
            }
            return fail(e.to_string());
        }
        let mut results = Vec::with_capacity(reqs.len());
        let mut moved = 0;
        // Once the kernel refuses a copy, the rest of the batch goes over TCP.
        let mut refused: Option<SameHostError> = None;
        for (r, grant) in reqs.iter().zip(grants.chunks_exact(STATUS_LEN)) {
            let mut frame = [0u8; STATUS_LEN];
            frame.copy_from_slice(grant);
            results.push(match decode_status(&frame) {
                Some(wire::OK) if refused.is_some() => Err(SameHostError::UseTcp),
                // SAFETY: the caller's request names its own memory at `local`, as for
                // every transport; the kernel checks both ranges and fails rather than
                // fault.
                Some(wire::OK) => match unsafe { copy::copy_request(pid, r) } {
                    Ok(()) => {
                        moved += r.len;
                        Ok(())
                    }
                    Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                        let err = self.give_up(socket, format!("the kernel refused the copy: {e}"));
                        refused = Some(err.clone());
                        Err(err)
                    }
                    Err(e) => Err(SameHostError::Failed(format!("same-host copy: {e}"))),
                },
                Some(wire::REJECTED) => Err(SameHostError::Rejected),
                Some(wire::USE_TCP) => Err(SameHostError::UseTcp),
                _ => return fail("bad reply".into()),
            });
        }
        self.moved.fetch_add(moved, Ordering::Relaxed);
        if refused.is_none()
            && conn
                .write_all(&wire::encode_status_frame(wire::RELEASE))
                .is_ok()
        {
            self.give_back(socket, conn, pid);
        }
        results
    }

    /// A pooled or new connection to `socket`, with the target's pid as the kernel
    /// reports it.
    fn take(&self, socket: &str) -> io::Result<(UnixStream, i32)> {
        {
            let mut pools = self.pools.lock();
            if let Some(pool) = pools.get_mut(socket) {
                let pooled = pool.pop();
                if pool.is_empty() {
                    pools.remove(socket);
                }
                if let Some(c) = pooled {
                    return Ok(c);
                }
            }
        }
        let conn = UnixStream::connect_addr(&SocketAddr::from_abstract_name(socket)?)?;
        conn.set_read_timeout(Some(self.io_timeout))?;
        conn.set_write_timeout(Some(self.io_timeout))?;
        let pid = fd_passing::peer_credentials(&conn)?.pid;
        if pid <= 0 {
            return Err(io::Error::other("no peer credentials on the socket"));
        }
        Ok((conn, pid))
    }

    fn give_back(&self, socket: &str, conn: UnixStream, pid: i32) {
        let mut pools = self.pools.lock();
        let pool = pools.entry(socket.to_string()).or_default();
        if pool.len() < POOL_MAX {
            pool.push((conn, pid));
        }
    }

    /// Closes pooled connections whose peer process exited or closed them (a
    /// restarted peer listens on a new socket, so nothing else would ever close them);
    /// a peer that closed them stopped serving, so what was mapped from it goes too.
    fn close_connections_to_exited_peers(&self) {
        let mut stopped = Vec::new();
        self.pools.lock().retain(|socket, pool| {
            let before = pool.len();
            pool.retain(|(conn, pid)| process_exists(*pid) && !fd_passing::hung_up(conn));
            if pool.is_empty() && before > 0 {
                stopped.push(socket.clone());
            }
            !pool.is_empty()
        });
        for socket in stopped {
            self.mapped.forget_peer(&socket);
        }
    }

    /// Sends `socket`'s peer to TCP for good; the error saying so.
    fn give_up(&self, socket: &str, why: String) -> SameHostError {
        let newly = {
            let mut unavailable = self.unavailable.lock();
            if unavailable.len() >= MAX_UNAVAILABLE {
                unavailable.clear();
            }
            unavailable.insert(socket.to_string())
        };
        if newly {
            log::warn!("same-host path to {socket} unavailable ({why}); using TCP for it");
        }
        self.pools.lock().remove(socket);
        SameHostError::Unavailable(why)
    }
}

/// Reads a share reply and the files beside it.
fn read_share_reply(
    conn: &UnixStream,
) -> io::Result<(wire::ShareReply, Vec<std::os::fd::OwnedFd>)> {
    let mut buf = [0u8; wire::SHARE_REPLY_LEN];
    let files = fd_passing::read_exact_with_fds(conn, &mut buf)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed"))?;
    let reply = wire::ShareReply::decode(&buf)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad share reply"))?;
    Ok((reply, files))
}

/// With Yama `ptrace_scope=1`, lets same-host initiators copy into and out of this
/// process's registered memory (`PR_SET_PTRACER_ANY`; the kernel still requires the
/// same user). Done once, when the same-host listener starts.
fn allow_peers_to_copy() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        if scope == "1" {
            // SAFETY: prctl with integer arguments only.
            let rc =
                unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0) };
            if rc != 0 {
                log::warn!(
                    "same-host: PR_SET_PTRACER failed ({}); peers may fall back to TCP",
                    io::Error::last_os_error()
                );
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_connections_to_exited_peers_are_closed() {
        let initiator = SameHostInitiator::new(Duration::from_secs(1));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let exited = child.id() as i32;
        child.wait().unwrap();
        let me = std::process::id() as i32;
        let (gone, _gone_end) = UnixStream::pair().unwrap();
        let (here, _here_end) = UnixStream::pair().unwrap();
        // A peer in this very process that closed its end.
        let (closed, _) = UnixStream::pair().unwrap();
        initiator.give_back("gone", gone, exited);
        initiator.give_back("here", here, me);
        initiator.give_back("closed", closed, me);
        initiator.close_connections_to_exited_peers();
        let mut pools = initiator.pools.lock();
        assert!(!pools.contains_key("gone") && !pools.contains_key("closed"));
        assert_eq!(pools.get("here").map(Vec::len), Some(1));
        drop(pools);
        // The last pooled connection taken: nothing is left under its name.
        assert!(initiator.take("here").is_ok());
        pools = initiator.pools.lock();
        assert!(pools.is_empty());
    }
}
