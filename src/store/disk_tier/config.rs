//! The owner's disk-tier settings: upstream's `MOONCAKE_OFFLOAD_*` environment (spec
//! tiers-events-conductor.md §1.7; each also read without `OFFLOAD_`), and the
//! directory given to `setup`, which wins over the environment's.

use crate::store::error::{StoreError, StoreResult};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// The disk tier of one client.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskTierConfig {
    /// `MOONCAKE_OFFLOAD_FILE_STORAGE_PATH` (`/data/file_storage`), or `setup`'s path.
    pub path: PathBuf,
    /// `MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES` (1.25 GiB): registered memory where
    /// objects read from disk are staged for readers.
    pub staging_bytes: u64,
    /// `MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES` (2 TiB): what the disk may hold (sent
    /// to the master as its capacity).
    pub total_size_limit: u64,
    /// `MOONCAKE_OFFLOAD_TOTAL_KEYS_LIMIT` (10 M objects).
    pub total_keys_limit: u64,
    /// `MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS` (10): how often offload tasks are
    /// fetched.
    pub heartbeat_interval: Duration,
    /// `MOONCAKE_OFFLOAD_CLIENT_BUFFER_GC_TTL_MS` (5000): staged objects a reader never
    /// released are freed after this.
    pub gc_ttl: Duration,
    /// `MOONCAKE_OFFLOAD_BUCKET_KEYS_LIMIT` (500): objects per bucket file.
    pub bucket_keys_limit: u64,
    /// `MOONCAKE_OFFLOAD_BUCKET_SIZE_LIMIT_BYTES` (256 MiB): bytes per bucket file.
    pub bucket_size_limit: u64,
    /// `MOONCAKE_OFFLOAD_ENABLE_DISK_WATERMARK_EVICTION` (true).
    pub watermark_eviction: bool,
    /// `MOONCAKE_OFFLOAD_DISK_EVICTION_HIGH_WATERMARK_RATIO` (0.90) of the size limit:
    /// oldest buckets are deleted above it...
    pub high_watermark: f64,
    /// `MOONCAKE_OFFLOAD_DISK_EVICTION_LOW_WATERMARK_RATIO` (0.80): ...down to this.
    pub low_watermark: f64,
}

impl Default for DiskTierConfig {
    fn default() -> Self {
        DiskTierConfig {
            path: PathBuf::from("/data/file_storage"),
            staging_bytes: 1_342_177_280,
            total_size_limit: 2 << 40,
            total_keys_limit: 10_000_000,
            heartbeat_interval: Duration::from_secs(10),
            gc_ttl: Duration::from_millis(5000),
            bucket_keys_limit: 500,
            bucket_size_limit: 256 << 20,
            watermark_eviction: true,
            high_watermark: 0.90,
            low_watermark: 0.80,
        }
    }
}

impl DiskTierConfig {
    /// From the environment `get` (a `MOONCAKE_OFFLOAD_X` variable or its alias
    /// `MOONCAKE_X`); `setup_path`, when not empty, is the directory. Malformed values
    /// keep their default, with a warning.
    pub fn from_env(get: impl Fn(&str) -> Option<String>, setup_path: &str) -> DiskTierConfig {
        let var = |name: &str| {
            get(&format!("MOONCAKE_OFFLOAD_{name}"))
                .or_else(|| get(&format!("MOONCAKE_{name}")))
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let num = |name: &str, default: u64| match var(name) {
            None => default,
            Some(v) => v.parse::<u64>().unwrap_or_else(|_| {
                log::warn!("MOONCAKE_OFFLOAD_{name}={v:?} is not a number; using {default}");
                default
            }),
        };
        let ratio = |name: &str, default: f64| match var(name) {
            None => default,
            Some(v) => match v.parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => r,
                _ => {
                    log::warn!("MOONCAKE_OFFLOAD_{name}={v:?} is not a ratio; using {default}");
                    default
                }
            },
        };
        let d = DiskTierConfig::default();
        let path = if setup_path.is_empty() {
            var("FILE_STORAGE_PATH").map_or(d.path.clone(), PathBuf::from)
        } else {
            PathBuf::from(setup_path)
        };
        DiskTierConfig {
            path,
            staging_bytes: num("LOCAL_BUFFER_SIZE_BYTES", d.staging_bytes),
            total_size_limit: num("TOTAL_SIZE_LIMIT_BYTES", d.total_size_limit),
            total_keys_limit: num("TOTAL_KEYS_LIMIT", d.total_keys_limit),
            heartbeat_interval: Duration::from_secs(num("HEARTBEAT_INTERVAL_SECONDS", 10).max(1)),
            gc_ttl: Duration::from_millis(num("CLIENT_BUFFER_GC_TTL_MS", 5000)),
            bucket_keys_limit: num("BUCKET_KEYS_LIMIT", d.bucket_keys_limit).max(1),
            bucket_size_limit: num("BUCKET_SIZE_LIMIT_BYTES", d.bucket_size_limit).max(1),
            watermark_eviction: var("ENABLE_DISK_WATERMARK_EVICTION").map_or(true, |v| {
                !matches!(v.as_str(), "0" | "false" | "FALSE" | "False")
            }),
            high_watermark: ratio("DISK_EVICTION_HIGH_WATERMARK_RATIO", d.high_watermark),
            low_watermark: ratio("DISK_EVICTION_LOW_WATERMARK_RATIO", d.low_watermark),
        }
    }

    /// Upstream's path checks: absolute, an existing directory, not a symlink, no `..`
    /// (-600 otherwise).
    pub fn check_path(&self) -> StoreResult<()> {
        let p: &Path = &self.path;
        let refused = |why: &dyn std::fmt::Display| {
            Err(StoreError::invalid(format!("{}: {why}", p.display())))
        };
        if !p.is_absolute() {
            return refused(&"not an absolute path");
        }
        if p.components().any(|c| c == Component::ParentDir) {
            return refused(&"contains '..'");
        }
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => refused(&"is a symbolic link"),
            Ok(m) if m.is_dir() => Ok(()),
            Ok(_) => refused(&"not a directory"),
            Err(e) => refused(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::master_api::ErrorCode;
    use std::collections::HashMap;

    #[test]
    fn environment_aliases_and_setup_path() {
        let env: HashMap<&str, &str> = [
            ("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", "/env/path"),
            ("MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS", "1"),
            ("MOONCAKE_BUCKET_KEYS_LIMIT", "4"),
            ("MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES", "not a number"),
            ("MOONCAKE_OFFLOAD_DISK_EVICTION_HIGH_WATERMARK_RATIO", "0.5"),
            ("MOONCAKE_OFFLOAD_ENABLE_DISK_WATERMARK_EVICTION", "false"),
        ]
        .into();
        let get = |k: &str| env.get(k).map(|v| v.to_string());
        let c = DiskTierConfig::from_env(get, "");
        assert_eq!(c.path, PathBuf::from("/env/path"));
        assert_eq!(c.heartbeat_interval, Duration::from_secs(1));
        assert_eq!(c.bucket_keys_limit, 4);
        assert_eq!(c.staging_bytes, DiskTierConfig::default().staging_bytes);
        assert_eq!(c.high_watermark, 0.5);
        assert!(!c.watermark_eviction);
        let c = DiskTierConfig::from_env(get, "/setup/path");
        assert_eq!(c.path, PathBuf::from("/setup/path"));
        assert_eq!(
            DiskTierConfig::from_env(|_| None, ""),
            DiskTierConfig::default()
        );
    }

    #[test]
    fn path_checks() {
        let mut c = DiskTierConfig {
            path: "relative".into(),
            ..DiskTierConfig::default()
        };
        assert_eq!(c.check_path().unwrap_err(), ErrorCode::INVALID_PARAMS);
        c.path = "/tmp/../tmp".into();
        assert!(c.check_path().is_err());
        c.path = std::env::temp_dir();
        assert!(c.check_path().is_ok());
        c.path = "/nonexistent-mooncake-dir".into();
        assert!(c.check_path().is_err());
    }
}
