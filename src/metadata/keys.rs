//! Metadata key layout (spec §2.2): `mooncake/[<cluster>/]{rpc_meta|ram}/<name>`.

/// Builds metadata keys for one cluster id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLayout {
    prefix: String,
}

impl KeyLayout {
    /// A layout for `cluster_id` (`MC_METADATA_CLUSTER_ID`), or the default cluster.
    pub fn new(cluster_id: Option<&str>) -> KeyLayout {
        let prefix = match cluster_id.filter(|c| !c.is_empty()) {
            Some(c) if c.ends_with('/') => format!("mooncake/{c}"),
            Some(c) => format!("mooncake/{c}/"),
            None => "mooncake/".to_string(),
        };
        KeyLayout { prefix }
    }

    /// Key of a segment's RPC address entry.
    pub fn rpc_meta(&self, segment: &str) -> String {
        format!("{}rpc_meta/{segment}", self.prefix)
    }

    /// Key of a segment's descriptor: `ram/<name>`, or `<name>` when it contains a `/`.
    pub fn segment(&self, segment: &str) -> String {
        if segment.contains('/') {
            format!("{}{segment}", self.prefix)
        } else {
            format!("{}ram/{segment}", self.prefix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_upstream() {
        let k = KeyLayout::new(None);
        assert_eq!(k.rpc_meta("127.0.0.1:1"), "mooncake/rpc_meta/127.0.0.1:1");
        assert_eq!(k.segment("n"), "mooncake/ram/n");
        assert_eq!(k.segment("nvmeof/x"), "mooncake/nvmeof/x");
        assert_eq!(k.segment(""), "mooncake/ram/");
        let k = KeyLayout::new(Some("c1"));
        assert_eq!(k.segment("x"), "mooncake/c1/ram/x");
        assert_eq!(
            KeyLayout::new(Some("c1/")).rpc_meta("x"),
            "mooncake/c1/rpc_meta/x"
        );
    }
}
