//! The QP handshake (spec transfer-engine.md §5.6), both sides.
//!
//! Active (a worker needs an endpoint): send our NIC path, GID, LID and QP numbers to
//! the peer's RPC daemon (type 0); connect our QPs to the QP numbers in the reply; if
//! the peer takes part in the ready-ACK exchange, send the same message again with
//! `ready_ack: true`. Passive (the RPC daemon received one): connect the endpoint for
//! the sender's NIC path to its QPs, reply with ours, and, when the sender takes part,
//! post nothing until its ACK arrives. Simultaneous opens meet on the same endpoint
//! lock and agree on one set of QPs, as upstream's do. The RPC itself never runs
//! under the endpoint lock.

use super::connectors::{ConnectJob, ConnectService, Connectors};
use super::endpoint::{Endpoint, State};
use super::error::RdmaError;
use super::gid;
use super::handshake::{split_nic_path, HandShake};
use super::nic::Nic;
use super::shared::Shared;
use super::worker_handle::Msg;
use std::time::Instant;

/// Our handshake message for `ep`.
fn describe(nic: &Nic, ep: &Endpoint, qp_num: Vec<u32>) -> HandShake {
    HandShake {
        local_nic_path: nic.path.clone(),
        local_lid: nic.port_attr.lid,
        local_gid: nic.gid_text.clone(),
        peer_nic_path: ep.peer_path.clone(),
        qp_num,
        ready_ack_supported: true,
        ..HandShake::default()
    }
}

/// Connects `ep` actively; on failure the endpoint is left with fresh QPs (or
/// retired) and the error says why.
pub fn connect_active(shared: &Shared, nic: &Nic, ep: &Endpoint) -> Result<(), RdmaError> {
    let cq = shared.cq_of(nic, ep);
    let verbs = shared.verbs.as_ref();
    let setup = nic.qp_setup(&shared.cfg);
    let (server, device) = split_nic_path(&ep.peer_path)
        .ok_or_else(|| RdmaError::MalformedPeerPath(ep.peer_path.clone()))?;
    let request = {
        let mut conn = ep.conn.lock();
        match conn.state {
            State::Connected => return Ok(()),
            State::Retired => return Err(RdmaError::Retired),
            _ => {}
        }
        if ep.peer_path == nic.path {
            // Loopback: our own QPs are the peer's.
            let qpns = conn.qp_nums();
            conn.connect(verbs, &setup, nic.gid.gid, nic.port_attr.lid, &qpns)?;
            conn.state = State::Connected;
            return Ok(());
        }
        conn.state = State::Connecting;
        describe(nic, ep, conn.qp_nums())
    };
    let segment = shared.segment_of(server);
    let reply = shared.channel.exchange(&segment, &request.to_value());
    let mut conn = ep.conn.lock();
    let reply = match reply {
        Ok(v) => HandShake::from_value(&v),
        Err(e) => {
            if conn.state == State::Connected && conn.qp_nums() == request.qp_num {
                return Ok(()); // the peer's simultaneous open connected us meanwhile
            }
            let _ = conn.reset(verbs, &setup, cq);
            return Err(RdmaError::Exchange {
                server: server.to_string(),
                source: e,
            });
        }
    };
    let connected_meanwhile = matches!(conn.state, State::Connected | State::WaitAck(_));
    if connected_meanwhile && conn.peer_qpns == reply.qp_num && !reply.qp_num.is_empty() {
        // Simultaneous open: the peer's own handshake connected these QPs already.
        if reply.ready_ack_supported {
            drop(conn);
            return send_ready_ack(shared, nic, ep, server, request);
        }
        conn.state = State::Connected;
        return Ok(());
    }
    if connected_meanwhile {
        conn.reset(verbs, &setup, cq)?;
        return Err(RdmaError::OtherQps {
            server: server.to_string(),
        });
    }
    if !reply.reply_msg.is_empty() {
        let _ = conn.reset(verbs, &setup, cq);
        return Err(RdmaError::Rejected {
            server: server.to_string(),
            reason: reply.reply_msg,
        });
    }
    if reply.local_nic_path != ep.peer_path || reply.peer_nic_path != nic.path {
        let _ = conn.reset(verbs, &setup, cq);
        return Err(RdmaError::OtherPaths {
            server: server.to_string(),
            answered_local: reply.local_nic_path,
            answered_peer: reply.peer_nic_path,
            peer_path: ep.peer_path.clone(),
            nic_path: nic.path.clone(),
        });
    }
    let peer = if reply.local_gid.is_empty() {
        shared.channel.peer_device(&segment, device)
    } else {
        Some((reply.local_gid.clone(), reply.local_lid))
    };
    let Some((gid_text, lid)) = peer else {
        let _ = conn.reset(verbs, &setup, cq);
        return Err(RdmaError::NoPeerDevice {
            server: server.to_string(),
            device: device.to_string(),
        });
    };
    let Some(peer_gid) = gid::from_text(&gid_text) else {
        let _ = conn.reset(verbs, &setup, cq);
        return Err(RdmaError::InvalidGid {
            server: server.to_string(),
            gid: gid_text,
        });
    };
    if let Err(e) = conn.connect(verbs, &setup, peer_gid, lid, &reply.qp_num) {
        let _ = conn.reset(verbs, &setup, cq);
        return Err(RdmaError::ConnectQps {
            peer_path: ep.peer_path.clone(),
            source: Box::new(e),
        });
    }
    if reply.ready_ack_supported {
        conn.state = State::WaitAck(Instant::now());
        drop(conn);
        return send_ready_ack(shared, nic, ep, server, request);
    }
    conn.state = State::Connected;
    Ok(())
}

/// Connector threads run active handshakes for the transport and tell the worker
/// owning the endpoint how they went.
impl ConnectService for Shared {
    fn connectors(&self) -> &Connectors {
        &self.connectors
    }

    fn run(&self, job: ConnectJob) {
        let result = connect_active(self, &job.nic, &job.ep);
        self.worker(&job.nic, &job.ep)
            .send(Msg::Connected(job.ep.peer_path.clone(), result.err()));
    }
}

/// Sends the ready ACK and marks the endpoint connected.
fn send_ready_ack(
    shared: &Shared,
    nic: &Nic,
    ep: &Endpoint,
    server: &str,
    mut request: HandShake,
) -> Result<(), RdmaError> {
    request.ready_ack = true;
    let sent = shared
        .channel
        .exchange(&shared.segment_of(server), &request.to_value());
    let mut conn = ep.conn.lock();
    let failure = match sent {
        Ok(v) => {
            let reply = HandShake::from_value(&v);
            (!reply.reply_msg.is_empty()).then(|| RdmaError::AckRefused {
                server: server.to_string(),
                reason: reply.reply_msg,
            })
        }
        Err(e) => Some(RdmaError::AckNotSent {
            server: server.to_string(),
            source: e,
        }),
    };
    if let Some(why) = failure {
        let cq = shared.cq_of(nic, ep);
        let _ = conn.reset(shared.verbs.as_ref(), &nic.qp_setup(&shared.cfg), cq);
        return Err(why);
    }
    if conn.qp_nums() != request.qp_num {
        return Err(RdmaError::Rebuilt);
    }
    conn.state = State::Connected;
    Ok(())
}

/// Answers a handshake message received by the RPC daemon.
pub fn accept(shared: &Shared, msg: &HandShake) -> HandShake {
    let Some((_, device)) = split_nic_path(&msg.peer_nic_path) else {
        return HandShake::rejection(format!(
            "Invalid peer_nic_path in handshake: {}",
            msg.peer_nic_path
        ));
    };
    let Some(nic) = shared.nics.iter().find(|n| n.name == device) else {
        return HandShake::rejection(format!(
            "Local RDMA context not found for handshake NIC: {device}"
        ));
    };
    if msg.peer_nic_path != nic.path {
        return HandShake::rejection(format!(
            "Invalid argument: peer nic path inconsistency, expect {} while got {}",
            nic.path, msg.peer_nic_path
        ));
    }
    let Some((server, peer_device)) = split_nic_path(&msg.local_nic_path) else {
        return HandShake::rejection(format!(
            "Parse peer nic path failed: {}",
            msg.local_nic_path
        ));
    };
    let ep = match shared.endpoint(nic, &msg.local_nic_path) {
        Ok(ep) => ep,
        Err(e) => {
            return HandShake::rejection(format!(
                "Local RDMA endpoint unavailable for {device} <- {}: {e}",
                msg.local_nic_path
            ))
        }
    };
    let verbs = shared.verbs.as_ref();
    let cq = shared.cq_of(nic, &ep);
    let setup = nic.qp_setup(&shared.cfg);
    let mut conn = ep.conn.lock();
    if msg.ready_ack {
        let connected = matches!(conn.state, State::Connected | State::WaitAck(_));
        if !connected {
            return HandShake::rejection("Received RDMA ready ACK for unconnected endpoint");
        }
        if conn.peer_qpns != msg.qp_num {
            return HandShake::rejection(
                "Received stale RDMA ready ACK with mismatched peer QP numbers",
            );
        }
        conn.state = State::Connected;
        drop(conn);
        shared.endpoint_ready(nic, &ep);
        return HandShake::default();
    }
    if matches!(conn.state, State::Connected | State::WaitAck(_)) {
        if conn.peer_qpns == msg.qp_num {
            if !msg.ready_ack_supported {
                conn.state = State::Connected;
            }
            return describe(nic, &ep, conn.qp_nums());
        }
        // The peer rebuilt its side (restarted, or failed the old connection).
        if let Err(e) = conn.reset(verbs, &setup, cq) {
            return HandShake::rejection(format!("re-establishing connection: {e}"));
        }
    }
    if conn.state == State::Retired {
        return HandShake::rejection("Local RDMA endpoint was retired");
    }
    let peer = if msg.local_gid.is_empty() {
        shared
            .channel
            .peer_device(&shared.segment_of(server), peer_device)
    } else {
        Some((msg.local_gid.clone(), msg.local_lid))
    };
    let Some(peer_gid) = peer.as_ref().and_then(|(g, _)| gid::from_text(g)) else {
        return HandShake::rejection(format!(
            "Peer nic not found in that server: {}",
            msg.local_nic_path
        ));
    };
    let lid = peer.map_or(0, |(_, l)| l);
    if let Err(e) = conn.connect(verbs, &setup, peer_gid, lid, &msg.qp_num) {
        let _ = conn.reset(verbs, &setup, cq);
        return HandShake::rejection(format!("failed connection setup (passive): {e}"));
    }
    conn.state = if msg.ready_ack_supported {
        State::WaitAck(Instant::now())
    } else {
        State::Connected
    };
    let reply = describe(nic, &ep, conn.qp_nums());
    let ready = conn.state == State::Connected;
    drop(conn);
    if ready {
        shared.endpoint_ready(nic, &ep);
    }
    reply
}
