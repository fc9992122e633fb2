//! `tent_load_config_from_file` and `tent_set_config`: the settings the calling
//! thread's next `tent_create_engine` uses (per thread, as upstream's), and how they
//! become an engine's metadata connection, name and RPC port.
//!
//! Keys honoured (upstream's names): `metadata_type` (`p2p` (default), `http`, `etcd`,
//! `redis`), `metadata_servers` (the URL or `host:port[,host:port]`),
//! `local_segment_name`, `rpc_server_hostname`, `rpc_server_port`. Every other key
//! (upstream's scheduling, queueing and transport tuning) is accepted and changes
//! nothing; the engine's own settings come from the `MC_*` variables.

#![allow(non_snake_case)]

use crate::config::Config;
use crate::ffi::args::c_str;
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::fail::{invalid, FfiError};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::c_char;

/// The calling thread's TENT settings: a config file, then `key = value` overrides.
#[derive(Debug, Default, Clone)]
struct Settings {
    path: Option<String>,
    attrs: BTreeMap<String, String>,
}

thread_local! {
    static SETTINGS: RefCell<Settings> = RefCell::new(Settings::default());
}

/// What an engine is created with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EnginePlan {
    /// The classic engine's metadata connection string.
    pub metadata: String,
    /// Its local server name (a host, or `host:port`).
    pub local_name: String,
    /// A fixed RPC port, when one was asked for.
    pub rpc_port: Option<u16>,
}

/// Remembers `path` as the JSON config file of the thread's next engine.
///
/// # Safety
/// `path` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tent_load_config_from_file(path: *const c_char) {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        let path = unsafe { c_str(path, "path") }?.into_owned();
        SETTINGS.with(|s| s.borrow_mut().path = Some(path));
        Ok(())
    })
}

/// Sets `key` to `value` for the thread's next engine (over the config file's).
///
/// # Safety
/// `key` and `value` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tent_set_config(key: *const c_char, value: *const c_char) {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        let key = unsafe { c_str(key, "key") }?.into_owned();
        // SAFETY: as above.
        let value = unsafe { c_str(value, "value") }?.into_owned();
        SETTINGS.with(|s| s.borrow_mut().attrs.insert(key, value));
        Ok(())
    })
}

/// The plan for the calling thread's next engine.
pub(crate) fn current_plan() -> Result<EnginePlan, FfiError> {
    let settings = SETTINGS.with(|s| s.borrow().clone());
    let mut values = BTreeMap::new();
    if let Some(path) = &settings.path {
        match std::fs::read_to_string(path) {
            Ok(text) => read_json(&text, path, &mut values),
            Err(e) => log::warn!("tent_create_engine: config file {path}: {e}; using defaults"),
        }
    }
    values.extend(settings.attrs);
    plan(&values, &|| {
        let config = Config::global();
        config
            .advertised_ip
            .clone()
            .or_else(|| crate::host::net::first_interface_ip(config.use_ipv6))
            .unwrap_or_else(|| "127.0.0.1".into())
    })
}

/// The top-level scalar keys of a JSON config file (upstream's file format).
fn read_json(text: &str, path: &str, into: &mut BTreeMap<String, String>) {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) => {
            for (k, v) in map {
                let value = match v {
                    serde_json::Value::String(s) => s,
                    serde_json::Value::Number(n) => n.to_string(),
                    serde_json::Value::Bool(b) => b.to_string(),
                    _ => continue,
                };
                into.insert(k, value);
            }
        }
        Ok(_) => log::warn!("tent_create_engine: {path} is not a JSON object; using defaults"),
        Err(e) => log::warn!("tent_create_engine: {path}: {e}; using defaults"),
    }
}

/// The engine `values` describe; `default_host` names this host when no hostname is
/// configured.
fn plan(
    values: &BTreeMap<String, String>,
    default_host: &dyn Fn() -> String,
) -> Result<EnginePlan, FfiError> {
    let get = |k: &str| values.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let servers = get("metadata_servers").unwrap_or("");
    let metadata = match get("metadata_type")
        .unwrap_or("p2p")
        .to_ascii_lowercase()
        .as_str()
    {
        "p2p" | "p2phandshake" => "P2PHANDSHAKE".to_string(),
        "http" => with_scheme(servers, "http://", "metadata_servers")?,
        "etcd" => with_scheme(servers, "etcd://", "metadata_servers")?,
        "redis" => with_scheme(servers, "redis://", "metadata_servers")?,
        other => {
            return Err(invalid(format!(
                "metadata_type {other:?} is not one of p2p, http, etcd, redis"
            )))
        }
    };
    let rpc_port = match get("rpc_server_port") {
        None | Some("0") => None,
        Some(p) => Some(
            p.parse::<u16>()
                .map_err(|_| invalid(format!("rpc_server_port {p:?} is not in [0, 65535]")))?,
        ),
    };
    let local_name = match get("local_segment_name") {
        Some(name) => name.to_string(),
        None => get("rpc_server_hostname")
            .map(str::to_string)
            .unwrap_or_else(default_host),
    };
    Ok(EnginePlan {
        metadata,
        local_name,
        rpc_port,
    })
}

/// `servers` with `scheme` in front unless it already has one.
fn with_scheme(servers: &str, scheme: &str, what: &str) -> Result<String, FfiError> {
    if servers.is_empty() {
        return Err(invalid(format!("{what} is empty")));
    }
    Ok(if servers.contains("://") {
        servers.to_string()
    } else {
        format!("{scheme}{servers}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(pairs: &[(&str, &str)]) -> Result<EnginePlan, String> {
        let values = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        plan(&values, &|| "10.0.0.7".into()).map_err(|e| format!("{e:?}"))
    }

    #[test]
    fn upstream_keys_become_an_engine() {
        assert_eq!(
            of(&[]).unwrap(),
            EnginePlan {
                metadata: "P2PHANDSHAKE".into(),
                local_name: "10.0.0.7".into(),
                rpc_port: None
            }
        );
        let p = of(&[
            ("metadata_type", "http"),
            ("metadata_servers", "127.0.0.1:8080/metadata"),
            ("rpc_server_hostname", "127.0.0.1"),
            ("rpc_server_port", "12345"),
            ("merge_requests", "false"),
        ])
        .unwrap();
        assert_eq!(p.metadata, "http://127.0.0.1:8080/metadata");
        assert_eq!(
            (p.local_name.as_str(), p.rpc_port),
            ("127.0.0.1", Some(12345))
        );
        let p = of(&[
            ("metadata_type", "etcd"),
            ("metadata_servers", "a:2379,b:2379"),
        ])
        .unwrap();
        assert_eq!(p.metadata, "etcd://a:2379,b:2379");
        let p = of(&[
            ("metadata_type", "redis"),
            ("metadata_servers", "redis://r:6379"),
        ])
        .unwrap();
        assert_eq!(p.metadata, "redis://r:6379");
        let p = of(&[
            ("local_segment_name", "node-a"),
            ("rpc_server_hostname", "h"),
        ])
        .unwrap();
        assert_eq!(p.local_name, "node-a");
        assert!(of(&[("metadata_type", "zk")]).is_err());
        assert!(of(&[("metadata_type", "http")]).is_err(), "no servers");
        assert!(of(&[("rpc_server_port", "70000")]).is_err());
        assert_eq!(of(&[("rpc_server_port", "0")]).unwrap().rpc_port, None);
    }

    #[test]
    fn a_config_file_gives_its_scalar_keys() {
        let mut values = BTreeMap::new();
        read_json(
            r#"{"metadata_type":"p2p","rpc_server_port":0,"verbose":true,"nested":{"a":1}}"#,
            "f",
            &mut values,
        );
        assert_eq!(values["metadata_type"], "p2p");
        assert_eq!(values["rpc_server_port"], "0");
        assert_eq!(values["verbose"], "true");
        assert!(!values.contains_key("nested"));
        read_json("[1]", "f", &mut values);
        read_json("not json", "f", &mut values);
        assert_eq!(values.len(), 3);
    }
}
