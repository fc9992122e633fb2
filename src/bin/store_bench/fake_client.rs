//! The fake segment owner the master-load modes run with: it mounts fake segments
//! (made-up base addresses; the master only allocates ranges in them), pings every
//! second from a side thread (remounting when the master answers NEED_REMOUNT), and
//! unmounts them at the end; and the put calls it makes.

use crate::settings::Settings;
use mooncake::host::net::random_u64;
use mooncake::wire::master_api::{
    ClientStatus, ErrorCode, MasterApi, ObjectMeta, ReplicaType, ReplicateConfig, Segment, Uuid,
    DEFAULT_TENANT,
};
use mooncake::wire::rpc_client::MasterRpcClient;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where the first fake segment "lives" in the fake owner's address space.
pub(crate) const FAKE_BASE: u64 = 0x7f00_0000_0000;
/// Ping period (upstream's heartbeat period).
pub(crate) const PING_PERIOD: Duration = Duration::from_secs(1);

pub(crate) fn random_uuid() -> Uuid {
    Uuid {
        first: random_u64(),
        second: random_u64(),
    }
}

/// A connection of its own to the master (one lane), version-checked.
pub(crate) fn connect(s: &Settings) -> Result<MasterRpcClient, String> {
    let connect_timeout = s.rpc_timeout.min(Duration::from_secs(5));
    MasterRpcClient::connect_with_pool(&s.master_server_addr, s.rpc_timeout, connect_timeout, 1)
        .map_err(|e| format!("connecting to the master at {}: {e}", s.master_server_addr))
}

/// The fake segment owner: its id, segments, and heartbeat thread.
pub(crate) struct FakeClient {
    pub(crate) master: Arc<MasterRpcClient>,
    pub(crate) id: Uuid,
    pub(crate) segments: Vec<Segment>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) pinger: Option<JoinHandle<()>>,
}

impl FakeClient {
    /// Mounts `--fake_segments` fake segments of `--fake_segment_size` bytes and
    /// starts pinging.
    pub(crate) fn mount(s: &Settings) -> Result<FakeClient, String> {
        let master = Arc::new(connect(s)?);
        let id = random_uuid();
        let tag = random_u64() as u32;
        let segments: Vec<Segment> = (0..s.fake_segments)
            .map(|i| {
                let name = format!("store-bench-fake-{tag:08x}-{i}");
                Segment {
                    id: random_uuid(),
                    name: name.clone(),
                    base: FAKE_BASE + i as u64 * s.fake_segment_size,
                    size: s.fake_segment_size,
                    te_endpoint: name,
                    protocol: "tcp".into(),
                    host_id: "127.0.0.1".into(),
                }
            })
            .collect();
        for seg in &segments {
            master
                .mount_segment(seg, id)
                .map_err(|e| format!("MountSegment {}: {e}", seg.name))?;
        }
        // The first ping answers NEED_REMOUNT; remount right away like a real client.
        heartbeat(&*master, id, &segments);
        let stop = Arc::new(AtomicBool::new(false));
        let pinger = {
            let (master, segments, stop) = (master.clone(), segments.clone(), stop.clone());
            std::thread::Builder::new()
                .name("store-bench-ping".into())
                .spawn(move || {
                    let mut next = Instant::now() + PING_PERIOD;
                    while !stop.load(Ordering::SeqCst) {
                        if Instant::now() >= next {
                            next += PING_PERIOD;
                            heartbeat(&*master, id, &segments);
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                })
                .map_err(|e| format!("starting the ping thread: {e}"))?
        };
        eprintln!(
            "store_bench: fake client {id} mounted {} x {} bytes on {}",
            segments.len(),
            s.fake_segment_size,
            s.master_server_addr
        );
        Ok(FakeClient {
            master,
            id,
            segments,
            stop,
            pinger: Some(pinger),
        })
    }

    /// Stops pinging and unmounts the segments.
    pub(crate) fn close(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.pinger.take() {
            let _ = t.join();
        }
        for seg in &self.segments {
            if let Err(e) = self.master.unmount_segment(seg.id, self.id) {
                log::warn!("UnmountSegment {}: {e}", seg.name);
            }
        }
    }
}

/// One ping; remounts every segment when the master asks.
pub(crate) fn heartbeat(master: &dyn MasterApi, id: Uuid, segments: &[Segment]) {
    match master.ping(id) {
        Ok(r) if r.client_status == ClientStatus::NeedRemount => {
            if let Err(e) = master.remount_segment(segments, id) {
                log::warn!("ReMountSegment: {e}");
            }
        }
        Ok(_) => {}
        Err(e) => log::warn!("Ping: {e}"),
    }
}

/// `PutStart` + `PutEnd` of one key.
pub(crate) fn put_one(m: &dyn MasterApi, id: Uuid, key: &str, len: u64) -> Result<(), ErrorCode> {
    m.put_start(id, key, len, &ReplicateConfig::default(), DEFAULT_TENANT)?;
    let meta = ObjectMeta {
        key: key.to_string(),
        checksum: None,
    };
    m.put_end(id, &meta, ReplicaType::All, DEFAULT_TENANT)
}

/// `BatchPutStart` + `BatchPutEnd` of `keys`; returns how many were stored and the
/// first error.
pub(crate) fn put_batch(
    m: &dyn MasterApi,
    id: Uuid,
    keys: &[String],
    len: u64,
) -> (u64, Option<ErrorCode>) {
    let lens = vec![len; keys.len()];
    let starts =
        match m.batch_put_start(id, keys, &lens, &ReplicateConfig::default(), DEFAULT_TENANT) {
            Ok(r) => r,
            Err(e) => return (0, Some(e)),
        };
    let mut first = None;
    let mut metas = Vec::with_capacity(keys.len());
    for (k, r) in keys.iter().zip(starts) {
        match r {
            Ok(_) => metas.push(ObjectMeta {
                key: k.clone(),
                checksum: None,
            }),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    if metas.is_empty() {
        return (0, first);
    }
    match m.batch_put_end(id, &metas, ReplicaType::All, DEFAULT_TENANT) {
        Ok(ends) => {
            let mut ok = 0;
            for r in ends {
                match r {
                    Ok(()) => ok += 1,
                    Err(e) => {
                        first.get_or_insert(e);
                    }
                }
            }
            (ok, first)
        }
        Err(e) => (0, Some(e)),
    }
}
