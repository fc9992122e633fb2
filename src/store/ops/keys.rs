//! Key-level operations of [`Client`] that move no object bytes: existence, sizes,
//! replica descriptors, removal, and clearing this client's replicas (upstream's
//! Python `batch_replica_clear`). One master call each.

use crate::store::error::{from_codes, StoreResult};
use crate::store::vocab::fit;
use crate::store::Client;
use crate::wire::master_api::{
    ErrorCode, MasterApi, MasterResult, ReplicaDescriptor, ReplicaLocation,
};

/// The size recorded in a replica descriptor, whatever its kind.
fn replica_size(r: &ReplicaDescriptor) -> u64 {
    match &r.location {
        ReplicaLocation::Memory(d) | ReplicaLocation::Nof(d) => d.size,
        ReplicaLocation::Disk { object_size, .. }
        | ReplicaLocation::LocalDisk { object_size, .. }
        | ReplicaLocation::Dfs { object_size, .. } => *object_size,
    }
}

/// The keys as the master takes them.
fn owned(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

/// A master call, for a tenant, that answers per key.
type PerKeyCall<'a, T> =
    &'a dyn Fn(&dyn MasterApi, &str, &[String]) -> MasterResult<Vec<MasterResult<T>>>;

impl Client {
    /// Per key, the master's answer to `call` over `keys` (one master call); the
    /// failure of the whole call (-600 once closed) for every key.
    fn per_key<T: Clone>(&self, keys: &[&str], call: PerKeyCall<'_, T>) -> Vec<StoreResult<T>> {
        match self
            .state()
            .and_then(|s| call(&**s.master(), s.tenant(), &owned(keys)))
        {
            Ok(each) => from_codes(fit(each, keys.len())),
            Err(e) => vec![Err(e.into()); keys.len()],
        }
    }

    /// Whether `key` has a complete replica (grants a read lease when it does).
    pub fn is_exist(&self, key: &str) -> StoreResult<bool> {
        let state = self.state()?;
        Ok(state.master().exist_key(key, state.tenant())?)
    }

    /// [`Client::is_exist`] for several keys in one master call.
    pub fn batch_is_exist(&self, keys: &[&str]) -> Vec<StoreResult<bool>> {
        self.per_key(keys, &|m, t, k| m.batch_exist_key(k, t))
    }

    /// The object's size in bytes (grants a read lease). -704 when missing.
    pub fn get_size(&self, key: &str) -> StoreResult<u64> {
        let replicas = self.get_replica_desc(key)?;
        Ok(replicas
            .first()
            .map(replica_size)
            .ok_or(ErrorCode::INVALID_PARAMS)?)
    }

    /// How many times this client's reads asked a disk owner to stage objects only its
    /// disk holds (upstream's `get_offload_rpc_read_count`); 0 before setup.
    pub fn offload_rpc_read_count(&self) -> u64 {
        self.state().map_or(0, |s| s.reads().offload_rpc_reads())
    }

    /// The sizes of several objects in one master call (grants read leases).
    pub fn batch_get_size(&self, keys: &[&str]) -> Vec<StoreResult<u64>> {
        self.batch_get_replica_desc(keys)
            .into_iter()
            .map(|r| {
                let replicas = r?;
                Ok(replicas
                    .first()
                    .map(replica_size)
                    .ok_or(ErrorCode::INVALID_PARAMS)?)
            })
            .collect()
    }

    /// The replicas of `key` as the master reports them (grants a read lease);
    /// -704 when missing.
    pub fn get_replica_desc(&self, key: &str) -> StoreResult<Vec<ReplicaDescriptor>> {
        let state = self.state()?;
        let resp = state.master().get_replica_list(key, state.tenant())?;
        Ok(resp.replicas)
    }

    /// [`Client::get_replica_desc`] for several keys in one master call.
    pub fn batch_get_replica_desc(
        &self,
        keys: &[&str],
    ) -> Vec<StoreResult<Vec<ReplicaDescriptor>>> {
        self.per_key(keys, &|m, t, k| {
            let lists = m.batch_get_replica_list(k, t)?;
            Ok(lists
                .into_iter()
                .map(|r| r.map(|resp| resp.replicas))
                .collect())
        })
    }

    /// Removes `key`: -704 missing, -706 under a read lease unless `force`.
    pub fn remove(&self, key: &str, force: bool) -> StoreResult<()> {
        let state = self.state()?;
        Ok(state.master().remove(key, force, state.tenant())?)
    }

    /// Removes several keys in one master call; per key as [`Client::remove`].
    pub fn batch_remove(&self, keys: &[&str], force: bool) -> Vec<StoreResult<()>> {
        self.per_key(keys, &|m, t, k| m.batch_remove(k, force, t))
    }

    /// Removes every key `pattern` matches (ECMAScript search semantics); returns how
    /// many were removed. -600 for an invalid pattern.
    pub fn remove_by_regex(&self, pattern: &str, force: bool) -> StoreResult<i64> {
        let state = self.state()?;
        Ok(state
            .master()
            .remove_by_regex(pattern, force, state.tenant())?)
    }

    /// Removes every removable object; returns how many were removed.
    pub fn remove_all(&self, force: bool) -> StoreResult<i64> {
        let state = self.state()?;
        Ok(state.master().remove_all(force, state.tenant())?)
    }

    /// Asks the master to drop this client's objects among `keys` whose read leases
    /// have expired: their replicas on `segment_name` (a segment name, i.e. a
    /// client's hostname), or every replica when it is empty. Returns the keys that
    /// were cleared; keys that are missing, leased, being written or another
    /// client's are left alone. -600 before setup or after close.
    pub fn batch_replica_clear(
        &self,
        keys: &[&str],
        segment_name: &str,
    ) -> StoreResult<Vec<String>> {
        let state = self.state()?;
        Ok(state
            .master()
            .batch_replica_clear(&owned(keys), state.client_id(), segment_name)?)
    }
}

#[cfg(test)]
mod tests {
    use crate::master::{MasterConfig, MasterService};
    use crate::store::ops::tests::{client, on};
    use crate::store::{Code, ErrorCode};

    #[test]
    fn clears_only_own_unleased_objects() {
        let m = MasterService::new(MasterConfig::default());
        let (a, b) = (client(&m), client(&m));
        let own = on(a.hostname());
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
            a.batch_replica_clear(&["a3"], "").code(),
            Err(ErrorCode::INVALID_PARAMS)
        );
    }
}
