//! The P2P Store over real verbs: nodes in one process whose engines install only RDMA
//! on the device named by `MOONCAKE_INTEROP_RDMA` (`rxe0` in `scripts/rxe-vm.sh`, run
//! by `scripts/test-rdma-vm.sh`), sharing our in-process HTTP metadata server. A seed
//! puts an object of a few MiB in small shards, three receivers get it at once (bytes
//! verified, each a source of every shard), the seed withdraws its copy and a late
//! receiver gets the object from the receivers' replicas alone. The NICs' counters
//! show every byte went over RDMA. Without the variable the test prints a skip line
//! and passes: `p2p_store` runs the same store over TCP everywhere.

use mooncake::metadata::http_server::HttpMetadataServer;
use mooncake::p2p::payload::Payload;
use mooncake::p2p::{P2pConfig, P2pStore};

const NAME: &str = "ckpt/rdma-model";
/// A few MiB, not a whole number of shards.
const SIZE: usize = (5 << 20) + 4321;
const SHARD: u64 = 128 << 10;

fn device(test: &str) -> Option<String> {
    match std::env::var("MOONCAKE_INTEROP_RDMA") {
        Ok(d) if !d.trim().is_empty() => Some(d),
        _ => {
            eprintln!(
                "SKIPPED {test}: no RDMA device (MOONCAKE_INTEROP_RDMA is not set); \
                 it runs in the RDMA VM suite (scripts/test-rdma-vm.sh)"
            );
            None
        }
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) ^ (i >> 11) as u8)
        .collect()
}

/// A name no other node of this test has (the HTTP metadata server names segments by
/// it): 127.0.0.1 with a port nothing listens on now.
fn unique_name() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    format!("127.0.0.1:{port}")
}

/// A node whose engine has RDMA on `dev` and nothing else (no TCP, no same-host path),
/// so every byte it moves to or from another node crosses the NIC.
fn node(metadata: &str, dev: &str) -> P2pStore {
    let matrix = format!(r#"{{"cpu:0": [["{dev}"], []]}}"#);
    let config = P2pConfig {
        shard_size: SHARD,
        no_source_retries: 3,
        ..P2pConfig::default()
    };
    let node = P2pStore::new_with(metadata, &unique_name(), Some(&matrix), config)
        .expect("a P2P node with RDMA on the device");
    let engine = node.engine();
    assert!(engine.has_transport("rdma"), "RDMA installed");
    assert!(!engine.has_transport("tcp"), "TCP installed beside RDMA");
    let nics = engine.rdma().expect("the RDMA transport").links_json();
    assert_eq!(nics["local_nics"][0]["device"], dev, "{nics}");
    node
}

/// `(bytes read, bytes written)` over the node's one NIC.
fn nic_bytes(node: &P2pStore) -> (u64, u64) {
    let links = node.engine().rdma().unwrap().links_json();
    let nics = links["local_nics"].as_array().expect("local_nics");
    assert_eq!(nics.len(), 1, "{links}");
    let count = |field: &str| nics[0][field].as_u64().expect(field);
    (count("bytes_read"), count("bytes_written"))
}

fn payload(node: &P2pStore) -> Payload {
    node.meta()
        .get(NAME)
        .expect("reading the metadata")
        .expect("the object's key")
        .0
}

#[test]
fn receivers_fetch_a_checkpoint_over_rdma_and_serve_it_to_each_other() {
    let test = "receivers_fetch_a_checkpoint_over_rdma_and_serve_it_to_each_other";
    let Some(dev) = device(test) else {
        return;
    };
    let server = HttpMetadataServer::start("127.0.0.1:0".parse().unwrap()).expect("server");
    let metadata = format!("http://{}/metadata", server.local_addr());

    let seed = node(&metadata, &dev);
    let data = pattern(SIZE, 11);
    seed.put(NAME, &data).expect("put");
    let shards = SIZE.div_ceil(SHARD as usize);
    assert_eq!(payload(&seed).shards.len(), shards);

    let receivers: Vec<P2pStore> = (0..3).map(|_| node(&metadata, &dev)).collect();
    for r in &receivers {
        let id = r.engine().open_segment(seed.local_server_name()).unwrap();
        let desc = r.engine().segment_descriptor(id).unwrap();
        assert_eq!(desc.protocol, "rdma");
        assert_eq!(desc.rdma.as_ref().unwrap().devices[0].name, dev);
    }
    std::thread::scope(|s| {
        for r in &receivers {
            let data = &data;
            s.spawn(move || {
                let got = r.get(NAME).expect("get over RDMA");
                assert!(got == *data, "{}: wrong bytes", r.local_server_name());
            });
        }
    });
    let p = payload(&seed);
    for (i, shard) in p.shards.iter().enumerate() {
        assert!(shard.held_by(seed.local_server_name()), "shard {i}");
        for r in &receivers {
            assert!(shard.held_by(r.local_server_name()), "shard {i}");
        }
    }
    // Receivers read (RDMA READ from the sources' memory): each at least the whole
    // object over its NIC (a shard refetched after a failure counts twice).
    for r in &receivers {
        let (read, written) = nic_bytes(r);
        assert!(
            read >= SIZE as u64,
            "{} read {read} bytes over {dev}, the object has {SIZE}",
            r.local_server_name()
        );
        assert_eq!(written, 0);
        assert_eq!(r.engine().same_host_bytes(), 0);
    }
    // The seed only served: its NIC initiated nothing.
    assert_eq!(nic_bytes(&seed), (0, 0));

    // The seed withdraws its copy: a late receiver gets the object from the
    // receivers' replicas alone, node to node over RDMA.
    seed.unregister(NAME).expect("unregister");
    assert!(payload(&receivers[0])
        .shards
        .iter()
        .all(|s| s.gold.is_empty() && !s.held_by(seed.local_server_name())));
    let late = node(&metadata, &dev);
    let got = late.get(NAME).expect("get from the replicas over RDMA");
    assert!(got == data, "the late receiver got wrong bytes");
    let (read, written) = nic_bytes(&late);
    assert!(read >= SIZE as u64, "the late receiver read {read} bytes");
    assert_eq!(written, 0);
    assert!(payload(&late)
        .shards
        .iter()
        .all(|s| s.held_by(late.local_server_name())));

    late.close();
    for r in &receivers {
        r.close();
    }
    assert!(
        late.meta().get(NAME).unwrap().is_none(),
        "the key goes with the last copy"
    );
    seed.close();
    server.stop();
}
