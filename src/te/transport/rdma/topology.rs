//! The topology matrix (spec transfer-engine.md §5.1): for each memory location
//! (`cpu:<numa>`, `cuda:<n>`) the NICs to prefer and the other usable ones; its JSON
//! form (`{"cpu:0": [["mlx5_0"], ["mlx5_1"]], ...}`), discovery from `/sys`, the NIC
//! numbering an upstream reader derives from it, and NIC selection with retries.

use super::error::RdmaError;
use super::stl_order;
use crate::config::RdmaConfig;
use crate::error::{Error, Result};
use crate::metadata::json;
use crate::sys::verbs::Verbs;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The location that stands for "any": every NIC, all preferred, in NIC order.
pub const WILDCARD: &str = "*";

/// One location's NICs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Entry {
    /// NICs closest to the location, used first.
    pub preferred: Vec<String>,
    /// Other usable NICs.
    pub available: Vec<String>,
}

/// A topology matrix keyed by location.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Topology {
    entries: BTreeMap<String, Entry>,
}

/// What discovery found out about one NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicPlacement {
    /// Device name.
    pub name: String,
    /// NUMA node of its PCI device (`None` when unknown, e.g. SoftRoCE).
    pub numa_node: Option<u32>,
    /// `realpath` of its PCI device in sysfs, for distances to GPUs.
    pub pci_path: Option<PathBuf>,
}

/// A GPU to place: its index and the sysfs path of its PCI device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPlacement {
    /// CUDA device index.
    pub index: u32,
    /// NUMA node of its PCI device.
    pub numa_node: Option<u32>,
    /// `realpath` of its PCI device.
    pub pci_path: Option<PathBuf>,
}

impl Topology {
    /// A matrix from `(location, entry)` pairs.
    pub fn from_entries(entries: impl IntoIterator<Item = (String, Entry)>) -> Topology {
        Topology {
            entries: entries.into_iter().collect(),
        }
    }

    /// Parses upstream's JSON; every value must be an array of exactly two arrays of
    /// names (otherwise `-103`, as upstream).
    pub fn parse(json: &str) -> Result<Topology> {
        Topology::from_value(&json::parse(json.as_bytes(), "topology")?)
    }

    /// [`Topology::parse`] on a parsed value.
    pub fn from_value(value: &Value) -> Result<Topology> {
        let obj = json::object(value, "topology")?;
        let mut entries = BTreeMap::new();
        for (location, v) in obj {
            let lists = v.as_array().filter(|a| a.len() == 2).ok_or_else(|| {
                Error::MalformedJson(format!(
                    "topology entry '{location}' is not [[preferred], [available]]"
                ))
            })?;
            let names = |l: &Value| -> Result<Vec<String>> {
                l.as_array()
                    .ok_or_else(|| {
                        Error::MalformedJson(format!("topology entry '{location}': not a list"))
                    })?
                    .iter()
                    .map(|n| {
                        n.as_str().map(str::to_string).ok_or_else(|| {
                            Error::MalformedJson(format!(
                                "topology entry '{location}': a NIC name is not a string"
                            ))
                        })
                    })
                    .collect()
            };
            entries.insert(
                location.clone(),
                Entry {
                    preferred: names(&lists[0])?,
                    available: names(&lists[1])?,
                },
            );
        }
        Ok(Topology { entries })
    }

    /// The JSON value (keys sorted, as upstream's writer emits them).
    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        for (location, e) in &self.entries {
            obj.insert(
                location.clone(),
                Value::Array(vec![
                    Value::from(e.preferred.clone()),
                    Value::from(e.available.clone()),
                ]),
            );
        }
        Value::Object(obj)
    }

    /// Whether no location lists any NIC.
    pub fn is_empty(&self) -> bool {
        self.entries
            .values()
            .all(|e| e.preferred.is_empty() && e.available.is_empty())
    }

    /// The locations, sorted.
    pub fn locations(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The NICs in the order an upstream reader numbers them: its matrix is an
    /// `unordered_map` filled from the sorted keys; each NIC gets the next number the
    /// first time it appears in an entry's preferred then available list.
    pub fn nic_order(&self) -> Vec<String> {
        let keys: Vec<&str> = self.entries.keys().map(String::as_str).collect();
        let mut order: Vec<String> = Vec::new();
        for i in stl_order::iteration_order(&keys) {
            let e = &self.entries[keys[i]];
            for nic in e.preferred.iter().chain(&e.available) {
                if !order.contains(nic) {
                    order.push(nic.clone());
                }
            }
        }
        order
    }

    /// The entry for `location`, or the wildcard one (every NIC, all preferred) when
    /// the location is unknown (upstream retries an unknown location with `*`).
    pub fn entry(&self, location: &str) -> Entry {
        match self.entries.get(location) {
            Some(e) if !(e.preferred.is_empty() && e.available.is_empty()) => e.clone(),
            _ => Entry {
                preferred: self.nic_order(),
                available: Vec::new(),
            },
        }
    }

    /// Picks a NIC for `location` (upstream's `selectDevice`): on the first attempt a
    /// preferred one chosen by `random` (or the available ones if none is preferred);
    /// on attempt `k > 0`, deterministically the `(k-1)`-th of preferred then
    /// available, so retries walk every NIC.
    pub fn select(&self, location: &str, attempt: u32, random: u64) -> Option<String> {
        select_from(&self.entry(location), attempt, random)
    }
}

/// [`Topology::select`] on one entry.
pub fn select_from(e: &Entry, attempt: u32, random: u64) -> Option<String> {
    if attempt == 0 {
        let pool = if e.preferred.is_empty() {
            &e.available
        } else {
            &e.preferred
        };
        if pool.is_empty() {
            return None;
        }
        return Some(pool[(random % pool.len() as u64) as usize].clone());
    }
    let total = e.preferred.len() + e.available.len();
    if total == 0 {
        return None;
    }
    let k = (attempt as usize - 1) % total;
    Some(if k < e.preferred.len() {
        e.preferred[k].clone()
    } else {
        e.available[k - e.preferred.len()].clone()
    })
}

/// The NUMA nodes of this machine (`/sys/devices/system/node/node<N>`), `[0]` when
/// the kernel shows none.
pub fn numa_nodes(sysfs: &Path) -> Vec<u32> {
    let mut nodes: Vec<u32> = std::fs::read_dir(sysfs.join("devices/system/node"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    nodes.sort_unstable();
    if nodes.is_empty() {
        nodes.push(0);
    }
    nodes
}

/// Where NIC `name` sits: its PCI device (`realpath(/sys/class/infiniband/<name>/../..)`)
/// and that device's NUMA node.
pub fn place_nic(sysfs: &Path, name: &str) -> NicPlacement {
    let pci = std::fs::canonicalize(sysfs.join("class/infiniband").join(name))
        .ok()
        .and_then(|p| p.parent()?.parent().map(Path::to_path_buf));
    let numa_node = pci.as_ref().and_then(|p| numa_of(p));
    NicPlacement {
        name: name.to_string(),
        numa_node,
        pci_path: pci,
    }
}

/// Where the GPUs of the process's GPU runtime sit (none without one): each
/// device's PCI path under `sysfs` from its bus id, and its NUMA node.
pub fn place_gpus(sysfs: &Path) -> Vec<GpuPlacement> {
    let Some(gpu) = crate::sys::cuda::system() else {
        return Vec::new();
    };
    (0..gpu.device_count())
        .map(|index| {
            let pci_path = gpu.pci_bus_id(index).and_then(|bus| {
                std::fs::canonicalize(sysfs.join("bus/pci/devices").join(bus)).ok()
            });
            GpuPlacement {
                index,
                numa_node: pci_path.as_deref().and_then(numa_of),
                pci_path,
            }
        })
        .collect()
}

/// The `numa_node` of a sysfs device directory (`None` for -1 or absent).
pub fn numa_of(device: &Path) -> Option<u32> {
    std::fs::read_to_string(device.join("numa_node"))
        .ok()?
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|n| *n >= 0)
        .map(|n| n as u32)
}

/// Path distance between two sysfs device paths: the components after their common
/// prefix (upstream's measure of PCI closeness).
pub fn pci_distance(a: &Path, b: &Path) -> usize {
    let (ac, bc): (Vec<_>, Vec<_>) = (a.components().collect(), b.components().collect());
    let common = ac.iter().zip(&bc).take_while(|(x, y)| x == y).count();
    (ac.len() - common) + (bc.len() - common)
}

/// Builds the matrix for `nics` (already filtered to usable ones) and `gpus`:
/// `cpu:<n>` prefers the NICs on NUMA node n; `cuda:<i>` prefers, among the NICs on
/// its NUMA node (or all when none), those at the smallest PCI distance.
pub fn build(nics: &[NicPlacement], numa: &[u32], gpus: &[GpuPlacement]) -> Topology {
    let mut entries = BTreeMap::new();
    for &node in numa {
        let (preferred, available): (Vec<&NicPlacement>, Vec<&NicPlacement>) =
            nics.iter().partition(|n| n.numa_node == Some(node));
        entries.insert(
            format!("cpu:{node}"),
            Entry {
                preferred: preferred.iter().map(|n| n.name.clone()).collect(),
                available: available.iter().map(|n| n.name.clone()).collect(),
            },
        );
    }
    for gpu in gpus {
        let same_node: Vec<&NicPlacement> = nics
            .iter()
            .filter(|n| gpu.numa_node.is_some() && n.numa_node == gpu.numa_node)
            .collect();
        let candidates: Vec<&NicPlacement> = if same_node.is_empty() {
            nics.iter().collect()
        } else {
            same_node
        };
        let distance = |n: &NicPlacement| match (&gpu.pci_path, &n.pci_path) {
            (Some(g), Some(p)) => pci_distance(g, p),
            _ => usize::MAX,
        };
        let best = candidates.iter().map(|n| distance(n)).min();
        let preferred: Vec<String> = candidates
            .iter()
            .filter(|n| Some(distance(n)) == best)
            .map(|n| n.name.clone())
            .collect();
        let available: Vec<String> = nics
            .iter()
            .map(|n| n.name.clone())
            .filter(|n| !preferred.contains(n))
            .collect();
        entries.insert(
            format!("cuda:{}", gpu.index),
            Entry {
                preferred,
                available,
            },
        );
    }
    Topology { entries }
}

/// The RDMA devices worth using: listed by the verbs provider, allowed by `filter`
/// (when not empty) and `MC_TE_FILTERS`, openable, with port `MC_IB_PORT` active and
/// a non-empty GID table. Returns them and, for each skipped one, why.
pub fn usable_nics(
    verbs: &dyn Verbs,
    cfg: &RdmaConfig,
    filter: &[String],
) -> Result<(Vec<String>, Vec<String>)> {
    let names = verbs
        .device_names()
        .map_err(|e| Error::NotSupportedTransport(format!("rdma: {e}")))?;
    let mut usable = Vec::new();
    let mut skipped = Vec::new();
    for name in names {
        if !filter.is_empty() && !filter.contains(&name) {
            continue;
        }
        if !cfg.device_filter.is_empty() && !cfg.device_filter.contains(&name) {
            continue;
        }
        match probe(verbs, &name, cfg.ib_port) {
            Ok(()) => usable.push(name),
            Err(why) => skipped.push(format!("{name}: {why}")),
        }
    }
    Ok((usable, skipped))
}

/// Opens `name` and checks its port is active with GIDs.
fn probe(verbs: &dyn Verbs, name: &str, port: u8) -> std::result::Result<(), RdmaError> {
    let ctx = verbs.open_device(name)?;
    let r = verbs
        .query_port(ctx, port)
        .map_err(RdmaError::from)
        .and_then(|p| {
            if !p.active {
                return Err(RdmaError::PortInactive(port));
            }
            if p.gid_table_len == 0 {
                return Err(RdmaError::NoGidTable(port));
            }
            Ok(())
        });
    verbs.close_device(ctx);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic(name: &str, node: Option<u32>, pci: &str) -> NicPlacement {
        NicPlacement {
            name: name.into(),
            numa_node: node,
            pci_path: Some(PathBuf::from(pci)),
        }
    }

    #[test]
    fn json_round_trip_and_errors() {
        let t = Topology::parse(
            r#"{"cpu:0": [["mlx5_0"], ["mlx5_1"]], "cpu:1": [[], ["mlx5_0", "mlx5_1"]]}"#,
        )
        .unwrap();
        assert_eq!(Topology::from_value(&t.to_value()).unwrap(), t);
        assert_eq!(t.locations().collect::<Vec<_>>(), ["cpu:0", "cpu:1"]);
        for bad in [
            r#"[]"#,
            r#"{"cpu:0": [["a"]]}"#,
            r#"{"cpu:0": [["a"], ["b"], []]}"#,
            r#"{"cpu:0": "a"}"#,
            r#"{"cpu:0": [[1], []]}"#,
            "not json",
        ] {
            let e = Topology::parse(bad).unwrap_err();
            assert_eq!(e.err_code(), -103, "{bad}");
        }
    }

    #[test]
    fn selection_walks_preferred_then_available() {
        let t = Topology::parse(r#"{"cpu:0": [["a", "b"], ["c"]]}"#).unwrap();
        for r in 0..10 {
            let first = t.select("cpu:0", 0, r).unwrap();
            assert!(first == "a" || first == "b");
        }
        let retries: Vec<String> = (1..=4).map(|k| t.select("cpu:0", k, 0).unwrap()).collect();
        assert_eq!(retries, ["a", "b", "c", "a"]);
        // Unknown locations use every NIC.
        assert_eq!(t.entry("cuda:9").preferred, t.nic_order());
        let none = Topology::parse(r#"{"cpu:0": [[], ["c"]]}"#).unwrap();
        assert_eq!(none.select("cpu:0", 0, 7).unwrap(), "c");
        assert!(Topology::default().select("cpu:0", 0, 0).is_none());
    }

    #[test]
    fn built_from_placements() {
        let nics = [
            nic(
                "mlx5_0",
                Some(0),
                "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0",
            ),
            nic(
                "mlx5_1",
                Some(1),
                "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0",
            ),
            NicPlacement {
                name: "rxe0".into(),
                numa_node: None,
                pci_path: None,
            },
        ];
        let gpus = [GpuPlacement {
            index: 0,
            numa_node: Some(1),
            pci_path: Some(PathBuf::from(
                "/sys/devices/pci0000:80/0000:80:01.0/0000:82:00.0",
            )),
        }];
        let t = build(&nics, &[0, 1], &gpus);
        let e = t.entry("cpu:0");
        assert_eq!(e.preferred, ["mlx5_0"]);
        assert_eq!(e.available, ["mlx5_1", "rxe0"]);
        let g = t.entry("cuda:0");
        assert_eq!(g.preferred, ["mlx5_1"]);
        assert_eq!(g.available, ["mlx5_0", "rxe0"]);
        assert_eq!(
            pci_distance(
                Path::new("/sys/devices/pci0000:80/0000:80:01.0/0000:82:00.0"),
                Path::new("/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0")
            ),
            2
        );
    }
}
