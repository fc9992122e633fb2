//! Replica placement (spec store.md §2.2 step 3, §2.7): best effort, 1..replica_num
//! buffers on distinct segment names; preferred segments first, in order.
//!
//! * `random`: after the preferred names, walk at most min(100, #names) names from a
//!   random start, skipping names already used.
//! * `free_ratio_first`: after the preferred names, sample min(6 x remaining, #names)
//!   consecutive names from a random start, try them by decreasing free ratio, then fall
//!   back to the random walk.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

use super::config::AllocationStrategy;
use super::segments::{AllocView, Buffer};

const MAX_WALK: usize = 100;
const CANDIDATE_MULTIPLIER: usize = 6;

thread_local! {
    static RNG: Cell<u64> = Cell::new({
        let mut h = RandomState::new().build_hasher();
        h.write_u64(0x5eed);
        h.finish() | 1
    });
}

/// A uniformly distributed index below `n` (`n > 0`), from a per-thread xorshift.
pub(crate) fn random_index(n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    RNG.with(|c| {
        let mut x = c.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c.set(x);
        (x % n as u64) as usize
    })
}

/// Places up to `replica_num` buffers of `size` bytes on distinct segment names.
/// Returns what could be allocated (possibly nothing).
pub(crate) fn place(
    view: &mut dyn AllocView,
    strategy: AllocationStrategy,
    size: u64,
    replica_num: usize,
    preferred: &[String],
) -> Vec<Buffer> {
    let mut out: Vec<Buffer> = Vec::new();
    let total = view.names().len();
    if size == 0 || replica_num == 0 || total == 0 {
        return out;
    }
    let want = replica_num.min(total);
    let mut used: Vec<String> = Vec::new();

    if total == 1 {
        let name = view.names()[0].clone();
        if let Some(b) = view.try_alloc(&name, size, random_index(usize::MAX)) {
            out.push(b);
        }
        return out;
    }

    for name in preferred {
        if out.len() >= want {
            return out;
        }
        if used.iter().any(|u| u == name) {
            continue;
        }
        if let Some(b) = view.try_alloc(name, size, random_index(usize::MAX)) {
            out.push(b);
            used.push(name.clone());
        }
    }

    if strategy == AllocationStrategy::FreeRatioFirst && out.len() < want {
        let sample = (CANDIDATE_MULTIPLIER * (want - out.len())).min(total);
        let start = random_index(total);
        let mut cands: Vec<(f64, String)> = (0..sample)
            .map(|i| view.names()[(start + i) % total].clone())
            .filter(|n| !used.contains(n))
            .map(|n| (view.free_ratio(&n), n))
            .collect();
        cands.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal));
        for (_, name) in cands {
            if out.len() >= want {
                break;
            }
            if let Some(b) = view.try_alloc(&name, size, random_index(usize::MAX)) {
                out.push(b);
                used.push(name);
            }
        }
    }

    let start = random_index(total);
    let walk = MAX_WALK.min(total);
    for i in 0..walk {
        if out.len() >= want {
            break;
        }
        let names = view.names();
        if names.is_empty() {
            break;
        }
        let name = names[(start + i) % names.len()].clone();
        if used.contains(&name) {
            continue;
        }
        if let Some(b) = view.try_alloc(&name, size, random_index(usize::MAX)) {
            out.push(b);
            used.push(name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::master::segments::Segments;
    use crate::wire::master_api::{Segment, Uuid};

    fn seg(i: u64, size: u64) -> Segment {
        Segment {
            id: Uuid {
                first: 1,
                second: i,
            },
            name: format!("10.0.0.{i}:1000"),
            base: 0x1000_0000 * i,
            size,
            te_endpoint: format!("10.0.0.{i}:1000"),
            protocol: "tcp".into(),
            host_id: format!("host{}", i % 2),
        }
    }

    fn table(n: u64, size: u64) -> Segments {
        let t = Segments::new(false);
        for i in 1..=n {
            t.mount(
                &seg(i, size),
                Uuid {
                    first: 9,
                    second: i,
                },
            )
            .unwrap();
        }
        t
    }

    #[test]
    fn distinct_names_best_effort() {
        let t = table(3, 1 << 20);
        for strategy in [
            AllocationStrategy::Random,
            AllocationStrategy::FreeRatioFirst,
        ] {
            let got = t.with_view(|v| place(v, strategy, 100, 1000, &[]));
            assert_eq!(got.len(), 3);
            let mut names: Vec<_> = got.iter().map(|b| b.seg.segment.name.clone()).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), 3);
            t.release(got);
        }
        assert_eq!(t.allocated_bytes(), 0);
    }

    #[test]
    fn preferred_first_and_unknown_skipped() {
        let t = table(4, 1 << 20);
        let pref = vec!["nope:1".to_string(), seg(3, 0).name, seg(2, 0).name];
        for _ in 0..20 {
            let got = t.with_view(|v| place(v, AllocationStrategy::Random, 10, 2, &pref));
            let names: Vec<_> = got.iter().map(|b| b.seg.segment.name.clone()).collect();
            assert_eq!(names, vec![seg(3, 0).name, seg(2, 0).name]);
            t.release(got);
        }
    }

    #[test]
    fn free_ratio_first_prefers_emptier() {
        let t = table(2, 1000);
        // Fill segment 1 mostly.
        let filler = t
            .with_view(|v| v.try_alloc(&seg(1, 0).name, 900, 0))
            .unwrap();
        for _ in 0..20 {
            let got = t.with_view(|v| place(v, AllocationStrategy::FreeRatioFirst, 10, 1, &[]));
            assert_eq!(got[0].seg.segment.name, seg(2, 0).name);
            t.release(got);
        }
        t.release([filler]);
    }

    #[test]
    fn nothing_fits() {
        let t = table(2, 100);
        assert!(t
            .with_view(|v| place(v, AllocationStrategy::Random, 101, 1, &[]))
            .is_empty());
        let empty = Segments::new(false);
        assert!(empty
            .with_view(|v| place(v, AllocationStrategy::Random, 1, 1, &[]))
            .is_empty());
    }

    #[test]
    fn random_index_in_range() {
        for n in 1..50 {
            for _ in 0..50 {
                assert!(random_index(n) < n);
            }
        }
        assert_eq!(random_index(0), 0);
    }
}
