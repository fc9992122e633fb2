//! `--mode=pressure`: a cache workload over an oversubscribed pool, reporting the
//! failed-put rate.
//!
//! The process mounts its own `--global_segment_size` segment and loops, for
//! `--duration` seconds on each of `--threads` threads, over its own `--keys` keys:
//! `--mix` percent put / get / remove of a random key. A key's value has a size in
//! `--value_min..=--value_max` derived from the key, and bytes derived from the key and
//! the put's generation (a process-wide counter): the value starts with the key's
//! number and the generation, and the rest follows from both, so every read is checked
//! whichever put it returns (a wrong byte counts as corrupt, a missing key as a miss).
//! Every call slower than `--call_deadline_ms` counts as late. Puts go through
//! `--put_op` (`put`, `put_from`, or `batch_put_from` of `--batch` random keys).
//! With several such processes on one master and keys x mean value size well above the
//! pool, the master has to evict to make room for most puts.
//!
//! Prints a summary and one machine-readable line:
//! `PRESSURE puts=N put_failed=F put_fail_pct=P gets=G hits=H misses=M get_errors=E
//! corrupt=C removes=R remove_errors=X late=L max_call_ms=T ops_per_sec=O
//! failed_codes=code:n,...`.
//! With `--report_every=S` it also prints an `INTERVAL` line with the same counters
//! every S seconds (the interval's own counts), so a run can be watched over time.

use crate::client_ops::setup;
use crate::settings::{PutOp, Settings};
use mooncake::runtime::signals;
use mooncake::store::{Client, Code, ErrorCode, ReplicateConfig, StoreResult};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of the shared source pattern beyond the largest value.
const PATTERN_SPREAD: usize = 1 << 20;
/// The stamp at the start of every value: the key's number and the generation.
const STAMP: usize = 16;

/// Counters of one thread (or of all threads, merged).
#[derive(Debug, Default, Clone)]
struct Tally {
    puts: u64,
    put_failed: u64,
    failed_codes: BTreeMap<i32, u64>,
    gets: u64,
    hits: u64,
    misses: u64,
    get_errors: u64,
    corrupt: u64,
    removes: u64,
    remove_errors: u64,
    late: u64,
    max_call: Duration,
}

impl Tally {
    fn merge(&mut self, o: &Tally) {
        self.puts += o.puts;
        self.put_failed += o.put_failed;
        for (c, n) in &o.failed_codes {
            *self.failed_codes.entry(*c).or_default() += n;
        }
        self.gets += o.gets;
        self.hits += o.hits;
        self.misses += o.misses;
        self.get_errors += o.get_errors;
        self.corrupt += o.corrupt;
        self.removes += o.removes;
        self.remove_errors += o.remove_errors;
        self.late += o.late;
        self.max_call = self.max_call.max(o.max_call);
    }

    /// Records how long one call took.
    fn timed(&mut self, started: Instant, deadline: Duration) {
        let took = started.elapsed();
        self.max_call = self.max_call.max(took);
        if took > deadline {
            self.late += 1;
        }
    }

    fn put_result(&mut self, r: StoreResult<()>) {
        self.puts += 1;
        if let Err(e) = r {
            self.put_failed += 1;
            *self.failed_codes.entry(e.code.0).or_default() += 1;
        }
    }

    fn ops(&self) -> u64 {
        self.puts + self.gets + self.removes
    }

    /// The machine-readable line, prefixed with `tag`.
    fn line(&self, tag: &str, elapsed: Duration) -> String {
        let pct = if self.puts == 0 {
            0.0
        } else {
            100.0 * self.put_failed as f64 / self.puts as f64
        };
        let codes: Vec<String> = self
            .failed_codes
            .iter()
            .map(|(c, n)| format!("{c}:{n}"))
            .collect();
        format!(
            "{tag} puts={} put_failed={} put_fail_pct={pct:.3} gets={} hits={} misses={} \
             get_errors={} corrupt={} removes={} remove_errors={} late={} max_call_ms={} \
             ops_per_sec={:.1} failed_codes={}",
            self.puts,
            self.put_failed,
            self.gets,
            self.hits,
            self.misses,
            self.get_errors,
            self.corrupt,
            self.removes,
            self.remove_errors,
            self.late,
            self.max_call.as_millis(),
            self.ops() as f64 / elapsed.as_secs_f64().max(1e-9),
            if codes.is_empty() {
                "-".to_string()
            } else {
                codes.join(",")
            }
        )
    }
}

/// The key space and the values each key carries.
struct Workload {
    prefix: String,
    keys: usize,
    min: u64,
    max: u64,
    /// Source bytes: a value's body is a slice of it.
    pattern: Vec<u8>,
    /// The last generation handed out.
    generation: AtomicU64,
}

impl Workload {
    fn new(s: &Settings) -> Workload {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let pattern = (0..s.value_max as usize + PATTERN_SPREAD)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        Workload {
            prefix: s.key_prefix.clone(),
            keys: s.keys,
            min: s.value_min,
            max: s.value_max,
            pattern,
            generation: AtomicU64::new(0),
        }
    }

    fn key(&self, i: usize) -> String {
        format!("{}-p-{i}", self.prefix)
    }

    /// The size every value of key `i` has.
    fn size(&self, i: usize) -> usize {
        let h = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (self.min + (h >> 11) % (self.max - self.min + 1)) as usize
    }

    /// The body (after the stamp) of key `i` at `generation`.
    fn body(&self, i: usize, generation: u64) -> &[u8] {
        let h = (i as u64 + 1)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(generation.wrapping_mul(0xff51_afd7_ed55_8ccd));
        let offset = ((h >> 40) as usize) % PATTERN_SPREAD;
        &self.pattern[offset..offset + self.size(i) - STAMP]
    }

    /// A fresh value for key `i`: its stamp, then the body of a new generation.
    fn next_value(&self, i: usize, out: &mut Vec<u8>) {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        out.clear();
        out.extend_from_slice(&(i as u64).to_le_bytes());
        out.extend_from_slice(&generation.to_le_bytes());
        out.extend_from_slice(self.body(i, generation));
    }

    /// Whether `value` is a whole value of key `i` (of whichever generation it names).
    fn is_value_of(&self, i: usize, value: &[u8]) -> bool {
        if value.len() != self.size(i) {
            return false;
        }
        let word = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&value[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let generation = word(8);
        word(0) == i as u64
            && generation != 0
            && generation <= self.generation.load(Ordering::Relaxed)
            && value[STAMP..] == *self.body(i, generation)
    }
}

/// A per-thread xorshift64* generator.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n.max(1)
    }
}

/// One thread's loop until `until` (or a stop signal).
fn worker(client: &Client, w: &Workload, s: &Settings, seed: u64, until: Instant) -> Tally {
    let mut t = Tally::default();
    let mut rng = Rng(seed | 1);
    let mut buf = vec![0u8; w.max as usize];
    let mut value = Vec::with_capacity(w.max as usize);
    let config = ReplicateConfig::default();
    let (put_pct, get_pct) = (s.mix[0] as usize, s.mix[1] as usize);
    while Instant::now() < until && !signals::stop_requested() {
        let i = rng.below(w.keys);
        let roll = rng.below(100);
        let started = Instant::now();
        if roll < put_pct {
            match s.put_op {
                PutOp::Put | PutOp::PutFrom => {
                    w.next_value(i, &mut value);
                    let r = if s.put_op == PutOp::Put {
                        client.put(&w.key(i), &value, &config)
                    } else {
                        client.put_from(&w.key(i), &value, &config)
                    };
                    t.put_result(r);
                }
                PutOp::BatchPutFrom => {
                    let picks: Vec<usize> = std::iter::once(i)
                        .chain((1..s.batch).map(|_| rng.below(w.keys)))
                        .collect();
                    let keys: Vec<String> = picks.iter().map(|&k| w.key(k)).collect();
                    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
                    let values: Vec<Vec<u8>> = picks
                        .iter()
                        .map(|&k| {
                            let mut v = Vec::with_capacity(w.size(k));
                            w.next_value(k, &mut v);
                            v
                        })
                        .collect();
                    let value_refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
                    for r in client.batch_put_from(&key_refs, &value_refs, &config) {
                        t.put_result(r);
                    }
                }
            }
        } else if roll < put_pct + get_pct {
            t.gets += 1;
            match client.get_into(&w.key(i), &mut buf) {
                Ok(n) if w.is_value_of(i, &buf[..(n as usize).min(buf.len())]) => t.hits += 1,
                Ok(n) => {
                    t.corrupt += 1;
                    log::error!(
                        "pressure: {} read {n} bytes that are no value of it",
                        w.key(i)
                    );
                }
                Err(e) if e == ErrorCode::OBJECT_NOT_FOUND => t.misses += 1,
                Err(e) => {
                    t.get_errors += 1;
                    log::debug!("pressure: get {}: {e}", w.key(i));
                }
            }
        } else {
            t.removes += 1;
            match client.remove(&w.key(i), false).code() {
                Ok(()) | Err(ErrorCode::OBJECT_NOT_FOUND) | Err(ErrorCode::OBJECT_HAS_LEASE) => {}
                Err(e) => {
                    t.remove_errors += 1;
                    log::debug!("pressure: remove {}: {e}", w.key(i));
                }
            }
        }
        t.timed(started, s.call_deadline);
    }
    t
}

/// `--mode=pressure`.
pub fn run(s: &Settings) -> Result<(), String> {
    let client = Arc::new(setup(s, s.global_segment_size)?);
    eprintln!(
        "store_bench pressure: segment {} ({} MiB), {} keys of {}..={} bytes, mix {:?}, {}",
        client.hostname(),
        s.global_segment_size >> 20,
        s.keys,
        s.value_min,
        s.value_max,
        s.mix,
        s.put_op.name()
    );
    let workload = Arc::new(Workload::new(s));
    let start = Instant::now();
    let until = start + s.duration;
    let total = std::thread::scope(|scope| {
        let slices = s.report_every.map_or(1, |every| {
            (s.duration.as_secs_f64() / every.as_secs_f64())
                .ceil()
                .max(1.0) as usize
        });
        let mut total = Tally::default();
        let mut slice_start = start;
        for n in 1..=slices {
            let slice_end = s
                .report_every
                .map_or(until, |every| (start + every * n as u32).min(until));
            let handles: Vec<_> = (0..s.threads)
                .map(|t| {
                    let (client, w) = (&client, &workload);
                    let seed = mooncake::host::net::random_u64() ^ t as u64;
                    scope.spawn(move || worker(client, w, s, seed, slice_end))
                })
                .collect();
            let mut slice = Tally::default();
            for h in handles {
                slice.merge(&h.join().map_err(|_| "a pressure thread panicked")?);
            }
            if s.report_every.is_some() {
                println!("{}", slice.line("INTERVAL", slice_end - slice_start));
            }
            total.merge(&slice);
            slice_start = slice_end;
            if signals::stop_requested() {
                break;
            }
        }
        Ok::<Tally, String>(total)
    })?;
    let elapsed = start.elapsed();
    println!(
        "pressure: {:.1} s, {} ops; puts {} ({} failed), gets {} ({} hits, {} misses, {} errors, \
         {} corrupt), removes {} ({} errors)",
        elapsed.as_secs_f64(),
        total.ops(),
        total.puts,
        total.put_failed,
        total.gets,
        total.hits,
        total.misses,
        total.get_errors,
        total.corrupt,
        total.removes,
        total.remove_errors
    );
    println!("{}", total.line("PRESSURE", elapsed));
    client.close();
    Ok(())
}
