//! Which instance holds which prefix blocks: block hash -> holders (with the media each
//! holds it in), and per instance the blocks it holds in least-recently-used order, so
//! an instance's view never exceeds its KV capacity and leaves with it.
//!
//! The maps hash with foldhash (randomly seeded): block hashes are looked up dozens of
//! times per schedule call, and SipHash cost more than the lookups themselves.

use std::collections::VecDeque;

use foldhash::HashMap;

/// An instance's place in the conductor's tables.
pub type Slot = u32;

/// Media a block is held in, as bits.
pub mod medium {
    /// GPU memory of an inference engine.
    pub const GPU: u8 = 1;
    /// Host memory (an engine's CPU cache, or the Mooncake Store's memory tier).
    pub const CPU: u8 = 2;
    /// SSD (the Mooncake Store's disk tier).
    pub const DISK: u8 = 4;
    /// Every medium.
    pub const ALL: u8 = GPU | CPU | DISK;

    /// Reads a medium name (`gpu`, `cpu`, `disk`, any case).
    pub fn parse(name: &str) -> Option<u8> {
        match name.to_ascii_lowercase().as_str() {
            "gpu" => Some(GPU),
            "cpu" => Some(CPU),
            "disk" | "ssd" => Some(DISK),
            _ => None,
        }
    }
}

/// One instance's blocks in least-recently-used order: the latest stamp of each block,
/// and touches in order (older duplicates skipped when popped, and compacted away).
#[derive(Debug, Default)]
struct Recency {
    stamps: HashMap<u64, u64>,
    order: VecDeque<(u64, u64)>,
    clock: u64,
    capacity: u64,
}

impl Recency {
    fn touch(&mut self, block: u64) {
        self.clock += 1;
        self.stamps.insert(block, self.clock);
        self.order.push_back((block, self.clock));
        if self.order.len() > 2 * self.stamps.len() + 64 {
            let stamps = &self.stamps;
            self.order.retain(|(b, s)| stamps.get(b) == Some(s));
        }
    }

    /// The least recently used block, taken out.
    fn pop_oldest(&mut self) -> Option<u64> {
        while let Some((block, stamp)) = self.order.pop_front() {
            if self.stamps.get(&block) == Some(&stamp) {
                self.stamps.remove(&block);
                return Some(block);
            }
        }
        None
    }

    fn over_capacity(&self) -> bool {
        self.capacity > 0 && self.stamps.len() as u64 > self.capacity
    }
}

/// The prefix index.
#[derive(Debug, Default)]
pub struct PrefixIndex {
    holders: HashMap<u64, Vec<(Slot, u8)>>,
    instances: Vec<Option<Recency>>,
    candidates: Vec<Slot>,
}

impl PrefixIndex {
    /// An empty index.
    pub fn new() -> PrefixIndex {
        PrefixIndex::default()
    }

    /// Makes room for an instance at `slot` holding at most `capacity` blocks (0: no
    /// limit).
    pub fn add_instance(&mut self, slot: Slot, capacity: u64) {
        let i = slot as usize;
        if self.instances.len() <= i {
            self.instances.resize_with(i + 1, || None);
        }
        let recency = self.instances[i].get_or_insert_with(Recency::default);
        recency.capacity = capacity;
        while recency.over_capacity() {
            let Some(block) = recency.pop_oldest() else {
                break;
            };
            drop_holder(&mut self.holders, block, slot);
        }
    }

    /// Forgets everything `slot` holds; the number of blocks it held.
    pub fn remove_instance(&mut self, slot: Slot) -> usize {
        let Some(recency) = self.instances.get_mut(slot as usize).and_then(Option::take) else {
            return 0;
        };
        for block in recency.stamps.keys() {
            drop_holder(&mut self.holders, *block, slot);
        }
        recency.stamps.len()
    }

    /// Forgets everything `slot` holds but keeps the instance.
    pub fn clear_instance(&mut self, slot: Slot) -> usize {
        let capacity = match self.instances.get(slot as usize) {
            Some(Some(r)) => r.capacity,
            _ => return 0,
        };
        let n = self.remove_instance(slot);
        self.add_instance(slot, capacity);
        n
    }

    /// Records that `slot` holds `block` in `media` (and uses it now); blocks beyond
    /// its capacity leave, least recently used first. Returns how many left.
    pub fn store(&mut self, slot: Slot, block: u64, media: u8) -> usize {
        let Some(Some(recency)) = self.instances.get_mut(slot as usize) else {
            return 0;
        };
        let entry = self.holders.entry(block).or_default();
        match entry.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, m)) => *m |= media,
            None => entry.push((slot, media)),
        }
        recency.touch(block);
        let mut evicted = 0;
        while recency.over_capacity() {
            let Some(old) = recency.pop_oldest() else {
                break;
            };
            drop_holder(&mut self.holders, old, slot);
            evicted += 1;
        }
        evicted
    }

    /// Records that `slot` no longer holds `block` in `media`; whether it held it.
    pub fn remove(&mut self, slot: Slot, block: u64, media: u8) -> bool {
        let Some(entry) = self.holders.get_mut(&block) else {
            return false;
        };
        let Some(pos) = entry.iter().position(|(s, _)| *s == slot) else {
            return false;
        };
        entry[pos].1 &= !media;
        if entry[pos].1 == 0 {
            entry.swap_remove(pos);
            if entry.is_empty() {
                self.holders.remove(&block);
            }
            if let Some(Some(recency)) = self.instances.get_mut(slot as usize) {
                recency.stamps.remove(&block);
            }
        }
        true
    }

    /// Marks `blocks` as just used by `slot` (those it holds).
    pub fn touch(&mut self, slot: Slot, blocks: &[u64]) {
        if let Some(Some(recency)) = self.instances.get_mut(slot as usize) {
            for b in blocks {
                if recency.stamps.contains_key(b) {
                    recency.touch(*b);
                }
            }
        }
    }

    /// For every slot, how many of `blocks` it holds as an unbroken prefix (in any of
    /// `media`), written to `out[slot]` (resized to cover every slot).
    pub fn prefix_lengths(&mut self, blocks: &[u64], media: u8, out: &mut Vec<u32>) {
        out.clear();
        out.resize(self.instances.len(), 0);
        let Some(first) = blocks.first().and_then(|b| self.holders.get(b)) else {
            return;
        };
        self.candidates.clear();
        for &(slot, m) in first {
            if m & media != 0 {
                self.candidates.push(slot);
                out[slot as usize] = 1;
            }
        }
        for (i, block) in blocks.iter().enumerate().skip(1) {
            if self.candidates.is_empty() {
                break;
            }
            let Some(holders) = self.holders.get(block) else {
                break;
            };
            self.candidates
                .retain(|slot| holders.iter().any(|&(s, m)| s == *slot && m & media != 0));
            for &slot in &self.candidates {
                out[slot as usize] = i as u32 + 1;
            }
        }
    }

    /// How many of `blocks` `slot` holds as an unbroken prefix in any of `media`.
    pub fn prefix_of(&self, slot: Slot, blocks: &[u64], media: u8) -> usize {
        blocks
            .iter()
            .take_while(|b| {
                self.holders
                    .get(b)
                    .is_some_and(|h| h.iter().any(|&(s, m)| s == slot && m & media != 0))
            })
            .count()
    }

    /// The slots holding `block`, with their media.
    pub fn holders(&self, block: u64) -> &[(Slot, u8)] {
        self.holders.get(&block).map_or(&[], Vec::as_slice)
    }

    /// Blocks `slot` holds.
    pub fn blocks_of(&self, slot: Slot) -> usize {
        match self.instances.get(slot as usize) {
            Some(Some(r)) => r.stamps.len(),
            _ => 0,
        }
    }

    /// Distinct blocks held anywhere.
    pub fn distinct_blocks(&self) -> usize {
        self.holders.len()
    }
}

/// Takes `slot` off `block`'s holders.
fn drop_holder(holders: &mut HashMap<u64, Vec<(Slot, u8)>>, block: u64, slot: Slot) {
    if let Some(entry) = holders.get_mut(&block) {
        entry.retain(|(s, _)| *s != slot);
        if entry.is_empty() {
            holders.remove(&block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::medium::{ALL, CPU, DISK, GPU};
    use super::*;

    fn index_with(slots: &[(Slot, u64)]) -> PrefixIndex {
        let mut ix = PrefixIndex::new();
        for &(s, cap) in slots {
            ix.add_instance(s, cap);
        }
        ix
    }

    #[test]
    fn prefix_stops_at_the_first_missing_block() {
        let mut ix = index_with(&[(0, 0), (1, 0), (2, 0)]);
        for b in [10, 11, 12] {
            ix.store(0, b, GPU);
        }
        for b in [10, 12] {
            ix.store(1, b, GPU);
        }
        ix.store(2, 11, GPU);
        let mut out = Vec::new();
        ix.prefix_lengths(&[10, 11, 12, 13], ALL, &mut out);
        assert_eq!(out, vec![3, 1, 0]);
        assert_eq!(ix.prefix_of(0, &[10, 11, 12, 13], ALL), 3);
        ix.prefix_lengths(&[], ALL, &mut out);
        assert_eq!(out, vec![0, 0, 0]);
    }

    #[test]
    fn media_are_tracked_per_holder() {
        let mut ix = index_with(&[(0, 0)]);
        ix.store(0, 1, CPU);
        ix.store(0, 2, DISK);
        ix.store(0, 2, CPU);
        assert_eq!(ix.prefix_of(0, &[1, 2], CPU), 2);
        assert_eq!(ix.prefix_of(0, &[1, 2], DISK), 0);
        assert!(ix.remove(0, 2, CPU));
        assert_eq!(ix.prefix_of(0, &[1, 2], CPU), 1);
        assert_eq!(ix.prefix_of(0, &[2], DISK), 1);
        assert!(ix.remove(0, 2, DISK));
        assert_eq!(ix.holders(2), &[]);
        assert!(!ix.remove(0, 2, DISK));
        assert_eq!(ix.blocks_of(0), 1);
    }

    #[test]
    fn capacity_evicts_least_recently_used() {
        let mut ix = index_with(&[(0, 3)]);
        for b in [1, 2, 3] {
            assert_eq!(ix.store(0, b, GPU), 0);
        }
        ix.touch(0, &[1]);
        assert_eq!(ix.store(0, 4, GPU), 1);
        assert_eq!(ix.holders(2), &[]);
        assert_eq!(ix.blocks_of(0), 3);
        for b in [1, 3, 4] {
            assert_eq!(ix.holders(b), &[(0, GPU)]);
        }
        ix.add_instance(0, 1);
        assert_eq!(ix.blocks_of(0), 1);
        assert_eq!(ix.holders(4), &[(0, GPU)]);
    }

    #[test]
    fn removing_an_instance_takes_all_its_blocks() {
        let mut ix = index_with(&[(0, 0), (1, 0)]);
        for b in 0..100 {
            ix.store(0, b, GPU);
            ix.store(1, b * 2, GPU);
        }
        assert_eq!(ix.remove_instance(0), 100);
        assert_eq!(ix.distinct_blocks(), 100);
        assert!(ix.holders(1).is_empty());
        assert_eq!(ix.holders(2), &[(1, GPU)]);
        assert_eq!(ix.store(0, 5, GPU), 0);
        assert!(ix.holders(5).is_empty());
        assert_eq!(ix.clear_instance(1), 100);
        assert_eq!(ix.distinct_blocks(), 0);
    }

    #[test]
    fn recency_order_stays_bounded_under_repeated_touches() {
        let mut ix = index_with(&[(0, 0)]);
        ix.store(0, 1, GPU);
        for _ in 0..10_000 {
            ix.touch(0, &[1]);
        }
        let r = ix.instances[0].as_ref().unwrap();
        assert!(r.order.len() <= 2 * r.stamps.len() + 65);
    }
}
