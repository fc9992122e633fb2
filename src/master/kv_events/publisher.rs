//! The running publisher: a PUB socket and one worker thread that turns queued events
//! into batches and sends each as `[empty topic, big-endian u64 sequence, msgpack]`.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use super::config::KvEventConfig;
use super::payload::{EventKind, Medium, PendingEvent, Shape};
use super::pipeline::{KvEventStats, Pipeline};
use crate::codec::zmtp::endpoint::{BindEndpoint, EndpointError};
use crate::codec::zmtp::{PubLimits, PubSocket};
use crate::runtime::conn_threads::ConnLimits;

/// Messages queued per subscriber before it misses new ones (upstream's
/// `ZMQ_SNDHWM`).
pub const HIGH_WATER_MARK: usize = 10_000;
/// Bytes queued per subscriber before it misses new ones (ours, not libzmq's: a
/// stalled subscriber holds at most this much of the master's memory; some 3,000 full
/// batches of typical events fit in it).
pub const MAX_QUEUED_BYTES: usize = 64 << 20;
/// Subscribers served at once (indexers and routers: a handful in practice).
pub const MAX_SUBSCRIBERS: usize = 64;
/// Subscribers one host may hold.
pub const MAX_SUBSCRIBERS_PER_PEER: usize = 32;
/// How long a stopping publisher waits for subscribers to take what was sent.
const LINGER: Duration = Duration::from_secs(1);

/// Why the publisher did not start (logged; the publisher is then disabled).
#[derive(Debug, thiserror::Error)]
enum StartError {
    /// A flag the publisher needs is empty.
    #[error("enabled but --{0} is empty")]
    EmptyFlag(&'static str),
    /// The bind endpoint does not parse.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The bind endpoint's interface is not up.
    #[error("binding {endpoint}: {source}")]
    Address {
        endpoint: String,
        source: EndpointError,
    },
    /// The PUB socket did not bind.
    #[error("binding {endpoint}: {source}")]
    Bind { endpoint: String, source: io::Error },
    /// The worker thread did not start.
    #[error("starting the publisher thread: {0}")]
    Thread(io::Error),
}

struct Running {
    pipeline: Arc<Pipeline>,
    addr: SocketAddr,
    worker: Mutex<Option<JoinHandle<()>>>,
}

/// The master's KV-event publisher (spec tiers-events-conductor.md §2). Disabled, it
/// accepts events and drops them; enabled, publishing never blocks the caller. Stops
/// (after publishing what is queued) on [`KvEvents::shutdown`] or drop.
pub struct KvEvents {
    running: Option<Running>,
}

impl fmt::Debug for KvEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KvEvents")
            .field("addr", &self.local_addr())
            .field("stats", &self.stats())
            .finish()
    }
}

impl KvEvents {
    /// A publisher that publishes nothing.
    pub fn disabled() -> KvEvents {
        KvEvents { running: None }
    }

    /// Starts publishing as `config` says (`interface_ip` looks up an interface named
    /// in the endpoint). Off, without an endpoint or backend id, or when the endpoint
    /// cannot be bound, it logs why and returns a disabled publisher, as upstream does.
    pub fn start(
        config: &KvEventConfig,
        interface_ip: impl Fn(&str) -> Option<IpAddr>,
    ) -> KvEvents {
        if !config.enabled {
            return KvEvents::disabled();
        }
        match KvEvents::try_start(config, interface_ip) {
            Ok(events) => events,
            Err(e) => {
                log::error!("kv_events: {e}; KV events are disabled");
                KvEvents::disabled()
            }
        }
    }

    fn try_start(
        config: &KvEventConfig,
        interface_ip: impl Fn(&str) -> Option<IpAddr>,
    ) -> Result<KvEvents, StartError> {
        if config.bind_endpoint.is_empty() {
            return Err(StartError::EmptyFlag("kv_events_bind_endpoint"));
        }
        if config.backend_id.is_empty() {
            return Err(StartError::EmptyFlag("kv_events_backend_id"));
        }
        let endpoint = &config.bind_endpoint;
        let bind = BindEndpoint::parse(endpoint)?
            .socket_addr(interface_ip)
            .map_err(|source| StartError::Address {
                endpoint: endpoint.clone(),
                source,
            })?;
        let limits = PubLimits {
            high_water_mark: HIGH_WATER_MARK,
            max_queued_bytes: MAX_QUEUED_BYTES,
            connections: ConnLimits::new(MAX_SUBSCRIBERS, MAX_SUBSCRIBERS_PER_PEER),
        };
        let socket = PubSocket::bind(bind, limits).map_err(|source| StartError::Bind {
            endpoint: endpoint.clone(),
            source,
        })?;
        let addr = socket.local_addr();
        if !config.emit_object_key {
            log::warn!(
                "kv_events: --kv_events_emit_object_key=false: events of keys that are not \
                 decimal or 0x-hex hashes are not published (counted as skipped_unparsed_keys)"
            );
        }
        let shape = Shape {
            backend_id: config.backend_id.clone(),
            legacy: config.emit_legacy_compat,
            object_key: config.emit_object_key,
        };
        let capacity = usize::try_from(config.queue_capacity).unwrap_or(usize::MAX);
        let pipeline = Arc::new(Pipeline::new(shape, capacity));
        let worker_pipeline = pipeline.clone();
        let worker = std::thread::Builder::new()
            .name("mc-kv-events".into())
            .spawn(move || publish_loop(&worker_pipeline, socket))
            .map_err(StartError::Thread)?;
        log::info!(
            "kv_events publisher enabled on {endpoint} ({addr}) backend_id={}",
            config.backend_id
        );
        Ok(KvEvents {
            running: Some(Running {
                pipeline,
                addr,
                worker: Mutex::new(Some(worker)),
            }),
        })
    }

    /// Whether events are published (false when off or when starting failed).
    pub fn enabled(&self) -> bool {
        self.running.is_some()
    }

    /// The bound address of the PUB socket, when enabled.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.running.as_ref().map(|r| r.addr)
    }

    /// Announces that a put of `key` completed.
    pub fn stored(&self, key: &str, medium: Medium, tenant: &str, group: &str) {
        self.enqueue(EventKind::Stored, key, medium, tenant, group);
    }

    /// Announces that `key` is gone.
    pub fn removed(&self, key: &str, medium: Medium, tenant: &str, group: &str) {
        self.enqueue(EventKind::Removed, key, medium, tenant, group);
    }

    fn enqueue(&self, kind: EventKind, key: &str, medium: Medium, tenant: &str, group: &str) {
        if let Some(r) = &self.running {
            r.pipeline.enqueue(PendingEvent {
                kind,
                key: key.to_string(),
                medium,
                tenant: tenant.to_string(),
                group: group.to_string(),
            });
        }
    }

    /// Starts an HA leader's term of view `view_version`: its batches are numbered from
    /// [`term_first_seq`] on, and it publishes `cleared`, then `objects` (a `stored`
    /// event for every object it holds), before any event of its own operations.
    /// Events still queued from an earlier term are dropped.
    pub fn start_term(&self, view_version: i64, objects: Vec<PendingEvent>) {
        if let Some(r) = &self.running {
            r.pipeline.start_term(term_first_seq(view_version), objects);
        }
    }

    /// The counters (all zero when disabled).
    pub fn stats(&self) -> KvEventStats {
        self.running
            .as_ref()
            .map_or_else(KvEventStats::default, |r| r.pipeline.stats())
    }

    /// The body of `GET /kv_events/status`, fields in upstream's order.
    pub fn status_json(&self) -> String {
        let s = self.stats();
        format!(
            "{{\"enabled\":{},\"published_batches\":{},\"published_events\":{},\
             \"dropped_events\":{},\"skipped_unparsed_keys\":{}}}",
            self.enabled(),
            s.published_batches,
            s.published_events,
            s.dropped_events,
            s.skipped_unparsed_keys
        )
    }

    /// Publishes what is queued, closes the socket and joins the worker (idempotent).
    /// Events announced afterwards are dropped.
    pub fn shutdown(&self) {
        if let Some(r) = &self.running {
            r.pipeline.stop();
            if let Some(worker) = r.worker.lock().take() {
                let _ = worker.join();
            }
        }
    }
}

impl Drop for KvEvents {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The worker: batch, number, encode, send, until stopped and drained; then lets the
/// subscribers take the last messages (at most [`LINGER`]) and closes the socket.
fn publish_loop(pipeline: &Pipeline, mut socket: PubSocket) {
    loop {
        let batch = pipeline.next_batch();
        if batch.is_empty() {
            break;
        }
        if let Some(p) = pipeline.prepare(&batch, unix_ms()) {
            socket.send(&[b"", &p.seq.to_be_bytes(), &p.payload]);
            pipeline.record_sent(p.events);
        }
    }
    socket.linger(LINGER);
    socket.close();
}

/// The first sequence number of an HA term of view `view_version` (the etcd revision
/// that elected the leader): the view in the upper 32 bits, the batch's number in the
/// term in the lower ones, so that numbers grow across leaders and a subscriber tells
/// terms apart by `seq >> 32`. Views past 2^32 - 1 share the last term number.
pub fn term_first_seq(view_version: i64) -> u64 {
    let term = u64::try_from(view_version.max(0)).map_or(0, |v| v.min(u64::from(u32::MAX)));
    term << 32 | 1
}

/// Milliseconds since the Unix epoch.
fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::zmtp::test_sub::Sub;

    fn config(capacity: u32) -> KvEventConfig {
        KvEventConfig {
            enabled: true,
            bind_endpoint: "tcp://127.0.0.1:0".into(),
            backend_id: "t".into(),
            queue_capacity: capacity,
            ..KvEventConfig::default()
        }
    }

    #[test]
    fn shutdown_publishes_what_is_queued() {
        let events = KvEvents::start(&config(0), |_| None);
        assert!(events.enabled());
        let mut sub = Sub::connect(events.local_addr().unwrap(), 1);
        sub.subscribe(b"", true);
        for i in 0..300 {
            events.stored(&i.to_string(), Medium::Cpu, "default", "");
        }
        events.shutdown();
        let (mut seq, mut n) = (0u64, 0u64);
        while n < 300 {
            let frames = sub.recv();
            assert_eq!(frames.len(), 3);
            assert!(frames[0].is_empty());
            seq += 1;
            assert_eq!(frames[1], seq.to_be_bytes());
            // [ts, [events...], 0]: the array header after the 9-byte timestamp.
            let header = frames[2][10];
            n += match header {
                0x90..=0x9f => u64::from(header & 0x0f),
                0xdc => u64::from(u16::from_be_bytes([frames[2][11], frames[2][12]])),
                other => panic!("events array header {other:#x}"),
            };
        }
        assert_eq!(n, 300);
        assert!(sub.closed());
        let s = events.stats();
        assert_eq!((s.published_events, s.published_batches), (300, seq));
        assert_eq!(
            events.status_json(),
            format!(
                "{{\"enabled\":true,\"published_batches\":{seq},\"published_events\":300,\
                 \"dropped_events\":0,\"skipped_unparsed_keys\":0}}"
            )
        );
        // Afterwards, announcing is harmless and does nothing.
        events.removed("1", Medium::Cpu, "default", "");
        assert_eq!(events.stats(), s);
    }

    #[test]
    fn misconfigured_publishers_are_disabled() {
        let off = KvEvents::start(&KvEventConfig::default(), |_| None);
        assert!(!off.enabled() && off.local_addr().is_none());
        off.stored("1", Medium::Cpu, "default", "");
        assert_eq!(off.stats(), KvEventStats::default());
        assert_eq!(
            off.status_json(),
            "{\"enabled\":false,\"published_batches\":0,\"published_events\":0,\
             \"dropped_events\":0,\"skipped_unparsed_keys\":0}"
        );
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = held.local_addr().unwrap().port();
        for c in [
            KvEventConfig {
                backend_id: String::new(),
                ..config(1)
            },
            KvEventConfig {
                bind_endpoint: String::new(),
                ..config(1)
            },
            KvEventConfig {
                bind_endpoint: format!("tcp://127.0.0.1:{port}"),
                ..config(1)
            },
            KvEventConfig {
                bind_endpoint: "tcp://eth9:1".into(),
                ..config(1)
            },
        ] {
            assert!(!KvEvents::start(&c, |_| None).enabled(), "{c:?}");
        }
    }
}
