//! Multi-tenancy on the master (spec tenants §2, §3), with `--enable_multi_tenants`:
//! the tenant a request names, checked as upstream checks it (reads and ends: -600 for
//! an invalid name; starts: -1701 for an invalid name or one without a quota policy);
//! the bytes each tenant's memory replicas take (kept up to date by the object table
//! on every change, see [`Charges`]); admission of new bytes against the tenant's
//! effective quota (-1700 beyond it); the policy's changes through the admin API.
//! Without multi-tenancy every request is the `default` tenant's and nothing is
//! counted.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;

use super::config::MasterConfig;
use super::object::Object;
use super::tenant_policy::{effective_quotas, is_valid_tenant, Policy, PolicyStore, MAX_QUOTA};
use crate::wire::master_api::{ErrorCode, MasterResult, DEFAULT_TENANT};

/// `TENANT_QUOTA_EXCEEDED`.
pub const TENANT_QUOTA_EXCEEDED: ErrorCode = ErrorCode(-1700);
/// `TENANT_NOT_REGISTERED`.
pub const TENANT_NOT_REGISTERED: ErrorCode = ErrorCode(-1701);
/// `TENANT_NOT_EMPTY`.
pub const TENANT_NOT_EMPTY: ErrorCode = ErrorCode(-1702);
/// `UNAVAILABLE_IN_CURRENT_MODE`: the quota API without multi-tenancy.
pub const UNAVAILABLE_IN_CURRENT_MODE: ErrorCode = ErrorCode(-1011);
/// `PERSISTENT_FAIL`: the policy could not be saved.
pub const PERSISTENT_FAIL: ErrorCode = ErrorCode(-1503);

/// The bytes an object charges its tenant: its size once per memory replica.
pub(crate) fn charge_of(o: &Object) -> u64 {
    o.size().saturating_mul(o.replicas.len() as u64)
}

/// Bytes charged per tenant, moved by the object table as objects change.
#[derive(Default)]
pub(crate) struct Charges(Mutex<HashMap<String, u64>>);

impl Charges {
    /// An object of `tenant` went from charging `before` bytes to `after`.
    pub fn apply(&self, tenant: &str, before: u64, after: u64) {
        if before == after {
            return;
        }
        let mut map = self.0.lock();
        let entry = map.entry(tenant.to_string()).or_insert(0);
        *entry = entry.saturating_add(after).saturating_sub(before);
        if *entry == 0 {
            map.remove(tenant);
        }
    }

    /// Bytes `tenant` is charged.
    pub fn of(&self, tenant: &str) -> u64 {
        self.0.lock().get(tenant).copied().unwrap_or(0)
    }

    fn all(&self) -> HashMap<String, u64> {
        self.0.lock().clone()
    }
}

/// One tenant's account as the admin API and the metrics show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantSnapshot {
    /// The tenant.
    pub tenant_id: String,
    /// Its policy's quota (0 without one).
    pub requested_quota_bytes: u64,
    /// What it may use now (its request, or its share of the capacity).
    pub effective_quota_bytes: u64,
    /// What its memory replicas take.
    pub charged_bytes: u64,
    /// Whether it may not write (no policy).
    pub admission_closed: bool,
    /// Whether it uses more than its effective quota.
    pub over_quota: bool,
    /// Whether it has a policy.
    pub has_explicit_policy: bool,
}

/// Bytes reserved by an admitted start until it is placed (then its object's charge
/// counts them); given back on drop.
pub(crate) struct Reservation<'a> {
    tenants: &'a Tenants,
    tenant: String,
    bytes: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        let mut reserved = self.tenants.reserved.lock();
        if let Some(r) = reserved.get_mut(&self.tenant) {
            *r = r.saturating_sub(self.bytes);
            if *r == 0 {
                reserved.remove(&self.tenant);
            }
        }
    }
}

/// The master's tenants.
pub(crate) struct Tenants {
    enabled: bool,
    store: Option<PolicyStore>,
    policy: Mutex<Policy>,
    /// What each tenant's objects take (shared with the object table).
    pub charges: Arc<Charges>,
    reserved: Mutex<HashMap<String, u64>>,
    rejects: Mutex<BTreeMap<String, u64>>,
    evicted: Mutex<BTreeMap<String, u64>>,
}

impl Tenants {
    /// The tenants `config` sets up: with multi-tenancy, the policy loaded from its
    /// store (an error is logged and leaves every tenant closed; the binary checks the
    /// policy loads before it starts).
    pub fn new(config: &MasterConfig) -> Tenants {
        let mut store = None;
        let mut policy = Policy::new();
        if config.enable_multi_tenants {
            match PolicyStore::open(config).and_then(|s| s.load().map(|p| (s, p))) {
                Ok((s, p)) => {
                    store = Some(s);
                    policy = p;
                }
                Err(e) => log::error!("tenant quota policy: {e}; every tenant is closed"),
            }
        }
        Tenants {
            enabled: config.enable_multi_tenants,
            store,
            policy: Mutex::new(policy),
            charges: Arc::new(Charges::default()),
            reserved: Mutex::new(HashMap::new()),
            rejects: Mutex::new(BTreeMap::new()),
            evicted: Mutex::new(BTreeMap::new()),
        }
    }

    /// Whether multi-tenancy is on.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The tenant a read or an end applies to: `default` without multi-tenancy or for
    /// `""`; -600 for an invalid name. No policy is needed.
    pub fn read<'a>(&self, tenant: &'a str) -> MasterResult<&'a str> {
        if !self.enabled || tenant.is_empty() {
            return Ok(DEFAULT_TENANT);
        }
        if !is_valid_tenant(tenant) {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        Ok(tenant)
    }

    /// The tenant a start (a write of new bytes) applies to: `default` without
    /// multi-tenancy; -1701 for an empty or invalid name or a tenant without a policy.
    pub fn write<'a>(&self, tenant: &'a str) -> MasterResult<&'a str> {
        if !self.enabled {
            return Ok(DEFAULT_TENANT);
        }
        if !is_valid_tenant(tenant) || !self.policy.lock().contains_key(tenant) {
            return Err(TENANT_NOT_REGISTERED);
        }
        Ok(tenant)
    }

    /// Admits `bytes` more for `tenant` with `capacity` bytes of memory mounted: a
    /// reservation held until the start is placed; -1701 without a policy, or -1700
    /// and the bytes missing when the charge would exceed the effective quota.
    pub fn admit(
        &self,
        tenant: &str,
        bytes: u64,
        capacity: u64,
    ) -> Result<Reservation<'_>, (ErrorCode, u64)> {
        let none = Reservation {
            tenants: self,
            tenant: String::new(),
            bytes: 0,
        };
        if !self.enabled {
            return Ok(none);
        }
        let effective = {
            let policy = self.policy.lock();
            if !policy.contains_key(tenant) {
                return Err((TENANT_NOT_REGISTERED, 0));
            }
            effective_quotas(capacity, &policy)
                .get(tenant)
                .copied()
                .unwrap_or(0)
        };
        if bytes > MAX_QUOTA {
            return Err((ErrorCode::INVALID_PARAMS, 0));
        }
        if bytes == 0 {
            return Ok(none);
        }
        let mut reserved = self.reserved.lock();
        let held = reserved.get(tenant).copied().unwrap_or(0);
        let used = self.charges.of(tenant).saturating_add(held);
        let wanted = used.saturating_add(bytes);
        if wanted > effective {
            return Err((TENANT_QUOTA_EXCEEDED, wanted - effective));
        }
        *reserved.entry(tenant.to_string()).or_insert(0) += bytes;
        Ok(Reservation {
            tenants: self,
            tenant: tenant.to_string(),
            bytes,
        })
    }

    /// Counts a start of `tenant` finally refused for its quota.
    pub fn note_reject(&self, tenant: &str) {
        *self.rejects.lock().entry(tenant.to_string()).or_insert(0) += 1;
    }

    /// Counts `bytes` evicted to make room within `tenant`'s quota.
    pub fn note_evicted(&self, tenant: &str, bytes: u64) {
        *self.evicted.lock().entry(tenant.to_string()).or_insert(0) += bytes;
    }

    /// Quota rejections per tenant.
    pub fn rejects(&self) -> BTreeMap<String, u64> {
        self.rejects.lock().clone()
    }

    /// Bytes evicted for quota per tenant.
    pub fn evicted(&self) -> BTreeMap<String, u64> {
        self.evicted.lock().clone()
    }

    /// Every tenant with a policy or a charge, sorted, with `capacity` bytes mounted.
    pub fn snapshots(&self, capacity: u64) -> Vec<TenantSnapshot> {
        let policy = self.policy.lock().clone();
        let effective = effective_quotas(capacity, &policy);
        let charges = self.charges.all();
        let mut names: Vec<&String> = policy.keys().chain(charges.keys()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|t| {
                let requested = policy.get(t).copied();
                let charged = charges.get(t).copied().unwrap_or(0);
                let eff = effective.get(t).copied().unwrap_or(0);
                TenantSnapshot {
                    tenant_id: t.clone(),
                    requested_quota_bytes: requested.unwrap_or(0),
                    effective_quota_bytes: eff,
                    charged_bytes: charged,
                    admission_closed: requested.is_none(),
                    over_quota: charged > eff,
                    has_explicit_policy: requested.is_some(),
                }
            })
            .collect()
    }

    /// `tenant`'s snapshot; -600 for an invalid name, -704 with neither a policy nor
    /// a charge, -1011 without multi-tenancy.
    pub fn snapshot(&self, tenant: &str, capacity: u64) -> MasterResult<TenantSnapshot> {
        self.check_api(tenant)?;
        self.snapshots(capacity)
            .into_iter()
            .find(|s| s.tenant_id == tenant)
            .ok_or(ErrorCode::OBJECT_NOT_FOUND)
    }

    fn check_api(&self, tenant: &str) -> MasterResult<()> {
        if !self.enabled {
            return Err(UNAVAILABLE_IN_CURRENT_MODE);
        }
        if !is_valid_tenant(tenant) {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        Ok(())
    }

    /// Sets `tenant`'s requested quota (saved first, then applied); its snapshot.
    /// -600 for an invalid name or a quota outside `[1, 2^63 - 1]`, -1503 when the
    /// policy cannot be saved, -1011 without multi-tenancy.
    pub fn set_quota(
        &self,
        tenant: &str,
        bytes: u64,
        capacity: u64,
    ) -> MasterResult<TenantSnapshot> {
        self.check_api(tenant)?;
        if bytes == 0 || bytes > MAX_QUOTA {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        {
            let mut policy = self.policy.lock();
            let mut next = policy.clone();
            next.insert(tenant.to_string(), bytes);
            self.save(&next)?;
            *policy = next;
        }
        self.snapshot(tenant, capacity)
    }

    /// Deletes `tenant`'s policy: -704 without one, -1702 while it is charged or
    /// `has_objects` says it holds objects, -1503 when the policy cannot be saved.
    pub fn delete_quota(&self, tenant: &str, has_objects: impl Fn() -> bool) -> MasterResult<()> {
        self.check_api(tenant)?;
        let mut policy = self.policy.lock();
        if !policy.contains_key(tenant) {
            return Err(ErrorCode::OBJECT_NOT_FOUND);
        }
        if self.charges.of(tenant) > 0 || has_objects() {
            return Err(TENANT_NOT_EMPTY);
        }
        let mut next = policy.clone();
        next.remove(tenant);
        self.save(&next)?;
        *policy = next;
        Ok(())
    }

    fn save(&self, policy: &Policy) -> MasterResult<()> {
        match &self.store {
            Some(store) => store.save(policy).map_err(|e| {
                log::error!("tenant quota policy: {e}");
                PERSISTENT_FAIL
            }),
            None => Err(PERSISTENT_FAIL),
        }
    }
}
