//! The records a master replicates to its standbys and its snapshot: the full state of
//! one object, its removal, a segment mounted or unmounted, and the end of a full-state
//! dump. Every object record carries the whole object, so applying records is
//! idempotent and a later record for a key replaces an earlier one.
//!
//! Encoding (ours, versioned by the stream's magic): a tag byte, then fields as
//! little-endian integers and `u32`-length-prefixed strings. The decoder checks every
//! length against the bytes left and never panics.

use crate::wire::master_api::{ReplicaStatus, Segment, SoftPinAction, Uuid};

/// One replica of a replicated object, its segment named by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaState {
    /// Global replica id.
    pub id: u64,
    /// The segment its buffer is in.
    pub segment: Uuid,
    /// Buffer address.
    pub addr: u64,
    /// Buffer size.
    pub size: u64,
    /// PROCESSING or COMPLETE.
    pub status: ReplicaStatus,
}

/// One copy of a replicated object on a client's local disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskReplicaState {
    /// Global replica id.
    pub id: u64,
    /// The client whose disk holds it.
    pub client: Uuid,
    /// Bytes stored.
    pub size: u64,
    /// The client's offload RPC address.
    pub endpoint: String,
}

/// Everything about an object that must survive a failover. Times are relative to the
/// moment the record was made, since masters' clocks are unrelated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectState {
    /// Writer of the current put.
    pub client: Uuid,
    /// Nanoseconds since its put started.
    pub age_ns: u64,
    /// Value size.
    pub size: u64,
    /// Replicas.
    pub replicas: Vec<ReplicaState>,
    /// Never evicted.
    pub hard_pin: bool,
    /// Nanoseconds of soft pin left.
    pub soft_pin_left_ns: Option<u64>,
    /// Soft-pin action (and its TTL) waiting for the put to complete.
    pub pending_pin: Option<(SoftPinAction, u64)>,
    /// Checksum given at PutEnd.
    pub checksum: Option<u64>,
    /// Group id ("" when none).
    pub group_id: String,
    /// Copies on clients' local disks.
    pub disk_replicas: Vec<DiskReplicaState>,
}

/// One replicated change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A segment mounted by a client.
    Mount {
        /// The segment.
        segment: Segment,
        /// Its owner.
        client: Uuid,
    },
    /// A segment unmounted (its replicas are gone with it).
    Unmount {
        /// Segment id.
        id: Uuid,
    },
    /// An object's current state.
    Object {
        /// Tenant.
        tenant: String,
        /// Key.
        key: String,
        /// State.
        state: ObjectState,
    },
    /// An object removed.
    Removed {
        /// Tenant.
        tenant: String,
        /// Key.
        key: String,
    },
    /// A full-state dump is complete: whoever applied everything up to here holds the
    /// whole state.
    DumpDone,
}

const TAG_MOUNT: u8 = 1;
const TAG_UNMOUNT: u8 = 2;
const TAG_OBJECT: u8 = 3;
const TAG_REMOVED: u8 = 4;
const TAG_DUMP_DONE: u8 = 5;
/// An object with copies on local disks: [`TAG_OBJECT`]'s fields, then those copies
/// (objects without any keep the older tag, which older snapshots hold).
const TAG_OBJECT_WITH_DISK: u8 = 6;

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn uuid(&mut self, v: Uuid) {
        self.u64(v.first);
        self.u64(v.second);
    }
    fn str(&mut self, s: &str) {
        let len = u32::try_from(s.len()).unwrap_or(u32::MAX);
        self.0.extend_from_slice(&len.to_le_bytes());
        self.0.extend_from_slice(&s.as_bytes()[..len as usize]);
    }
    fn opt(&mut self, v: Option<u64>) {
        match v {
            Some(x) => {
                self.u8(1);
                self.u64(x);
            }
            None => self.u8(0),
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)?.try_into().ok().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }
    fn uuid(&mut self) -> Option<Uuid> {
        Some(Uuid {
            first: self.u64()?,
            second: self.u64()?,
        })
    }
    fn str(&mut self) -> Option<String> {
        let len = self.u32()? as usize;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }
    fn opt(&mut self) -> Option<Option<u64>> {
        match self.u8()? {
            0 => Some(None),
            1 => Some(Some(self.u64()?)),
            _ => None,
        }
    }
}

fn status_code(s: ReplicaStatus) -> u8 {
    s.code() as u8
}

fn status_of(code: u8) -> Option<ReplicaStatus> {
    ReplicaStatus::from_code(i32::from(code))
}

impl Record {
    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(96));
        match self {
            Record::Mount { segment, client } => {
                w.u8(TAG_MOUNT);
                w.uuid(segment.id);
                w.str(&segment.name);
                w.u64(segment.base);
                w.u64(segment.size);
                w.str(&segment.te_endpoint);
                w.str(&segment.protocol);
                w.str(&segment.host_id);
                w.uuid(*client);
            }
            Record::Unmount { id } => {
                w.u8(TAG_UNMOUNT);
                w.uuid(*id);
            }
            Record::Object { tenant, key, state } => {
                let with_disk = !state.disk_replicas.is_empty();
                w.u8(if with_disk {
                    TAG_OBJECT_WITH_DISK
                } else {
                    TAG_OBJECT
                });
                w.str(tenant);
                w.str(key);
                w.uuid(state.client);
                w.u64(state.age_ns);
                w.u64(state.size);
                w.u8(u8::from(state.hard_pin));
                w.opt(state.soft_pin_left_ns);
                match state.pending_pin {
                    Some((action, ttl)) => {
                        w.u8(1);
                        w.u8(action as u8);
                        w.u64(ttl);
                    }
                    None => w.u8(0),
                }
                w.opt(state.checksum);
                w.str(&state.group_id);
                let n = u32::try_from(state.replicas.len()).unwrap_or(u32::MAX);
                w.0.extend_from_slice(&n.to_le_bytes());
                for r in state.replicas.iter().take(n as usize) {
                    w.u64(r.id);
                    w.uuid(r.segment);
                    w.u64(r.addr);
                    w.u64(r.size);
                    w.u8(status_code(r.status));
                }
                if with_disk {
                    let n = u32::try_from(state.disk_replicas.len()).unwrap_or(u32::MAX);
                    w.0.extend_from_slice(&n.to_le_bytes());
                    for r in state.disk_replicas.iter().take(n as usize) {
                        w.u64(r.id);
                        w.uuid(r.client);
                        w.u64(r.size);
                        w.str(&r.endpoint);
                    }
                }
            }
            Record::Removed { tenant, key } => {
                w.u8(TAG_REMOVED);
                w.str(tenant);
                w.str(key);
            }
            Record::DumpDone => w.u8(TAG_DUMP_DONE),
        }
        w.0
    }

    /// Decodes one record; `None` for anything malformed (trailing bytes included).
    pub fn decode(bytes: &[u8]) -> Option<Record> {
        let mut r = Reader(bytes);
        let rec = match r.u8()? {
            TAG_MOUNT => {
                let segment = Segment {
                    id: r.uuid()?,
                    name: r.str()?,
                    base: r.u64()?,
                    size: r.u64()?,
                    te_endpoint: r.str()?,
                    protocol: r.str()?,
                    host_id: r.str()?,
                };
                Record::Mount {
                    segment,
                    client: r.uuid()?,
                }
            }
            TAG_UNMOUNT => Record::Unmount { id: r.uuid()? },
            tag @ (TAG_OBJECT | TAG_OBJECT_WITH_DISK) => {
                let tenant = r.str()?;
                let key = r.str()?;
                let client = r.uuid()?;
                let age_ns = r.u64()?;
                let size = r.u64()?;
                let hard_pin = match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => return None,
                };
                let soft_pin_left_ns = r.opt()?;
                let pending_pin = match r.u8()? {
                    0 => None,
                    1 => Some((SoftPinAction::from_code(r.u8()?)?, r.u64()?)),
                    _ => return None,
                };
                let checksum = r.opt()?;
                let group_id = r.str()?;
                let n = r.u32()? as usize;
                // Each replica takes 41 bytes: a count beyond what is left is a lie.
                if n > r.0.len() / 41 {
                    return None;
                }
                let mut replicas = Vec::with_capacity(n);
                for _ in 0..n {
                    replicas.push(ReplicaState {
                        id: r.u64()?,
                        segment: r.uuid()?,
                        addr: r.u64()?,
                        size: r.u64()?,
                        status: status_of(r.u8()?)?,
                    });
                }
                let mut disk_replicas = Vec::new();
                if tag == TAG_OBJECT_WITH_DISK {
                    let n = r.u32()? as usize;
                    // Each copy takes at least 36 bytes.
                    if n > r.0.len() / 36 {
                        return None;
                    }
                    for _ in 0..n {
                        disk_replicas.push(DiskReplicaState {
                            id: r.u64()?,
                            client: r.uuid()?,
                            size: r.u64()?,
                            endpoint: r.str()?,
                        });
                    }
                }
                Record::Object {
                    tenant,
                    key,
                    state: ObjectState {
                        client,
                        age_ns,
                        size,
                        replicas,
                        hard_pin,
                        soft_pin_left_ns,
                        pending_pin,
                        checksum,
                        group_id,
                        disk_replicas,
                    },
                }
            }
            TAG_REMOVED => Record::Removed {
                tenant: r.str()?,
                key: r.str()?,
            },
            TAG_DUMP_DONE => Record::DumpDone,
            _ => return None,
        };
        r.0.is_empty().then_some(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Record> {
        let id = Uuid {
            first: 7,
            second: 9,
        };
        vec![
            Record::Mount {
                segment: Segment {
                    id,
                    name: "127.0.0.1:1234".into(),
                    base: 1 << 40,
                    size: 64 << 20,
                    te_endpoint: "127.0.0.1:1234".into(),
                    protocol: "tcp".into(),
                    host_id: "h".into(),
                },
                client: Uuid {
                    first: 1,
                    second: 2,
                },
            },
            Record::Unmount { id },
            Record::Object {
                tenant: "default".into(),
                key: "k\u{e9}y".into(),
                state: ObjectState {
                    client: id,
                    age_ns: 12,
                    size: 4096,
                    replicas: vec![
                        ReplicaState {
                            id: 3,
                            segment: id,
                            addr: (1 << 40) + 64,
                            size: 4096,
                            status: ReplicaStatus::Complete,
                        },
                        ReplicaState {
                            id: 4,
                            segment: id,
                            addr: (1 << 40) + 8192,
                            size: 4096,
                            status: ReplicaStatus::Processing,
                        },
                    ],
                    hard_pin: true,
                    soft_pin_left_ns: Some(5),
                    pending_pin: Some((SoftPinAction::Enable, 77)),
                    checksum: None,
                    group_id: "g".into(),
                    disk_replicas: Vec::new(),
                },
            },
            Record::Object {
                tenant: "default".into(),
                key: "on disk".into(),
                state: ObjectState {
                    client: id,
                    age_ns: 1,
                    size: 10,
                    replicas: Vec::new(),
                    hard_pin: false,
                    soft_pin_left_ns: None,
                    pending_pin: None,
                    checksum: Some(3),
                    group_id: String::new(),
                    disk_replicas: vec![DiskReplicaState {
                        id: 5,
                        client: id,
                        size: 10,
                        endpoint: "host:4567".into(),
                    }],
                },
            },
            Record::Removed {
                tenant: "t".into(),
                key: String::new(),
            },
            Record::DumpDone,
        ]
    }

    #[test]
    fn records_round_trip() {
        for rec in samples() {
            assert_eq!(Record::decode(&rec.encode()), Some(rec));
        }
    }

    #[test]
    fn truncated_or_padded_records_are_refused() {
        for rec in samples() {
            let bytes = rec.encode();
            for cut in 0..bytes.len() {
                assert_eq!(Record::decode(&bytes[..cut]), None, "{rec:?} cut at {cut}");
            }
            let mut padded = bytes.clone();
            padded.push(0);
            assert_eq!(Record::decode(&padded), None);
        }
        assert_eq!(Record::decode(&[99]), None);
        // A replica count far beyond the bytes present.
        let mut lying = samples()[2].encode();
        let at = lying.len() - 2 * 41 - 4;
        lying[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Record::decode(&lying), None);
    }
}
