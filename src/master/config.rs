//! The master's tunables (spec store.md §3.5, "Core" and "Cache policy" groups), with
//! upstream's flag names and defaults. Parsing the command line is the binary's job;
//! [`MasterConfig::set`] applies one `--name=value` pair.

use std::time::Duration;

/// Why a master flag or config file was refused.
#[derive(Debug, thiserror::Error)]
pub enum MasterConfigError {
    /// A flag this master does not know.
    #[error("unknown master flag: {0}")]
    UnknownFlag(String),
    /// A duration flag's value.
    #[error(transparent)]
    Duration(#[from] DurationError),
    /// A boolean flag's value.
    #[error("not a boolean: {value:?}")]
    NotBool {
        /// The value as given.
        value: String,
    },
    /// A flag's value is not a number of the flag's type (`what`: `an integer`, `a
    /// non-negative integer`, `a number`).
    #[error("{name}: not {what}: {value:?}")]
    NotNumber {
        /// The flag.
        name: String,
        /// The kind of number it takes.
        what: &'static str,
        /// The value as given.
        value: String,
    },
    /// A ratio outside [0, 1].
    #[error("{name} must be between 0.0 and 1.0, got {value}")]
    RatioOutOfRange {
        /// The flag.
        name: String,
        /// The ratio.
        value: f64,
    },
    /// A count above the flag's limit.
    #[error("{name}: at most {max}, got {value}")]
    AboveLimit {
        /// The flag.
        name: String,
        /// Its limit.
        max: u64,
        /// The count given.
        value: u64,
    },
    /// A value that is none of the flag's choices (`what`: `strategy`, `allocator`).
    #[error("{name}: unknown {what} {value:?}")]
    UnknownChoice {
        /// The flag.
        name: String,
        /// What the flag chooses.
        what: &'static str,
        /// The value as given.
        value: String,
    },
    /// `put_start_release_timeout_sec` is not above `put_start_discard_timeout_sec`.
    #[error("put_start_release_timeout_sec must be larger than put_start_discard_timeout_sec")]
    ReleaseNotAfterDiscard,
    /// The config file is not JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The config file is JSON but not an object.
    #[error("not a JSON object")]
    NotObject,
}

/// The binaries keep their errors as text.
impl From<MasterConfigError> for String {
    fn from(e: MasterConfigError) -> String {
        e.to_string()
    }
}

/// Why a duration (upstream's `ParseDurationMs`) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The value does not start with a digit.
    #[error("duration {0:?} must start with a non-negative integer (units ms, s, m, h)")]
    NoNumber(String),
    /// The number does not fit in 64 bits.
    #[error("duration {0:?} is too large")]
    TooLarge(String),
    /// The unit is not `ms`, `s`, `m` or `h`.
    #[error("unsupported duration unit {0:?}; supported units are ms, s, m, and h")]
    UnknownUnit(String),
    /// The milliseconds do not fit in 64 bits.
    #[error("duration {0:?} is too large after unit conversion")]
    TooLargeInMs(String),
}

/// `--allocation_strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocationStrategy {
    /// Preferred segments first, then a random walk over segment names (default).
    #[default]
    Random,
    /// Preferred segments first, then sampled names by decreasing free ratio.
    FreeRatioFirst,
}

/// `--memory_allocator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryAllocator {
    /// Offset (bin) allocator, any object size up to a segment's free range (default).
    #[default]
    Offset,
    /// Cachelib semantics: segments 16 MiB aligned, objects at most 16 MiB - 16.
    Cachelib,
}

/// Largest object `--memory_allocator=cachelib` accepts (`kMaxSliceSize`).
pub const CACHELIB_MAX_OBJECT_SIZE: u64 = (1 << 24) - 16;

/// `--dynamic_replication_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DynamicMode {
    /// No heat is counted.
    Off,
    /// Heat is counted; a hot key is only logged.
    Observe,
    /// A hot key gets one more memory replica through a copy task.
    Enforce,
}

impl DynamicMode {
    /// The mode named `v` (exactly `off`, `observe` or `enforce`, as upstream).
    pub fn parse(v: &str) -> Option<DynamicMode> {
        match v {
            "off" => Some(DynamicMode::Off),
            "observe" => Some(DynamicMode::Observe),
            "enforce" => Some(DynamicMode::Enforce),
            _ => None,
        }
    }
}

/// Master configuration. Field names are upstream's flag names; durations are held as
/// [`Duration`] whatever unit the flag uses.
#[derive(Debug, Clone, PartialEq)]
pub struct MasterConfig {
    /// `--default_kv_lease_ttl` (ms, or `ms`/`s`/`m`/`h` suffix; default 10 s): read lease.
    pub default_kv_lease_ttl: Duration,
    /// `--default_kv_soft_pin_ttl` (default 30 min).
    pub default_kv_soft_pin_ttl: Duration,
    /// `--max_kv_soft_pin_ttl` (default 24 h): largest per-request soft-pin TTL.
    pub max_kv_soft_pin_ttl: Duration,
    /// `--allow_evict_soft_pinned_objects` (default true).
    pub allow_evict_soft_pinned_objects: bool,
    /// `--enable_disk_eviction` (default true): told to clients in `GetStorageConfig`,
    /// for the shared-file-system tier.
    pub enable_disk_eviction: bool,
    /// `--eviction_ratio` (default 0.05): fraction of evictable objects evicted per run.
    pub eviction_ratio: f64,
    /// `--eviction_high_watermark_ratio` (default 0.90): used ratio that triggers eviction.
    pub eviction_high_watermark_ratio: f64,
    /// `--client_ttl` (seconds, default 10): liveness deadline after a ping or mount.
    pub client_ttl: Duration,
    /// `--put_start_discard_timeout_sec` (default 30 s): age after which an unfinished
    /// put may be preempted by another PutStart of the same key.
    pub put_start_discard_timeout_sec: Duration,
    /// `--put_start_release_timeout_sec` (default 600 s): age after which the space of an
    /// unfinished or preempted put is freed.
    pub put_start_release_timeout_sec: Duration,
    /// `--allocation_strategy` (default `random`).
    pub allocation_strategy: AllocationStrategy,
    /// `--memory_allocator` (default `offset`).
    pub memory_allocator: MemoryAllocator,
    /// `--enable_multi_tenants` (default false): when off every tenant is `default`;
    /// when on, each tenant has its own keys and writes need a quota policy.
    pub enable_multi_tenants: bool,
    /// `--tenant_quota_connector_type` (default `file`): where the tenant quota policy
    /// is kept, `file` or `etcd`.
    pub tenant_quota_connector_type: String,
    /// `--tenant_quota_connector_uri`: the policy file's path, or the etcd endpoints.
    pub tenant_quota_connector_uri: String,
    /// `--cluster_id` (default `mooncake_cluster`): names the etcd key of the tenant
    /// quota policy (and the HA cluster, which the binary reads itself).
    pub cluster_id: String,
    /// HA view version reported by `Ping` (0 without HA). Not a flag.
    pub view_version: i64,
    /// Eviction thread period (upstream: 10 ms). Not a flag.
    pub eviction_interval: Duration,
    /// Client-liveness thread period (upstream: 1 s). Not a flag.
    pub client_monitor_interval: Duration,
    /// `--ha_sync_timeout_ms` (ours, default 2000): how long an RPC waits for a standby
    /// (or the snapshot writer) to acknowledge its changes before cutting it off.
    pub ha_sync_timeout: Duration,
    /// `--enable_offload` (default false): clients may mount local disks and keep
    /// objects there (the disk-tier RPCs answer -1300 otherwise).
    pub enable_offload: bool,
    /// `--offload_on_evict` (default false): objects are copied to their owner's disk
    /// when eviction picks them, not as soon as they are written.
    pub offload_on_evict: bool,
    /// `--offload_force_evict` (default false): with `offload_on_evict`, objects beyond
    /// the per-cycle offload cap are evicted without a disk copy.
    pub offload_force_evict: bool,
    /// `--offloading_queue_limit` (default 50000, at most 1e8): offload tasks queued
    /// per client disk.
    pub offloading_queue_limit: u64,
    /// `--offload_cap_ratio` (default 0.5): with `offload_on_evict`, one eviction run
    /// queues at most this fraction of `offloading_queue_limit`.
    pub offload_cap_ratio: f64,
    /// `--promotion_on_hit` (default false): a read served only from a disk copy asks
    /// the holder to copy the object back to memory.
    pub promotion_on_hit: bool,
    /// `--promotion_admission_threshold` (default 2): reads of a disk-only object
    /// before it is promoted (1 = the first).
    pub promotion_admission_threshold: u64,
    /// `--promotion_max_per_heartbeat` (default 1): promotion tasks handed out per
    /// heartbeat.
    pub promotion_max_per_heartbeat: u64,
    /// `--promotion_queue_limit` (default 50000): promotion tasks queued per client.
    pub promotion_queue_limit: u64,
    /// `--max_total_pending_tasks` (default 10000): copy/move tasks waiting to be
    /// fetched, at most; creating one more fails with -1401.
    pub max_total_pending_tasks: u64,
    /// `--max_total_processing_tasks` (default 10000): tasks being executed, at most;
    /// `FetchTasks` hands out fewer beyond.
    pub max_total_processing_tasks: u64,
    /// `--max_total_finished_tasks` (default 10000): ended tasks kept for `QueryTask`.
    pub max_total_finished_tasks: u64,
    /// `--pending_task_timeout_sec` (default 300, 0 = never): a task not fetched by
    /// then fails with "pending timeout".
    pub pending_task_timeout: Duration,
    /// `--processing_task_timeout_sec` (default 300, 0 = never): a task not reported
    /// by then (from its fetch) fails with "processing timeout".
    pub processing_task_timeout: Duration,
    /// `--max_retry_attempts` (default 10): how often a client retries a task that
    /// found no space (-200).
    pub max_retry_attempts: u32,
    /// `--dynamic_replication_mode` (default `off`): hot objects get more memory
    /// replicas (`enforce`) or are only logged (`observe`).
    pub dynamic_replication_mode: DynamicMode,
    /// `--dynamic_replication_heat_window_seconds` (default 10, 0 is 1): the window
    /// reads are counted in.
    pub dynamic_replication_heat_window: Duration,
    /// `--dynamic_replication_admission_qps_threshold` (default 0.8, above 0): reads
    /// per second of window that make a key hot.
    pub dynamic_replication_admission_qps_threshold: f64,
    /// `--dynamic_replication_max_memory_replicas` (default 2, 0 is 1): readable
    /// memory replicas at which a hot key gets no more.
    pub dynamic_replication_max_memory_replicas: u64,
}

impl Default for MasterConfig {
    fn default() -> Self {
        MasterConfig {
            default_kv_lease_ttl: Duration::from_millis(10_000),
            default_kv_soft_pin_ttl: Duration::from_millis(30 * 60 * 1000),
            max_kv_soft_pin_ttl: Duration::from_millis(24 * 60 * 60 * 1000),
            allow_evict_soft_pinned_objects: true,
            enable_disk_eviction: true,
            eviction_ratio: 0.05,
            eviction_high_watermark_ratio: 0.90,
            client_ttl: Duration::from_secs(10),
            put_start_discard_timeout_sec: Duration::from_secs(30),
            put_start_release_timeout_sec: Duration::from_secs(600),
            allocation_strategy: AllocationStrategy::Random,
            memory_allocator: MemoryAllocator::Offset,
            enable_multi_tenants: false,
            tenant_quota_connector_type: "file".into(),
            tenant_quota_connector_uri: String::new(),
            cluster_id: crate::wire::master_view::DEFAULT_CLUSTER_ID.into(),
            view_version: 0,
            eviction_interval: Duration::from_millis(10),
            client_monitor_interval: Duration::from_secs(1),
            ha_sync_timeout: Duration::from_millis(2000),
            enable_offload: false,
            offload_on_evict: false,
            offload_force_evict: false,
            offloading_queue_limit: 50_000,
            offload_cap_ratio: 0.5,
            promotion_on_hit: false,
            promotion_admission_threshold: 2,
            promotion_max_per_heartbeat: 1,
            promotion_queue_limit: 50_000,
            max_total_pending_tasks: 10_000,
            max_total_processing_tasks: 10_000,
            max_total_finished_tasks: 10_000,
            pending_task_timeout: Duration::from_secs(300),
            processing_task_timeout: Duration::from_secs(300),
            max_retry_attempts: 10,
            dynamic_replication_mode: DynamicMode::Off,
            dynamic_replication_heat_window: Duration::from_secs(10),
            dynamic_replication_admission_qps_threshold: 0.8,
            dynamic_replication_max_memory_replicas: 2,
        }
    }
}

/// The flags [`MasterConfig::set`] understands, each with whether it is a boolean.
pub const MASTER_CONFIG_FLAGS: &[(&str, bool)] = &[
    ("default_kv_lease_ttl", false),
    ("default_kv_soft_pin_ttl", false),
    ("max_kv_soft_pin_ttl", false),
    ("allow_evict_soft_pinned_objects", true),
    ("enable_disk_eviction", true),
    ("eviction_ratio", false),
    ("eviction_high_watermark_ratio", false),
    ("client_ttl", false),
    ("put_start_discard_timeout_sec", false),
    ("put_start_release_timeout_sec", false),
    ("allocation_strategy", false),
    ("memory_allocator", false),
    ("enable_multi_tenants", true),
    ("tenant_quota_connector_type", false),
    ("tenant_quota_connector_uri", false),
    ("ha_sync_timeout_ms", false),
    ("enable_offload", true),
    ("offload_on_evict", true),
    ("offload_force_evict", true),
    ("offloading_queue_limit", false),
    ("offload_cap_ratio", false),
    ("promotion_on_hit", true),
    ("promotion_admission_threshold", false),
    ("promotion_max_per_heartbeat", false),
    ("max_total_pending_tasks", false),
    ("max_total_processing_tasks", false),
    ("max_total_finished_tasks", false),
    ("pending_task_timeout_sec", false),
    ("processing_task_timeout_sec", false),
    ("max_retry_attempts", false),
    ("dynamic_replication_mode", false),
    ("dynamic_replication_heat_window_seconds", false),
    ("dynamic_replication_admission_qps_threshold", false),
    ("dynamic_replication_max_memory_replicas", false),
    ("promotion_queue_limit", false),
];

impl MasterConfig {
    /// Applies flag `name` (without dashes) with `value`. Unknown names and malformed
    /// values are errors; `allocation_strategy` values upstream knows but this master
    /// does not implement (`ssd_free_ratio_first`, `cxl`, `local_first`) fall back to
    /// `random` with a warning.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), MasterConfigError> {
        let v = value.trim();
        match name {
            "default_kv_lease_ttl" => self.default_kv_lease_ttl = parse_duration_ms(v)?,
            "default_kv_soft_pin_ttl" => self.default_kv_soft_pin_ttl = parse_duration_ms(v)?,
            "max_kv_soft_pin_ttl" => self.max_kv_soft_pin_ttl = parse_duration_ms(v)?,
            "allow_evict_soft_pinned_objects" => {
                self.allow_evict_soft_pinned_objects = parse_bool(v)?
            }
            "enable_disk_eviction" => self.enable_disk_eviction = parse_bool(v)?,
            "eviction_ratio" => self.eviction_ratio = parse_ratio(name, v)?,
            "eviction_high_watermark_ratio" => {
                self.eviction_high_watermark_ratio = parse_ratio(name, v)?
            }
            "client_ttl" => {
                let secs: i64 = v.parse().map_err(|_| MasterConfigError::NotNumber {
                    name: name.to_string(),
                    what: "an integer",
                    value: v.to_string(),
                })?;
                self.client_ttl = Duration::from_secs(secs.max(0) as u64);
            }
            "put_start_discard_timeout_sec" => {
                self.put_start_discard_timeout_sec = Duration::from_secs(parse_u64(name, v)?)
            }
            "put_start_release_timeout_sec" => {
                self.put_start_release_timeout_sec = Duration::from_secs(parse_u64(name, v)?)
            }
            "allocation_strategy" => {
                self.allocation_strategy = match v {
                    "random" => AllocationStrategy::Random,
                    "free_ratio_first" => AllocationStrategy::FreeRatioFirst,
                    "ssd_free_ratio_first" | "cxl" | "local_first" => {
                        log::warn!("allocation_strategy={v} is not implemented; using random");
                        AllocationStrategy::Random
                    }
                    _ => return Err(unknown_choice("allocation_strategy", "strategy", v)),
                }
            }
            "memory_allocator" => {
                self.memory_allocator = match v {
                    "offset" => MemoryAllocator::Offset,
                    "cachelib" => MemoryAllocator::Cachelib,
                    _ => return Err(unknown_choice("memory_allocator", "allocator", v)),
                }
            }
            "enable_multi_tenants" => self.enable_multi_tenants = parse_bool(v)?,
            "tenant_quota_connector_type" => self.tenant_quota_connector_type = v.to_string(),
            "tenant_quota_connector_uri" => self.tenant_quota_connector_uri = v.to_string(),
            "ha_sync_timeout_ms" => {
                self.ha_sync_timeout = Duration::from_millis(parse_u64(name, v)?.max(1))
            }
            "enable_offload" => self.enable_offload = parse_bool(v)?,
            "offload_on_evict" => self.offload_on_evict = parse_bool(v)?,
            "offload_force_evict" => self.offload_force_evict = parse_bool(v)?,
            "offloading_queue_limit" => {
                let n = parse_u64(name, v)?;
                if n > 100_000_000 {
                    return Err(MasterConfigError::AboveLimit {
                        name: name.to_string(),
                        max: 100_000_000,
                        value: n,
                    });
                }
                self.offloading_queue_limit = n;
            }
            "offload_cap_ratio" => self.offload_cap_ratio = parse_ratio(name, v)?,
            "promotion_on_hit" => self.promotion_on_hit = parse_bool(v)?,
            "promotion_admission_threshold" => {
                self.promotion_admission_threshold = parse_u64(name, v)?.max(1)
            }
            "promotion_max_per_heartbeat" => self.promotion_max_per_heartbeat = parse_u64(name, v)?,
            "promotion_queue_limit" => self.promotion_queue_limit = parse_u64(name, v)?,
            "max_total_pending_tasks" => self.max_total_pending_tasks = parse_u64(name, v)?,
            "max_total_processing_tasks" => self.max_total_processing_tasks = parse_u64(name, v)?,
            "max_total_finished_tasks" => self.max_total_finished_tasks = parse_u64(name, v)?,
            "pending_task_timeout_sec" => {
                self.pending_task_timeout = Duration::from_secs(parse_u64(name, v)?)
            }
            "processing_task_timeout_sec" => {
                self.processing_task_timeout = Duration::from_secs(parse_u64(name, v)?)
            }
            "dynamic_replication_mode" => {
                self.dynamic_replication_mode = DynamicMode::parse(v).ok_or_else(|| {
                    unknown_choice(
                        "dynamic_replication_mode",
                        "mode (off, observe, enforce)",
                        v,
                    )
                })?
            }
            "dynamic_replication_heat_window_seconds" => {
                let secs = parse_u64(name, v)?;
                if secs == 0 {
                    log::warn!("dynamic_replication_heat_window_seconds=0; clamping to 1");
                }
                self.dynamic_replication_heat_window = Duration::from_secs(secs.max(1))
            }
            "dynamic_replication_admission_qps_threshold" => {
                let qps: f64 = v.parse().map_err(|_| MasterConfigError::NotNumber {
                    name: name.to_string(),
                    what: "a number above 0",
                    value: v.to_string(),
                })?;
                if !(qps > 0.0 && qps.is_finite()) {
                    return Err(MasterConfigError::NotNumber {
                        name: name.to_string(),
                        what: "a number above 0",
                        value: v.to_string(),
                    });
                }
                self.dynamic_replication_admission_qps_threshold = qps
            }
            "dynamic_replication_max_memory_replicas" => {
                let n = parse_u64(name, v)?;
                if n == 0 {
                    log::warn!("dynamic_replication_max_memory_replicas=0; clamping to 1");
                }
                self.dynamic_replication_max_memory_replicas = n.max(1)
            }
            "max_retry_attempts" => {
                self.max_retry_attempts = u32::try_from(parse_u64(name, v)?).unwrap_or(u32::MAX)
            }
            _ => return Err(MasterConfigError::UnknownFlag(name.to_string())),
        }
        Ok(())
    }

    /// Upstream's start-up checks: ratios within [0, 1] and the release timeout longer
    /// than the discard timeout.
    pub fn validate(&self) -> Result<(), MasterConfigError> {
        for (name, r) in [
            ("eviction_ratio", self.eviction_ratio),
            (
                "eviction_high_watermark_ratio",
                self.eviction_high_watermark_ratio,
            ),
        ] {
            check_ratio(name, r)?;
        }
        if self.put_start_release_timeout_sec <= self.put_start_discard_timeout_sec {
            return Err(MasterConfigError::ReleaseNotAfterDiscard);
        }
        Ok(())
    }
}

/// The (name, value) pairs of a master config file: a JSON object with flag names as
/// keys; string values are taken as they are, others as their JSON text.
pub fn config_pairs(text: &str) -> Result<Vec<(String, String)>, MasterConfigError> {
    let value: serde_json::Value = serde_json::from_str(text)?;
    let obj = value.as_object().ok_or(MasterConfigError::NotObject)?;
    Ok(obj
        .iter()
        .map(|(k, v)| {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), v)
        })
        .collect())
}

/// Upstream's `ParseDurationMs`: a non-negative integer, optionally followed by `ms`,
/// `s`, `m` or `h` (case-insensitive, whitespace allowed); a bare number is milliseconds.
pub fn parse_duration_ms(value: &str) -> Result<Duration, DurationError> {
    let t = value.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(DurationError::NoNumber(value.to_string()));
    }
    let n: u64 = t[..digits]
        .parse()
        .map_err(|_| DurationError::TooLarge(value.to_string()))?;
    let mult: u64 = match t[digits..].trim().to_ascii_lowercase().as_str() {
        "" | "ms" => 1,
        "s" => 1000,
        "m" => 60 * 1000,
        "h" => 60 * 60 * 1000,
        other => return Err(DurationError::UnknownUnit(other.to_string())),
    };
    let ms = n
        .checked_mul(mult)
        .ok_or_else(|| DurationError::TooLargeInMs(value.to_string()))?;
    Ok(Duration::from_millis(ms))
}

fn parse_bool(v: &str) -> Result<bool, MasterConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "t" | "yes" | "y" | "1" => Ok(true),
        "false" | "f" | "no" | "n" | "0" => Ok(false),
        _ => Err(MasterConfigError::NotBool {
            value: v.to_string(),
        }),
    }
}

fn parse_u64(name: &str, v: &str) -> Result<u64, MasterConfigError> {
    v.parse().map_err(|_| MasterConfigError::NotNumber {
        name: name.to_string(),
        what: "a non-negative integer",
        value: v.to_string(),
    })
}

fn parse_ratio(name: &str, v: &str) -> Result<f64, MasterConfigError> {
    let r: f64 = v.parse().map_err(|_| MasterConfigError::NotNumber {
        name: name.to_string(),
        what: "a number",
        value: v.to_string(),
    })?;
    check_ratio(name, r)?;
    Ok(r)
}

fn check_ratio(name: &str, value: f64) -> Result<(), MasterConfigError> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(MasterConfigError::RatioOutOfRange {
            name: name.to_string(),
            value,
        })
    }
}

fn unknown_choice(name: &str, what: &'static str, v: &str) -> MasterConfigError {
    MasterConfigError::UnknownChoice {
        name: name.to_string(),
        what,
        value: v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration_ms("10000"),
            Ok(Duration::from_millis(10_000))
        );
        assert_eq!(parse_duration_ms("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration_ms(" 30m "), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration_ms("1H"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration_ms("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration_ms("0"), Ok(Duration::ZERO));
        assert!(parse_duration_ms("").is_err());
        assert!(parse_duration_ms("-1").is_err());
        assert!(parse_duration_ms("5d").is_err());
        assert!(parse_duration_ms("99999999999999999999").is_err());
        assert!(parse_duration_ms("18446744073709551615h").is_err());
    }

    #[test]
    fn set_and_validate() {
        let mut c = MasterConfig::default();
        assert!(c.validate().is_ok());
        c.set("default_kv_lease_ttl", "500").unwrap();
        assert_eq!(c.default_kv_lease_ttl, Duration::from_millis(500));
        c.set("client_ttl", "3").unwrap();
        assert_eq!(c.client_ttl, Duration::from_secs(3));
        c.set("allocation_strategy", "cxl").unwrap();
        assert_eq!(c.allocation_strategy, AllocationStrategy::Random);
        c.set("allocation_strategy", "free_ratio_first").unwrap();
        assert_eq!(c.allocation_strategy, AllocationStrategy::FreeRatioFirst);
        assert!(c.set("allocation_strategy", "bogus").is_err());
        c.set("memory_allocator", "cachelib").unwrap();
        assert_eq!(c.memory_allocator, MemoryAllocator::Cachelib);
        c.set("allow_evict_soft_pinned_objects", "false").unwrap();
        assert!(!c.allow_evict_soft_pinned_objects);
        assert!(c.enable_disk_eviction);
        c.set("enable_disk_eviction", "false").unwrap();
        assert!(!c.enable_disk_eviction);
        assert!(c.set("eviction_ratio", "1.5").is_err());
        assert!(c.set("no_such_flag", "1").is_err());
        c.set("put_start_release_timeout_sec", "10").unwrap();
        assert!(c.validate().is_err());
        for (name, _) in MASTER_CONFIG_FLAGS {
            assert!(!name.is_empty());
        }
    }
}
