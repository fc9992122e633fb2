//! Fetching one object into a receiver's buffers: `concurrency` workers each take
//! the next shard and source from the [`Plan`] and read the shard over the Transfer
//! Engine; a publisher adds every shard that landed (and checked) to the metadata as
//! a new source at once, in one compare-and-swap for whatever landed meanwhile, and
//! prunes the locations of sources found dead or serving wrong bytes. Each publish
//! reads the payload afresh, and while workers have nothing they may fetch the
//! publisher re-reads it every few milliseconds, so the workers see the copies other
//! receivers publish.

use super::choose::{Next, Plan, Status};
use super::config::P2pConfig;
use super::error::{P2pError, P2pResult};
use super::meta::{Meta, Updated};
use super::payload::{Location, Payload};
use crate::te::{Op, TaskStatus, TransferEngine, TransferRequest};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a worker waits for a change before it looks again.
const WAIT_SLICE: Duration = Duration::from_millis(100);
/// The longest pause between two publishes that failed (metadata unreachable).
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Reports progress: bytes landed so far, and the object's size.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// What one receiver needs to fetch one object.
pub struct Receiver<'a> {
    /// The engine the shards are read with.
    pub engine: &'a TransferEngine,
    /// Where the payload lives.
    pub meta: &'a Meta,
    /// This node's segment name.
    pub own: &'a str,
    /// The object.
    pub name: &'a str,
    /// The destination of each shard (registered, writable).
    pub dests: &'a [u64],
    /// The settings.
    pub config: &'a P2pConfig,
    /// Told of every shard that lands.
    pub progress: Option<Progress<'a>>,
    /// Only these nodes are asked (`None`: every source).
    pub only: Option<&'a [String]>,
}

/// What the workers and the publisher share.
struct Shared {
    plan: Plan,
    payload: Payload,
    /// The version `payload` was read or written at, when known: the next publish
    /// swaps over it without reading first.
    version: Option<u64>,
    /// Landed shards not yet published.
    unpublished: Vec<usize>,
    /// Sources found dead, to prune.
    dead: Vec<String>,
    /// Locations that served bytes failing their CRC, to prune.
    bad: Vec<(usize, Location)>,
    /// Workers still running.
    working: usize,
    /// The metadata is being re-read for a stuck shard.
    refreshing: bool,
    /// A worker had nothing it could fetch: the publisher re-reads the payload.
    want_fresh: bool,
    /// Re-reads that found no new source.
    fruitless: u32,
    landed_bytes: u64,
    /// Bytes landed from each source.
    by_source: HashMap<String, u64>,
    error: Option<P2pError>,
}

/// How a fetch ended.
pub struct Outcome {
    /// Which shards are in the buffers.
    pub landed: Vec<bool>,
    /// Bytes fetched from each source, most first.
    pub by_source: Vec<(String, u64)>,
    /// The error that stopped it, if any.
    pub result: P2pResult<()>,
}

/// Why fetching a shard from one source failed.
enum Failure {
    /// The source is gone (or never was): prune it.
    Dead(String),
    /// The transfer failed; the source still answers.
    Failed(String),
    /// The bytes failed their CRC: prune this location.
    Corrupt,
}

impl Receiver<'_> {
    /// Fetches every shard not in `landed` (one flag per shard), publishing each as it
    /// lands (and those already landed); returns which shards landed and from where,
    /// with the first error that stopped it.
    ///
    /// # Safety
    /// Every `dests[i]` must be the start of `payload.shards[i].size` writable bytes
    /// that nothing else accesses until this returns.
    pub unsafe fn fetch(&self, payload: Payload, landed: &[bool]) -> Outcome {
        let landed_bytes = payload
            .shards
            .iter()
            .zip(landed)
            .filter(|(_, &l)| l)
            .map(|(s, _)| s.size)
            .sum();
        let workers = self.config.concurrency.max(1);
        let plan = Plan::new(self.own, landed).per_source(self.config.per_source);
        let shared = Mutex::new(Shared {
            plan: match self.only {
                Some(peers) => plan.only_from(peers),
                None => plan,
            },
            payload,
            version: None,
            // Shards already here (an earlier attempt's) are published again.
            unpublished: (0..landed.len()).filter(|&s| landed[s]).collect(),
            dead: Vec::new(),
            bad: Vec::new(),
            working: workers,
            refreshing: false,
            want_fresh: false,
            fruitless: 0,
            landed_bytes,
            by_source: HashMap::new(),
            error: None,
        });
        let changed = Condvar::new();
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    self.work(&shared, &changed);
                    let mut sh = shared.lock();
                    sh.working -= 1;
                    changed.notify_all();
                });
            }
            self.publish(&shared, &changed);
        });
        let sh = shared.into_inner();
        let mut by_source: Vec<(String, u64)> = sh.by_source.into_iter().collect();
        by_source.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Outcome {
            landed: sh
                .plan
                .status()
                .iter()
                .map(|&s| s == Status::Landed)
                .collect(),
            by_source,
            result: sh.error.map_or(Ok(()), Err),
        }
    }

    /// One worker: fetches shards until none is left or an error stops the fetch.
    fn work(&self, shared: &Mutex<Shared>, changed: &Condvar) {
        let mut rng = fastrand::Rng::new();
        let mut sh = shared.lock();
        loop {
            if sh.error.is_some() {
                return;
            }
            let Shared { plan, payload, .. } = &mut *sh;
            match plan.next(payload, &mut rng) {
                Next::Done => return,
                Next::Wait => {
                    // The publisher is told once; telling it again would wake the
                    // other waiting workers, which would tell it again, and so on.
                    if !sh.want_fresh {
                        sh.want_fresh = true;
                        changed.notify_all();
                    }
                    changed.wait_for(&mut sh, WAIT_SLICE);
                }
                Next::Stuck(shards) => {
                    if sh.refreshing {
                        changed.wait_for(&mut sh, WAIT_SLICE);
                        continue;
                    }
                    sh.refreshing = true;
                    drop(sh);
                    let refreshed = self.refresh(shared, &shards);
                    sh = shared.lock();
                    sh.refreshing = false;
                    if let Err(e) = refreshed {
                        sh.error.get_or_insert(e);
                    }
                    changed.notify_all();
                }
                Next::Fetch { shard, from } => {
                    log::debug!(
                        "p2p: '{}' shard {shard} from {}",
                        self.name,
                        from.segment_name
                    );
                    let size = sh.payload.shards[shard].size;
                    let crc = sh.payload.shards[shard].crc32c;
                    drop(sh);
                    let outcome = self.fetch_shard(shard, &from, size, crc);
                    sh = shared.lock();
                    match outcome {
                        Ok(()) => {
                            sh.plan.landed(shard, &from);
                            sh.unpublished.push(shard);
                            sh.landed_bytes += size;
                            *sh.by_source.entry(from.segment_name.clone()).or_default() += size;
                            sh.fruitless = 0;
                            if let Some(progress) = self.progress {
                                progress(sh.landed_bytes, sh.payload.size);
                            }
                        }
                        Err(failure) => self.note_failure(&mut sh, shard, &from, failure),
                    }
                    changed.notify_all();
                }
            }
        }
    }

    /// Records a failed fetch of `shard` from `from` in the plan and the prune lists.
    fn note_failure(&self, sh: &mut Shared, shard: usize, from: &Location, failure: Failure) {
        let name = self.name;
        let source = &from.segment_name;
        match failure {
            Failure::Dead(why) => {
                log::warn!("p2p: '{name}' shard {shard}: source {source} is gone ({why})");
                sh.plan.failed(shard, from, true);
                sh.dead.push(source.clone());
            }
            Failure::Failed(why) => {
                log::warn!("p2p: '{name}' shard {shard} from {source} failed: {why}");
                sh.plan.failed(shard, from, false);
            }
            Failure::Corrupt => {
                log::warn!("p2p: '{name}' shard {shard} from {source} failed its CRC-32C");
                sh.plan.failed(shard, from, false);
                sh.bad.push((shard, from.clone()));
            }
        }
    }

    /// Re-reads the payload for `stuck` shards (backing off from 100 ms); the error
    /// that ends the fetch when, after the configured number of re-reads, no source is
    /// left for one of them.
    fn refresh(&self, shared: &Mutex<Shared>, stuck: &[usize]) -> P2pResult<()> {
        let fruitless = shared.lock().fruitless;
        std::thread::sleep(backoff(fruitless));
        let Some((fresh, version)) = self.meta.get(self.name)? else {
            return Err(P2pError::NotFound(self.name.to_string()));
        };
        let mut sh = shared.lock();
        self.adopt(&mut sh, fresh, Some(version))?;
        let usable = stuck
            .iter()
            .any(|&s| !sh.plan.usable(&sh.payload, s).is_empty());
        if usable {
            return Ok(());
        }
        sh.fruitless += 1;
        if sh.fruitless > self.config.no_source_retries {
            let shard = stuck[0];
            return Err(P2pError::NoSource {
                name: self.name.to_string(),
                shard,
                tried: sh.plan.tried(shard),
            });
        }
        Ok(())
    }

    /// Takes `fresh` (at `version`, when known) as the payload to choose sources
    /// from, if it still describes the same shards.
    fn adopt(&self, sh: &mut Shared, fresh: Payload, version: Option<u64>) -> P2pResult<()> {
        if fresh.shard_sizes() != sh.payload.shard_sizes() {
            return Err(P2pError::Corrupt {
                name: self.name.to_string(),
                why: "the object was registered again with other shards while it was \
                      being fetched"
                    .into(),
            });
        }
        sh.payload = fresh;
        sh.version = version;
        Ok(())
    }

    /// The publisher: until the workers are done and everything is published, adds
    /// landed shards as sources and prunes dead or bad ones, one compare-and-swap per
    /// round.
    ///
    /// Landed shards are published at most every `publish_gap` (what lands meanwhile
    /// goes in one compare-and-swap), so the payload is rewritten a few times a second,
    /// not once per shard; prunes and the end of the fetch publish at once. While a
    /// worker has nothing it may fetch, the payload is re-read (or the pending shards
    /// published) every half gap, for copies other receivers published meanwhile.
    fn publish(&self, shared: &Mutex<Shared>, changed: &Condvar) {
        let publish_gap = self.config.publish_gap;
        let refresh_every = publish_gap / 2;
        let mut failures = 0u32;
        let mut read_at = Instant::now();
        let mut published_at = Instant::now()
            .checked_sub(publish_gap)
            .unwrap_or_else(Instant::now);
        let mut sh = shared.lock();
        loop {
            if sh.error.is_some() && sh.working == 0 {
                // The fetch failed: the caller withdraws what was published.
                return;
            }
            let pending = !(sh.unpublished.is_empty() && sh.dead.is_empty() && sh.bad.is_empty());
            if !pending && sh.working == 0 {
                return;
            }
            let stale = sh.want_fresh && read_at.elapsed() >= refresh_every;
            let publish_now = pending
                && (!sh.dead.is_empty()
                    || !sh.bad.is_empty()
                    || sh.working == 0
                    || stale
                    || published_at.elapsed() >= publish_gap);
            if !publish_now {
                if stale {
                    sh.want_fresh = false;
                    drop(sh);
                    let fresh = self.meta.get(self.name);
                    read_at = Instant::now();
                    sh = shared.lock();
                    if let Ok(Some((payload, version))) = fresh {
                        if let Err(e) = self.adopt(&mut sh, payload, Some(version)) {
                            sh.error.get_or_insert(e);
                        }
                        changed.notify_all();
                    }
                    continue;
                }
                let mut wait = WAIT_SLICE;
                if pending {
                    wait = wait.min(publish_gap.saturating_sub(published_at.elapsed()));
                }
                if sh.want_fresh {
                    wait = wait.min(refresh_every.saturating_sub(read_at.elapsed()));
                }
                changed.wait_for(&mut sh, wait.max(Duration::from_millis(1)));
                continue;
            }
            sh.want_fresh = false;
            published_at = Instant::now();
            let shards = std::mem::take(&mut sh.unpublished);
            let dead = std::mem::take(&mut sh.dead);
            let bad = std::mem::take(&mut sh.bad);
            let known = sh.version.map(|version| (sh.payload.clone(), version));
            drop(sh);
            // A source that answers again was not dead (the metadata may have been
            // unreachable when it was looked up): it keeps its locations.
            let dead: Vec<String> = dead
                .into_iter()
                .filter(|segment| self.engine.probe(segment).is_err())
                .collect();
            let outcome = self.meta.update_from(self.name, known, |p| {
                let mut changed = false;
                for &s in &shards {
                    let here = Location {
                        segment_name: self.own.to_string(),
                        offset: self.dests[s],
                    };
                    changed |= p.add_replica(s, here);
                }
                for segment in &dead {
                    changed |= p.remove_segment(segment);
                }
                for (s, location) in &bad {
                    if let Some(shard) = p.shards.get_mut(*s) {
                        let before = shard.gold.len() + shard.replica_list.len();
                        shard.gold.retain(|l| l != location);
                        shard.replica_list.retain(|l| l != location);
                        changed |= before != shard.gold.len() + shard.replica_list.len();
                    }
                }
                changed
            });
            sh = shared.lock();
            match outcome {
                Ok((Updated::Kept(fresh), version)) => {
                    failures = 0;
                    read_at = Instant::now();
                    log::debug!(
                        "p2p: '{}' published {} shard(s); {} location(s) listed",
                        self.name,
                        shards.len(),
                        fresh
                            .shards
                            .iter()
                            .map(|s| s.gold.len() + s.replica_list.len())
                            .sum::<usize>()
                    );
                    if let Err(e) = self.adopt(&mut sh, fresh, version) {
                        sh.error.get_or_insert(e);
                    }
                }
                Ok((Updated::Missing | Updated::Deleted, _)) => {
                    sh.error
                        .get_or_insert(P2pError::NotFound(self.name.to_string()));
                }
                Err(e) => {
                    log::warn!("p2p: publishing shards of '{}': {e}", self.name);
                    sh.unpublished.extend(shards);
                    sh.dead.extend(dead);
                    sh.bad.extend(bad);
                    failures += 1;
                    if sh.working == 0 && failures > self.config.no_source_retries {
                        sh.error.get_or_insert(e);
                        return;
                    }
                    drop(sh);
                    std::thread::sleep(backoff(failures));
                    sh = shared.lock();
                }
            }
            changed.notify_all();
        }
    }

    /// Reads shard `shard` (`size` bytes) from `from` into its destination and checks
    /// its CRC-32C when it has one.
    fn fetch_shard(
        &self,
        shard: usize,
        from: &Location,
        size: u64,
        crc: Option<u32>,
    ) -> Result<(), Failure> {
        let dest = self.dests[shard];
        let engine = self.engine;
        let segment = &from.segment_name;
        let target = engine
            .open_segment(segment)
            .map_err(|e| Failure::Dead(format!("opening its segment: {e}")))?;
        let request = TransferRequest::new(Op::Read, dest, target, from.offset, size);
        match self.transfer(&request) {
            Ok(()) => {}
            Err(why) => {
                return Err(match engine.probe(segment) {
                    Ok(()) => {
                        // Its descriptor may be stale (the node registered again).
                        let _ = engine.open_segment_no_cache(segment);
                        Failure::Failed(why)
                    }
                    Err(e) => Failure::Dead(format!("{why}; probing it: {e}")),
                });
            }
        }
        let Some(expected) = crc else {
            return Ok(());
        };
        // SAFETY: the caller's contract: `size` bytes at `dest` are ours until the
        // fetch returns, and the transfer into them completed.
        let bytes = unsafe { std::slice::from_raw_parts(dest as *const u8, size as usize) };
        if crc32c::crc32c(bytes) == expected {
            Ok(())
        } else {
            Err(Failure::Corrupt)
        }
    }

    /// Runs one read to completion.
    fn transfer(&self, request: &TransferRequest) -> Result<(), String> {
        let engine = self.engine;
        let batch = engine.allocate_batch(1);
        let result = (|| {
            engine
                .submit(batch, std::slice::from_ref(request))
                .map_err(|e| e.to_string())?;
            while !engine
                .wait_batch(batch, Duration::from_secs(1))
                .map_err(|e| e.to_string())?
            {}
            let (status, _) = engine
                .transfer_status(batch, 0)
                .map_err(|e| e.to_string())?;
            match status {
                TaskStatus::Completed => Ok(()),
                other => Err(format!("the transfer ended {other:?}")),
            }
        })();
        if let Err(e) = engine.free_batch(batch) {
            log::warn!("p2p: freeing batch {batch:#x}: {e}");
        }
        result
    }
}

/// The pause before retry `n` (from 1): 100 ms doubling up to 1 s; none before the
/// first try.
fn backoff(n: u32) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    (Duration::from_millis(100) * 2u32.saturating_pow(n - 1).min(16)).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_a_second() {
        let ms: Vec<u128> = (0..7).map(|n| backoff(n).as_millis()).collect();
        assert_eq!(ms, [0, 100, 200, 400, 800, 1000, 1000]);
    }
}
