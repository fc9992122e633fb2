//! The tenant quota policy (spec tenants §3.1, §3.2): which tenants may write and how
//! many bytes of memory each requested, read from and saved to a YAML document in a
//! file or an etcd key, and the effective quotas when the requests exceed the
//! capacity (a largest-remainder split).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::config::MasterConfig;
use crate::metadata::etcd::EtcdMetadataStore;
use crate::metadata::MetadataStore;

/// Requested quota (bytes) per tenant with an explicit policy.
pub type Policy = BTreeMap<String, u64>;

/// The largest quota a policy may give (`2^63 - 1`).
pub const MAX_QUOTA: u64 = i64::MAX as u64;

/// Upstream's `TenantId::IsValid`: non-empty, not starting with `_` (reserved), no
/// control byte.
pub fn is_valid_tenant(t: &str) -> bool {
    !t.is_empty() && !t.starts_with('_') && !t.bytes().any(|b| b < 0x20 || b == 0x7f)
}

/// `<digits>[B|KB|MB|GB|TB]` (binary multiples, case-sensitive, no space), above 0.
fn parse_quota(text: &str) -> Result<u64, String> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let unit = &text[digits..];
    let mult: u64 = match unit {
        "" | "B" => 1,
        "KB" => 1 << 10,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        "TB" => 1 << 40,
        _ => return Err(format!("unsupported quota unit '{unit}'")),
    };
    let n: u64 = text[..digits]
        .parse()
        .map_err(|_| format!("invalid quota '{text}'"))?;
    let bytes = n
        .checked_mul(mult)
        .filter(|b| *b <= MAX_QUOTA)
        .ok_or_else(|| format!("quota '{text}' is too large"))?;
    if bytes == 0 {
        return Err(format!("quota '{text}' must be above 0"));
    }
    Ok(bytes)
}

/// A YAML scalar: an optional pair of double or single quotes removed.
fn scalar(v: &str) -> String {
    let v = v.trim();
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            let inner = &v[1..v.len() - 1];
            return if q == '"' {
                inner.replace("\\\"", "\"").replace("\\\\", "\\")
            } else {
                inner.replace("''", "'")
            };
        }
    }
    v.to_string()
}

/// Parses the policy document: `version: 1` and `tenants:`, a list of `- name: T`
/// with `quota: <size>` (or `tenants: []`). Names must be valid and unique.
pub fn parse_policy(text: &str) -> Result<Policy, String> {
    let mut version = None;
    let mut seen_tenants = false;
    let mut entries: Vec<(Option<String>, Option<String>)> = Vec::new();
    for raw in text.lines() {
        let line = match raw.find(" #") {
            Some(i) => &raw[..i],
            None if raw.trim_start().starts_with('#') => "",
            None => raw,
        };
        if line.trim().is_empty() {
            continue;
        }
        let indented = line.starts_with(' ') || line.starts_with('-');
        let body = line.trim();
        let (item, body) = match body.strip_prefix("- ") {
            Some(rest) => (true, rest.trim()),
            None => (body == "-", if body == "-" { "" } else { body }),
        };
        if item {
            if !seen_tenants {
                return Err("a list item outside 'tenants'".into());
            }
            entries.push((None, None));
        }
        if body.is_empty() {
            continue;
        }
        let (k, v) = body
            .split_once(':')
            .ok_or_else(|| format!("not a 'key: value' line: '{}'", raw.trim()))?;
        let (k, v) = (k.trim(), v.trim());
        if !indented {
            match k {
                "version" => version = Some(scalar(v)),
                "tenants" => {
                    seen_tenants = true;
                    if !v.is_empty() && v != "[]" {
                        return Err("'tenants' must be a list".into());
                    }
                }
                _ => return Err(format!("unknown key '{k}'")),
            }
            continue;
        }
        let Some(entry) = entries.last_mut() else {
            return Err(format!("'{k}' outside a tenant entry"));
        };
        match k {
            "name" => entry.0 = Some(scalar(v)),
            "quota" => entry.1 = Some(scalar(v)),
            _ => return Err(format!("unknown tenant key '{k}'")),
        }
    }
    match version.as_deref() {
        Some("1") => {}
        Some(v) => return Err(format!("unsupported policy version '{v}'")),
        None => return Err("the policy has no 'version'".into()),
    }
    if !seen_tenants {
        return Err("the policy has no 'tenants'".into());
    }
    let mut policy = Policy::new();
    for (name, quota) in entries {
        let name = name.ok_or("a tenant without a name")?;
        if !is_valid_tenant(&name) {
            return Err(format!("invalid tenant name '{name}'"));
        }
        let quota = parse_quota(&quota.ok_or_else(|| format!("tenant '{name}' has no quota"))?)?;
        if policy.insert(name.clone(), quota).is_some() {
            return Err(format!("tenant '{name}' is listed twice"));
        }
    }
    Ok(policy)
}

/// The document upstream saves: names quoted, quotas in bytes, sorted by name.
pub fn format_policy(policy: &Policy) -> String {
    let mut out = String::from("version: 1\n\n");
    if policy.is_empty() {
        out.push_str("tenants: []\n");
        return out;
    }
    out.push_str("tenants:\n");
    for (name, quota) in policy {
        let quoted = name.replace('\\', "\\\\").replace('"', "\\\"");
        out.push_str(&format!("  - name: \"{quoted}\"\n    quota: {quota}\n"));
    }
    out
}

/// Where the policy is kept (`--tenant_quota_connector_type`/`_uri`).
pub enum PolicyStore {
    /// A YAML file, rewritten atomically on change.
    File(PathBuf),
    /// An etcd key, `mooncake-store/<cluster_id>/tenant_quota_policy`.
    Etcd(Box<EtcdMetadataStore>, String),
}

impl PolicyStore {
    /// The store `config` names; an error for an unknown type or an empty uri.
    pub fn open(config: &MasterConfig) -> Result<PolicyStore, String> {
        let uri = config.tenant_quota_connector_uri.trim();
        match config.tenant_quota_connector_type.trim() {
            "" | "file" => {
                if uri.is_empty() {
                    return Err("tenant quota file connector requires a non-empty uri \
                                (--tenant_quota_connector_uri=<policy.yaml>)"
                        .into());
                }
                Ok(PolicyStore::File(PathBuf::from(uri)))
            }
            "etcd" => {
                if uri.is_empty() {
                    return Err("tenant quota etcd connector requires the etcd endpoints \
                                (--tenant_quota_connector_uri)"
                        .into());
                }
                let store = EtcdMetadataStore::new(uri).map_err(|e| e.to_string())?;
                let cluster = config.cluster_id.trim_end_matches('/');
                let cluster = if cluster.is_empty() {
                    crate::wire::master_view::DEFAULT_CLUSTER_ID
                } else {
                    cluster
                };
                let key = format!("mooncake-store/{cluster}/tenant_quota_policy");
                Ok(PolicyStore::Etcd(Box::new(store), key))
            }
            other => Err(format!("unsupported tenant quota connector type '{other}'")),
        }
    }

    /// The stored policy (a missing etcd key is an empty policy).
    pub fn load(&self) -> Result<Policy, String> {
        match self {
            PolicyStore::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    format!(
                        "failed to open tenant quota policy file '{}': {e}",
                        path.display()
                    )
                })?;
                parse_policy(&text)
            }
            PolicyStore::Etcd(store, key) => match store.get(key).map_err(|e| e.to_string())? {
                None => Ok(Policy::new()),
                Some(bytes) => parse_policy(&String::from_utf8_lossy(&bytes)),
            },
        }
    }

    /// Saves `policy` (a file is replaced atomically).
    pub fn save(&self, policy: &Policy) -> Result<(), String> {
        let text = format_policy(policy);
        match self {
            PolicyStore::File(path) => {
                write_atomically(path, &text).map_err(|e| format!("saving {}: {e}", path.display()))
            }
            PolicyStore::Etcd(store, key) => {
                store.set(key, text.as_bytes()).map_err(|e| e.to_string())
            }
        }
    }
}

/// Writes `text` to a temporary file beside `path`, syncs it and renames it over `path`.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(d) = dir {
        if let Ok(f) = std::fs::File::open(d) {
            let _ = f.sync_all();
        }
    }
    Ok(())
}

/// The effective quota of each tenant of `policy` when `capacity` bytes of memory are
/// mounted: what it requested while the requests fit, otherwise a share of the
/// capacity proportional to its request (floors, then the bytes left over one each by
/// largest remainder, ties by name).
pub fn effective_quotas(capacity: u64, policy: &Policy) -> BTreeMap<String, u64> {
    let sum: u128 = policy.values().map(|q| u128::from(*q)).sum();
    if sum <= u128::from(capacity) {
        return policy.clone();
    }
    let mut out = BTreeMap::new();
    let mut rests: Vec<(u128, &String)> = Vec::new();
    let mut given: u128 = 0;
    for (name, q) in policy {
        let share = u128::from(capacity) * u128::from(*q);
        let base = share / sum;
        given += base;
        rests.push((share % sum, name));
        out.insert(name.clone(), base as u64);
    }
    rests.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let left = u128::from(capacity) - given;
    for (_, name) in rests.into_iter().take(left as usize) {
        if let Some(v) = out.get_mut(name) {
            *v += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_format_as_upstream() {
        let p = parse_policy(
            "version: 1   # comment\ntenants:\n  - name: tenant-a\n    quota: 200GB\n  - name: \"b\"\n    quota: 1024\n",
        )
        .unwrap();
        assert_eq!(p["tenant-a"], 200 << 30);
        assert_eq!(p["b"], 1024);
        assert_eq!(parse_policy(&format_policy(&p)).unwrap(), p);
        assert_eq!(
            format_policy(&p),
            "version: 1\n\ntenants:\n  - name: \"b\"\n    quota: 1024\n  - name: \"tenant-a\"\n    quota: 214748364800\n"
        );
        assert!(parse_policy("version: 1\ntenants: []\n")
            .unwrap()
            .is_empty());
        for (bad, why) in [
            ("version: 2\ntenants: []\n", "version"),
            ("tenants: []\n", "version"),
            (
                "version: 1\ntenants:\n  - name: _x\n    quota: 1MB\n",
                "invalid tenant name '_x'",
            ),
            (
                "version: 1\ntenants:\n  - name: a\n    quota: 1GiB\n",
                "unsupported quota unit 'GiB'",
            ),
            (
                "version: 1\ntenants:\n  - name: a\n    quota: 0\n",
                "above 0",
            ),
            (
                "version: 1\ntenants:\n  - name: a\n    quota: 1\n  - name: a\n    quota: 2\n",
                "twice",
            ),
        ] {
            let e = parse_policy(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        assert!(is_valid_tenant("tenant-ü") && !is_valid_tenant("") && !is_valid_tenant("a\u{1}"));
    }

    #[test]
    fn oversubscribed_quotas_split_by_largest_remainder() {
        let p: Policy = [("a".to_string(), 8 << 20), ("b".to_string(), 100 << 20)].into();
        let e = effective_quotas(64 << 20, &p);
        assert_eq!((e["a"], e["b"]), (4_971_027, 62_137_837));
        assert_eq!(effective_quotas(1 << 30, &p), p);
        let even: Policy = [("x".to_string(), 1), ("y".to_string(), 1)].into();
        let e = effective_quotas(1, &even);
        assert_eq!((e["x"], e["y"]), (1, 0));
    }
}
