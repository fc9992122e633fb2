//! The RDMA part of a segment descriptor (spec transfer-engine.md §2.5): `devices[]`,
//! buffers with one `rkey`/`lkey` per device, and the `priority_matrix`.
//!
//! Decoding is upstream's: a device with an empty name or GID, or a buffer whose
//! non-empty `rkey` list does not have one key per device, invalidates the descriptor;
//! an empty `rkey` list marks a buffer that peers may not access.

use crate::error::{Error, Result};
use serde_json::{json, Map, Value};

/// One NIC of an RDMA segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaDevice {
    /// Device name (`mlx5_0`, `rxe0`).
    pub name: String,
    /// LID (0 on RoCE).
    pub lid: u16,
    /// GID, 16 two-digit hex bytes joined by `:`.
    pub gid: String,
}

/// One buffer of an RDMA segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaBuffer {
    /// Its memory location (`cpu:0`, `cuda:1`, `*`): the topology entry to use.
    pub location: String,
    /// Base address in the owner's process.
    pub addr: u64,
    /// Length.
    pub length: u64,
    /// Remote keys, one per device in `devices[]` order (empty: not remotely accessible).
    pub rkey: Vec<u32>,
    /// Local keys, likewise.
    pub lkey: Vec<u32>,
}

/// The RDMA fields of a descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RdmaPart {
    /// NICs, in the order the key lists follow.
    pub devices: Vec<RdmaDevice>,
    /// Buffers.
    pub buffers: Vec<RdmaBuffer>,
    /// The topology matrix as published.
    pub priority_matrix: Value,
}

impl RdmaPart {
    /// The buffers as a descriptor's generic buffer list (location as the name).
    pub fn plain_buffers(&self) -> Vec<super::buffer_desc::BufferDesc> {
        self.buffers
            .iter()
            .map(|b| super::buffer_desc::BufferDesc {
                name: b.location.clone(),
                addr: b.addr,
                length: b.length,
            })
            .collect()
    }

    /// Adds the RDMA fields to a descriptor object.
    pub fn encode_into(&self, obj: &mut Map<String, Value>) {
        let devices: Vec<Value> = self
            .devices
            .iter()
            .map(|d| json!({"gid": d.gid, "lid": d.lid, "name": d.name}))
            .collect();
        let buffers: Vec<Value> = self
            .buffers
            .iter()
            .filter(|b| b.addr != 0 && b.length != 0)
            .map(|b| {
                json!({"addr": b.addr, "length": b.length, "lkey": b.lkey,
                       "name": b.location, "rkey": b.rkey})
            })
            .collect();
        obj.insert("devices".into(), Value::Array(devices));
        obj.insert("buffers".into(), Value::Array(buffers));
        let matrix = if self.priority_matrix.is_object() {
            self.priority_matrix.clone()
        } else {
            Value::Object(Map::new())
        };
        obj.insert("priority_matrix".into(), matrix);
    }

    /// Decodes the RDMA fields of segment `segment`'s descriptor object.
    pub fn decode(segment: &str, obj: &Map<String, Value>) -> Result<RdmaPart> {
        let bad = |what: String| Error::MalformedJson(format!("segment {segment}: {what}"));
        let mut devices = Vec::new();
        for d in list(obj, "devices") {
            let name = text(d, "name");
            let gid = text(d, "gid");
            if name.is_empty() || gid.is_empty() {
                return Err(bad("a device has an empty name or gid".into()));
            }
            let lid = d
                .get("lid")
                .and_then(Value::as_u64)
                .and_then(|l| u16::try_from(l).ok())
                .unwrap_or(0);
            devices.push(RdmaDevice { name, lid, gid });
        }
        let mut buffers = Vec::new();
        for b in list(obj, "buffers") {
            let location = text(b, "name");
            let addr = b.get("addr").and_then(Value::as_u64).unwrap_or(0);
            let length = b.get("length").and_then(Value::as_u64).unwrap_or(0);
            if location.is_empty() || addr == 0 || length == 0 || addr.checked_add(length).is_none()
            {
                return Err(bad("a buffer has an empty name or an invalid range".into()));
            }
            let keys = |k: &str| -> Vec<u32> {
                b.get(k)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_u64)
                    .map(|v| v.min(u64::from(u32::MAX)) as u32)
                    .collect()
            };
            let (rkey, lkey) = (keys("rkey"), keys("lkey"));
            if !rkey.is_empty() && (rkey.len() != devices.len() || lkey.len() != devices.len()) {
                return Err(bad(format!(
                    "buffer {addr:#x} has {} rkeys and {} lkeys for {} devices",
                    rkey.len(),
                    lkey.len(),
                    devices.len()
                )));
            }
            buffers.push(RdmaBuffer {
                location,
                addr,
                length,
                rkey,
                lkey,
            });
        }
        Ok(RdmaPart {
            devices,
            buffers,
            priority_matrix: obj
                .get("priority_matrix")
                .cloned()
                .unwrap_or(Value::Object(Map::new())),
        })
    }

    /// The buffer holding `[addr, addr + len)`.
    pub fn buffer_for(&self, addr: u64, len: u64) -> Option<&RdmaBuffer> {
        let end = addr.checked_add(len)?;
        self.buffers
            .iter()
            .find(|b| addr >= b.addr && end <= b.addr + b.length)
    }

    /// The index of device `name` in `devices[]`.
    pub fn device_index(&self, name: &str) -> Option<usize> {
        self.devices.iter().position(|d| d.name == name)
    }
}

fn list<'a>(obj: &'a Map<String, Value>, key: &str) -> impl Iterator<Item = &'a Value> {
    obj.get(key).and_then(Value::as_array).into_iter().flatten()
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(s: &str) -> Result<RdmaPart> {
        let v: Value = serde_json::from_str(s).unwrap();
        RdmaPart::decode("seg", v.as_object().unwrap())
    }

    #[test]
    fn upstream_shape_round_trips() {
        let s = r#"{"devices":[{"gid":"00:00:00:00:00:00:00:00:00:00:ff:ff:7f:00:00:01","lid":0,"name":"rxe0"}],
            "buffers":[{"addr":140000000000000,"length":1048576,"lkey":[513],"name":"cpu:0","rkey":[513]},
                       {"addr":150000000000000,"length":4096,"lkey":[],"name":"cpu:0","rkey":[]}],
            "priority_matrix":{"cpu:0":[["rxe0"],[]]}}"#;
        let p = decode(s).unwrap();
        assert_eq!(p.devices[0].name, "rxe0");
        assert_eq!(p.buffers[0].rkey, [513]);
        assert!(p.buffers[1].rkey.is_empty());
        assert_eq!(p.buffer_for(140000000000000 + 10, 100).unwrap().rkey, [513]);
        assert!(p.buffer_for(140000000000000 + 1048570, 100).is_none());
        assert_eq!(p.device_index("rxe0"), Some(0));
        let mut obj = Map::new();
        p.encode_into(&mut obj);
        assert_eq!(RdmaPart::decode("seg", &obj).unwrap(), p);
    }

    #[test]
    fn invalid_parts_are_rejected() {
        for s in [
            r#"{"devices":[{"gid":"","lid":0,"name":"rxe0"}]}"#,
            r#"{"devices":[{"gid":"00","lid":0,"name":""}]}"#,
            r#"{"devices":[{"gid":"00","name":"a"}],"buffers":[{"addr":1,"length":1,"name":"cpu:0","rkey":[1,2],"lkey":[1,2]}]}"#,
            r#"{"devices":[{"gid":"00","name":"a"}],"buffers":[{"addr":1,"length":1,"name":"cpu:0","rkey":[1],"lkey":[]}]}"#,
            r#"{"devices":[],"buffers":[{"addr":0,"length":1,"name":"cpu:0"}]}"#,
            r#"{"devices":[],"buffers":[{"addr":1,"length":1,"name":""}]}"#,
        ] {
            assert!(decode(s).is_err(), "{s}");
        }
    }
}
