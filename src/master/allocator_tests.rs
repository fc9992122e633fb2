//! The range allocator: exact fits, merging, stale and forged frees, and randomized
//! allocate/free sequences checked against a model.

use super::*;
use std::collections::BTreeMap;

/// A tiny deterministic PRNG for the randomized tests.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn classes_are_monotonic_and_consistent() {
    let mut last = 0;
    for c in 1..NUM_CLASSES {
        let m = class_min(c);
        assert!(m > last, "class {c}");
        assert_eq!(class_floor(m), c);
        assert_eq!(class_floor(m - 1), c - 1);
        last = m;
    }
    assert_eq!(class_floor(u64::MAX), NUM_CLASSES - 1);
    for s in 1..5000u64 {
        let c = class_ceil(s);
        assert!(class_min(c) >= s);
        assert!(c == 0 || class_min(c - 1) < s);
    }
}

#[test]
fn exact_fill_and_refill() {
    let mut a = RangeAllocator::new(0x1000, 1000);
    let mut allocs = Vec::new();
    for i in 0..10 {
        let p = a.allocate(100).expect("fits");
        assert_eq!(p.addr, 0x1000 + i * 100);
        assert_eq!(a.allocation_size(p.addr, p.block), Some(100));
        allocs.push(p);
    }
    assert_eq!(a.allocate(1), None);
    assert_eq!(a.used(), 1000);
    assert_eq!(a.allocation_count(), 10);
    for p in allocs.drain(..) {
        assert_eq!(a.free(p.addr, p.block), Some(100));
    }
    assert_eq!(a.allocation_count(), 0);
    assert_eq!(a.free_range_count(), 1);
    assert_eq!(a.allocate(1000).map(|p| p.addr), Some(0x1000));
    assert_eq!(a.allocate(0), None);
}

#[test]
fn restored_allocations_behave_like_allocated_ones() {
    let base = 0x10_000;
    let ranges = [
        (base + 4096, 1024),
        (base, 100),
        (base + 50, 10),     // overlaps the one at base
        (base + 8192, 8192), // ends exactly at the segment's end
        (base + 16384, 1),   // past the end
        (base - 1, 1),       // before the start
        (base + 200, 0),     // empty
    ];
    let (mut a, blocks) = RangeAllocator::with_allocations(base, 16384, &ranges);
    let ok: Vec<bool> = blocks.iter().map(Option::is_some).collect();
    assert_eq!(ok, [true, true, false, true, false, false, false]);
    assert_eq!(a.used(), 1024 + 100 + 8192);
    assert_eq!(a.allocation_count(), 3);
    // The gaps are free: 100..4096 and 5120..8192.
    let x = a.allocate(3996).expect("the first gap");
    assert_eq!(x.addr, base + 100);
    let y = a.allocate(3072).expect("the second gap");
    assert_eq!(y.addr, base + 5120);
    assert!(a.allocate(1).is_none());
    for (i, b) in blocks.iter().enumerate() {
        if let Some(block) = b {
            assert_eq!(a.free(ranges[i].0, *block), Some(ranges[i].1));
        }
    }
    a.free(x.addr, x.block).unwrap();
    a.free(y.addr, y.block).unwrap();
    assert_eq!(a.used(), 0);
    assert_eq!(a.free_range_count(), 1);
    assert_eq!(a.largest_free(), 16384);
}

#[test]
fn bad_frees_are_ignored() {
    let mut a = RangeAllocator::new(100, 1 << 20);
    let p = a.allocate(4096).unwrap();
    let q = a.allocate(100).unwrap();
    assert_eq!(a.free(p.addr + 1, p.block), None);
    assert_eq!(a.free(0, p.block), None);
    assert_eq!(a.free(q.addr, p.block), None);
    assert_eq!(a.free(p.addr, q.block), None);
    assert_eq!(a.free(p.addr, 1000), None);
    assert_eq!(a.free(p.addr, u32::MAX), None);
    assert_eq!(a.free(p.addr, p.block), Some(4096));
    assert_eq!(a.free(p.addr, p.block), None);
    assert_eq!(a.allocation_size(p.addr, p.block), None);
    // The free tail block and the spare slots left by merging are not live either.
    for b in 0..8 {
        if b != q.block {
            assert_eq!(a.free(q.addr + 100, b), None);
            assert_eq!(a.free(p.addr, b), None);
        }
    }
    assert_eq!(a.used(), 100);
    assert_eq!(a.free(q.addr, q.block), Some(100));
    assert_eq!(a.free(q.addr, q.block), None);
    assert_eq!(a.used(), 0);
    assert_eq!(a.free_range_count(), 1);
}

#[test]
fn huge_ranges_do_not_overflow() {
    let mut a = RangeAllocator::new(u64::MAX - 10, 100);
    assert_eq!(a.capacity(), 10);
    assert_eq!(a.allocate(10).map(|p| p.addr), Some(u64::MAX - 10));
    let mut b = RangeAllocator::new(1, u64::MAX - 1);
    assert!(b.allocate(1 << 62).is_some());
    assert!(b.allocate(u64::MAX).is_none());
}

#[test]
fn randomized_no_overlap_and_full_coalescing() {
    // Miri interprets about a thousand times slower: one short run there.
    let (seeds, steps) = if cfg!(miri) { (1, 500) } else { (8, 20_000) };
    for seed in 1..=seeds {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
        let cap = 1 << 20;
        let mut a = RangeAllocator::new(4096, cap);
        let mut live: BTreeMap<u64, (u64, u32)> = BTreeMap::new();
        for _ in 0..steps {
            if live.is_empty() || rng.below(100) < 55 {
                let size = match rng.below(4) {
                    0 => 1 + rng.below(64),
                    1 => 1 + rng.below(4096),
                    2 => 1 + rng.below(65536),
                    _ => 1 + rng.below(cap / 8),
                };
                if let Some(Allocation { addr: p, block }) = a.allocate(size) {
                    assert!(p >= 4096 && p + size <= 4096 + cap);
                    if let Some((&q, &(qs, _))) = live.range(..=p).next_back() {
                        assert!(q + qs <= p, "overlap with previous");
                    }
                    if let Some((&q, _)) = live.range(p..).next() {
                        assert!(p + size <= q, "overlap with next");
                    }
                    live.insert(p, (size, block));
                } else {
                    // Nothing fits: no free range may be large enough.
                    assert!(a.largest_free() < size);
                }
            } else {
                let n = rng.below(live.len() as u64) as usize;
                let (&p, &(s, b)) = live.iter().nth(n).unwrap();
                assert_eq!(a.free(p, b), Some(s));
                assert_eq!(a.free(p, b), None);
                live.remove(&p);
            }
            assert_eq!(a.used(), live.values().map(|v| v.0).sum::<u64>());
            assert_eq!(a.allocation_count(), live.len());
        }
        for (p, (s, b)) in std::mem::take(&mut live) {
            assert_eq!(a.free(p, b), Some(s));
        }
        assert_eq!(a.used(), 0);
        assert_eq!(a.free_range_count(), 1);
        assert_eq!(a.largest_free(), cap);
        assert_eq!(a.allocate(cap).map(|p| p.addr), Some(4096));
    }
}

#[test]
fn fragmented_pool_finds_exact_fits() {
    // Free every other block; a request equal to a hole must be satisfied even
    // though it is not a class boundary.
    let mut a = RangeAllocator::new(0, 1000 * 100);
    let ps: Vec<Allocation> = (0..1000).map(|_| a.allocate(100).unwrap()).collect();
    for p in ps.iter().step_by(2) {
        assert_eq!(a.free(p.addr, p.block), Some(100));
    }
    for _ in 0..500 {
        assert!(a.allocate(100).is_some());
    }
    assert!(a.allocate(1).is_none());
}

#[test]
fn a_live_allocation_costs_one_24_byte_block() {
    assert_eq!(std::mem::size_of::<Block>(), 24);
    let mut a = RangeAllocator::new(0, 1 << 20);
    let x = a.allocate(100).expect("fits");
    let y = a.allocate(200).expect("fits");
    // Lengths are derived from the next block's start: each stays exact as its
    // neighbours are split off and merged back.
    assert_eq!(a.allocation_size(x.addr, x.block), Some(100));
    assert_eq!(a.allocation_size(y.addr, y.block), Some(200));
    assert_eq!(a.free(x.addr, x.block), Some(100));
    assert_eq!(a.allocation_size(y.addr, y.block), Some(200));
    assert_eq!(a.largest_free(), (1 << 20) - 300);
    assert_eq!(a.free(y.addr, y.block), Some(200));
    assert_eq!(a.largest_free(), 1 << 20);
    assert_eq!(a.free_range_count(), 1);
}
