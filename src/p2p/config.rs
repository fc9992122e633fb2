//! The P2P Store's settings, from `MC_P2P_*` variables.

use crate::config::number_in_range;
use std::time::Duration;

/// How a P2P store fetches and registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct P2pConfig {
    /// Shards one `get_replica` fetches at a time (`MC_P2P_CONCURRENCY`, 1-256,
    /// default 8: a receiver that reads from peers which each serve several others
    /// needs that many to fill its link).
    pub concurrency: usize,
    /// Shards one `get_replica` asks of one source at a time (`MC_P2P_PER_SOURCE`,
    /// 1-256, default 2): a receiver spreads its fetches over the nodes with copies
    /// instead of crowding the one that registered the object.
    pub per_source: usize,
    /// The shard size `put` registers with (`MC_P2P_SHARD_SIZE`, bytes, 4 KiB-4 GiB,
    /// default 16 MiB): smaller shards start spreading sooner.
    pub shard_size: u64,
    /// Whether `register` computes each shard's CRC-32C and receivers check the shards
    /// that carry one (`MC_P2P_CHECKSUM`, `0` to turn off; default on).
    pub checksum: bool,
    /// How often a receiver re-reads the metadata for a shard no source is left for
    /// before it gives up (`MC_P2P_NO_SOURCE_RETRIES`, 0-100, default 5; backing off
    /// from 100 ms to 1 s).
    pub no_source_retries: u32,
    /// The shortest time between two rewrites of the payload by one receiver
    /// (`MC_P2P_PUBLISH_MS`, 10-10000 ms, default 100): the shards that land
    /// meanwhile are published in one compare-and-swap. Longer eases the metadata
    /// store when many receivers fetch one object; shorter spreads new copies sooner.
    pub publish_gap: Duration,
}

impl Default for P2pConfig {
    fn default() -> P2pConfig {
        P2pConfig {
            concurrency: 8,
            per_source: 2,
            shard_size: 16 << 20,
            checksum: true,
            no_source_retries: 5,
            publish_gap: Duration::from_millis(100),
        }
    }
}

impl P2pConfig {
    /// The settings from the environment (defaults where unset or out of range).
    pub fn from_env() -> P2pConfig {
        P2pConfig::from_lookup(|name| std::env::var(name).ok())
    }

    /// The settings from `get` (a variable's value by name).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> P2pConfig {
        let d = P2pConfig::default();
        let num = |name: &str, lo: u64, hi: u64, default: u64| {
            number_in_range(get(name).as_deref(), name, lo, hi).unwrap_or(default)
        };
        P2pConfig {
            concurrency: num("MC_P2P_CONCURRENCY", 1, 256, d.concurrency as u64) as usize,
            per_source: num("MC_P2P_PER_SOURCE", 1, 256, d.per_source as u64) as usize,
            shard_size: num("MC_P2P_SHARD_SIZE", 4096, 4 << 30, d.shard_size),
            checksum: get("MC_P2P_CHECKSUM").map_or(true, |v| v.trim() != "0"),
            no_source_retries: num("MC_P2P_NO_SOURCE_RETRIES", 0, 100, 5) as u32,
            publish_gap: Duration::from_millis(num(
                "MC_P2P_PUBLISH_MS",
                10,
                10_000,
                d.publish_gap.as_millis() as u64,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_override_defaults_within_their_ranges() {
        let env = |pairs: &'static [(&str, &str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(P2pConfig::from_lookup(env(&[])), P2pConfig::default());
        let c = P2pConfig::from_lookup(env(&[
            ("MC_P2P_CONCURRENCY", "12"),
            ("MC_P2P_PER_SOURCE", "3"),
            ("MC_P2P_SHARD_SIZE", "1048576"),
            ("MC_P2P_CHECKSUM", "0"),
            ("MC_P2P_NO_SOURCE_RETRIES", "1"),
            ("MC_P2P_PUBLISH_MS", "250"),
        ]));
        assert_eq!(
            c,
            P2pConfig {
                concurrency: 12,
                per_source: 3,
                shard_size: 1 << 20,
                checksum: false,
                no_source_retries: 1,
                publish_gap: Duration::from_millis(250),
            }
        );
        let c = P2pConfig::from_lookup(env(&[
            ("MC_P2P_CONCURRENCY", "0"),
            ("MC_P2P_SHARD_SIZE", "12"),
            ("MC_P2P_PUBLISH_MS", "1"),
        ]));
        assert_eq!(c, P2pConfig::default());
    }
}
