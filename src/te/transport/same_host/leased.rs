//! Copies into and out of regions a same-host target leased to this process (see
//! `te::region_leases`): each region is pinned in the lease connection's pin table
//! and its generation checked before the copy; the requests of one operation go to
//! the kernel in as few `process_vm_writev`/`readv` calls as it takes (up to
//! `IOV_MAX` ranges each), and only a call that did not move everything is redone
//! request by request, to tell which one failed.

use super::copy;
use super::wire::Request;
use crate::te::region_leases::PeerPins;
use crate::te::shared_regions::PeerEpochs;
use crate::te::transport::request::Op;
use std::io;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

/// Most ranges in one system call (Linux's `IOV_MAX`).
const MAX_RANGES: usize = 1024;
/// Most bytes gathered into one system call (a longer request goes alone): beyond a
/// few MiB gathering saves nothing.
const MAX_CALL_BYTES: u64 = 4 << 20;

/// The connection a target's leases live on (the target counts this process's pins
/// until it closes) and its pin table mapped here.
pub struct PeerLease {
    control: UnixStream,
    pins: PeerPins,
}

impl PeerLease {
    /// A lease connection and the pin table that came on it.
    pub fn new(control: UnixStream, pins: PeerPins) -> PeerLease {
        PeerLease { control, pins }
    }

    /// The connection (share requests to this peer go on it).
    pub fn connection(&self) -> &UnixStream {
        &self.control
    }
}

/// One region a target leased to this process.
pub struct LeasedRegion {
    /// Its base address in the target.
    pub base: u64,
    /// Its length.
    pub len: u64,
    slot: u64,
    gen: u64,
    epochs: Arc<PeerEpochs>,
    lease: Arc<PeerLease>,
}

impl LeasedRegion {
    /// A region leased at `[base, base + len)` with its epoch `slot` and `gen`.
    pub fn new(
        base: u64,
        len: u64,
        (slot, gen): (u64, u64),
        epochs: Arc<PeerEpochs>,
        lease: Arc<PeerLease>,
    ) -> LeasedRegion {
        LeasedRegion {
            base,
            len,
            slot,
            gen,
            epochs,
            lease,
        }
    }

    /// Whether `[addr, addr + len)` lies inside the region.
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.base
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.base + self.len)
    }
}

/// What became of one request.
#[derive(Debug)]
pub enum Outcome {
    /// Its bytes moved while the region was registered.
    Done,
    /// The region was unregistered: nothing moved, the lease is over.
    Stale,
    /// The copy failed (`PermissionDenied`: the kernel refuses to copy to that peer).
    Failed(io::Error),
}

/// Copies every request (each inside its region) between this process and the
/// target `pid`; one outcome per request, in order.
///
/// # Safety
/// Each request's local range must be valid for its direction (as for every
/// transport) for the duration of the call.
pub unsafe fn copy_all(pid: i32, items: &[(Arc<LeasedRegion>, Request)]) -> Vec<Outcome> {
    let mut regions: Vec<&Arc<LeasedRegion>> = items.iter().map(|(r, _)| r).collect();
    regions.sort_by_key(|r| Arc::as_ptr(r) as usize);
    regions.dedup_by(|a, b| Arc::ptr_eq(a, b));
    // Pinned first, then checked: the target either sees the pin or we see the end.
    let mut pins = Vec::with_capacity(regions.len());
    let mut stale = Vec::new();
    for region in regions {
        match region.lease.pins.pin(region.slot) {
            Some(pin) if region.epochs.is_live(region.slot, region.gen) => pins.push(pin),
            _ => stale.push(Arc::as_ptr(region)),
        }
    }
    let mut out: Vec<Option<Outcome>> = items
        .iter()
        .map(|(r, _)| stale.contains(&Arc::as_ptr(r)).then_some(Outcome::Stale))
        .collect();
    for op in [Op::Write, Op::Read] {
        let todo: Vec<usize> = (0..items.len())
            .filter(|&i| out[i].is_none() && items[i].1.op == op && items[i].1.len > 0)
            .collect();
        for call in calls(&todo, |i| items[i].1.len) {
            let reqs: Vec<&Request> = call.iter().map(|&i| &items[i].1).collect();
            // SAFETY: the local ranges are valid per this function's contract; the
            // target ranges are inside regions pinned and live above.
            let whole = unsafe { copy_in_one_call(pid, op, &reqs) };
            for &i in call {
                out[i] = Some(if whole {
                    Outcome::Done
                } else {
                    // SAFETY: as above, one request at a time.
                    match unsafe { copy::copy_request(pid, &items[i].1) } {
                        Ok(()) => Outcome::Done,
                        Err(e) => Outcome::Failed(e),
                    }
                });
            }
        }
    }
    drop(pins);
    out.into_iter()
        .map(|o| o.unwrap_or(Outcome::Done))
        .collect()
}

/// Splits `todo` into groups the kernel takes in one call.
fn calls(todo: &[usize], len: impl Fn(usize) -> u64) -> Vec<&[usize]> {
    let mut groups = Vec::new();
    let mut start = 0;
    let mut bytes = 0u64;
    for (k, &i) in todo.iter().enumerate() {
        let n = len(i);
        if k > start && (k - start == MAX_RANGES || bytes + n > MAX_CALL_BYTES) {
            groups.push(&todo[start..k]);
            start = k;
            bytes = 0;
        }
        bytes += n;
    }
    if start < todo.len() {
        groups.push(&todo[start..]);
    }
    groups
}

/// Moves all of `reqs` (one `op`) in one system call; whether every byte moved.
///
/// # Safety
/// As [`copy_all`].
unsafe fn copy_in_one_call(pid: i32, op: Op, reqs: &[&Request]) -> bool {
    let total: u64 = reqs.iter().map(|r| r.len).sum();
    if total > MAX_CALL_BYTES {
        return false;
    }
    let iov = |addr: u64, len: u64| libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: len as usize,
    };
    let local: Vec<libc::iovec> = reqs.iter().map(|r| iov(r.local, r.len)).collect();
    let remote: Vec<libc::iovec> = reqs.iter().map(|r| iov(r.remote, r.len)).collect();
    let n = reqs.len() as libc::c_ulong;
    // SAFETY: both iovec arrays hold `n` entries; the local ranges are valid per the
    // contract; the kernel checks the remote ones in the other process.
    let moved = unsafe {
        match op {
            Op::Write => libc::process_vm_writev(pid, local.as_ptr(), n, remote.as_ptr(), n, 0),
            Op::Read => libc::process_vm_readv(pid, local.as_ptr(), n, remote.as_ptr(), n, 0),
        }
    };
    moved >= 0 && moved as u64 == total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_respect_the_kernels_limits() {
        let todo: Vec<usize> = (0..2500).collect();
        let groups = calls(&todo, |_| 4096);
        assert_eq!(
            groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
            [1024, 1024, 452]
        );
        let big = calls(&[0, 1, 2], |_| 3 << 20);
        assert_eq!(big.len(), 3, "each call stays within its byte limit");
        let huge = calls(&[0], |_| 3 << 30);
        assert_eq!(huge, [&[0][..]], "a request longer than a call goes alone");
        assert!(calls(&[], |_| 1).is_empty());
    }
}
