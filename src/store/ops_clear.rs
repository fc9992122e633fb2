//! Clearing this client's replicas (upstream's Python `batch_replica_clear`).

use super::client::Client;
use crate::wire::master_api::ErrorCode;

impl Client {
    /// Asks the master to drop this client's objects among `keys` whose read leases
    /// have expired: their replicas on `segment_name` (a segment name, i.e. a
    /// client's hostname), or every replica when it is empty. Returns the keys that
    /// were cleared; keys that are missing, leased, being written or another
    /// client's are left alone. -600 before setup or after close.
    pub fn batch_replica_clear(
        &self,
        keys: &[&str],
        segment_name: &str,
    ) -> Result<Vec<String>, ErrorCode> {
        let inner = self.inner()?;
        let owned: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        inner
            .master
            .batch_replica_clear(&owned, inner.client_id, segment_name)
    }
}

#[cfg(test)]
mod tests {
    use crate::master::{MasterConfig, MasterService};
    use crate::store::{Client, ErrorCode, ReplicateConfig, SetupConfig};

    #[test]
    fn clears_only_own_unleased_objects() {
        let m = MasterService::new(MasterConfig::default());
        let cfg = SetupConfig {
            local_hostname: "127.0.0.1".into(),
            metadata_server: "P2PHANDSHAKE".into(),
            global_segment_size: 16 << 20,
            local_buffer_size: 1 << 20,
            ..SetupConfig::default()
        };
        let a = Client::setup_with_master(&cfg, m.clone()).unwrap();
        let b = Client::setup_with_master(&cfg, m.clone()).unwrap();
        let own = ReplicateConfig {
            preferred_segments: vec![a.hostname().to_string()],
            ..ReplicateConfig::default()
        };
        for k in ["a1", "a2", "a3"] {
            a.put(k, b"value", &own).unwrap();
        }
        b.put("b1", b"value", &own).unwrap();
        assert!(a.is_exist("a2").unwrap()); // a read lease keeps a2
        let cleared = a.batch_replica_clear(&["a1", "a2", "b1", "none"], "");
        assert_eq!(cleared, Ok(vec!["a1".to_string()]));
        assert_eq!(a.is_exist("a1"), Ok(false));
        assert_eq!(a.batch_replica_clear(&["a3"], "elsewhere"), Ok(vec![]));
        assert_eq!(
            a.batch_replica_clear(&["a3"], a.hostname()),
            Ok(vec!["a3".into()])
        );
        a.close();
        assert_eq!(
            a.batch_replica_clear(&["a3"], ""),
            Err(ErrorCode::INVALID_PARAMS)
        );
    }
}
