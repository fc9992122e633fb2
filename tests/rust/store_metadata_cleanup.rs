//! `--enable_metadata_cleanup_on_timeout` against the real `mooncake_master` binary
//! and `store_node` children: a client killed with SIGKILL, or frozen past its 4 s
//! client TTL, has its Transfer Engine entries (`mooncake/[<cluster>/]ram/<segment>`,
//! `.../rpc_meta/<segment>`) removed from the HTTP metadata server, whether the
//! master embeds that server or it runs apart (found through
//! `MOONCAKE_TE_META_DATA_SERVER`, under `MC_METADATA_CLUSTER_ID`'s prefix). A live
//! client's entries stay, a frozen one publishes its entries again once it resumes,
//! and without the flag a dead client's entries stay (upstream's default).

#[path = "store_support/cluster.rs"]
mod cluster;
#[path = "store_support/node.rs"]
mod node;

use cluster::{eventually, Master};
use mooncake::metadata::http::HttpMetadataStore;
use mooncake::metadata::http_server::HttpMetadataServer;
use mooncake::metadata::{KeyLayout, MetadataStore};
use node::Node;

/// Client TTL of the masters here: short, so expiry comes soon.
const SHORT_TTL: u64 = 4;

/// The flag under test.
const CLEANUP: &str = "--enable_metadata_cleanup_on_timeout=true";

/// Reads keys of one HTTP metadata server.
struct Metadata {
    store: HttpMetadataStore,
    keys: KeyLayout,
}

impl Metadata {
    fn new(url: &str, cluster: Option<&str>) -> Metadata {
        Metadata {
            store: HttpMetadataStore::new(url).expect("metadata URL"),
            keys: KeyLayout::new(cluster),
        }
    }

    /// Which of the node's two entries (descriptor, RPC address) exist.
    fn entries(&self, node: &Node) -> [bool; 2] {
        [
            self.keys.segment(&node.hostname),
            self.keys.rpc_meta(&node.hostname),
        ]
        .map(|key| {
            self.store
                .get(&key)
                .unwrap_or_else(|e| panic!("GET {key}: {e}"))
                .is_some()
        })
    }
}

#[test]
fn killed_and_frozen_clients_lose_their_entries_in_the_masters_metadata_server() {
    let master = Master::start_with_all(SHORT_TTL, true, &[CLEANUP], &[]);
    let metadata = Metadata::new(&master.metadata(), None);
    let mut killed = Node::start(&master, 16, &[]);
    let frozen = Node::start(&master, 16, &[]);
    let live = Node::start(&master, 16, &[]);
    for node in [&killed, &frozen, &live] {
        assert_eq!(metadata.entries(node), [true, true], "{}", node.hostname);
    }

    killed.proc.kill();
    frozen.proc.freeze();
    eventually(
        "the killed and the frozen client's entries are removed",
        || metadata.entries(&killed) == [false; 2] && metadata.entries(&frozen) == [false; 2],
        || {
            format!(
                "killed {:?}, frozen {:?}; segments {:?}\n{}",
                metadata.entries(&killed),
                metadata.entries(&frozen),
                master.segments(),
                master.proc.log_tail()
            )
        },
    );
    assert!(!master.segments().contains(&killed.hostname));
    assert_eq!(metadata.entries(&live), [true, true]);

    // Resumed, the frozen client remounts and publishes its entries again.
    frozen.proc.thaw();
    eventually(
        "the resumed client is mounted and published again",
        || {
            master.segments().contains(&frozen.hostname)
                && metadata.entries(&frozen) == [true, true]
        },
        || format!("{:?}\n{}", master.segments(), frozen.proc.log_tail()),
    );
    assert_eq!(metadata.entries(&killed), [false, false]);
    assert_eq!(metadata.entries(&live), [true, true]);
}

#[test]
fn a_separate_metadata_server_is_cleaned_over_http_under_the_cluster_prefix() {
    let server = HttpMetadataServer::start("127.0.0.1:0".parse().unwrap()).expect("bind");
    let url = format!("http://{}/metadata", server.local_addr());
    let cluster = [("MC_METADATA_CLUSTER_ID", "cluster-a")];
    let master = Master::start_with_all(
        SHORT_TTL,
        false,
        &[CLEANUP],
        &[("MOONCAKE_TE_META_DATA_SERVER", url.as_str()), cluster[0]],
    );
    let metadata = Metadata::new(&url, Some("cluster-a"));
    let mut killed = Node::start_with_metadata(&master, &url, 16, &cluster);
    let live = Node::start_with_metadata(&master, &url, 16, &cluster);
    assert_eq!(metadata.entries(&killed), [true, true]);
    // Entries of the same name outside the cluster are not the master's to remove.
    let other = Metadata::new(&url, None);
    other
        .store
        .set(&other.keys.segment(&killed.hostname), b"{}")
        .unwrap();

    killed.proc.kill();
    eventually(
        "the killed client's entries are removed",
        || metadata.entries(&killed) == [false, false],
        || format!("{:?}\n{}", master.segments(), master.proc.log_tail()),
    );
    assert_eq!(metadata.entries(&live), [true, true]);
    assert_eq!(other.entries(&killed), [true, false]);
    server.stop();
}

#[test]
fn without_the_flag_a_killed_clients_entries_stay() {
    let master = Master::start_with(SHORT_TTL, true);
    let metadata = Metadata::new(&master.metadata(), None);
    let mut killed = Node::start(&master, 16, &[]);
    assert_eq!(metadata.entries(&killed), [true, true]);
    killed.proc.kill();
    eventually(
        "the killed client expires",
        || !master.segments().contains(&killed.hostname),
        || master.proc.log_tail(),
    );
    assert_eq!(metadata.entries(&killed), [true, true]);
}
