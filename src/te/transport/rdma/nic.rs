//! One NIC in use (upstream's `RdmaContext`): the open device, its protection domain,
//! port, chosen GID, its endpoints (one per peer NIC) and counters. Its worker threads
//! are in `worker`.

use super::endpoint::{Endpoint, QpSetup};
use super::gid;
use crate::config::RdmaConfig;
use crate::sys::verbs::{mtu_code, Ctx, DeviceAttr, Pd, PortAttr, QpCaps, Verbs, VerbsError};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Counters of one NIC.
#[derive(Debug, Default)]
pub struct NicStats {
    /// Bytes written to peers.
    pub bytes_written: AtomicU64,
    /// Bytes read from peers.
    pub bytes_read: AtomicU64,
    /// Slices completed.
    pub slices_ok: AtomicU64,
    /// Slice attempts that failed (each retry counts).
    pub slice_errors: AtomicU64,
    /// Bytes posted and not yet completed.
    pub bytes_in_flight: AtomicU64,
}

impl NicStats {
    /// Records a completed slice of `len` bytes.
    pub fn completed(&self, len: u64, write: bool) {
        let c = if write {
            &self.bytes_written
        } else {
            &self.bytes_read
        };
        c.fetch_add(len, Ordering::Relaxed);
        self.slices_ok.fetch_add(1, Ordering::Relaxed);
    }
}

/// An open NIC.
pub struct Nic {
    /// Position in the transport's NIC list.
    pub index: usize,
    /// Device name.
    pub name: String,
    /// The open device.
    pub ctx: Ctx,
    /// Its protection domain.
    pub pd: Pd,
    /// Port used (`MC_IB_PORT`).
    pub port: u8,
    /// Device limits.
    pub attr: DeviceAttr,
    /// Port state at open time.
    pub port_attr: PortAttr,
    /// GID in use.
    pub gid: gid::Chosen,
    /// The GID in upstream's text form.
    pub gid_text: String,
    /// This NIC's path, `<server>@<device>`.
    pub path: String,
    /// Path MTU as the verbs enum: min(active MTU, `MC_MTU`).
    pub path_mtu: u32,
    /// Endpoints by peer NIC path.
    pub endpoints: Mutex<HashMap<String, Arc<Endpoint>>>,
    /// Counters.
    pub stats: NicStats,
}

impl Nic {
    /// Opens device `name`, allocates its PD and picks its GID.
    pub fn open(
        verbs: &dyn Verbs,
        cfg: &RdmaConfig,
        index: usize,
        name: &str,
        server: &str,
    ) -> Result<Nic, VerbsError> {
        let ctx = verbs.open_device(name)?;
        let opened = (|| {
            let attr = verbs.query_device(ctx)?;
            let port_attr = verbs.query_port(ctx, cfg.ib_port)?;
            if !port_attr.active {
                return Err(VerbsError::new(
                    "ibv_query_port",
                    0,
                    format!("{name} port {} is not active", cfg.ib_port),
                ));
            }
            let gids = verbs.gid_entries(name, ctx, cfg.ib_port, port_attr.gid_table_len);
            let gid = gid::choose(&gids, port_attr.ethernet, cfg.gid_index).ok_or_else(|| {
                VerbsError::new(
                    "ibv_query_gid",
                    0,
                    match cfg.gid_index {
                        Some(i) => format!("{name} has no GID at MC_GID_INDEX={i}"),
                        None => format!("{name} has no usable GID"),
                    },
                )
            })?;
            let pd = verbs.alloc_pd(ctx)?;
            Ok((attr, port_attr, gid, pd))
        })();
        let (attr, port_attr, gid, pd) = match opened {
            Ok(v) => v,
            Err(e) => {
                verbs.close_device(ctx);
                return Err(e);
            }
        };
        let wanted = mtu_code(cfg.mtu).unwrap_or(5);
        let path_mtu = if port_attr.active_mtu == 0 {
            wanted
        } else {
            wanted.min(port_attr.active_mtu)
        };
        log::info!(
            "rdma: {name} port {} gid[{}] {} mtu {} ({})",
            cfg.ib_port,
            gid.index,
            gid::to_text(&gid.gid),
            crate::sys::verbs::mtu_bytes(path_mtu),
            verbs.provider()
        );
        Ok(Nic {
            index,
            name: name.to_string(),
            ctx,
            pd,
            port: cfg.ib_port,
            attr,
            port_attr,
            gid_text: gid::to_text(&gid.gid),
            gid,
            path: format!("{server}@{name}"),
            path_mtu,
            endpoints: Mutex::new(HashMap::new()),
            stats: NicStats::default(),
        })
    }

    /// What this NIC's endpoints make their queue pairs with, sized by `cfg` within
    /// the device's limits.
    pub fn qp_setup(&self, cfg: &RdmaConfig) -> QpSetup {
        QpSetup {
            pd: self.pd,
            port: self.port,
            pkey_index: cfg.pkey_index,
            count: cfg.qp_per_endpoint,
            caps: QpCaps {
                max_send_wr: cfg.max_wr.min(self.attr.max_qp_wr.max(1)),
                max_recv_wr: cfg.max_wr.min(self.attr.max_qp_wr.max(1)),
                max_sge: cfg.max_sge.min(self.attr.max_sge.max(1)),
                max_inline: cfg.max_inline,
            },
            path_mtu: self.path_mtu,
            sgid_index: self.gid.index as u8,
            traffic_class: cfg.traffic_class,
            service_level: cfg.service_level,
            max_rd_atomic: self.attr.max_qp_rd_atom.clamp(1, 16) as u8,
        }
    }
}
