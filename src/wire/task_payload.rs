//! The JSON payloads of copy and move tasks (`TaskAssignment::payload`), byte for byte
//! as upstream's master writes them (iguana's `struct_json`: compact, keys in
//! declaration order) and read as its client reads them (keys in any order, unknown
//! keys skipped, missing ones defaulted).

use serde::{Deserialize, Serialize};

use super::master_types::DEFAULT_TENANT;

fn default_tenant() -> String {
    DEFAULT_TENANT.to_string()
}

/// `ReplicaCopyPayload`: copy `key`'s replica on `source` to every segment of `targets`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyPayload {
    /// The object's tenant.
    #[serde(default = "default_tenant")]
    pub tenant_id: String,
    /// The object's key.
    #[serde(default)]
    pub key: String,
    /// The segment holding the replica to copy (its owner executes the task).
    #[serde(default)]
    pub source: String,
    /// The segments to copy to, as the caller named them.
    #[serde(default)]
    pub targets: Vec<String>,
    /// Dynamic replication's lease id, high half (0: an ordinary copy).
    #[serde(default)]
    pub dynamic_replication_lease_id_high: u64,
    /// Dynamic replication's lease id, low half.
    #[serde(default)]
    pub dynamic_replication_lease_id_low: u64,
    /// Dynamic replication's version epoch.
    #[serde(default)]
    pub dynamic_replication_version_epoch: u64,
}

/// `ReplicaMovePayload`: move `key`'s replica on `source` to `target`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MovePayload {
    /// The object's tenant.
    #[serde(default = "default_tenant")]
    pub tenant_id: String,
    /// The object's key.
    #[serde(default)]
    pub key: String,
    /// The segment holding the replica to move (its owner executes the task).
    #[serde(default)]
    pub source: String,
    /// The segment to move it to.
    #[serde(default)]
    pub target: String,
}

/// The compact JSON text of `payload`.
pub fn to_json<T: Serialize>(payload: &T) -> String {
    serde_json::to_string(payload).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_upstreams_bytes() {
        let copy = CopyPayload {
            tenant_id: "default".into(),
            key: "A-k5".into(),
            source: "127.0.0.1:13499".into(),
            targets: vec!["127.0.0.1:13868".into(), "127.0.0.1:12358".into()],
            dynamic_replication_lease_id_high: 0,
            dynamic_replication_lease_id_low: 0,
            dynamic_replication_version_epoch: 0,
        };
        assert_eq!(
            to_json(&copy),
            r#"{"tenant_id":"default","key":"A-k5","source":"127.0.0.1:13499","targets":["127.0.0.1:13868","127.0.0.1:12358"],"dynamic_replication_lease_id_high":0,"dynamic_replication_lease_id_low":0,"dynamic_replication_version_epoch":0}"#
        );
        let mv = MovePayload {
            tenant_id: "default".into(),
            key: "A-k3".into(),
            source: "127.0.0.1:13499".into(),
            target: "127.0.0.1:13868".into(),
        };
        assert_eq!(
            to_json(&mv),
            r#"{"tenant_id":"default","key":"A-k3","source":"127.0.0.1:13499","target":"127.0.0.1:13868"}"#
        );
    }

    #[test]
    fn payloads_read_in_any_order_with_defaults() {
        let p: MovePayload =
            serde_json::from_str(r#"{"target":"b","extra":[1],"key":"k","source":"a"}"#).unwrap();
        assert_eq!(p.tenant_id, "default");
        assert_eq!(
            (p.key.as_str(), p.source.as_str(), p.target.as_str()),
            ("k", "a", "b")
        );
        assert!(serde_json::from_str::<CopyPayload>("{not json").is_err());
    }
}
