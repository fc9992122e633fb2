//! `--mode=serve` (a segment owner) and `--mode=client` (the client-operations
//! benchmark).
//!
//! The benchmark mirrors upstream's two-process baseline (spec store.md Appendix A.2):
//! for each value size and each operation family (`put`/`get`,
//! `put_from`/`get_into`, `batch_put_from`/`batch_get_into`) it runs `--rounds`
//! rounds of `--ops` items with fresh keys, the reads of a round reading the keys its
//! writes just stored, and removes the round's keys (untimed) before the next one.
//! Ops/s is the median round; latencies are over every call of every round (a batch
//! call is one sample). Data is checked after each read loop (outside the timing).

use crate::settings::{ClientOp, Settings};
use crate::stats::{median, report, Row, Samples};
use mooncake::runtime::signals;
use mooncake::store::{Client, ReplicateConfig, SetupConfig, StoreResult};
use std::time::Instant;

/// Minimum number of buffer slots per direction (sources and destinations).
const MIN_SLOTS: usize = 16;

/// A store client for these settings, mounting `segment` bytes.
pub fn setup(s: &Settings, segment: u64) -> Result<Client, String> {
    let cfg = SetupConfig {
        local_hostname: s.local_hostname.clone(),
        metadata_server: s.metadata_server.clone(),
        global_segment_size: segment,
        local_buffer_size: s.local_buffer_size,
        protocol: s.protocol.clone(),
        device_name: String::new(),
        master_server_addr: s.master_server_addr.clone(),
        ..SetupConfig::default()
    };
    Client::setup(&cfg).map_err(|e| {
        format!(
            "store setup (master {}, metadata {}): {e}",
            s.master_server_addr, s.metadata_server
        )
    })
}

/// `--mode=serve`: mounts a segment and holds it until SIGINT/SIGTERM.
pub fn serve(s: &Settings) -> Result<(), String> {
    if s.global_segment_size == 0 {
        return Err("--mode=serve needs --global_segment_size > 0".into());
    }
    let client = setup(s, s.global_segment_size)?;
    eprintln!("store_bench serving segment {}", client.hostname());
    signals::wait_for_stop();
    client.close();
    eprintln!("store_bench: segment {} closed", client.hostname());
    Ok(())
}

/// The byte pattern every value carries (distinct per size).
fn payload(size: usize) -> Vec<u8> {
    (0..size)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(7) ^ (i >> 12) as u8 ^ size as u8)
        .collect()
}

/// `get` as a user without a preallocated buffer does it: one call that returns the
/// object in a fresh buffer (like the Python `get`).
fn get_owned(client: &Client, key: &str) -> StoreResult<Vec<u8>> {
    client.get(key)
}

/// What one operation accumulated over its rounds.
#[derive(Default)]
struct Acc {
    samples: Samples,
    rates: Vec<f64>,
    errors: u64,
    first_error: Option<String>,
}

impl Acc {
    fn error(&mut self, what: impl FnOnce() -> String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what());
        }
    }

    /// One round: `body`'s calls, then the round's rate of `n` items per second.
    fn round(&mut self, n: usize, body: impl FnOnce(&mut Acc)) {
        let start = Instant::now();
        body(self);
        self.rates.push(n as f64 / start.elapsed().as_secs_f64());
    }

    /// One call, timed as one latency sample.
    fn timed<R>(&mut self, call: impl FnOnce() -> R) -> R {
        let t = Instant::now();
        let r = call();
        self.samples.push(t.elapsed());
        r
    }

    fn into_row(mut self, op: ClientOp, size: u64) -> Row {
        if let Some(e) = &self.first_error {
            log::warn!(
                "{} size {size}: {} error(s), first: {e}",
                op.name(),
                self.errors
            );
        }
        let rate = median(&mut self.rates);
        Row::new(op.name(), size, rate, &mut self.samples, self.errors)
    }
}

/// The benchmark of one value size.
struct SizeBench<'a> {
    client: &'a Client,
    s: &'a Settings,
    size: usize,
    n: usize,
    slots: usize,
    payload: Vec<u8>,
    config: ReplicateConfig,
}

impl SizeBench<'_> {
    fn key(&self, family: &str, round: usize, i: usize) -> String {
        format!("{}-{family}-{}-{round}-{i}", self.s.key_prefix, self.size)
    }

    /// Removes every key of one family round (untimed).
    fn cleanup(&self, family: &str, round: usize) {
        let pattern = format!(
            "^{}-",
            regex::escape(&format!(
                "{}-{family}-{}-{round}",
                self.s.key_prefix, self.size
            ))
        );
        match self.client.remove_by_regex(&pattern, true) {
            Ok(n) => log::debug!("cleanup {pattern}: {n} removed"),
            Err(e) => log::warn!("cleanup {pattern}: {e}"),
        }
    }

    fn wants(&self, op: ClientOp) -> bool {
        self.s.operations.contains(&op)
    }

    /// `put` then `get` of the same keys.
    fn bytes_family(&self, rows: &mut Vec<Row>) {
        let (mut put, mut get) = (Acc::default(), Acc::default());
        for round in 0..self.s.rounds {
            put.round(self.n, |put| {
                for i in 0..self.n {
                    let key = self.key("pb", round, i);
                    if let Err(e) = put.timed(|| self.client.put(&key, &self.payload, &self.config))
                    {
                        put.error(|| format!("put {key}: {e}"));
                    }
                }
            });
            if self.wants(ClientOp::Get) {
                let mut last = None;
                get.round(self.n, |get| {
                    for i in 0..self.n {
                        let key = self.key("pb", round, i);
                        match get.timed(|| get_owned(self.client, &key)) {
                            Ok(v) if v.len() == self.size => last = Some(v),
                            Ok(v) => get.error(|| format!("get {key}: {} bytes", v.len())),
                            Err(e) => get.error(|| format!("get {key}: {e}")),
                        }
                    }
                });
                if last.is_some_and(|v| v != self.payload) {
                    get.error(|| "get: data differs from what was put".into());
                }
            }
            self.cleanup("pb", round);
        }
        if self.wants(ClientOp::Put) {
            rows.push(put.into_row(ClientOp::Put, self.size as u64));
        }
        if self.wants(ClientOp::Get) {
            rows.push(get.into_row(ClientOp::Get, self.size as u64));
        }
    }

    /// Checks the first `used` destination slots hold the payload.
    fn verify(&self, dst: &[u8], used: usize, acc: &mut Acc, what: &str) {
        let bad = dst
            .chunks(self.size)
            .take(used)
            .any(|slot| slot != self.payload.as_slice());
        if bad {
            acc.error(|| format!("{what}: data differs from what was put"));
        }
    }

    /// `put_from` then `get_into` of the same keys (registered buffer).
    fn zero_copy_family(&self, src: &[u8], dst: &mut [u8], rows: &mut Vec<Row>) {
        let size = self.size;
        let (mut put, mut get) = (Acc::default(), Acc::default());
        let value = &src[..size];
        for round in 0..self.s.rounds {
            put.round(self.n, |put| {
                for i in 0..self.n {
                    let key = self.key("pf", round, i);
                    if let Err(e) = put.timed(|| self.client.put_from(&key, value, &self.config)) {
                        put.error(|| format!("put_from {key}: {e}"));
                    }
                }
            });
            if self.wants(ClientOp::GetInto) {
                dst.fill(0);
                get.round(self.n, |get| {
                    for i in 0..self.n {
                        let key = self.key("pf", round, i);
                        let slot = &mut dst[(i % self.slots) * size..][..size];
                        match get.timed(|| self.client.get_into(&key, slot)) {
                            Ok(n) if n == size as u64 => {}
                            Ok(n) => get.error(|| format!("get_into {key}: {n} bytes")),
                            Err(e) => get.error(|| format!("get_into {key}: {e}")),
                        }
                    }
                });
                self.verify(dst, self.n.min(self.slots), &mut get, "get_into");
            }
            self.cleanup("pf", round);
        }
        if self.wants(ClientOp::PutFrom) {
            rows.push(put.into_row(ClientOp::PutFrom, size as u64));
        }
        if self.wants(ClientOp::GetInto) {
            rows.push(get.into_row(ClientOp::GetInto, size as u64));
        }
    }

    /// `batch_put_from` then `batch_get_into` of the same keys, `--batch` per call.
    fn batch_family(&self, src: &[u8], dst: &mut [u8], rows: &mut Vec<Row>) {
        let size = self.size;
        let batch = self.s.batch;
        let (mut put, mut get) = (Acc::default(), Acc::default());
        for round in 0..self.s.rounds {
            let keys: Vec<String> = (0..self.n).map(|i| self.key("bp", round, i)).collect();
            put.round(self.n, |put| {
                for chunk in keys.chunks(batch) {
                    let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
                    let bufs: Vec<&[u8]> = src.chunks(size).take(chunk.len()).collect();
                    let r = put.timed(|| self.client.batch_put_from(&refs, &bufs, &self.config));
                    for (k, res) in chunk.iter().zip(r) {
                        if let Err(e) = res {
                            put.error(|| format!("batch_put_from {k}: {e}"));
                        }
                    }
                }
            });
            if self.wants(ClientOp::BatchGetInto) {
                dst.fill(0);
                get.round(self.n, |get| {
                    for chunk in keys.chunks(batch) {
                        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
                        let mut bufs: Vec<&mut [u8]> =
                            dst.chunks_mut(size).take(chunk.len()).collect();
                        let r = get.timed(|| self.client.batch_get_into(&refs, &mut bufs));
                        for (k, res) in chunk.iter().zip(r) {
                            match res {
                                Ok(n) if n == size as u64 => {}
                                Ok(n) => get.error(|| format!("batch_get_into {k}: {n} bytes")),
                                Err(e) => get.error(|| format!("batch_get_into {k}: {e}")),
                            }
                        }
                    }
                });
                self.verify(dst, self.n.min(batch), &mut get, "batch_get_into");
            }
            self.cleanup("bp", round);
        }
        if self.wants(ClientOp::BatchPutFrom) {
            rows.push(put.into_row(ClientOp::BatchPutFrom, size as u64));
        }
        if self.wants(ClientOp::BatchGetInto) {
            rows.push(get.into_row(ClientOp::BatchGetInto, size as u64));
        }
    }

    /// Opens the Transfer Engine connections to the segment owner (untimed).
    fn warm_up(&self, src: &[u8], dst: &mut [u8]) {
        let keys: Vec<String> = (0..self.slots).map(|i| self.key("warm", 0, i)).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let bufs: Vec<&[u8]> = src.chunks(self.size).take(self.slots).collect();
        let puts = self.client.batch_put_from(&refs, &bufs, &self.config);
        let mut outs: Vec<&mut [u8]> = dst.chunks_mut(self.size).take(self.slots).collect();
        let gets = self.client.batch_get_into(&refs, &mut outs);
        if let Some(e) = puts.iter().find_map(|r| r.as_ref().err()) {
            log::warn!("warm-up batch_put_from: {e}");
        } else if let Some(e) = gets.iter().find_map(|r| r.as_ref().err()) {
            log::warn!("warm-up batch_get_into: {e}");
        }
        self.cleanup("warm", 0);
    }

    fn run(&self, buf: &mut [u8]) -> Vec<Row> {
        let region = self.slots * self.size;
        let (src, rest) = buf.split_at_mut(region);
        let dst = &mut rest[..region];
        for slot in src.chunks_mut(self.size) {
            slot.copy_from_slice(&self.payload);
        }
        let src: &[u8] = src;
        self.warm_up(src, dst);
        let mut rows = Vec::new();
        let wants = |ops: [ClientOp; 2]| ops.iter().any(|op| self.wants(*op));
        if wants([ClientOp::Put, ClientOp::Get]) && !signals::stop_requested() {
            self.bytes_family(&mut rows);
        }
        if wants([ClientOp::PutFrom, ClientOp::GetInto]) && !signals::stop_requested() {
            self.zero_copy_family(src, dst, &mut rows);
        }
        if wants([ClientOp::BatchPutFrom, ClientOp::BatchGetInto]) && !signals::stop_requested() {
            self.batch_family(src, dst, &mut rows);
        }
        rows
    }
}

/// `--mode=client`: the client-operations benchmark.
pub fn run(s: &Settings) -> Result<(), String> {
    let client = setup(s, s.global_segment_size)?;
    let max = s.value_sizes.iter().copied().max().unwrap_or(0) as usize;
    let slots = s.batch.max(MIN_SLOTS);
    let len = 2 * slots * max;
    let mut buf = vec![0u8; len];
    client
        .register_buffer(buf.as_mut_ptr(), len)
        .map_err(|e| format!("register_buffer of {len} bytes: {e}"))?;
    eprintln!(
        "store_bench client {} -> master {} (segment {} bytes, prefix {})",
        client.hostname(),
        s.master_server_addr,
        s.global_segment_size,
        s.key_prefix
    );
    let mut rows = Vec::new();
    for &size in &s.value_sizes {
        if signals::stop_requested() {
            break;
        }
        let size = size as usize;
        let bench = SizeBench {
            client: &client,
            s,
            size,
            n: s.ops_for(size as u64),
            slots,
            payload: payload(size),
            config: ReplicateConfig::default(),
        };
        let got = bench.run(&mut buf[..2 * slots * size]);
        for r in &got {
            eprintln!("{}", r.row_line());
        }
        rows.extend(got);
    }
    if let Err(e) = client.unregister_buffer(buf.as_mut_ptr()) {
        log::warn!("unregister_buffer: {e}");
    }
    client.close();
    report(
        &format!(
            "store_bench client ops (Rust API, rounds {}, batch {}, segment {} bytes)",
            s.rounds, s.batch, s.global_segment_size
        ),
        &rows,
    );
    Ok(())
}
