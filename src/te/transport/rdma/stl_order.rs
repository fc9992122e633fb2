//! The iteration order of a libstdc++ `std::unordered_map<std::string, T>` after a
//! sequence of insertions.
//!
//! Upstream numbers a segment's NICs by iterating its topology matrix, an
//! `unordered_map` filled from the JSON object's keys in sorted order (spec
//! transfer-engine.md §5.1), and indexes the peer's `devices[]` and `rkey[]` with
//! those numbers. A descriptor this crate publishes must therefore list its devices in
//! exactly the order an upstream reader derives, which depends on libstdc++'s hash
//! (`_Hash_bytes`, seed 0xc70f6907), its prime rehash policy and where it links new
//! nodes. This module reproduces those; `tests/rust/rdma_topology.rs` checks it against
//! a program built with g++.

/// `std::hash<std::string>` on LP64 libstdc++: `_Hash_bytes(data, len, 0xc70f6907)`.
pub fn std_hash(bytes: &[u8]) -> u64 {
    const MUL: u64 = (0xc6a4_a793u64 << 32) + 0x5bd1_e995;
    const SEED: u64 = 0xc70f_6907;
    let shift_mix = |v: u64| v ^ (v >> 47);
    let len = bytes.len();
    let mut hash = SEED ^ (len as u64).wrapping_mul(MUL);
    let aligned = len & !7;
    for chunk in bytes[..aligned].chunks_exact(8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let data = shift_mix(word.wrapping_mul(MUL)).wrapping_mul(MUL);
        hash ^= data;
        hash = hash.wrapping_mul(MUL);
    }
    let tail = &bytes[aligned..];
    if !tail.is_empty() {
        let data = tail
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) + u64::from(b));
        hash ^= data;
        hash = hash.wrapping_mul(MUL);
    }
    hash = shift_mix(hash).wrapping_mul(MUL);
    shift_mix(hash)
}

/// libstdc++'s `__prime_list` (the start of it: far more buckets than a topology has).
const PRIMES: [u64; 40] = [
    2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97,
    103, 109, 113, 127, 137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241,
];

/// `_Prime_rehash_policy` with `max_load_factor` 1.
#[derive(Debug, Default)]
struct RehashPolicy {
    next_resize: u64,
}

impl RehashPolicy {
    fn next_bucket_count(&mut self, n: u64) -> u64 {
        const FAST: [u64; 14] = [2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13];
        if n < FAST.len() as u64 {
            if n == 0 {
                return 1;
            }
            self.next_resize = FAST[n as usize];
            return FAST[n as usize];
        }
        let bucket = PRIMES[6..]
            .iter()
            .copied()
            .find(|&p| p >= n)
            .unwrap_or_else(|| next_prime(n));
        self.next_resize = bucket;
        bucket
    }

    /// `_M_need_rehash`: the new bucket count, if inserting one more element needs one.
    fn need_rehash(&mut self, buckets: u64, elements: u64) -> Option<u64> {
        if elements < self.next_resize {
            return None;
        }
        let floor = if self.next_resize == 0 { 11 } else { 0 };
        let min_buckets = (elements + 1).max(floor);
        if min_buckets >= buckets {
            return Some(self.next_bucket_count((min_buckets + 1).max(buckets * 2)));
        }
        self.next_resize = buckets;
        None
    }
}

/// The smallest prime >= `n` (beyond the table; never reached by topologies).
fn next_prime(mut n: u64) -> u64 {
    loop {
        if n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| n % d != 0) {
            return n;
        }
        n += 1;
    }
}

/// Where a bucket's chain starts: after the list head, or after a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Before {
    Head,
    Node(usize),
}

/// The node following `before`.
fn after(before: Before, head: Option<usize>, next: &[Option<usize>]) -> Option<usize> {
    match before {
        Before::Head => head,
        Before::Node(x) => next[x],
    }
}

/// Links `node` right after `before`.
fn set_after(
    before: Before,
    node: Option<usize>,
    head: &mut Option<usize>,
    next: &mut [Option<usize>],
) {
    match before {
        Before::Head => *head = node,
        Before::Node(x) => next[x] = node,
    }
}

/// The iteration order (indices into `keys`) of an `unordered_map<string, T>` into
/// which `keys` were inserted in this order (duplicates after the first ignored).
pub fn iteration_order(keys: &[&str]) -> Vec<usize> {
    let hashes: Vec<u64> = keys.iter().map(|k| std_hash(k.as_bytes())).collect();
    let mut policy = RehashPolicy::default();
    let mut bucket_count: u64 = 1;
    let mut buckets: Vec<Option<Before>> = vec![None];
    let mut next: Vec<Option<usize>> = vec![None; keys.len()];
    let mut head: Option<usize> = None;
    let mut elements: u64 = 0;
    let bucket_of = |i: usize, n: u64| (hashes[i] % n) as usize;
    for i in 0..keys.len() {
        if keys[..i].contains(&keys[i]) {
            continue;
        }
        if let Some(n) = policy.need_rehash(bucket_count, elements) {
            // `_M_rehash_aux` for unique keys.
            let mut fresh: Vec<Option<Before>> = vec![None; n as usize];
            let mut p = head;
            head = None;
            let mut begin_bucket = 0usize;
            while let Some(node) = p {
                let following = next[node];
                let b = bucket_of(node, n);
                match fresh[b] {
                    None => {
                        next[node] = head;
                        head = Some(node);
                        fresh[b] = Some(Before::Head);
                        if next[node].is_some() {
                            fresh[begin_bucket] = Some(Before::Node(node));
                        }
                        begin_bucket = b;
                    }
                    Some(before) => {
                        next[node] = after(before, head, &next);
                        set_after(before, Some(node), &mut head, &mut next);
                    }
                }
                p = following;
            }
            buckets = fresh;
            bucket_count = n;
        }
        // `_M_insert_bucket_begin`.
        let b = bucket_of(i, bucket_count);
        match buckets[b] {
            Some(before) => {
                next[i] = after(before, head, &next);
                set_after(before, Some(i), &mut head, &mut next);
            }
            None => {
                next[i] = head;
                head = Some(i);
                if let Some(old_first) = next[i] {
                    let ob = bucket_of(old_first, bucket_count);
                    buckets[ob] = Some(Before::Node(i));
                }
                buckets[b] = Some(Before::Head);
            }
        }
        elements += 1;
    }
    let mut order = Vec::new();
    let mut p = head;
    while let Some(node) = p {
        order.push(node);
        p = next[node];
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_and_duplicate_keys() {
        assert_eq!(iteration_order(&["cpu:0"]), vec![0]);
        assert_eq!(iteration_order(&[]), Vec::<usize>::new());
        let order = iteration_order(&["a", "b", "a"]);
        assert_eq!(order.len(), 2);
    }

    /// Orders printed by a g++ 12 program inserting the same keys (see
    /// `tests/rust/rdma_topology.rs`, which re-derives them where g++ is installed).
    #[test]
    fn matches_libstdcxx() {
        assert_eq!(std_hash(b"cpu:0"), 0x3598_967c_23ec_5fbe);
        assert_eq!(std_hash(b"a"), 0x454d_dee4_88c1_ed6b);
        let keys = [
            "cpu:0", "cpu:1", "cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:4", "cuda:5", "cuda:6",
            "cuda:7",
        ];
        assert_eq!(iteration_order(&keys), [9, 8, 6, 5, 4, 7, 3, 2, 1, 0]);
        let many: Vec<String> = (1..=30).map(|i| format!("k{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            iteration_order(&refs),
            [
                20, 9, 16, 26, 19, 6, 2, 21, 5, 0, 8, 11, 13, 10, 1, 14, 15, 17, 18, 3, 25, 29, 12,
                23, 4, 22, 24, 27, 7, 28
            ]
        );
    }

    #[test]
    fn every_key_once() {
        let keys: Vec<String> = (0..40).map(|i| format!("cuda:{i}")).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let mut order = iteration_order(&refs);
        order.sort_unstable();
        assert_eq!(order, (0..40).collect::<Vec<_>>());
    }
}
