//! The metadata value of one object, exactly as upstream's Go P2P store writes it
//! under `mooncake/checkpoint/<name>`: its size, the sizes of the buffers it was
//! registered from, the shard size, and per shard where it can be read (`gold`: the
//! registering node's copy; `replica_list`: copies other nodes fetched).
//!
//! One extension: a shard may carry `crc32c`, the CRC-32C of its bytes, which our
//! receivers check. Go's decoder ignores the field; a Go node that rewrites the value
//! drops it, and the shards then go unchecked.

use super::error::{P2pError, P2pResult};
use serde::{Deserialize, Deserializer, Serialize};

/// Where a copy of a shard lives: a Transfer Engine segment and the address in it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Location {
    /// The segment (node) name.
    pub segment_name: String,
    /// The shard's address in that node's memory.
    pub offset: u64,
}

/// One shard of an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Its length in bytes.
    pub size: u64,
    /// The copies of the nodes that registered the object.
    #[serde(default, deserialize_with = "null_is_empty")]
    pub gold: Vec<Location>,
    /// The copies other nodes fetched.
    #[serde(default, deserialize_with = "null_is_empty")]
    pub replica_list: Vec<Location>,
    /// CRC-32C of the shard's bytes, when the registering node computed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc32c: Option<u32>,
}

/// The metadata value of one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// The object's name.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// The sizes of the buffers it was registered from.
    #[serde(default, deserialize_with = "null_is_empty")]
    pub size_list: Vec<u64>,
    /// The largest shard.
    pub max_shard_size: u64,
    /// Its shards, in the order of its bytes.
    #[serde(default, deserialize_with = "null_is_empty")]
    pub shards: Vec<Shard>,
}

/// The most shards one object may have (a larger count is a corrupt value, not a
/// request to allocate).
pub const MAX_SHARDS: usize = 1 << 24;

/// Go encodes an empty slice as `null`.
fn null_is_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

impl Shard {
    /// Every location of the shard: gold first, then replicas.
    pub fn locations(&self) -> impl Iterator<Item = &Location> {
        self.gold.iter().chain(&self.replica_list)
    }

    /// Whether `segment` holds a copy of the shard.
    pub fn held_by(&self, segment: &str) -> bool {
        self.locations().any(|l| l.segment_name == segment)
    }
}

impl Payload {
    /// The payload of an object registered from buffers of `sizes` bytes by
    /// `segment`, its shards at `addrs` (one per buffer) cut every `max_shard_size`
    /// bytes, with the CRC-32C of each shard when `crcs` gives them.
    pub fn registered(
        name: &str,
        segment: &str,
        buffers: &[(u64, u64)],
        max_shard_size: u64,
        crcs: Option<&[u32]>,
    ) -> Payload {
        let mut shards = Vec::new();
        for &(addr, size) in buffers {
            for (offset, len) in cuts(size, max_shard_size) {
                shards.push(Shard {
                    size: len,
                    gold: vec![Location {
                        segment_name: segment.to_string(),
                        offset: addr + offset,
                    }],
                    replica_list: Vec::new(),
                    crc32c: crcs.and_then(|c| c.get(shards.len()).copied()),
                });
            }
        }
        Payload {
            name: name.to_string(),
            size: buffers.iter().map(|&(_, s)| s).sum(),
            size_list: buffers.iter().map(|&(_, s)| s).collect(),
            max_shard_size,
            shards,
        }
    }

    /// Decodes and checks a metadata value (never trusting its sizes).
    pub fn decode(name: &str, bytes: &[u8]) -> P2pResult<Payload> {
        let corrupt = |why: String| P2pError::Corrupt {
            name: name.to_string(),
            why,
        };
        let payload: Payload = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
        payload.check().map_err(corrupt)?;
        Ok(payload)
    }

    /// The value to store.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Whether the sizes agree: shards within `max_shard_size` that add up to `size`,
    /// as the buffer sizes do.
    fn check(&self) -> Result<(), String> {
        if self.shards.len() > MAX_SHARDS {
            return Err(format!(
                "{} shards (at most {MAX_SHARDS})",
                self.shards.len()
            ));
        }
        if self.max_shard_size == 0 {
            return Err("max_shard_size is 0".into());
        }
        let mut total = 0u64;
        for (i, shard) in self.shards.iter().enumerate() {
            if shard.size == 0 || shard.size > self.max_shard_size {
                return Err(format!(
                    "shard {i} has {} bytes (1 to {})",
                    shard.size, self.max_shard_size
                ));
            }
            if shard.locations().any(|l| l.segment_name.is_empty()) {
                return Err(format!("shard {i} has a location without a segment"));
            }
            total = total
                .checked_add(shard.size)
                .ok_or("the shard sizes overflow")?;
        }
        if total != self.size {
            return Err(format!(
                "shards add up to {total} bytes, size is {}",
                self.size
            ));
        }
        let listed = self
            .size_list
            .iter()
            .try_fold(0u64, |a, &s| a.checked_add(s))
            .ok_or("the buffer sizes overflow")?;
        if !self.size_list.is_empty() && listed != self.size {
            return Err(format!(
                "buffer sizes add up to {listed} bytes, size is {}",
                self.size
            ));
        }
        Ok(())
    }

    /// Whether no shard has a location left (upstream then deletes the key).
    pub fn is_empty(&self) -> bool {
        self.shards
            .iter()
            .all(|s| s.gold.is_empty() && s.replica_list.is_empty())
    }

    /// Removes every location of `segment` (gold and replicas); whether any was.
    pub fn remove_segment(&mut self, segment: &str) -> bool {
        let mut removed = false;
        for shard in &mut self.shards {
            let before = shard.gold.len() + shard.replica_list.len();
            shard.gold.retain(|l| l.segment_name != segment);
            shard.replica_list.retain(|l| l.segment_name != segment);
            removed |= before != shard.gold.len() + shard.replica_list.len();
        }
        removed
    }

    /// Adds `location` as a replica of shard `index` (unless it is listed already);
    /// whether it was added.
    pub fn add_replica(&mut self, index: usize, location: Location) -> bool {
        let Some(shard) = self.shards.get_mut(index) else {
            return false;
        };
        if shard.locations().any(|l| *l == location) {
            return false;
        }
        shard.replica_list.push(location);
        true
    }

    /// The shard sizes, in order (what a receiver lays out).
    pub fn shard_sizes(&self) -> Vec<u64> {
        self.shards.iter().map(|s| s.size).collect()
    }
}

/// `(offset, len)` of each shard of a buffer of `size` bytes cut every `max` bytes.
pub fn cuts(size: u64, max: u64) -> impl Iterator<Item = (u64, u64)> {
    let max = max.max(1);
    (0..size.div_ceil(max)).map(move |i| {
        let offset = i * max;
        (offset, max.min(size - offset))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value as upstream's Go store marshals it (struct order, `null` slices).
    const GO_VALUE: &str = r#"{"name":"ckpt","size":5,"size_list":[3,2],"max_shard_size":2,"shards":[{"size":2,"gold":[{"segment_name":"10.0.0.1:12345","offset":4096}],"replica_list":null},{"size":1,"gold":[{"segment_name":"10.0.0.1:12345","offset":4098}],"replica_list":[{"segment_name":"10.0.0.2:12345","offset":8192}]},{"size":2,"gold":[{"segment_name":"10.0.0.1:12345","offset":65536}],"replica_list":null}]}"#;

    #[test]
    fn reads_what_go_writes_and_writes_what_go_reads() {
        let p = Payload::decode("ckpt", GO_VALUE.as_bytes()).unwrap();
        assert_eq!(p.shard_sizes(), [2, 1, 2]);
        assert_eq!(p.shards[1].replica_list[0].offset, 8192);
        assert!(p.shards[0].replica_list.is_empty());
        let ours = Payload::registered("ckpt", "10.0.0.1:12345", &[(4096, 3), (65536, 2)], 2, None);
        assert_eq!(ours.shard_sizes(), p.shard_sizes());
        assert_eq!(ours.shards[0].gold, p.shards[0].gold);
        let text = String::from_utf8(ours.encode()).unwrap();
        assert!(text.starts_with(r#"{"name":"ckpt","size":5,"size_list":[3,2],"max_shard_size":2,"shards":[{"size":2,"gold":[{"segment_name":"10.0.0.1:12345","offset":4096}],"replica_list":[]}"#), "{text}");
        assert!(!text.contains("crc32c"));
    }

    /// What upstream's Go example (0.3.x, `-cmd trainer -file_size_mb 130`) wrote to
    /// etcd on this project's library, read back from etcd byte for byte.
    const GO_TRAINER_VALUE: &str = r#"{"name":"foo/bar","size":136314880,"size_list":[136314880],"max_shard_size":67108864,"shards":[{"size":67108864,"gold":[{"segment_name":"127.0.0.1:12345","offset":139912181448704}],"replica_list":null},{"size":67108864,"gold":[{"segment_name":"127.0.0.1:12345","offset":139912248557568}],"replica_list":null},{"size":2097152,"gold":[{"segment_name":"127.0.0.1:12345","offset":139912315666432}],"replica_list":null}]}"#;

    #[test]
    fn a_payload_upstreams_go_example_wrote_reads_and_writes_back_alike() {
        let p = Payload::decode("foo/bar", GO_TRAINER_VALUE.as_bytes()).unwrap();
        assert_eq!(p.shard_sizes(), [64 << 20, 64 << 20, 2 << 20]);
        assert_eq!(p.shards[2].gold[0].offset, 139912315666432);
        let ours = Payload::registered(
            "foo/bar",
            "127.0.0.1:12345",
            &[(139912181448704, 130 << 20)],
            64 << 20,
            None,
        );
        assert_eq!(ours, p, "registering the same buffer describes it alike");
        let text = String::from_utf8(ours.encode()).unwrap();
        // Go writes `null` for an empty replica list; the rest is byte for byte.
        assert_eq!(text.replace("[]", "null"), GO_TRAINER_VALUE);
    }

    #[test]
    fn crcs_travel_with_their_shards() {
        let p = Payload::registered("x", "a:1", &[(0, 5)], 2, Some(&[7, 8, 9]));
        let back = Payload::decode("x", &p.encode()).unwrap();
        let crcs: Vec<_> = back.shards.iter().map(|s| s.crc32c).collect();
        assert_eq!(crcs, [Some(7), Some(8), Some(9)]);
    }

    #[test]
    fn corrupt_values_are_refused_with_the_reason() {
        let cases = [
            ("not json", "expected"),
            (
                r#"{"name":"x","size":3,"size_list":[3],"max_shard_size":0,"shards":[]}"#,
                "max_shard_size is 0",
            ),
            (
                r#"{"name":"x","size":3,"size_list":[3],"max_shard_size":2,"shards":[{"size":3,"gold":[]}]}"#,
                "shard 0 has 3 bytes",
            ),
            (
                r#"{"name":"x","size":9,"size_list":[9],"max_shard_size":2,"shards":[{"size":2,"gold":[]}]}"#,
                "add up to 2 bytes",
            ),
            (
                r#"{"name":"x","size":2,"size_list":[5],"max_shard_size":2,"shards":[{"size":2,"gold":[]}]}"#,
                "buffer sizes add up to 5",
            ),
            (
                r#"{"name":"x","size":2,"size_list":[2],"max_shard_size":2,"shards":[{"size":2,"gold":[{"segment_name":"","offset":1}]}]}"#,
                "without a segment",
            ),
            (
                r#"{"name":"x","size":18446744073709551615,"size_list":[],"max_shard_size":18446744073709551615,"shards":[{"size":18446744073709551615},{"size":18446744073709551615}]}"#,
                "overflow",
            ),
        ];
        for (value, why) in cases {
            match Payload::decode("x", value.as_bytes()) {
                Err(P2pError::Corrupt { why: got, .. }) => {
                    assert!(got.contains(why), "{value}: {got}")
                }
                other => panic!("{value}: {other:?}"),
            }
        }
    }

    #[test]
    fn locations_come_and_go_by_segment() {
        let mut p = Payload::registered("x", "seed:1", &[(100, 4)], 2, None);
        let at = |s: &str, o| Location {
            segment_name: s.into(),
            offset: o,
        };
        assert!(p.add_replica(1, at("r:1", 7)));
        assert!(!p.add_replica(1, at("r:1", 7)), "listed once");
        assert!(!p.add_replica(5, at("r:1", 7)), "no such shard");
        assert!(p.shards[1].held_by("r:1") && !p.shards[0].held_by("r:1"));
        assert!(p.remove_segment("seed:1"));
        assert!(!p.is_empty());
        assert!(p.remove_segment("r:1"));
        assert!(p.is_empty());
        assert!(!p.remove_segment("r:1"));
    }

    #[test]
    fn buffers_are_cut_every_max_shard_size() {
        let all: Vec<_> = cuts(5, 2).collect();
        assert_eq!(all, [(0, 2), (2, 2), (4, 1)]);
        assert_eq!(cuts(0, 2).count(), 0);
        assert_eq!(cuts(4, 2).count(), 2);
    }
}
