//! Which engines share a host: the kernel's boot id plus the namespaces a same-host
//! transfer crosses (user: permission to reach the other process; pid: the pid its
//! socket reports means the same process; net: the abstract socket is reachable).
//! Never inferred from IP addresses.

use std::sync::OnceLock;

/// This process's identity, `None` when `/proc` does not tell (no same-host path).
pub fn host_identity() -> Option<&'static str> {
    static IDENTITY: OnceLock<Option<String>> = OnceLock::new();
    IDENTITY.get_or_init(read_identity).as_deref()
}

fn read_identity() -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let boot = boot.trim();
    if boot.is_empty() {
        return None;
    }
    let mut id = format!("boot:{boot}");
    for ns in ["user", "pid", "net"] {
        let link = std::fs::read_link(format!("/proc/self/ns/{ns}")).ok()?;
        id.push('/');
        id.push_str(&link.to_string_lossy());
    }
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_names_boot_and_namespaces() {
        let id = host_identity().expect("a Linux /proc");
        assert!(id.starts_with("boot:"), "{id}");
        for ns in ["/user:[", "/pid:[", "/net:["] {
            assert!(id.contains(ns), "{id}");
        }
        assert_eq!(host_identity(), Some(id));
    }
}
