//! `--enable_metadata_cleanup_on_timeout`: when a client expires, its Transfer Engine
//! entries (`mooncake/[<cluster>/]ram/<segment>` and `.../rpc_meta/<segment>`) are
//! removed from the HTTP metadata server, so peers stop finding a dead process there.
//!
//! With the master's own metadata server the keys go at once, in process; with a
//! separate one they are queued for a worker thread that sends HTTP `DELETE`s, so an
//! unreachable server never holds up the client monitor. Unlike upstream, a segment
//! remounted (its client came back) before its removal ran is left alone.

use crate::error::{Error, Result};
use crate::metadata::http::HttpMetadataStore;
use crate::metadata::http_server::MetadataTable;
use crate::metadata::{KeyLayout, MetadataStore};
use crossbeam_channel::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Whether an expired segment is still unmounted when its removal runs.
pub type StillGone = Box<dyn Fn() -> bool + Send>;

/// Removes expired clients' metadata from an HTTP metadata server.
pub struct MetadataCleanup {
    keys: KeyLayout,
    target: Target,
}

enum Target {
    InProcess(Arc<MetadataTable>),
    Remote {
        queue: Option<Sender<(String, StillGone)>>,
        worker: Option<JoinHandle<()>>,
    },
}

impl MetadataCleanup {
    /// Cleans up in the master's own metadata server's table.
    pub fn in_process(table: Arc<MetadataTable>, cluster_id: Option<&str>) -> MetadataCleanup {
        MetadataCleanup {
            keys: KeyLayout::new(cluster_id),
            target: Target::InProcess(table),
        }
    }

    /// Cleans up on the HTTP metadata server at `url` (a TE connection string such as
    /// `http://host:8080/metadata`); fails when the URL is not one this build speaks.
    pub fn remote(url: &str, cluster_id: Option<&str>) -> Result<MetadataCleanup> {
        let store = HttpMetadataStore::new(url)?;
        let keys = KeyLayout::new(cluster_id);
        let (queue, jobs) = crossbeam_channel::unbounded::<(String, StillGone)>();
        let worker_keys = keys.clone();
        let worker = std::thread::Builder::new()
            .name("mc-meta-cleanup".into())
            .spawn(move || {
                for (segment, still_gone) in jobs {
                    if still_gone() {
                        remove_remote(&store, &worker_keys, &segment);
                    }
                }
            })
            .map_err(|e| Error::Metadata(format!("starting the metadata cleanup thread: {e}")))?;
        Ok(MetadataCleanup {
            keys,
            target: Target::Remote {
                queue: Some(queue),
                worker: Some(worker),
            },
        })
    }

    /// The client owning `segment` expired: remove the segment's entries (unless
    /// `still_gone` says it was mounted again by the time the removal runs).
    pub fn segment_expired(&self, segment: &str, still_gone: StillGone) {
        match &self.target {
            Target::InProcess(table) => {
                if still_gone() {
                    let ram = table.remove(&self.keys.segment(segment));
                    let rpc = table.remove(&self.keys.rpc_meta(segment));
                    log::info!(
                        "Cleaned up HTTP metadata for segment: {segment}, ram_key_removed={ram}, \
                         rpc_key_removed={rpc}"
                    );
                }
            }
            Target::Remote { queue, .. } => {
                if let Some(queue) = queue {
                    let _ = queue.send((segment.to_string(), still_gone));
                }
            }
        }
    }
}

/// Sends the two `DELETE`s for `segment`, each on its own so one failing does not
/// keep the other.
fn remove_remote(store: &HttpMetadataStore, keys: &KeyLayout, segment: &str) {
    let mut removed = [false; 2];
    for (key, done) in [keys.segment(segment), keys.rpc_meta(segment)]
        .iter()
        .zip(&mut removed)
    {
        match store.remove(key) {
            Ok(()) => *done = true,
            Err(e) => log::warn!("Remote HTTP metadata cleanup of {key} failed: {e}"),
        }
    }
    log::info!(
        "Cleaned up remote HTTP metadata for segment: {segment}, ram_key_removed={}, \
         rpc_key_removed={}",
        removed[0],
        removed[1]
    );
}

impl Drop for MetadataCleanup {
    fn drop(&mut self) {
        if let Target::Remote { queue, worker } = &mut self.target {
            drop(queue.take());
            if let Some(worker) = worker.take() {
                let _ = worker.join();
            }
        }
    }
}

impl std::fmt::Debug for MetadataCleanup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let target = match self.target {
            Target::InProcess(_) => "in process",
            Target::Remote { .. } => "remote",
        };
        f.debug_struct("MetadataCleanup")
            .field("keys", &self.keys)
            .field("target", &target)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::http_server::HttpMetadataServer;

    fn publish(table: &MetadataTable, keys: &KeyLayout, segment: &str) {
        for key in [keys.segment(segment), keys.rpc_meta(segment)] {
            table.put(&key, b"{}".to_vec());
        }
    }

    fn published(table: &MetadataTable, keys: &KeyLayout, segment: &str) -> [bool; 2] {
        [keys.segment(segment), keys.rpc_meta(segment)].map(|k| table.get(&k).is_some())
    }

    #[test]
    fn in_process_removes_both_entries_unless_remounted() {
        let table = Arc::new(MetadataTable::new());
        let keys = KeyLayout::new(Some("c1"));
        let cleanup = MetadataCleanup::in_process(table.clone(), Some("c1"));
        for s in ["10.0.0.1:1", "10.0.0.2:1"] {
            publish(&table, &keys, s);
        }
        cleanup.segment_expired("10.0.0.1:1", Box::new(|| true));
        cleanup.segment_expired("10.0.0.2:1", Box::new(|| false));
        assert_eq!(published(&table, &keys, "10.0.0.1:1"), [false, false]);
        assert_eq!(published(&table, &keys, "10.0.0.2:1"), [true, true]);
    }

    #[test]
    fn remote_sends_deletes_unless_remounted_and_survives_a_dead_server() {
        let server = HttpMetadataServer::start("127.0.0.1:0".parse().unwrap()).unwrap();
        let url = format!("http://{}/metadata", server.local_addr());
        let keys = KeyLayout::new(None);
        let table = server.table().clone();
        {
            let cleanup = MetadataCleanup::remote(&url, None).unwrap();
            for s in ["a:1", "b:1", "c:1"] {
                publish(&table, &keys, s);
            }
            cleanup.segment_expired("b:1", Box::new(|| false));
            cleanup.segment_expired("a:1", Box::new(|| true));
            // Only one entry of c exists: the other's DELETE fails, this one goes.
            table.remove(&keys.rpc_meta("c:1"));
            cleanup.segment_expired("c:1", Box::new(|| true));
            // Dropping waits for the queued removals.
        }
        assert_eq!(published(&table, &keys, "a:1"), [false, false]);
        assert_eq!(published(&table, &keys, "b:1"), [true, true]);
        assert_eq!(published(&table, &keys, "c:1"), [false, false]);

        // A server gone away: the removal fails and is logged; nothing panics.
        let dead = format!("http://{}/metadata", server.local_addr());
        server.stop();
        let cleanup = MetadataCleanup::remote(&dead, None).unwrap();
        cleanup.segment_expired("a:1", Box::new(|| true));
        drop(cleanup);
    }

    #[test]
    fn a_url_this_build_cannot_speak_is_refused() {
        assert!(MetadataCleanup::remote("etcd://127.0.0.1:2379", None).is_err());
        assert!(MetadataCleanup::remote("https://meta:8080/metadata", None).is_err());
    }
}
