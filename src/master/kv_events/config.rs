//! The KV-event flags (spec tiers-events-conductor.md §2.2), upstream's names, types
//! and defaults; from the command line or the master's config file.

use crate::config::flags::{parse_bool, FlagError};

/// Why a KV-event flag was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvEventConfigError {
    /// A boolean flag's value.
    #[error(transparent)]
    Flag(#[from] FlagError),
    /// A value that is not a 32-bit unsigned integer.
    #[error("flag --{name}: '{value}' is not a 32-bit unsigned integer")]
    NotU32 {
        /// The flag.
        name: String,
        /// The value as given.
        value: String,
    },
    /// A flag that is not a KV-event flag.
    #[error("unknown KV-event flag: {0}")]
    UnknownFlag(String),
}

/// The binaries keep their errors as text.
impl From<KvEventConfigError> for String {
    fn from(e: KvEventConfigError) -> String {
        e.to_string()
    }
}

/// `--kv_events_*` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvEventConfig {
    /// `--enable_kv_events` (default false).
    pub enabled: bool,
    /// `--kv_events_bind_endpoint`: where the PUB socket binds (`tcp://host:port`).
    pub bind_endpoint: String,
    /// `--kv_events_backend_id`: stamped on every event as `backend_id`.
    pub backend_id: String,
    /// `--kv_events_emit_legacy_compat` (default true): add `type`, `block_hashes`
    /// and `parent_block_hash`.
    pub emit_legacy_compat: bool,
    /// `--kv_events_emit_object_key` (default true): add `object_key`; without it,
    /// events of keys that are not hashes are not published at all.
    pub emit_object_key: bool,
    /// `--kv_events_queue_capacity` (default 65536): events waiting to be published;
    /// the oldest is dropped beyond it; 0 = unbounded.
    pub queue_capacity: u32,
}

impl Default for KvEventConfig {
    fn default() -> Self {
        KvEventConfig {
            enabled: false,
            bind_endpoint: String::new(),
            backend_id: String::new(),
            emit_legacy_compat: true,
            emit_object_key: true,
            queue_capacity: 65536,
        }
    }
}

/// The flags [`KvEventConfig::set`] understands, each with whether it is a boolean.
/// The last six are deprecated upstream: accepted (and type-checked), never written
/// to events.
pub const KV_EVENT_FLAGS: &[(&str, bool)] = &[
    ("enable_kv_events", true),
    ("kv_events_bind_endpoint", false),
    ("kv_events_backend_id", false),
    ("kv_events_emit_legacy_compat", true),
    ("kv_events_emit_object_key", true),
    ("kv_events_queue_capacity", false),
    ("kv_events_model_name", false),
    ("kv_events_block_size", false),
    ("kv_events_dp_rank", false),
    ("kv_events_lora_name", false),
    ("kv_events_additional_salt", false),
    ("kv_events_tenant_id", false),
];

impl KvEventConfig {
    /// Applies flag `name` (without dashes) with `value`; unknown names and values of
    /// the wrong type are errors.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), KvEventConfigError> {
        let bool_of = |v: &str| parse_bool(name, v);
        let u32_of = |v: &str| {
            v.trim()
                .parse::<u32>()
                .map_err(|_| KvEventConfigError::NotU32 {
                    name: name.to_string(),
                    value: v.to_string(),
                })
        };
        match name {
            "enable_kv_events" => self.enabled = bool_of(value)?,
            "kv_events_bind_endpoint" => self.bind_endpoint = value.to_string(),
            "kv_events_backend_id" => self.backend_id = value.to_string(),
            "kv_events_emit_legacy_compat" => self.emit_legacy_compat = bool_of(value)?,
            "kv_events_emit_object_key" => self.emit_object_key = bool_of(value)?,
            "kv_events_queue_capacity" => self.queue_capacity = u32_of(value)?,
            "kv_events_block_size" | "kv_events_dp_rank" => {
                u32_of(value)?;
            }
            "kv_events_model_name"
            | "kv_events_lora_name"
            | "kv_events_additional_salt"
            | "kv_events_tenant_id" => {}
            _ => return Err(KvEventConfigError::UnknownFlag(name.to_string())),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_set_their_fields() {
        let mut c = KvEventConfig::default();
        assert!(!c.enabled && c.emit_legacy_compat && c.emit_object_key);
        assert_eq!(c.queue_capacity, 65536);
        let set_all = |c: &mut KvEventConfig, pairs: &[(&str, &str)]| {
            for (name, value) in pairs {
                c.set(name, value).unwrap();
            }
        };
        set_all(
            &mut c,
            &[
                ("enable_kv_events", "true"),
                ("kv_events_bind_endpoint", "tcp://*:5557"),
                ("kv_events_backend_id", "node0"),
                ("kv_events_emit_legacy_compat", "false"),
                ("kv_events_emit_object_key", "0"),
                ("kv_events_queue_capacity", "0"),
            ],
        );
        assert_eq!(
            c,
            KvEventConfig {
                enabled: true,
                bind_endpoint: "tcp://*:5557".into(),
                backend_id: "node0".into(),
                emit_legacy_compat: false,
                emit_object_key: false,
                queue_capacity: 0,
            }
        );
        // Deprecated: accepted, type-checked, no effect.
        let before = c.clone();
        set_all(
            &mut c,
            &[
                ("kv_events_model_name", "llama"),
                ("kv_events_block_size", "16"),
                ("kv_events_dp_rank", "3"),
                ("kv_events_tenant_id", "t"),
                ("kv_events_lora_name", "l"),
                ("kv_events_additional_salt", "s"),
            ],
        );
        assert_eq!(c, before);
        assert_eq!(
            c.set("kv_events_block_size", "-1").unwrap_err().to_string(),
            "flag --kv_events_block_size: '-1' is not a 32-bit unsigned integer"
        );
        assert!(c.set("kv_events_queue_capacity", "4294967296").is_err());
        assert!(c.set("enable_kv_events", "maybe").is_err());
        assert!(c.set("kv_events_nope", "1").is_err());
        for (name, _) in KV_EVENT_FLAGS {
            assert!(c.clone().set(name, "1").is_ok(), "{name}");
        }
    }
}
