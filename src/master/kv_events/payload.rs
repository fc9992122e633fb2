//! The msgpack payload of one published batch (spec tiers-events-conductor.md §2.6):
//! `[timestamp_ms, [event maps...], 0]`, each event a map with upstream's keys in
//! upstream's order, nil where upstream writes nil and absent where it leaves a key out.

use crate::codec::msgpack::Encoder;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// A put completed (`stored`, legacy `BlockStored`).
    Stored,
    /// The object is gone (`removed`, legacy `BlockRemoved`).
    Removed,
    /// Forget everything this backend announced before (`cleared`, legacy
    /// `AllBlocksCleared`): an HA leader's term starts with it, followed by a `stored`
    /// for every object it holds.
    Cleared,
}

/// Where the object's bytes are, as events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Medium {
    /// Memory replicas: `cpu`.
    Cpu,
    /// Disk, local-disk or NVMe-oF replicas: `disk`.
    Disk,
}

impl Medium {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Medium::Cpu => "cpu",
            Medium::Disk => "disk",
        }
    }
}

/// An event as it waits in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEvent {
    /// Stored or removed.
    pub kind: EventKind,
    /// The store key.
    pub key: String,
    /// Where the replicas are (were).
    pub medium: Medium,
    /// The object's tenant.
    pub tenant: String,
    /// The object's group id ("" when none).
    pub group: String,
}

impl PendingEvent {
    /// The `cleared` event that starts an HA leader's term.
    pub fn cleared() -> PendingEvent {
        PendingEvent {
            kind: EventKind::Cleared,
            key: String::new(),
            medium: Medium::Cpu,
            tenant: String::new(),
            group: String::new(),
        }
    }
}

/// The settings that shape every event map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Stamped as `backend_id`.
    pub backend_id: String,
    /// Write `type`, `block_hashes` and `parent_block_hash`.
    pub legacy: bool,
    /// Write `object_key`.
    pub object_key: bool,
}

/// An event about to be published: its id and the hash its key stands for.
#[derive(Debug, Clone, Copy)]
pub struct Numbered<'a> {
    /// The queued event.
    pub event: &'a PendingEvent,
    /// `event_id`.
    pub id: u64,
    /// The key's hash, when it is one.
    pub hash: Option<u64>,
}

/// Encodes a batch published at `timestamp_ms` (Unix milliseconds).
pub fn encode_batch(timestamp_ms: i64, events: &[Numbered<'_>], shape: &Shape) -> Vec<u8> {
    let mut e = Encoder::new();
    e.array(3);
    e.int(timestamp_ms);
    e.array(u32::try_from(events.len()).unwrap_or(u32::MAX));
    for n in events {
        event_map(&mut e, timestamp_ms, n, shape);
    }
    // The batch's dp_rank: the storage pool has none.
    e.uint(0);
    e.into_bytes()
}

/// How many keys an event map has: 13 always, 2 legacy (`type`, `block_hashes`), 1 for
/// `object_key`, then 3 + 1 legacy (`parent_block_hash`) for stored or 1 for removed.
/// A `cleared` map has the envelope alone: 12, and 1 legacy (`type`).
fn map_len(kind: EventKind, shape: &Shape) -> u32 {
    let legacy = u32::from(shape.legacy);
    let tail = match kind {
        EventKind::Stored => 3 + legacy,
        EventKind::Removed => 1,
        EventKind::Cleared => return 12 + legacy,
    };
    13 + 2 * legacy + u32::from(shape.object_key) + tail
}

/// `event_type` and the legacy `type` of `kind`.
fn type_names(kind: EventKind) -> (&'static str, &'static str) {
    match kind {
        EventKind::Stored => ("stored", "BlockStored"),
        EventKind::Removed => ("removed", "BlockRemoved"),
        EventKind::Cleared => ("cleared", "AllBlocksCleared"),
    }
}

fn event_map(e: &mut Encoder, timestamp_ms: i64, n: &Numbered<'_>, shape: &Shape) {
    let ev = n.event;
    let stored = ev.kind == EventKind::Stored;
    let (event_type, legacy_type) = type_names(ev.kind);
    e.map(map_len(ev.kind, shape));
    e.str("event_id");
    e.uint(n.id);
    e.str("timestamp");
    e.int(timestamp_ms);
    e.str("event_type");
    e.str(event_type);
    if shape.legacy {
        e.str("type");
        e.str(legacy_type);
    }
    if ev.kind == EventKind::Cleared {
        cleared_envelope(e, shape);
        return;
    }
    for unknown in ["model_name", "block_size", "additional_salt", "lora_name"] {
        e.str(unknown);
        e.nil();
    }
    e.str("tenant_id");
    e.str(&ev.tenant);
    e.str("backend_id");
    e.str(&shape.backend_id);
    e.str("group_id");
    if ev.group.is_empty() {
        e.nil();
    } else {
        e.str(&ev.group);
    }
    e.str("medium");
    e.str(ev.medium.as_str());
    e.str("dp_rank");
    e.nil();
    if shape.object_key {
        e.str("object_key");
        e.str(&ev.key);
    }
    let hashes = u32::from(n.hash.is_some());
    e.str("seq_hashes");
    e.array(hashes);
    if let Some(h) = n.hash {
        e.uint(h);
    }
    if shape.legacy {
        e.str("block_hashes");
        e.array(hashes);
        if let Some(h) = n.hash {
            // Upstream casts the hash to int64: values from 2^63 up turn negative.
            e.int(h as i64);
        }
    }
    e.str("base_block_idx");
    if stored {
        e.uint(0);
        e.str("parent_hash");
        e.nil();
        e.str("token_ids");
        e.nil();
        if shape.legacy {
            e.str("parent_block_hash");
            e.nil();
        }
    } else {
        e.nil();
    }
}

/// The rest of a `cleared` map: it is about the whole backend, so tenant, group and
/// medium are nil.
fn cleared_envelope(e: &mut Encoder, shape: &Shape) {
    for unknown in [
        "model_name",
        "block_size",
        "additional_salt",
        "lora_name",
        "tenant_id",
    ] {
        e.str(unknown);
        e.nil();
    }
    e.str("backend_id");
    e.str(&shape.backend_id);
    for none in ["group_id", "medium", "dp_rank"] {
        e.str(none);
        e.nil();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// msgpack of a str (fixstr: every test string is under 32 bytes).
    fn s(text: &str) -> Vec<u8> {
        assert!(text.len() < 32);
        let mut v = vec![0xa0 | text.len() as u8];
        v.extend_from_slice(text.as_bytes());
        v
    }

    fn kv(out: &mut Vec<u8>, key: &str, value: &[u8]) {
        out.extend(s(key));
        out.extend_from_slice(value);
    }

    const NIL: &[u8] = &[0xc0];
    const TS: i64 = 1_700_000_000_123;
    /// `TS` as msgpack: uint 64.
    const TS_BYTES: [u8; 9] = [0xcf, 0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x7b];

    fn shape(legacy: bool, object_key: bool) -> Shape {
        Shape {
            backend_id: "node0".into(),
            legacy,
            object_key,
        }
    }

    fn event(kind: EventKind, key: &str, group: &str) -> PendingEvent {
        PendingEvent {
            kind,
            key: key.into(),
            medium: Medium::Cpu,
            tenant: "default".into(),
            group: group.into(),
        }
    }

    /// The bytes of one event map, written out key by key from the spec's table.
    fn golden(
        kind: EventKind,
        id: u8,
        key: &str,
        hash: Option<(&[u8], &[u8])>,
        legacy: bool,
        object_key: bool,
    ) -> Vec<u8> {
        let stored = kind == EventKind::Stored;
        let size: u8 = match (stored, legacy, object_key) {
            (true, true, true) => 20,
            (false, true, true) => 17,
            (true, false, false) => 16,
            (false, false, false) => 14,
            _ => unreachable!(),
        };
        let mut m = if size < 16 {
            vec![0x80 | size]
        } else {
            vec![0xde, 0, size]
        };
        kv(&mut m, "event_id", &[id]);
        kv(&mut m, "timestamp", &TS_BYTES);
        kv(
            &mut m,
            "event_type",
            &s(if stored { "stored" } else { "removed" }),
        );
        if legacy {
            kv(
                &mut m,
                "type",
                &s(if stored {
                    "BlockStored"
                } else {
                    "BlockRemoved"
                }),
            );
        }
        for k in ["model_name", "block_size", "additional_salt", "lora_name"] {
            kv(&mut m, k, NIL);
        }
        kv(&mut m, "tenant_id", &s("default"));
        kv(&mut m, "backend_id", &s("node0"));
        kv(&mut m, "group_id", NIL);
        kv(&mut m, "medium", &s("cpu"));
        kv(&mut m, "dp_rank", NIL);
        if object_key {
            kv(&mut m, "object_key", &s(key));
        }
        let (seq, block): (Vec<u8>, Vec<u8>) = match hash {
            Some((u, i)) => ([&[0x91][..], u].concat(), [&[0x91][..], i].concat()),
            None => (vec![0x90], vec![0x90]),
        };
        kv(&mut m, "seq_hashes", &seq);
        if legacy {
            kv(&mut m, "block_hashes", &block);
        }
        if stored {
            kv(&mut m, "base_block_idx", &[0x00]);
            kv(&mut m, "parent_hash", NIL);
            kv(&mut m, "token_ids", NIL);
            if legacy {
                kv(&mut m, "parent_block_hash", NIL);
            }
        } else {
            kv(&mut m, "base_block_idx", NIL);
        }
        m
    }

    fn payload(maps: &[Vec<u8>]) -> Vec<u8> {
        let mut p = vec![0x93];
        p.extend_from_slice(&TS_BYTES);
        p.push(0x90 | maps.len() as u8);
        for m in maps {
            p.extend_from_slice(m);
        }
        p.push(0x00);
        p
    }

    #[test]
    fn stored_and_removed_with_defaults() {
        let (a, b) = (
            event(EventKind::Stored, "12345", ""),
            event(EventKind::Removed, "abc-not-hash", ""),
        );
        let batch = [
            Numbered {
                event: &a,
                id: 1,
                hash: Some(12345),
            },
            Numbered {
                event: &b,
                id: 2,
                hash: None,
            },
        ];
        let bytes = encode_batch(TS, &batch, &shape(true, true));
        // 12345 = 0x3039: uint 16 in both arrays.
        let h: &[u8] = &[0xcd, 0x30, 0x39];
        let expect = payload(&[
            golden(EventKind::Stored, 1, "12345", Some((h, h)), true, true),
            golden(EventKind::Removed, 2, "abc-not-hash", None, true, true),
        ]);
        assert_eq!(bytes, expect);
        // The map sizes the spec states: 20 and 17.
        assert_eq!(&bytes[11..14], [0xde, 0, 20]);
        assert_eq!(map_len(EventKind::Removed, &shape(true, true)), 17);
    }

    #[test]
    fn a_removed_event_with_the_switches_off_byte_by_byte() {
        let e = event(EventKind::Removed, "0x2a", "");
        let batch = [Numbered {
            event: &e,
            id: 1,
            hash: Some(42),
        }];
        let golden: Vec<u8> = [
            &[0x93][..],                                             // [ts, events, 0]
            &[0xcf, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x7b], // ts: uint 64
            &[0x91, 0x8e],                                           // 1 event, 14 keys
            b"\xa8event_id\x01",
            b"\xa9timestamp\xcf\x00\x00\x01\x8b\xcf\xe5\x68\x7b",
            b"\xaaevent_type\xa7removed",
            b"\xaamodel_name\xc0",
            b"\xaablock_size\xc0",
            b"\xafadditional_salt\xc0",
            b"\xa9lora_name\xc0",
            b"\xa9tenant_id\xa7default",
            b"\xaabackend_id\xa5node0",
            b"\xa8group_id\xc0",
            b"\xa6medium\xa3cpu",
            b"\xa7dp_rank\xc0",
            b"\xaaseq_hashes\x91\x2a",
            b"\xaebase_block_idx\xc0",
            &[0x00], // batch dp_rank
        ]
        .concat();
        assert_eq!(encode_batch(TS, &batch, &shape(false, false)), golden);
    }

    #[test]
    fn a_cleared_event_is_the_envelope_alone_byte_by_byte() {
        let e = PendingEvent::cleared();
        let batch = [Numbered {
            event: &e,
            id: 9,
            hash: None,
        }];
        let golden: Vec<u8> = [
            &[0x93][..],
            &[0xcf, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x7b],
            &[0x91, 0x8d], // 1 event, 13 keys
            b"\xa8event_id\x09",
            b"\xa9timestamp\xcf\x00\x00\x01\x8b\xcf\xe5\x68\x7b",
            b"\xaaevent_type\xa7cleared",
            b"\xa4type\xb0AllBlocksCleared",
            b"\xaamodel_name\xc0",
            b"\xaablock_size\xc0",
            b"\xafadditional_salt\xc0",
            b"\xa9lora_name\xc0",
            b"\xa9tenant_id\xc0",
            b"\xaabackend_id\xa5node0",
            b"\xa8group_id\xc0",
            b"\xa6medium\xc0",
            b"\xa7dp_rank\xc0",
            &[0x00],
        ]
        .concat();
        assert_eq!(encode_batch(TS, &batch, &shape(true, true)), golden);
        assert_eq!(map_len(EventKind::Cleared, &shape(false, true)), 12);
    }

    #[test]
    fn switches_off_drop_their_keys() {
        let a = event(EventKind::Stored, "0x2a", "");
        let b = event(EventKind::Removed, "0x2a", "");
        let batch = [
            Numbered {
                event: &a,
                id: 7,
                hash: Some(42),
            },
            Numbered {
                event: &b,
                id: 8,
                hash: Some(42),
            },
        ];
        let bytes = encode_batch(TS, &batch, &shape(false, false));
        let h: &[u8] = &[42];
        assert_eq!(
            bytes,
            payload(&[
                golden(EventKind::Stored, 7, "0x2a", Some((h, h)), false, false),
                golden(EventKind::Removed, 8, "0x2a", Some((h, h)), false, false),
            ])
        );
    }

    #[test]
    fn block_hashes_are_int64_and_group_is_written() {
        let mut a = event(EventKind::Stored, "18446744073709551615", "g1");
        a.medium = Medium::Disk;
        let batch = [Numbered {
            event: &a,
            id: 300,
            hash: Some(u64::MAX),
        }];
        let bytes = encode_batch(TS, &batch, &shape(true, true));
        let find = |needle: &[u8]| {
            bytes
                .windows(needle.len())
                .position(|w| w == needle)
                .unwrap_or_else(|| panic!("{needle:x?} not in {bytes:x?}"))
        };
        find(&[&s("event_id")[..], &[0xcd, 0x01, 0x2c]].concat());
        find(&[&s("group_id")[..], &s("g1")].concat());
        find(&[&s("medium")[..], &s("disk")].concat());
        let mut seq = s("seq_hashes");
        seq.extend_from_slice(&[0x91, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        find(&seq);
        let mut block = s("block_hashes");
        block.extend_from_slice(&[0x91, 0xff]);
        find(&block);
        // 2^63 becomes i64::MIN.
        let b = event(EventKind::Stored, "9223372036854775808", "");
        let bytes = encode_batch(
            TS,
            &[Numbered {
                event: &b,
                id: 1,
                hash: Some(1 << 63),
            }],
            &shape(true, true),
        );
        let mut block = s("block_hashes");
        block.extend_from_slice(&[0x91, 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0]);
        assert!(bytes.windows(block.len()).any(|w| w == block));
    }
}
