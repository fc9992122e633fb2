//! [`Verbs`] over the system's libibverbs, opened with `dlopen` on first use. The
//! exported verbs are called through a function table; the inline ones (`post_send`,
//! `poll_cq`, `req_notify_cq`) through the device context's operations table, as the
//! header's inline functions do.

use super::abi::*;
use super::error::{LoadError, VResult, VerbsError};
use super::real_functions::Functions;
use super::real_mr::{access_flags, errno, registered};
use super::seam::Verbs;
use super::sysfs::{parse_gid, sysfs};
use super::types::{
    Access, Completion, Cq, Ctx, DeviceAttr, Dmabuf, GidEntry, GidKind, Mr, MrKeys, Pd, PortAttr,
    Qp, QpCaps, QpInfo, QpTransition, RdmaOp, WorkRequest,
};
use crate::sys::dl::Library;
use std::cell::RefCell;
use std::ffi::{c_int, c_uint, c_void, CStr};
use std::os::fd::RawFd;
use std::path::Path;

/// libibverbs, loaded.
pub(super) struct RealVerbs {
    library: Library,
    f: Functions,
}

/// Largest completions polled per `poll_cq` call into the stack buffer.
const POLL_CHUNK: usize = 64;

thread_local! {
    /// Scratch space for `post_send`, so posting allocates nothing after warm-up.
    static POST_SCRATCH: RefCell<(Vec<ibv_send_wr>, Vec<ibv_sge>)> =
        const { RefCell::new((Vec::new(), Vec::new())) };
}

impl RealVerbs {
    /// Opens libibverbs (`MC_IBVERBS_LIBRARY`, a path or name, else the loader's
    /// `libibverbs.so.1`) and resolves every function; says which is missing otherwise.
    pub(super) fn load() -> Result<RealVerbs, LoadError> {
        let library =
            Library::open_configured("MC_IBVERBS_LIBRARY", &["libibverbs.so.1", "libibverbs.so"])
                .map_err(LoadError::NotInstalled)?;
        let f = Functions::resolve(&library)?;
        Ok(RealVerbs { library, f })
    }

    /// The device list, passed to `f` and freed afterwards.
    fn with_devices<T>(&self, f: impl FnOnce(&[*mut c_void]) -> VResult<T>) -> VResult<T> {
        let mut n: c_int = 0;
        // SAFETY: plain call; the list is freed below.
        let list = unsafe { (self.f.get_device_list)(&mut n) };
        if list.is_null() {
            let e = errno();
            return Err(VerbsError::new(
                "ibv_get_device_list",
                e,
                if e == libc::ENOSYS {
                    "the kernel has no RDMA support (ib_uverbs)"
                } else {
                    "listing RDMA devices"
                },
            ));
        }
        // SAFETY: the library returned `n` valid entries.
        let devices = unsafe { std::slice::from_raw_parts(list, n.max(0) as usize) };
        let r = f(devices);
        // SAFETY: the list came from ibv_get_device_list and is freed once.
        unsafe { (self.f.free_device_list)(list) };
        r
    }

    fn device_name(&self, dev: *mut c_void) -> String {
        // SAFETY: `dev` comes from the live device list.
        let p = unsafe { (self.f.get_device_name)(dev) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: a NUL-terminated name owned by the device.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    fn ctx(ctx: Ctx) -> *mut ibv_context {
        ctx.0 as usize as *mut ibv_context
    }
    fn cq(cq: Cq) -> *mut ibv_cq {
        cq.0 as usize as *mut ibv_cq
    }
    fn qp(qp: Qp) -> *mut ibv_qp {
        qp.0 as usize as *mut ibv_qp
    }
}

impl Verbs for RealVerbs {
    fn provider(&self) -> String {
        self.library.name().to_string()
    }

    fn device_names(&self) -> VResult<Vec<String>> {
        self.with_devices(|devs| Ok(devs.iter().map(|&d| self.device_name(d)).collect()))
    }

    fn open_device(&self, name: &str) -> VResult<Ctx> {
        self.with_devices(|devs| {
            let dev = devs
                .iter()
                .copied()
                .find(|&d| self.device_name(d) == name)
                .ok_or_else(|| {
                    VerbsError::new("ibv_open_device", libc::ENODEV, format!("no device {name}"))
                })?;
            // SAFETY: `dev` is in the live list; the context outlives the list.
            let ctx = unsafe { (self.f.open_device)(dev) };
            if ctx.is_null() {
                return Err(VerbsError::new(
                    "ibv_open_device",
                    errno(),
                    name.to_string(),
                ));
            }
            Ok(Ctx(ctx as usize as u64))
        })
    }

    fn close_device(&self, ctx: Ctx) {
        // SAFETY: a context from open_device, closed once.
        unsafe { (self.f.close_device)(Self::ctx(ctx)) };
    }

    fn query_device(&self, ctx: Ctx) -> VResult<DeviceAttr> {
        // SAFETY: all-zero is a valid ibv_device_attr.
        let mut a: ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: a live context and a properly sized out-parameter.
        let rc = unsafe { (self.f.query_device)(Self::ctx(ctx), &mut a) };
        if rc != 0 {
            return Err(VerbsError::new("ibv_query_device", rc, ""));
        }
        let u = |v: c_int| v.max(0) as u32;
        Ok(DeviceAttr {
            max_mr_size: a.max_mr_size,
            max_qp: u(a.max_qp),
            max_qp_wr: u(a.max_qp_wr),
            max_sge: u(a.max_sge),
            max_cqe: u(a.max_cqe),
            max_qp_rd_atom: u(a.max_qp_rd_atom),
            phys_port_cnt: a.phys_port_cnt,
        })
    }

    fn query_port(&self, ctx: Ctx, port: u8) -> VResult<PortAttr> {
        let mut a = ibv_port_attr::default();
        // SAFETY: a live context; the exported call fills the compat prefix of `a`.
        let rc = unsafe { (self.f.query_port)(Self::ctx(ctx), port, &mut a) };
        if rc != 0 {
            return Err(VerbsError::new(
                "ibv_query_port",
                rc,
                format!("port {port}"),
            ));
        }
        Ok(PortAttr {
            active: a.state == IBV_PORT_ACTIVE,
            active_mtu: a.active_mtu.max(0) as u32,
            lid: a.lid,
            gid_table_len: a.gid_tbl_len.max(0) as u32,
            ethernet: a.link_layer == IBV_LINK_LAYER_ETHERNET,
        })
    }

    fn gid_entries(&self, device: &str, ctx: Ctx, port: u8, table_len: u32) -> Vec<GidEntry> {
        let dir = Path::new("/sys/class/infiniband")
            .join(device)
            .join("ports")
            .join(port.to_string());
        let mut out = Vec::new();
        for index in 0..table_len.min(4096) {
            let gid = match sysfs(&dir.join("gids").join(index.to_string())) {
                Some(text) => parse_gid(&text),
                None => {
                    let mut g = ibv_gid::default();
                    // SAFETY: a live context and a 16-byte out-parameter.
                    let rc =
                        unsafe { (self.f.query_gid)(Self::ctx(ctx), port, index as c_int, &mut g) };
                    (rc == 0).then_some(g.raw)
                }
            };
            let Some(gid) = gid.filter(|g| g.iter().any(|&b| b != 0)) else {
                continue;
            };
            let kind = match sysfs(&dir.join("gid_attrs/types").join(index.to_string())) {
                Some(t) if t.eq_ignore_ascii_case("RoCE v2") => GidKind::RoceV2,
                Some(t) if !t.is_empty() => GidKind::IbRoceV1,
                _ => GidKind::Unknown,
            };
            let netdev = sysfs(&dir.join("gid_attrs/ndevs").join(index.to_string()))
                .filter(|n| !n.is_empty());
            out.push(GidEntry {
                index,
                gid,
                kind,
                netdev,
            });
        }
        out
    }

    fn alloc_pd(&self, ctx: Ctx) -> VResult<Pd> {
        // SAFETY: a live context.
        let pd = unsafe { (self.f.alloc_pd)(Self::ctx(ctx)) };
        if pd.is_null() {
            return Err(VerbsError::new("ibv_alloc_pd", errno(), ""));
        }
        Ok(Pd(pd as usize as u64))
    }

    fn dealloc_pd(&self, pd: Pd) {
        // SAFETY: a PD from alloc_pd, freed once after its MRs and QPs.
        unsafe { (self.f.dealloc_pd)(pd.0 as usize as *mut ibv_pd) };
    }

    fn reg_mr(&self, pd: Pd, addr: u64, len: u64, access: Access) -> VResult<MrKeys> {
        let flags = access_flags(access);
        let pd = pd.0 as usize as *mut ibv_pd;
        let ptr = addr as usize as *mut c_void;
        let mr = match (self.f.reg_mr_iova2, access.relaxed_ordering) {
            (Some(reg), true) => {
                // SAFETY: a live PD; the caller keeps the memory mapped while registered.
                unsafe {
                    reg(
                        pd,
                        ptr,
                        len as usize,
                        addr,
                        (flags | IBV_ACCESS_RELAXED_ORDERING) as c_uint,
                    )
                }
            }
            // SAFETY: as above.
            _ => unsafe { (self.f.reg_mr)(pd, ptr, len as usize, flags) },
        };
        // SAFETY: `mr` is what the registration just returned.
        unsafe { registered(mr, "ibv_reg_mr", len, addr) }
    }

    fn reg_dmabuf_mr(&self, pd: Pd, buf: Dmabuf, access: Access) -> VResult<MrKeys> {
        let Some(reg) = self.f.reg_dmabuf_mr else {
            return Err(VerbsError::new(
                "ibv_reg_dmabuf_mr",
                libc::ENOSYS,
                "this libibverbs predates dma-buf registration",
            ));
        };
        let flags = access_flags(access);
        // SAFETY: a live PD and an open dma-buf fd; the caller keeps the memory
        // allocated while registered.
        let mr = unsafe {
            reg(
                pd.0 as usize as *mut ibv_pd,
                buf.offset,
                buf.len as usize,
                buf.iova,
                buf.fd,
                flags,
            )
        };
        // SAFETY: `mr` is what the registration just returned.
        unsafe { registered(mr, "ibv_reg_dmabuf_mr", buf.len, buf.iova) }
    }

    fn dereg_mr(&self, mr: Mr) {
        // SAFETY: an MR from reg_mr, deregistered once.
        unsafe { (self.f.dereg_mr)(mr.0 as usize as *mut ibv_mr) };
    }

    fn create_cq(&self, ctx: Ctx, depth: u32) -> VResult<Cq> {
        let c = Self::ctx(ctx);
        // SAFETY: a live context.
        let channel = unsafe { (self.f.create_comp_channel)(c) };
        if channel.is_null() {
            return Err(VerbsError::new("ibv_create_comp_channel", errno(), ""));
        }
        // SAFETY: `channel` is valid; make its fd non-blocking so events are polled.
        unsafe {
            let fd = (*channel).fd;
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        // SAFETY: a live context and channel.
        let cq = unsafe {
            (self.f.create_cq)(
                c,
                depth.min(c_int::MAX as u32) as c_int,
                std::ptr::null_mut(),
                channel,
                0,
            )
        };
        if cq.is_null() {
            let e = errno();
            // SAFETY: the channel was just created and has no CQ.
            unsafe { (self.f.destroy_comp_channel)(channel) };
            return Err(VerbsError::new(
                "ibv_create_cq",
                e,
                format!("{depth} entries"),
            ));
        }
        Ok(Cq(cq as usize as u64))
    }

    fn destroy_cq(&self, cq: Cq) {
        let cq = Self::cq(cq);
        // SAFETY: a CQ from create_cq with no QPs left; its channel is destroyed after.
        unsafe {
            let channel = (*cq).channel;
            (self.f.destroy_cq)(cq);
            if !channel.is_null() {
                (self.f.destroy_comp_channel)(channel);
            }
        }
    }

    fn cq_event_fd(&self, cq: Cq) -> Option<RawFd> {
        // SAFETY: a live CQ created with a channel.
        let channel = unsafe { (*Self::cq(cq)).channel };
        // SAFETY: the channel lives as long as the CQ.
        (!channel.is_null()).then(|| unsafe { (*channel).fd })
    }

    fn arm_cq(&self, cq: Cq) -> VResult<()> {
        let cq = Self::cq(cq);
        // SAFETY: a live CQ; its context's ops table is the provider's.
        let rc = unsafe {
            match (*(*cq).context).ops.req_notify_cq {
                Some(f) => f(cq, 0),
                None => libc::ENOSYS,
            }
        };
        if rc != 0 {
            return Err(VerbsError::new("ibv_req_notify_cq", rc, ""));
        }
        Ok(())
    }

    fn take_cq_events(&self, cq: Cq) -> bool {
        let cq = Self::cq(cq);
        // SAFETY: a live CQ with a non-blocking channel.
        let channel = unsafe { (*cq).channel };
        if channel.is_null() {
            return false;
        }
        let mut got = 0u32;
        loop {
            let mut ev_cq: *mut ibv_cq = std::ptr::null_mut();
            let mut ev_ctx: *mut c_void = std::ptr::null_mut();
            // SAFETY: a live channel; the call fails with EAGAIN when none is pending.
            let rc = unsafe { (self.f.get_cq_event)(channel, &mut ev_cq, &mut ev_ctx) };
            if rc != 0 || ev_cq.is_null() {
                break;
            }
            got += 1;
        }
        if got > 0 {
            // SAFETY: acknowledges exactly the events taken above.
            unsafe { (self.f.ack_cq_events)(cq, got) };
        }
        got > 0
    }

    fn poll_cq(&self, cq: Cq, out: &mut [Completion]) -> VResult<usize> {
        let cq = Self::cq(cq);
        // SAFETY: a live CQ.
        let poll = unsafe { (*(*cq).context).ops.poll_cq }
            .ok_or_else(|| VerbsError::new("ibv_poll_cq", libc::ENOSYS, ""))?;
        let mut buf = [ibv_wc::default(); POLL_CHUNK];
        let mut n = 0;
        while n < out.len() {
            let want = (out.len() - n).min(POLL_CHUNK);
            // SAFETY: `buf` holds `want` entries.
            let got = unsafe { poll(cq, want as c_int, buf.as_mut_ptr()) };
            if got < 0 {
                return Err(VerbsError::new("ibv_poll_cq", -got, ""));
            }
            for wc in &buf[..got as usize] {
                out[n] = Completion {
                    wr_id: wc.wr_id,
                    status: wc.status.max(0) as u32,
                    qp_num: wc.qp_num,
                    vendor_err: wc.vendor_err,
                };
                n += 1;
            }
            if (got as usize) < want {
                break;
            }
        }
        Ok(n)
    }

    fn create_qp(&self, pd: Pd, cq: Cq, caps: QpCaps) -> VResult<QpInfo> {
        let cq = Self::cq(cq);
        let mut attr = ibv_qp_init_attr {
            qp_context: std::ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: std::ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: caps.max_send_wr,
                max_recv_wr: caps.max_recv_wr,
                max_send_sge: caps.max_sge,
                max_recv_sge: caps.max_sge,
                max_inline_data: caps.max_inline,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: a live PD and CQ; `attr` is fully initialised.
        let qp = unsafe { (self.f.create_qp)(pd.0 as usize as *mut ibv_pd, &mut attr) };
        if qp.is_null() {
            return Err(VerbsError::new(
                "ibv_create_qp",
                errno(),
                format!("{caps:?}"),
            ));
        }
        // SAFETY: a valid QP.
        let qp_num = unsafe { (*qp).qp_num };
        Ok(QpInfo {
            qp: Qp(qp as usize as u64),
            qp_num,
        })
    }

    fn modify_qp(&self, qp: Qp, to: &QpTransition) -> VResult<()> {
        let mut a = ibv_qp_attr::default();
        let mask = match *to {
            QpTransition::Init { port, pkey_index } => {
                a.qp_state = IBV_QPS_INIT;
                a.port_num = port;
                a.pkey_index = pkey_index;
                a.qp_access_flags = (IBV_ACCESS_LOCAL_WRITE
                    | IBV_ACCESS_REMOTE_READ
                    | IBV_ACCESS_REMOTE_WRITE
                    | IBV_ACCESS_REMOTE_ATOMIC) as c_uint;
                IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS
            }
            QpTransition::Rtr(p) => {
                a.qp_state = IBV_QPS_RTR;
                a.path_mtu = p.path_mtu as c_int;
                a.dest_qp_num = p.dest_qp_num;
                a.rq_psn = 0;
                a.max_dest_rd_atomic = p.max_dest_rd_atomic;
                a.min_rnr_timer = 12;
                a.ah_attr.is_global = 1;
                a.ah_attr.grh.dgid = ibv_gid { raw: p.gid };
                a.ah_attr.grh.sgid_index = p.sgid_index;
                a.ah_attr.grh.hop_limit = 16;
                a.ah_attr.grh.traffic_class = p.traffic_class.unwrap_or(0);
                a.ah_attr.dlid = p.lid;
                a.ah_attr.sl = p.service_level;
                a.ah_attr.port_num = p.port;
                IBV_QP_STATE
                    | IBV_QP_AV
                    | IBV_QP_PATH_MTU
                    | IBV_QP_DEST_QPN
                    | IBV_QP_RQ_PSN
                    | IBV_QP_MAX_DEST_RD_ATOMIC
                    | IBV_QP_MIN_RNR_TIMER
            }
            QpTransition::Rts { max_rd_atomic } => {
                a.qp_state = IBV_QPS_RTS;
                a.timeout = 14;
                a.retry_cnt = 7;
                a.rnr_retry = 7;
                a.sq_psn = 0;
                a.max_rd_atomic = max_rd_atomic;
                IBV_QP_STATE
                    | IBV_QP_TIMEOUT
                    | IBV_QP_RETRY_CNT
                    | IBV_QP_RNR_RETRY
                    | IBV_QP_SQ_PSN
                    | IBV_QP_MAX_QP_RD_ATOMIC
            }
            QpTransition::Error => {
                a.qp_state = IBV_QPS_ERR;
                IBV_QP_STATE
            }
        };
        // SAFETY: a live QP; `a` and `mask` agree.
        let rc = unsafe { (self.f.modify_qp)(Self::qp(qp), &mut a, mask) };
        if rc != 0 {
            return Err(VerbsError::new("ibv_modify_qp", rc, format!("{to:?}")));
        }
        Ok(())
    }

    fn destroy_qp(&self, qp: Qp) {
        // SAFETY: a QP from create_qp, destroyed once.
        unsafe { (self.f.destroy_qp)(Self::qp(qp)) };
    }

    fn post_send(&self, qp: Qp, wrs: &[WorkRequest]) -> Result<(), (usize, VerbsError)> {
        if wrs.is_empty() {
            return Ok(());
        }
        let qp = Self::qp(qp);
        // SAFETY: a live QP.
        let post = unsafe { (*(*qp).context).ops.post_send }
            .ok_or_else(|| (0, VerbsError::new("ibv_post_send", libc::ENOSYS, "")))?;
        POST_SCRATCH.with(|scratch| {
            let (list, sges) = &mut *scratch.borrow_mut();
            list.clear();
            sges.clear();
            sges.extend(wrs.iter().map(|w| ibv_sge {
                addr: w.local_addr,
                length: w.len,
                lkey: w.lkey,
            }));
            list.extend(wrs.iter().map(|w| ibv_send_wr {
                wr_id: w.wr_id,
                num_sge: 1,
                opcode: match w.op {
                    RdmaOp::Write => IBV_WR_RDMA_WRITE,
                    RdmaOp::Read => IBV_WR_RDMA_READ,
                },
                send_flags: if w.signaled { IBV_SEND_SIGNALED } else { 0 },
                rdma: ibv_send_wr_rdma::new(w.remote_addr, w.rkey),
                ..ibv_send_wr::default()
            }));
            let base = list.as_mut_ptr();
            for i in 0..list.len() {
                // SAFETY: indices are in bounds; the vectors are not resized below.
                unsafe {
                    (*base.add(i)).sg_list = sges.as_mut_ptr().add(i);
                    (*base.add(i)).next = if i + 1 < list.len() {
                        base.add(i + 1)
                    } else {
                        std::ptr::null_mut()
                    };
                }
            }
            let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
            // SAFETY: a well-formed linked list living until the call returns.
            let rc = unsafe { post(qp, base, &mut bad) };
            if rc == 0 {
                return Ok(());
            }
            let index = if bad.is_null() {
                0
            } else {
                // SAFETY: `bad` points into `list`.
                (unsafe { bad.offset_from(base) }).max(0) as usize
            };
            Err((
                index,
                VerbsError::new("ibv_post_send", rc, format!("request {index}")),
            ))
        })
    }
}
