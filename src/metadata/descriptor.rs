//! The segment descriptor JSON (spec §2.5): what a segment publishes about itself.
//!
//! Decoding is tolerant of unknown and missing optional fields, strict about buffers
//! (an empty name or zero address/length invalidates the whole descriptor), and keeps
//! u64 addresses exact. The RDMA fields are in [`super::descriptor_rdma`].

use super::buffer_desc::BufferDesc;
use super::descriptor_rdma::RdmaPart;
use super::json;
use crate::error::{Error, Result};
use serde_json::{json, Map, Value};

/// Where an engine takes same-host requests (ours: `mc_same_host` in the descriptor,
/// ignored by upstream readers), see `te::transport::same_host`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SameHostDesc {
    /// The host and namespace identity of the engine.
    pub identity: String,
    /// Its abstract Unix socket name.
    pub socket: String,
}

/// A decoded segment descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SegmentDesc {
    /// Segment name.
    pub name: String,
    /// Transport protocol name the segment is reached with (`"tcp"`, `"rdma"`, ...).
    pub protocol: String,
    /// TCP data port, 0 when the segment has no TCP listener.
    pub tcp_data_port: u16,
    /// TCP framing version the target understands (1 when absent).
    pub tcp_proto_version: u32,
    /// Host of the TCP data listener (newer upstream builds), if published.
    pub tcp_data_host: Option<String>,
    /// The RDMA server name, when published and non-empty.
    pub rdma_server_name: Option<String>,
    /// Registered buffers (for an RDMA segment: `name` is the buffer's location).
    pub buffers: Vec<BufferDesc>,
    /// Devices, keyed buffers and topology of an RDMA segment (`protocol: "rdma"`).
    pub rdma: Option<RdmaPart>,
    /// Same-host endpoint (ours only; absent from upstream's descriptors).
    pub same_host: Option<SameHostDesc>,
}

impl SegmentDesc {
    /// Whether `[addr, addr+len)` lies inside one published buffer.
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        self.buffers
            .iter()
            .any(|b| addr >= b.addr && end <= b.addr.saturating_add(b.length))
    }

    /// Encodes the descriptor as compact JSON with sorted keys, as upstream writes it.
    pub fn to_json(&self) -> Value {
        let mut obj = Map::new();
        match &self.rdma {
            Some(rdma) => rdma.encode_into(&mut obj),
            None => {
                let buffers: Vec<Value> = self
                    .buffers
                    .iter()
                    .filter(|b| !b.name.is_empty() && b.addr != 0 && b.length != 0)
                    .map(|b| json!({"addr": b.addr, "length": b.length, "name": b.name}))
                    .collect();
                obj.insert("buffers".into(), Value::Array(buffers));
            }
        }
        if let Some(sh) = &self.same_host {
            obj.insert(
                "mc_same_host".into(),
                json!({"identity": sh.identity, "socket": sh.socket}),
            );
        }
        obj.insert("name".into(), self.name.clone().into());
        obj.insert("protocol".into(), self.protocol.clone().into());
        obj.insert(
            "rdma_server_name".into(),
            self.rdma_server_name.clone().unwrap_or_default().into(),
        );
        if let Some(host) = &self.tcp_data_host {
            obj.insert("tcp_data_host".into(), host.clone().into());
        }
        obj.insert("tcp_data_port".into(), self.tcp_data_port.into());
        obj.insert("tcp_proto_version".into(), self.tcp_proto_version.into());
        obj.insert("timestamp".into(), timestamp_now().into());
        Value::Object(obj)
    }

    /// Encodes the descriptor to a compact JSON string.
    pub fn to_json_string(&self) -> String {
        self.to_json().to_string()
    }

    /// Decodes a descriptor from raw bytes; never panics.
    pub fn from_slice(bytes: &[u8]) -> Result<SegmentDesc> {
        SegmentDesc::from_json(&json::parse(bytes, "segment descriptor")?)
    }

    /// Decodes a descriptor from a parsed JSON value.
    pub fn from_json(value: &Value) -> Result<SegmentDesc> {
        let obj = json::object(value, "segment descriptor")?;
        let name = str_field(obj, "name")
            .ok_or_else(|| Error::MalformedJson("segment descriptor has no name".into()))?;
        let protocol = match obj.get("protocol") {
            Some(Value::String(p)) => p.clone(),
            Some(Value::Array(list)) => list
                .iter()
                .filter_map(Value::as_str)
                .find(|p| *p == "tcp")
                .or_else(|| list.first().and_then(Value::as_str))
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        };
        if protocol.is_empty() {
            return Err(Error::MalformedJson(format!("segment {name}: no protocol")));
        }
        let tcp_data_port = match obj.get("tcp_data_port").and_then(Value::as_i64) {
            Some(p) if (0..=65535).contains(&p) => p as u16,
            Some(p) => return Err(Error::MalformedJson(format!("segment {name}: port {p}"))),
            None => 0,
        };
        let tcp_proto_version = obj
            .get("tcp_proto_version")
            .and_then(Value::as_u64)
            .map_or(1, |v| v.min(u32::MAX as u64) as u32);
        let tcp_data_host = str_field(obj, "tcp_data_host").filter(|s| !s.is_empty());
        let rdma_server_name = str_field(obj, "rdma_server_name").filter(|s| !s.is_empty());
        // Malformed or partial: as if absent (the peer is then reached over TCP).
        let same_host = obj
            .get("mc_same_host")
            .and_then(Value::as_object)
            .and_then(|sh| {
                let identity = str_field(sh, "identity").filter(|s| !s.is_empty())?;
                let socket = str_field(sh, "socket").filter(|s| !s.is_empty())?;
                Some(SameHostDesc { identity, socket })
            });
        let mut buffers = Vec::new();
        let mut rdma = None;
        if protocol == "tcp" {
            for b in obj
                .get("buffers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                buffers.push(decode_buffer(&name, b)?);
            }
        } else if protocol == "rdma" {
            let part = RdmaPart::decode(&name, obj)?;
            buffers = part.plain_buffers();
            rdma = Some(part);
        }
        Ok(SegmentDesc {
            name,
            protocol,
            tcp_data_port,
            tcp_proto_version,
            tcp_data_host,
            rdma_server_name,
            buffers,
            rdma,
            same_host,
        })
    }

    /// Equality that ignores nothing but the timestamp (which is not stored).
    pub fn same_as(&self, other: &SegmentDesc) -> bool {
        self == other
    }
}

fn str_field(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key).and_then(Value::as_str).map(str::to_string)
}

fn decode_buffer(segment: &str, value: &Value) -> Result<BufferDesc> {
    let bad = |what: &str| Error::MalformedJson(format!("segment {segment}: buffer {what}"));
    let obj = value.as_object().ok_or_else(|| bad("is not an object"))?;
    let name = str_field(obj, "name").unwrap_or_default();
    let addr = obj.get("addr").and_then(Value::as_u64).unwrap_or(0);
    let length = obj.get("length").and_then(Value::as_u64).unwrap_or(0);
    if name.is_empty() || addr == 0 || length == 0 {
        return Err(bad("with empty name or zero address/length"));
    }
    if addr.checked_add(length).is_none() {
        return Err(bad("wraps around the address space"));
    }
    Ok(BufferDesc { name, addr, length })
}

/// Upstream's descriptor timestamp format, `%Y-%m-%d %H:%M:%S.uuuuuu`, in UTC.
fn timestamp_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:06}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_micros()
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const UPSTREAM: &str = r#"{"buffers":[{"addr":139756792971264,"length":100663296,"name":"127.0.0.1:12345"}],"name":"127.0.0.1:12345","protocol":"tcp","rdma_server_name":"","tcp_data_host":"127.0.0.1","tcp_data_port":15962,"tcp_proto_version":2,"timestamp":"2026-11-29 10:15:40.988347"}"#;

    #[test]
    fn decodes_upstream_capture() {
        let d = SegmentDesc::from_slice(UPSTREAM.as_bytes()).unwrap();
        assert_eq!(d.name, "127.0.0.1:12345");
        assert_eq!(d.protocol, "tcp");
        assert_eq!(d.tcp_data_port, 15962);
        assert_eq!(d.tcp_proto_version, 2);
        assert_eq!(d.tcp_data_host.as_deref(), Some("127.0.0.1"));
        assert_eq!(d.rdma_server_name, None);
        assert_eq!(d.buffers[0].addr, 139756792971264);
        assert!(d.contains(139756792971264, 100663296));
        assert!(!d.contains(139756792971264, 100663297));
    }

    #[test]
    fn roundtrip_keeps_u64_exact_and_sorted_keys() {
        let d = SegmentDesc {
            name: "n".into(),
            protocol: "tcp".into(),
            tcp_data_port: 1,
            tcp_proto_version: 2,
            tcp_data_host: Some("h".into()),
            rdma_server_name: None,
            buffers: vec![BufferDesc {
                name: "n".into(),
                addr: u64::MAX - 10,
                length: 10,
            }],
            rdma: None,
            same_host: Some(SameHostDesc {
                identity: "boot:x/user:[1]".into(),
                socket: "mooncake-te-1".into(),
            }),
        };
        let s = d.to_json_string();
        assert!(s.contains("18446744073709551605"), "{s}");
        assert!(s.starts_with(r#"{"buffers":[{"addr":"#), "{s}");
        assert_eq!(SegmentDesc::from_slice(s.as_bytes()).unwrap(), d);
    }

    #[test]
    fn a_malformed_same_host_field_is_ignored() {
        for sh in [
            r#""x""#,
            r#"{"identity":"i"}"#,
            r#"{"identity":"","socket":"s"}"#,
            r#"{"identity":1,"socket":"s"}"#,
        ] {
            let s = format!(r#"{{"name":"a","protocol":"tcp","mc_same_host":{sh}}}"#);
            assert_eq!(
                SegmentDesc::from_slice(s.as_bytes()).unwrap().same_host,
                None
            );
        }
    }

    #[test]
    fn missing_version_means_v1_and_missing_port_zero() {
        let d = SegmentDesc::from_slice(br#"{"name":"a","protocol":"tcp"}"#).unwrap();
        assert_eq!((d.tcp_proto_version, d.tcp_data_port), (1, 0));
    }

    #[test]
    fn bad_buffers_invalidate_the_descriptor() {
        for b in [
            r#"{"name":"","addr":1,"length":1}"#,
            r#"{"name":"a","addr":0,"length":1}"#,
            r#"{"name":"a","addr":1,"length":0}"#,
            r#"{"name":"a","addr":18446744073709551615,"length":2}"#,
        ] {
            let s = format!(r#"{{"name":"a","protocol":"tcp","buffers":[{b}]}}"#);
            assert!(SegmentDesc::from_slice(s.as_bytes()).is_err(), "{s}");
        }
    }

    #[test]
    fn never_publishes_invalid_buffers() {
        let d = SegmentDesc {
            name: "n".into(),
            protocol: "tcp".into(),
            buffers: vec![BufferDesc {
                name: String::new(),
                addr: 1,
                length: 1,
            }],
            ..Default::default()
        };
        assert!(d.to_json_string().contains(r#""buffers":[]"#));
    }

    #[test]
    fn timestamp_format() {
        let t = timestamp_now();
        assert_eq!(t.len(), 26, "{t}");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20786), (2026, 11, 29));
    }

    proptest! {
        #[test]
        fn decoder_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = SegmentDesc::from_slice(&bytes);
        }

        #[test]
        fn decoder_never_panics_on_json_shapes(
            name in ".{0,8}", port in any::<i64>(), ver in any::<i64>(),
            addr in any::<u64>(), len in any::<u64>(), proto in prop_oneof![Just("tcp"), Just("rdma"), Just("")]
        ) {
            let s = format!(r#"{{"name":{name:?},"protocol":"{proto}","tcp_data_port":{port},"tcp_proto_version":{ver},"buffers":[{{"name":"x","addr":{addr},"length":{len}}}]}}"#);
            let _ = SegmentDesc::from_slice(s.as_bytes());
        }
    }
}
