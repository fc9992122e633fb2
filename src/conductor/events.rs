//! KV-event payloads, as the conductor reads them: a Mooncake master's (maps, spec
//! §2.6) and an inference engine's in vLLM's format (tagged arrays), both inside the
//! `[timestamp, [events...], dp_rank]` envelope. Decoding never panics; what cannot be
//! read is counted and skipped.

use regex::Regex;

use super::index::medium;
use crate::codec::msgpack_decode::{decode, DecodeError, Value};
use crate::wire::kv_key_hash::seq_hash;

/// What a KV event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockEvent {
    /// The publisher now holds these blocks in `medium`.
    Stored {
        /// Block hashes.
        hashes: Vec<u64>,
        /// Medium bits ([`medium`]).
        medium: u8,
    },
    /// The publisher dropped these blocks from `medium`.
    Removed {
        /// Block hashes.
        hashes: Vec<u64>,
        /// Medium bits ([`medium`]).
        medium: u8,
    },
    /// The publisher dropped everything.
    Cleared,
}

/// How object keys without a hash are read.
#[derive(Debug, Clone, Default)]
pub struct KeyReader {
    /// A pattern whose first capture group is the key's block hash (decimal or
    /// `0x` hexadecimal), for keys that embed it (connector keys with model and rank
    /// prefixes). Without one, only keys that are a hash themselves are read.
    pub pattern: Option<Regex>,
}

impl KeyReader {
    /// The block hash an object key stands for.
    pub fn hash_of(&self, key: &str) -> Option<u64> {
        if let Some(h) = seq_hash(key) {
            return Some(h);
        }
        let captured = self.pattern.as_ref()?.captures(key)?.get(1)?.as_str();
        seq_hash(captured)
    }
}

/// A decoded batch: its events and the ones that could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// Events read.
    pub events: Vec<BlockEvent>,
    /// Events skipped (unknown type, no hash to index by).
    pub skipped: u64,
}

/// Why a payload frame is not an event batch.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BatchError {
    /// The frame is not msgpack.
    #[error(transparent)]
    Msgpack(#[from] DecodeError),
    /// The frame is not the `[timestamp, events, dp_rank]` envelope.
    #[error("the payload is not a [timestamp, events, dp_rank] array")]
    NotEnvelope,
    /// The envelope's second element is not a list of events.
    #[error("the payload's second element is not an array of events")]
    NoEvents,
}

/// Decodes one payload frame; `Err` when it is not an event batch at all.
pub fn decode_batch(payload: &[u8], keys: &KeyReader) -> Result<Batch, BatchError> {
    let value = decode(payload)?;
    let envelope = value
        .as_array()
        .filter(|a| a.len() >= 2)
        .ok_or(BatchError::NotEnvelope)?;
    let events = envelope[1].as_array().ok_or(BatchError::NoEvents)?;
    let mut batch = Batch::default();
    for e in events {
        match read_event(e, keys) {
            Some(event) => batch.events.push(event),
            None => batch.skipped += 1,
        }
    }
    Ok(batch)
}

/// One event: a map (Mooncake master, or engines sending maps) or a tagged array
/// (vLLM).
fn read_event(e: &Value, keys: &KeyReader) -> Option<BlockEvent> {
    match e {
        Value::Map(_) => read_map_event(e, keys),
        Value::Array(items) => read_tagged_event(items),
        _ => None,
    }
}

/// `event_type` (`stored`/`removed`/`cleared`) or the legacy `type`; hashes from
/// `seq_hashes`, else `block_hashes`, else the `object_key`.
fn read_map_event(e: &Value, keys: &KeyReader) -> Option<BlockEvent> {
    let kind = e
        .get("event_type")
        .and_then(Value::as_str)
        .or_else(|| e.get("type").and_then(Value::as_str))?;
    let medium = e
        .get("medium")
        .and_then(Value::as_str)
        .and_then(medium::parse)
        .unwrap_or(medium::CPU);
    let hashes = || -> Option<Vec<u64>> {
        for field in ["seq_hashes", "block_hashes"] {
            if let Some(list) = e.get(field).and_then(Value::as_array) {
                let hashes: Vec<u64> = list.iter().filter_map(hash_value).collect();
                if !hashes.is_empty() {
                    return Some(hashes);
                }
            }
        }
        let key = e.get("object_key").and_then(Value::as_str)?;
        Some(vec![keys.hash_of(key)?])
    };
    match kind {
        "stored" | "BlockStored" => Some(BlockEvent::Stored {
            hashes: hashes()?,
            medium,
        }),
        "removed" | "BlockRemoved" => Some(BlockEvent::Removed {
            hashes: hashes()?,
            medium,
        }),
        "cleared" | "AllBlocksCleared" => Some(BlockEvent::Cleared),
        _ => None,
    }
}

/// vLLM's tagged arrays: `["BlockStored", hashes, parent, token_ids, block_size,
/// lora_id, medium?]`, `["BlockRemoved", hashes, medium?]`, `["AllBlocksCleared"]`.
fn read_tagged_event(items: &[Value]) -> Option<BlockEvent> {
    let tag = items.first()?.as_str()?;
    let hashes = |v: Option<&Value>| -> Option<Vec<u64>> {
        let list = v?.as_array()?;
        let hashes: Vec<u64> = list.iter().filter_map(hash_value).collect();
        (!hashes.is_empty()).then_some(hashes)
    };
    let medium_at = |i: usize| {
        items
            .get(i)
            .and_then(Value::as_str)
            .and_then(medium::parse)
            .unwrap_or(medium::GPU)
    };
    match tag {
        "BlockStored" => Some(BlockEvent::Stored {
            hashes: hashes(items.get(1))?,
            medium: medium_at(6),
        }),
        "BlockRemoved" => Some(BlockEvent::Removed {
            hashes: hashes(items.get(1))?,
            medium: medium_at(2),
        }),
        "AllBlocksCleared" => Some(BlockEvent::Cleared),
        _ => None,
    }
}

/// A block hash: an integer (signed ones as their u64 bits), or bytes (the last
/// eight, big-endian, as vLLM's byte hashes are projected).
fn hash_value(v: &Value) -> Option<u64> {
    match v {
        Value::Bin(b) if !b.is_empty() => {
            let tail = &b[b.len().saturating_sub(8)..];
            Some(tail.iter().fold(0u64, |a, x| (a << 8) | u64::from(*x)))
        }
        _ => v.as_u64_wrapping(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::msgpack::Encoder;

    fn envelope(events: impl FnOnce(&mut Encoder), n: u32) -> Vec<u8> {
        let mut e = Encoder::new();
        e.array(3);
        e.int(1_700_000_000_000);
        e.array(n);
        events(&mut e);
        e.uint(0);
        e.into_bytes()
    }

    #[test]
    fn reads_mooncake_map_events() {
        let payload = envelope(
            |e| {
                e.map(4);
                e.str("event_type");
                e.str("stored");
                e.str("medium");
                e.str("disk");
                e.str("object_key");
                e.str("0x2a");
                e.str("seq_hashes");
                e.array(0);
                e.map(3);
                e.str("event_type");
                e.str("removed");
                e.str("block_hashes");
                e.array(1);
                e.int(-1);
                e.str("medium");
                e.str("cpu");
                e.map(2);
                e.str("event_type");
                e.str("stored");
                e.str("object_key");
                e.str("model@7@not-a-hash");
            },
            3,
        );
        let batch = decode_batch(&payload, &KeyReader::default()).unwrap();
        assert_eq!(
            batch.events,
            vec![
                BlockEvent::Stored {
                    hashes: vec![42],
                    medium: medium::DISK
                },
                BlockEvent::Removed {
                    hashes: vec![u64::MAX],
                    medium: medium::CPU
                },
            ]
        );
        assert_eq!(batch.skipped, 1);
        let keys = KeyReader {
            pattern: Some(Regex::new(r"@(\d+)@").unwrap()),
        };
        assert_eq!(keys.hash_of("model@7@not-a-hash"), Some(7));
    }

    #[test]
    fn reads_vllm_tagged_events() {
        let payload = envelope(
            |e| {
                e.array(7);
                e.str("BlockStored");
                e.array(2);
                e.uint(5);
                e.uint(6);
                e.nil();
                e.array(0);
                e.uint(16);
                e.nil();
                e.str("GPU");
                e.array(2);
                e.str("BlockRemoved");
                e.array(1);
                e.uint(5);
                e.array(1);
                e.str("AllBlocksCleared");
            },
            3,
        );
        let batch = decode_batch(&payload, &KeyReader::default()).unwrap();
        assert_eq!(
            batch.events,
            vec![
                BlockEvent::Stored {
                    hashes: vec![5, 6],
                    medium: medium::GPU
                },
                BlockEvent::Removed {
                    hashes: vec![5],
                    medium: medium::GPU
                },
                BlockEvent::Cleared,
            ]
        );
    }

    #[test]
    fn refuses_payloads_that_are_not_batches() {
        let keys = KeyReader::default();
        assert!(decode_batch(&[0x01], &keys).is_err());
        assert!(decode_batch(&[0x92, 0x01, 0x02], &keys).is_err());
        assert!(decode_batch(&[], &keys).is_err());
        assert_eq!(
            hash_value(&Value::Bin(vec![9; 32])),
            Some(0x0909_0909_0909_0909)
        );
    }
}
