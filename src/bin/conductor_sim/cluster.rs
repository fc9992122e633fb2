//! The simulated instances: what really happens in them, which the conductor only
//! sees through its API. A prefill instance runs one prefill at a time in arrival
//! order and keeps the blocks it computed or pulled in an LRU cache of its KV
//! capacity; a decode instance runs continuous batching, one token per running
//! request per step, a step taking the cost model's time between tokens.

use std::collections::{HashMap, VecDeque};

/// An LRU set of blocks.
#[derive(Debug, Default)]
pub struct BlockCache {
    stamps: HashMap<u64, u64>,
    order: VecDeque<(u64, u64)>,
    clock: u64,
    capacity: usize,
}

impl BlockCache {
    /// An empty cache of `capacity` blocks.
    pub fn new(capacity: usize) -> BlockCache {
        BlockCache {
            capacity,
            ..BlockCache::default()
        }
    }

    /// How many of `blocks` it holds as an unbroken prefix.
    pub fn prefix(&self, blocks: &[u64]) -> usize {
        blocks
            .iter()
            .take_while(|b| self.stamps.contains_key(b))
            .count()
    }

    /// Stores (or refreshes) `blocks`; the blocks evicted to make room.
    pub fn insert(&mut self, blocks: &[u64]) -> Vec<u64> {
        for b in blocks {
            self.clock += 1;
            self.stamps.insert(*b, self.clock);
            self.order.push_back((*b, self.clock));
        }
        let mut evicted = Vec::new();
        while self.stamps.len() > self.capacity {
            let Some((b, stamp)) = self.order.pop_front() else {
                break;
            };
            if self.stamps.get(&b) == Some(&stamp) {
                self.stamps.remove(&b);
                evicted.push(b);
            }
        }
        if self.order.len() > 2 * self.stamps.len() + 64 {
            let stamps = &self.stamps;
            self.order.retain(|(b, s)| stamps.get(b) == Some(s));
        }
        evicted
    }
}

/// A prefill instance.
#[derive(Debug)]
pub struct Prefill {
    /// Its name.
    pub id: String,
    /// When its last queued prefill ends.
    pub busy_until: f64,
    /// Its KV cache.
    pub cache: BlockCache,
}

/// A request decoding.
#[derive(Debug, Clone)]
pub struct Running {
    /// Index of the request in the trace.
    pub request: usize,
    /// Tokens still to produce.
    pub remaining: u64,
    /// Tokens of context it holds.
    pub context: u64,
}

/// A decode instance.
#[derive(Debug)]
pub struct Decode {
    /// Most requests in one batch.
    pub max_batch: usize,
    /// The batch.
    pub running: Vec<Running>,
    /// Requests waiting for room in the batch.
    pub waiting: VecDeque<Running>,
    /// Whether a step is under way.
    pub stepping: bool,
}

impl Decode {
    /// Tokens of context held by the batch.
    pub fn context(&self) -> u64 {
        self.running.iter().map(|r| r.context).sum()
    }

    /// Moves waiting requests into the batch while it has room.
    pub fn admit(&mut self) {
        while self.running.len() < self.max_batch {
            match self.waiting.pop_front() {
                Some(r) => self.running.push(r),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_evicts_least_recently_used() {
        let mut c = BlockCache::new(3);
        assert!(c.insert(&[1, 2, 3]).is_empty());
        assert!(c.insert(&[1]).is_empty());
        assert_eq!(c.insert(&[4]), vec![2]);
        assert_eq!(c.prefix(&[1, 3, 4, 5]), 3);
        assert_eq!(c.prefix(&[2, 1]), 0);
        for _ in 0..1000 {
            c.insert(&[1]);
        }
        assert!(c.order.len() <= 2 * c.stamps.len() + 65);
    }

    #[test]
    fn decode_admits_up_to_the_batch_limit() {
        let mut d = Decode {
            max_batch: 2,
            running: Vec::new(),
            waiting: (0..3)
                .map(|i| Running {
                    request: i,
                    remaining: 1,
                    context: 10,
                })
                .collect(),
            stepping: false,
        };
        d.admit();
        assert_eq!(d.running.len(), 2);
        assert_eq!(d.waiting.len(), 1);
        assert_eq!(d.context(), 20);
    }
}
