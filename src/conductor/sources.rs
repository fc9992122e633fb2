//! KV-event subscriptions: one thread per source, subscribed over ZeroMQ to a Mooncake
//! master's or an engine's publisher, reconnecting after failures, feeding what it
//! reads into the index under the source's instance. Sequence gaps are counted.
//!
//! HA masters (every master of a cluster subscribed to, for one instance) number each
//! leader's term apart, in the upper 32 bits of the sequence, and start it with
//! `cleared` and the new leader's whole state: a batch of a term older than the newest
//! one an instance has seen is a deposed leader's late message, and is ignored.

use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};

use super::events::{decode_batch, BlockEvent, KeyReader};
use super::instances::{InstanceSpec, Role};
use super::shared::{SchedulerOwner, SharedScheduler};
use crate::codec::zmtp::sub::{resolve, SubConnection};

/// Pause between connection attempts.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);
/// Bound on connecting and on the handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a subscription could not be added.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The endpoint is not a `tcp://host:port` one that resolves.
    #[error("{0}")]
    Endpoint(String),
    /// A subscription with the same key exists.
    #[error("a source {key:?} is already registered")]
    Taken {
        /// The key, `instance|tenant|dp_rank`.
        key: String,
    },
    /// The subscriber thread could not be started.
    #[error("spawning a subscriber thread: {0}")]
    Spawn(#[source] std::io::Error),
}

/// Why one connection attempt of a subscriber failed.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    /// The endpoint does not resolve.
    #[error("{0}")]
    Endpoint(String),
    /// Connecting or the handshake failed.
    #[error("connecting to {endpoint}: {source}")]
    Connect {
        /// The publisher.
        endpoint: String,
        /// What failed.
        source: std::io::Error,
    },
    /// The socket could not be cloned for shutting it down.
    #[error("{0}")]
    Handle(#[source] std::io::Error),
    /// The subscription was stopped meanwhile.
    #[error("stopped")]
    Stopped,
}

/// What a subscription is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSpec {
    /// The publisher, `tcp://host:port`.
    pub endpoint: String,
    /// The instance whose blocks its events describe (created as a store-only
    /// instance when not registered).
    pub instance: String,
    /// The tenant it belongs to.
    pub tenant: String,
    /// The data-parallel rank it publishes for.
    pub dp_rank: i64,
    /// Its publisher type as registered (`Mooncake`, `vLLM`, `SGLang`).
    pub kind: String,
}

impl SourceSpec {
    /// The key subscriptions are told apart by: `instance|tenant|dp_rank`.
    pub fn key(&self) -> String {
        format!("{}|{}|{}", self.instance, self.tenant, self.dp_rank)
    }
}

/// Counters of one subscription.
#[derive(Debug, Default)]
struct SourceStats {
    connected: AtomicBool,
    connects: AtomicU64,
    messages: AtomicU64,
    events: AtomicU64,
    skipped: AtomicU64,
    undecodable: AtomicU64,
    lost_batches: AtomicU64,
    stale_batches: AtomicU64,
    last_seq: AtomicU64,
    last_error: Mutex<String>,
}

/// A running subscription.
#[derive(Debug)]
struct Source {
    spec: SourceSpec,
    stats: Arc<SourceStats>,
    stop: Arc<AtomicBool>,
    stream: Arc<Mutex<Option<TcpStream>>>,
    thread: Option<JoinHandle<()>>,
}

impl Source {
    /// Asks the thread to stop and unblocks its read.
    fn signal_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(s) = self.stream.lock().take() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn join(mut self) {
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

/// The newest term (a sequence number's upper 32 bits) each instance has seen.
type Terms = Arc<Mutex<HashMap<String, u64>>>;

/// Every subscription of one conductor.
#[derive(Debug, Default)]
pub struct Sources {
    list: Mutex<Vec<Source>>,
    terms: Terms,
}

impl Sources {
    /// Subscribes to `spec.endpoint` for `spec.instance` (registering a store-only
    /// instance of that name when none is registered); `Err` when the key is taken
    /// or the endpoint is not one.
    pub fn add(
        &self,
        owner: &impl SchedulerOwner,
        spec: SourceSpec,
        keys: KeyReader,
    ) -> Result<String, SourceError> {
        resolve(&spec.endpoint).map_err(|e| SourceError::Endpoint(e.to_string()))?;
        let key = spec.key();
        let mut list = self.list.lock();
        if list.iter().any(|s| s.spec.key() == key) {
            return Err(SourceError::Taken { key });
        }
        let shared = owner.shared_scheduler();
        let now = shared.now(None);
        shared.with(|s| {
            if s.instances.slot_of(&spec.instance).is_none() {
                let store = InstanceSpec {
                    id: spec.instance.clone(),
                    role: Role::Store,
                    kv_capacity_blocks: 0,
                    max_batch: 0,
                };
                let _ = s.register(store, now);
            }
        });
        let stats = Arc::new(SourceStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let stream = Arc::new(Mutex::new(None));
        let worker = Worker {
            conductor: Arc::downgrade(shared),
            spec: spec.clone(),
            keys,
            stats: Arc::clone(&stats),
            stop: Arc::clone(&stop),
            stream: Arc::clone(&stream),
            terms: Arc::clone(&self.terms),
        };
        let thread = std::thread::Builder::new()
            .name("mc-kv-sub".into())
            .spawn(move || worker.run())
            .map_err(SourceError::Spawn)?;
        list.push(Source {
            spec,
            stats,
            stop,
            stream,
            thread: Some(thread),
        });
        Ok(key)
    }

    /// Stops the subscription `key`; its spec, or `None` when unknown.
    pub fn remove(&self, key: &str) -> Option<SourceSpec> {
        let source = {
            let mut list = self.list.lock();
            let i = list.iter().position(|s| s.spec.key() == key)?;
            list.remove(i)
        };
        source.signal_stop();
        let spec = source.spec.clone();
        source.join();
        Some(spec)
    }

    /// Stops every subscription.
    pub fn stop_all(&self) {
        let all: Vec<Source> = std::mem::take(&mut *self.list.lock());
        for s in &all {
            s.signal_stop();
        }
        for s in all {
            s.join();
        }
    }

    /// Every subscription's spec.
    pub fn specs(&self) -> Vec<SourceSpec> {
        self.list.lock().iter().map(|s| s.spec.clone()).collect()
    }

    /// Each subscription with its counters, as JSON.
    pub fn stats(&self) -> Value {
        let list = self.list.lock();
        Value::Array(
            list.iter()
                .map(|s| {
                    let st = &s.stats;
                    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
                    json!({
                        "key": s.spec.key(),
                        "endpoint": s.spec.endpoint,
                        "instance": s.spec.instance,
                        "type": s.spec.kind,
                        "connected": st.connected.load(Ordering::Relaxed),
                        "connects": n(&st.connects),
                        "messages": n(&st.messages),
                        "events": n(&st.events),
                        "skipped_events": n(&st.skipped),
                        "undecodable_messages": n(&st.undecodable),
                        "lost_batches": n(&st.lost_batches),
                        "stale_batches": n(&st.stale_batches),
                        "last_error": st.last_error.lock().clone(),
                    })
                })
                .collect(),
        )
    }

    /// Events received and batches lost, over every subscription.
    pub fn totals(&self) -> (u64, u64) {
        let list = self.list.lock();
        list.iter().fold((0, 0), |(e, l), s| {
            (
                e + s.stats.events.load(Ordering::Relaxed),
                l + s.stats.lost_batches.load(Ordering::Relaxed),
            )
        })
    }
}

impl Drop for Sources {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// A subscription's thread.
struct Worker {
    conductor: Weak<SharedScheduler>,
    spec: SourceSpec,
    keys: KeyReader,
    stats: Arc<SourceStats>,
    stop: Arc<AtomicBool>,
    stream: Arc<Mutex<Option<TcpStream>>>,
    terms: Terms,
}

impl Worker {
    fn run(self) {
        while !self.stop.load(Ordering::SeqCst) {
            match self.connect() {
                Ok(mut conn) => {
                    self.stats.connects.fetch_add(1, Ordering::Relaxed);
                    self.stats.connected.store(true, Ordering::Relaxed);
                    let error = loop {
                        match conn.recv() {
                            Ok(frames) => {
                                if !self.on_message(&frames) {
                                    break "the conductor is gone".to_string();
                                }
                            }
                            Err(e) => break e.to_string(),
                        }
                    };
                    self.stats.connected.store(false, Ordering::Relaxed);
                    self.stream.lock().take();
                    if !self.stop.load(Ordering::SeqCst) {
                        log::warn!("kv events from {}: {error}", self.spec.endpoint);
                        *self.stats.last_error.lock() = error;
                    }
                }
                Err(e) => *self.stats.last_error.lock() = e.to_string(),
            }
            self.pause();
        }
    }

    fn connect(&self) -> Result<SubConnection, ConnectError> {
        let addr =
            resolve(&self.spec.endpoint).map_err(|e| ConnectError::Endpoint(e.to_string()))?;
        let conn = SubConnection::connect(addr, b"", CONNECT_TIMEOUT).map_err(|source| {
            ConnectError::Connect {
                endpoint: self.spec.endpoint.clone(),
                source,
            }
        })?;
        let handle = conn.shutdown_handle().map_err(ConnectError::Handle)?;
        let mut slot = self.stream.lock();
        if self.stop.load(Ordering::SeqCst) {
            return Err(ConnectError::Stopped);
        }
        *slot = Some(handle);
        Ok(conn)
    }

    fn pause(&self) {
        let step = Duration::from_millis(50);
        let mut waited = Duration::ZERO;
        while waited < RECONNECT_DELAY && !self.stop.load(Ordering::SeqCst) {
            std::thread::sleep(step);
            waited += step;
        }
    }

    /// Applies one message `[topic, sequence, payload]`; `false` when the conductor
    /// is gone.
    fn on_message(&self, frames: &[Vec<u8>]) -> bool {
        let st = &self.stats;
        st.messages.fetch_add(1, Ordering::Relaxed);
        let Some(payload) = frames.last() else {
            return true;
        };
        let seq = (frames.len() >= 2)
            .then(|| <[u8; 8]>::try_from(frames[frames.len() - 2].as_slice()).ok())
            .flatten()
            .map(u64::from_be_bytes);
        if let Some(seq) = seq {
            let last = st.last_seq.swap(seq, Ordering::Relaxed);
            if last > 0 && seq > last + 1 && seq >> 32 == last >> 32 {
                st.lost_batches.fetch_add(seq - last - 1, Ordering::Relaxed);
            }
        }
        let batch = match decode_batch(payload, &self.keys) {
            Ok(b) => b,
            Err(e) => {
                st.undecodable.fetch_add(1, Ordering::Relaxed);
                *st.last_error.lock() = e.to_string();
                return true;
            }
        };
        st.skipped.fetch_add(batch.skipped, Ordering::Relaxed);
        st.events
            .fetch_add(batch.events.len() as u64, Ordering::Relaxed);
        let Some(conductor) = self.conductor.upgrade() else {
            return false;
        };
        let id = &self.spec.instance;
        // Held while the batch is applied: a deposed leader's batch checked before a
        // new term began is not applied after that term's `cleared`.
        let mut terms = self.terms.lock();
        if !terms.contains_key(id) {
            terms.insert(id.clone(), 0);
        }
        let newest = terms.get_mut(id).expect("inserted above");
        let term = seq.map_or(*newest, |s| s >> 32);
        if term < *newest {
            st.stale_batches.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        *newest = term;
        conductor.with(|s| {
            for event in &batch.events {
                match event {
                    BlockEvent::Stored { hashes, medium } => {
                        s.apply_events(id, (hashes, *medium), (&[], 0));
                    }
                    BlockEvent::Removed { hashes, medium } => {
                        s.apply_events(id, (&[], 0), (hashes, *medium));
                    }
                    BlockEvent::Cleared => {
                        s.clear_instance(id);
                    }
                }
            }
        });
        true
    }
}
