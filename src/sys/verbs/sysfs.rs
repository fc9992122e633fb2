//! Reading RDMA port details from sysfs: text files and the GIDs written there (the
//! same text form the transport publishes).

use std::path::Path;

/// Reads a sysfs file as trimmed text.
pub(super) fn sysfs(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// A GID as text: 32 hex digits with any `:` between them (sysfs writes 8 groups of
/// 4, "fe80:0000:..."; the transport publishes 16 groups of 2); `None` when invalid.
pub fn parse_gid(text: &str) -> Option<[u8; 16]> {
    let hex: String = text.chars().filter(|c| *c != ':').collect();
    if hex.len() != 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut gid = [0u8; 16];
    for (i, b) in gid.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(gid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_gids_parse() {
        let g = parse_gid("0000:0000:0000:0000:0000:ffff:7f00:0001").unwrap();
        assert_eq!(&g[10..], &[0xff, 0xff, 127, 0, 0, 1]);
        assert!(parse_gid("zz").is_none());
        assert!(parse_gid("0000:0000").is_none());
    }
}
