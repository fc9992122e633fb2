//! An in-process verbs provider for tests: devices on a shared [`Fabric`], memory
//! regions with access checks, the RC queue pair state machine, RDMA WRITE and READ as
//! copies between registered memory of this process, completions delivered through
//! completion queues (with their own event fds), and faults on demand.
//!
//! Several engines in one test process each get a [`FakeVerbs`] that sees its own
//! devices; queue pairs find each other on the fabric by (GID, QP number), as over a
//! real network. A request is carried out when it is posted, so a test is
//! deterministic; [`Fabric::inject`] makes the next requests fail in a chosen way, and
//! [`Fabric::set_reorder`] delivers completions of different queue pairs out of order.

use super::fake_state::{
    deliver, execute, CqState, Device, Fault, MrState, QpEntry, QpState, State,
};
use super::*;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// The network the fake devices share.
#[derive(Default)]
pub struct Fabric {
    state: Mutex<State>,
    next: AtomicU64,
}

impl Fabric {
    /// An empty fabric.
    pub fn new() -> Arc<Fabric> {
        Arc::new(Fabric {
            state: Mutex::new(State::default()),
            next: AtomicU64::new(1),
        })
    }

    fn id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Adds device `name` with a GID of `::ffff:10.0.<n>.<n>` style bytes; the view
    /// returned sees only the devices listed when it is made ([`FakeVerbs::new`]).
    pub fn add_device(&self, name: &str) {
        let mut s = self.state.lock();
        let n = s.devices.len() as u8 + 1;
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12] = 10;
        gid[13] = n;
        gid[14] = n;
        gid[15] = 1;
        s.devices.insert(name.to_string(), Device { gid });
    }

    /// The next posted requests meet `faults`, one each, in order.
    pub fn inject(&self, faults: &[Fault]) {
        self.state.lock().faults.extend(faults.iter().copied());
    }

    /// Delivers completions of different queue pairs in another order than they
    /// happened (each queue pair's own stay in order, as RC guarantees).
    pub fn set_reorder(&self, on: bool) {
        self.state.lock().reorder = on;
    }

    /// Holds every request posted from now on: it is accepted but neither runs nor
    /// completes until [`Fabric::release`], so queue pairs fill up as on a stalled
    /// link and the transport keeps what does not fit queued.
    pub fn hold(&self) {
        self.state.lock().holding = true;
    }

    /// Requests posted and held by [`Fabric::hold`], not yet run.
    pub fn held(&self) -> usize {
        self.state.lock().held.len()
    }

    /// Stops holding and runs the held requests in the order they were posted.
    pub fn release(&self) {
        let mut s = self.state.lock();
        s.holding = false;
        for (qp, wr) in std::mem::take(&mut s.held) {
            run_posted(&mut s, qp, &wr);
        }
    }

    /// Moves every queue pair of `device` to the error state (a NIC reset).
    pub fn break_device(&self, device: &str) {
        let mut s = self.state.lock();
        let ids: Vec<u64> = s
            .qps
            .iter()
            .filter(|(_, q)| q.device == device)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(q) = s.qps.get_mut(&id) {
                q.state = QpState::Error;
            }
        }
    }

    /// Makes plain registration of `[addr, addr + len)` fail with `EFAULT`, as device
    /// memory does without nvidia-peermem; `reg_dmabuf_mr` still registers it.
    pub fn require_dmabuf(&self, addr: u64, len: u64) {
        self.state.lock().dmabuf_only.push((addr, addr + len));
    }

    /// Requests posted so far (a test's measure of traffic).
    pub fn posted(&self) -> u64 {
        self.state.lock().posted
    }

    /// Live queue pairs.
    pub fn queue_pairs(&self) -> usize {
        self.state.lock().qps.len()
    }

    /// Live memory regions.
    pub fn memory_regions(&self) -> usize {
        self.state.lock().mrs.len()
    }
}

/// One process's view of a [`Fabric`]: the devices it was given.
pub struct FakeVerbs {
    fabric: Arc<Fabric>,
    devices: Vec<String>,
}

impl FakeVerbs {
    /// A view of `fabric` with `devices` (added to the fabric if new).
    pub fn new(fabric: Arc<Fabric>, devices: &[&str]) -> FakeVerbs {
        for d in devices {
            if !fabric.state.lock().devices.contains_key(*d) {
                fabric.add_device(d);
            }
        }
        FakeVerbs {
            fabric,
            devices: devices.iter().map(|d| d.to_string()).collect(),
        }
    }

    fn err(call: &'static str, errno: i32, detail: impl Into<String>) -> VerbsError {
        VerbsError::new(call, errno, detail)
    }

    /// The device behind handle `id` of `table`, or `EINVAL` from `call` saying
    /// `missing`.
    fn device_of(
        table: &HashMap<u64, String>,
        id: u64,
        call: &'static str,
        missing: &str,
    ) -> VResult<String> {
        table
            .get(&id)
            .cloned()
            .ok_or_else(|| Self::err(call, libc::EINVAL, missing))
    }

    /// Registers `[addr, addr + len)` in `pd` (both registration verbs end here).
    fn register(&self, pd: Pd, addr: u64, len: u64, access: Access) -> VResult<MrKeys> {
        if addr == 0 || len == 0 {
            return Err(Self::err("ibv_reg_mr", libc::EINVAL, "empty region"));
        }
        let id = self.fabric.id();
        let key = (id as u32).wrapping_mul(2_654_435_761) | 1;
        let mut s = self.fabric.state.lock();
        if !s.pds.contains_key(&pd.0) {
            return Err(Self::err("ibv_reg_mr", libc::EINVAL, "no such PD"));
        }
        s.mrs.insert(
            id,
            MrState {
                pd: pd.0,
                addr,
                len,
                remote: access.remote,
            },
        );
        s.keys.insert(key, id);
        Ok(MrKeys {
            mr: Mr(id),
            lkey: key,
            rkey: key,
        })
    }
}

impl Verbs for FakeVerbs {
    fn provider(&self) -> String {
        "fake".into()
    }

    fn device_names(&self) -> VResult<Vec<String>> {
        Ok(self.devices.clone())
    }

    fn open_device(&self, name: &str) -> VResult<Ctx> {
        if !self.devices.iter().any(|d| d == name) {
            return Err(Self::err("ibv_open_device", libc::ENODEV, name));
        }
        let id = self.fabric.id();
        self.fabric
            .state
            .lock()
            .contexts
            .insert(id, name.to_string());
        Ok(Ctx(id))
    }

    fn close_device(&self, ctx: Ctx) {
        self.fabric.state.lock().contexts.remove(&ctx.0);
    }

    fn query_device(&self, _ctx: Ctx) -> VResult<DeviceAttr> {
        Ok(DeviceAttr {
            max_mr_size: 1 << 40,
            max_qp: 4096,
            max_qp_wr: 1024,
            max_sge: 8,
            max_cqe: 65536,
            max_qp_rd_atom: 16,
            phys_port_cnt: 1,
        })
    }

    fn query_port(&self, _ctx: Ctx, port: u8) -> VResult<PortAttr> {
        if port != 1 {
            return Err(Self::err(
                "ibv_query_port",
                libc::EINVAL,
                format!("port {port}"),
            ));
        }
        Ok(PortAttr {
            active: true,
            active_mtu: 5,
            lid: 0,
            gid_table_len: 4,
            ethernet: true,
        })
    }

    fn gid_entries(&self, device: &str, _ctx: Ctx, _port: u8, _len: u32) -> Vec<GidEntry> {
        let s = self.fabric.state.lock();
        let Some(d) = s.devices.get(device) else {
            return Vec::new();
        };
        let mut v1 = d.gid;
        v1[0] = 0xfe;
        v1[1] = 0x80;
        vec![
            GidEntry {
                index: 0,
                gid: v1,
                kind: GidKind::IbRoceV1,
                netdev: Some("fake".into()),
            },
            GidEntry {
                index: 1,
                gid: d.gid,
                kind: GidKind::RoceV2,
                netdev: Some("fake".into()),
            },
        ]
    }

    fn alloc_pd(&self, ctx: Ctx) -> VResult<Pd> {
        let id = self.fabric.id();
        let mut s = self.fabric.state.lock();
        let device = Self::device_of(&s.contexts, ctx.0, "ibv_alloc_pd", "closed context")?;
        s.pds.insert(id, device);
        Ok(Pd(id))
    }

    fn dealloc_pd(&self, pd: Pd) {
        self.fabric.state.lock().pds.remove(&pd.0);
    }

    fn reg_mr(&self, pd: Pd, addr: u64, len: u64, access: Access) -> VResult<MrKeys> {
        let refused = self
            .fabric
            .state
            .lock()
            .dmabuf_only
            .iter()
            .any(|&(a, e)| addr < e && addr + len > a);
        if refused {
            return Err(Self::err("ibv_reg_mr", libc::EFAULT, "device memory"));
        }
        self.register(pd, addr, len, access)
    }

    fn reg_dmabuf_mr(&self, pd: Pd, buf: Dmabuf, access: Access) -> VResult<MrKeys> {
        if buf.fd < 0 {
            return Err(Self::err("ibv_reg_dmabuf_mr", libc::EBADF, "no dma-buf"));
        }
        self.register(pd, buf.iova, buf.len, access)
    }

    fn dereg_mr(&self, mr: Mr) {
        let mut s = self.fabric.state.lock();
        s.mrs.remove(&mr.0);
        s.keys.retain(|_, id| *id != mr.0);
    }

    fn create_cq(&self, _ctx: Ctx, _depth: u32) -> VResult<Cq> {
        // SAFETY: plain eventfd creation.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Self::err(
                "eventfd",
                std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
                "",
            ));
        }
        let id = self.fabric.id();
        self.fabric.state.lock().cqs.insert(
            id,
            CqState {
                completions: VecDeque::new(),
                armed: false,
                event_fd: fd,
            },
        );
        Ok(Cq(id))
    }

    fn destroy_cq(&self, cq: Cq) {
        if let Some(q) = self.fabric.state.lock().cqs.remove(&cq.0) {
            // SAFETY: the fd was created by create_cq and is closed once.
            unsafe { libc::close(q.event_fd) };
        }
    }

    fn cq_event_fd(&self, cq: Cq) -> Option<RawFd> {
        self.fabric.state.lock().cqs.get(&cq.0).map(|q| q.event_fd)
    }

    fn arm_cq(&self, cq: Cq) -> VResult<()> {
        let mut s = self.fabric.state.lock();
        let q = s
            .cqs
            .get_mut(&cq.0)
            .ok_or_else(|| Self::err("ibv_req_notify_cq", libc::EINVAL, "no such CQ"))?;
        if q.completions.is_empty() {
            q.armed = true;
        } else {
            let one: u64 = 1;
            // SAFETY: writing 8 bytes to an eventfd we own.
            unsafe { libc::write(q.event_fd, (&one as *const u64).cast(), 8) };
        }
        Ok(())
    }

    fn take_cq_events(&self, cq: Cq) -> bool {
        let Some(fd) = self.cq_event_fd(cq) else {
            return false;
        };
        let mut v: u64 = 0;
        // SAFETY: reading 8 bytes from a non-blocking eventfd.
        let n = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
        n == 8
    }

    fn poll_cq(&self, cq: Cq, out: &mut [Completion]) -> VResult<usize> {
        let mut s = self.fabric.state.lock();
        let reorder = s.reorder;
        let q = s
            .cqs
            .get_mut(&cq.0)
            .ok_or_else(|| Self::err("ibv_poll_cq", libc::EINVAL, "no such CQ"))?;
        if reorder && q.completions.len() > 1 {
            let mut v: Vec<Completion> = q.completions.drain(..).collect();
            // Later queue pairs first; each queue pair's own order is kept.
            v.sort_by_key(|c| std::cmp::Reverse(c.qp_num));
            q.completions.extend(v);
        }
        let n = out.len().min(q.completions.len());
        for slot in out.iter_mut().take(n) {
            *slot = q.completions.pop_front().unwrap_or_default();
        }
        Ok(n)
    }

    fn create_qp(&self, pd: Pd, cq: Cq, _caps: QpCaps) -> VResult<QpInfo> {
        let id = self.fabric.id();
        let mut s = self.fabric.state.lock();
        let device = Self::device_of(&s.pds, pd.0, "ibv_create_qp", "no such PD")?;
        if !s.cqs.contains_key(&cq.0) {
            return Err(Self::err("ibv_create_qp", libc::EINVAL, "no such CQ"));
        }
        let qp_num = (id as u32) & 0x00ff_ffff;
        let gid = s.devices.get(&device).map(|d| d.gid).unwrap_or_default();
        s.qp_by_num.insert((gid, qp_num), id);
        s.qps.insert(
            id,
            QpEntry {
                device,
                pd: pd.0,
                cq: cq.0,
                qp_num,
                state: QpState::Reset,
                remote: None,
            },
        );
        Ok(QpInfo { qp: Qp(id), qp_num })
    }

    fn modify_qp(&self, qp: Qp, to: &QpTransition) -> VResult<()> {
        let mut s = self.fabric.state.lock();
        let q = s
            .qps
            .get_mut(&qp.0)
            .ok_or_else(|| Self::err("ibv_modify_qp", libc::EINVAL, "no such QP"))?;
        let bad = |q: &QpEntry| {
            Self::err(
                "ibv_modify_qp",
                libc::EINVAL,
                format!("{:?} -> {to:?}", q.state),
            )
        };
        match to {
            QpTransition::Init { .. } if q.state == QpState::Reset => q.state = QpState::Init,
            QpTransition::Rtr(p) if q.state == QpState::Init => {
                q.state = QpState::Rtr;
                q.remote = Some((p.gid, p.dest_qp_num));
            }
            QpTransition::Rts { .. } if q.state == QpState::Rtr => q.state = QpState::Rts,
            QpTransition::Error => q.state = QpState::Error,
            _ => return Err(bad(q)),
        }
        Ok(())
    }

    fn destroy_qp(&self, qp: Qp) {
        let mut s = self.fabric.state.lock();
        if let Some(q) = s.qps.remove(&qp.0) {
            let gid = s.devices.get(&q.device).map(|d| d.gid).unwrap_or_default();
            s.qp_by_num.remove(&(gid, q.qp_num));
        }
    }

    fn post_send(&self, qp: Qp, wrs: &[WorkRequest]) -> Result<(), (usize, VerbsError)> {
        let mut s = self.fabric.state.lock();
        let Some(q) = s.qps.get(&qp.0) else {
            return Err((0, Self::err("ibv_post_send", libc::EINVAL, "no such QP")));
        };
        if matches!(q.state, QpState::Reset | QpState::Init | QpState::Rtr) {
            return Err((
                0,
                Self::err("ibv_post_send", libc::EINVAL, "QP not ready to send"),
            ));
        }
        for wr in wrs {
            s.posted += 1;
            if s.holding {
                s.held.push((qp.0, *wr));
            } else {
                run_posted(&mut s, qp.0, wr);
            }
        }
        Ok(())
    }
}

/// Carries out one request posted on queue pair `qp` (meeting the next injected
/// fault, if any) and delivers its completion when it has one.
fn run_posted(s: &mut State, qp: u64, wr: &WorkRequest) {
    let Some(q) = s.qps.get(&qp) else {
        return;
    };
    let (cq, pd, qp_num, remote, errored) =
        (q.cq, q.pd, q.qp_num, q.remote, q.state == QpState::Error);
    let mut status = wc::SUCCESS;
    let mut lost = false;
    if errored {
        status = wc::WR_FLUSH_ERR;
    } else {
        match s.faults.pop_front() {
            Some(Fault::RemoteAccess) => status = wc::REM_ACCESS_ERR,
            Some(Fault::RetryExceeded) => status = wc::RETRY_EXC_ERR,
            Some(Fault::QpError) => status = wc::WR_FLUSH_ERR,
            Some(Fault::LostCompletion) => lost = true,
            None => {}
        }
    }
    if status == wc::SUCCESS {
        status = execute(s, pd, remote, wr);
    }
    if status != wc::SUCCESS {
        if let Some(q) = s.qps.get_mut(&qp) {
            q.state = QpState::Error;
        }
    }
    if (wr.signaled || status != wc::SUCCESS) && !lost {
        deliver(
            s,
            cq,
            Completion {
                wr_id: wr.wr_id,
                status,
                qp_num,
                vendor_err: 0,
            },
        );
    }
}
