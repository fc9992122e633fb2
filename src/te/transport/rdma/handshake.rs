//! The QP handshake message (spec transfer-engine.md §3.3, §5.6): `HandShakeDesc`, sent
//! as RPC type 0. Decoding is as tolerant as upstream's: a missing or mistyped
//! `local_lid`/`local_gid` becomes 0/"", and `ready_ack` support is the key's presence.

use serde_json::{json, Map, Value};

/// One handshake message (request or reply).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HandShake {
    /// Free text (unused by the RDMA transport).
    pub payload: String,
    /// The sender's NIC path, `<server>@<device>`.
    pub local_nic_path: String,
    /// The sender's LID.
    pub local_lid: u16,
    /// The sender's GID in upstream's text form.
    pub local_gid: String,
    /// The NIC path the message is for.
    pub peer_nic_path: String,
    /// The sender's queue pair numbers, one per QP of the endpoint.
    pub qp_num: Vec<u32>,
    /// Whether the sender takes part in the ready-ACK exchange (`ready_ack` present).
    pub ready_ack_supported: bool,
    /// This is the second message confirming the sender's QPs are ready.
    pub ready_ack: bool,
    /// Non-empty: the handshake was rejected, and why.
    pub reply_msg: String,
}

impl HandShake {
    /// The JSON value (keys sorted by the RPC framing).
    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("payload".into(), self.payload.clone().into());
        obj.insert("local_nic_path".into(), self.local_nic_path.clone().into());
        obj.insert("local_lid".into(), self.local_lid.into());
        obj.insert("local_gid".into(), self.local_gid.clone().into());
        obj.insert("peer_nic_path".into(), self.peer_nic_path.clone().into());
        obj.insert("qp_num".into(), json!(self.qp_num));
        if self.ready_ack_supported || self.ready_ack {
            obj.insert("ready_ack".into(), self.ready_ack.into());
        }
        obj.insert("reply_msg".into(), self.reply_msg.clone().into());
        Value::Object(obj)
    }

    /// Decodes a message; never fails (missing fields take their defaults).
    pub fn from_value(v: &Value) -> HandShake {
        let text = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        HandShake {
            payload: text("payload"),
            local_nic_path: text("local_nic_path"),
            local_lid: v
                .get("local_lid")
                .and_then(Value::as_u64)
                .and_then(|l| u16::try_from(l).ok())
                .unwrap_or(0),
            local_gid: text("local_gid"),
            peer_nic_path: text("peer_nic_path"),
            qp_num: v
                .get("qp_num")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_u64)
                        .map(|n| n.min(u64::from(u32::MAX)) as u32)
                        .collect()
                })
                .unwrap_or_default(),
            ready_ack_supported: v.get("ready_ack").is_some(),
            ready_ack: v.get("ready_ack").and_then(Value::as_bool).unwrap_or(false),
            reply_msg: text("reply_msg"),
        }
    }

    /// A rejection carrying `why`.
    pub fn rejection(why: impl Into<String>) -> HandShake {
        HandShake {
            reply_msg: why.into(),
            ..HandShake::default()
        }
    }
}

/// Splits a NIC path `<server>@<device>` at its last `@`; `None` when either part is
/// empty.
pub fn split_nic_path(path: &str) -> Option<(&str, &str)> {
    let (server, device) = path.rsplit_once('@')?;
    (!server.is_empty() && !device.is_empty()).then_some((server, device))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_ready_ack_presence() {
        let h = HandShake {
            local_nic_path: "127.0.0.1:15000@rxe0".into(),
            local_gid: "00:00".into(),
            peer_nic_path: "127.0.0.1:15001@rxe0".into(),
            qp_num: vec![17, 18],
            ready_ack_supported: true,
            ..HandShake::default()
        };
        let v = h.to_value();
        assert_eq!(v["ready_ack"], false);
        assert_eq!(HandShake::from_value(&v), h);
        let old = HandShake {
            ready_ack_supported: false,
            ..h.clone()
        };
        assert!(old.to_value().get("ready_ack").is_none());
        // Upstream's TCP-only reply decodes as an empty, accepted message.
        let tcp_only = json!({"local_gid":"","local_lid":0,"local_nic_path":"","payload":"",
            "peer_nic_path":"","qp_num":[],"reply_msg":""});
        let d = HandShake::from_value(&tcp_only);
        assert!(d.qp_num.is_empty() && d.reply_msg.is_empty() && !d.ready_ack_supported);
        // Wrong types fall back to defaults.
        let odd = json!({"local_lid": "x", "local_gid": 5, "qp_num": "no", "ready_ack": 1});
        let d = HandShake::from_value(&odd);
        assert_eq!(
            (d.local_lid, d.local_gid.as_str(), d.qp_num.len()),
            (0, "", 0)
        );
        assert!(d.ready_ack_supported && !d.ready_ack);
    }

    #[test]
    fn nic_paths() {
        assert_eq!(
            split_nic_path("10.0.0.1:1500@mlx5_0"),
            Some(("10.0.0.1:1500", "mlx5_0"))
        );
        assert_eq!(split_nic_path("a@b@c"), Some(("a@b", "c")));
        assert_eq!(split_nic_path("@mlx5_0"), None);
        assert_eq!(split_nic_path("host@"), None);
        assert_eq!(split_nic_path("nohost"), None);
    }
}
