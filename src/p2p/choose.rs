//! Which shard a receiver fetches next and from where: the rarest shard first (the one
//! with the fewest sources it can still use, so that copies no other receiver has yet
//! spread first; among equals one from the middle of the longest stretch of them, so
//! that receivers starting together ask for different shards), from the source
//! serving this receiver the least, a copy another receiver made before the
//! registering node's. One receiver asks one source for at most `per_source` shards at
//! a time; the registering node (its gold copy) is asked as [`GoldRule`] says, so it
//! sends each shard about once and the receivers pass copies between them. A source that failed a shard twice
//! is not asked for it again; a dead one for nothing.

use super::payload::{Location, Payload};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// How long a receiver with nothing in flight waits for the owners of the shards it
/// lacks before it asks a gold copy for them itself.
pub const ESCAPE_AFTER: Duration = Duration::from_millis(200);

/// How often one source may fail one shard before the receiver stops asking it.
pub const TRIES_PER_SOURCE: u32 = 2;

/// Where one shard of the receiver's copy stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Not here yet, and not being fetched.
    Pending,
    /// Being fetched.
    InFlight,
    /// Here.
    Landed,
}

/// What to do next.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Fetch `shard` from `from`.
    Fetch {
        /// The shard's index.
        shard: usize,
        /// Its source.
        from: Location,
    },
    /// Pending shards have no usable source now, but fetches are in flight: wait for
    /// one to end.
    Wait,
    /// Pending shards have no usable source and nothing is in flight: these shards
    /// need fresh metadata, or there is no source left.
    Stuck(Vec<usize>),
    /// Every shard landed.
    Done,
}

/// A receiver's progress through one object.
#[derive(Debug)]
pub struct Plan {
    own: String,
    status: Vec<Status>,
    failures: Vec<HashMap<String, u32>>,
    serving: HashMap<String, usize>,
    dead: HashSet<String>,
    only: Option<HashSet<String>>,
    per_source: usize,
    escape_after: Duration,
    /// Since when nothing is in flight and the shards left wait for their owners.
    idle_since: Option<Instant>,
}

impl Plan {
    /// A plan for `landed.len()` shards, those `landed` already here, fetched by the
    /// node named `own` (never its own source).
    pub fn new(own: &str, landed: &[bool]) -> Plan {
        Plan {
            own: own.to_string(),
            status: landed
                .iter()
                .map(|&l| if l { Status::Landed } else { Status::Pending })
                .collect(),
            failures: vec![HashMap::new(); landed.len()],
            serving: HashMap::new(),
            dead: HashSet::new(),
            only: None,
            per_source: usize::MAX,
            escape_after: ESCAPE_AFTER,
            idle_since: None,
        }
    }

    /// The same plan asking gold copies for any shard after `wait` with nothing in
    /// flight (default [`ESCAPE_AFTER`]).
    pub fn escape_after(mut self, wait: Duration) -> Plan {
        self.escape_after = wait;
        self
    }

    /// The same plan asking one source for at most `cap` shards at a time (at least 1).
    pub fn per_source(mut self, cap: usize) -> Plan {
        self.per_source = cap.max(1);
        self
    }

    /// The same plan asking only the nodes named in `peers`.
    pub fn only_from(mut self, peers: &[String]) -> Plan {
        self.only = Some(peers.iter().cloned().collect());
        self
    }

    /// The status of every shard.
    pub fn status(&self) -> &[Status] {
        &self.status
    }

    /// The sources found dead so far.
    pub fn dead(&self) -> &HashSet<String> {
        &self.dead
    }

    /// The locations of `shard` this receiver may still ask.
    pub fn usable<'p>(&self, payload: &'p Payload, shard: usize) -> Vec<&'p Location> {
        let Some(s) = payload.shards.get(shard) else {
            return Vec::new();
        };
        let failures = &self.failures[shard];
        s.locations()
            .filter(|l| {
                l.segment_name != self.own
                    && !self.dead.contains(&l.segment_name)
                    && self
                        .only
                        .as_ref()
                        .map_or(true, |o| o.contains(&l.segment_name))
                    && failures.get(&l.segment_name).copied().unwrap_or(0) < TRIES_PER_SOURCE
            })
            .collect()
    }

    /// The sources that failed `shard`, comma-separated.
    pub fn tried(&self, shard: usize) -> String {
        let mut names: Vec<&str> = self.failures[shard].keys().map(String::as_str).collect();
        names.sort_unstable();
        names.join(", ")
    }

    /// Picks the next fetch (marking it in flight) from what `payload` lists.
    pub fn next(&mut self, payload: &Payload, rng: &mut fastrand::Rng) -> Next {
        let in_flight = self.status.contains(&Status::InFlight);
        let idle = !in_flight
            && (self.escape_after.is_zero()
                || self
                    .idle_since
                    .is_some_and(|since| since.elapsed() >= self.escape_after));
        let gold = GoldRule::new(payload, &self.own, idle, self.per_source);
        // The rarest shards some source can be asked for now.
        let mut rarest: Vec<usize> = Vec::new();
        let mut fewest = usize::MAX;
        let mut stuck = Vec::new();
        let mut blocked = false;
        for (shard, status) in self.status.iter().enumerate() {
            if *status != Status::Pending {
                continue;
            }
            let usable = self.usable(payload, shard);
            if usable.is_empty() {
                stuck.push(shard);
            } else if usable
                .iter()
                .any(|l| self.may_ask(payload, shard, l, &gold))
            {
                match usable.len().cmp(&fewest) {
                    std::cmp::Ordering::Less => {
                        fewest = usable.len();
                        rarest.clear();
                        rarest.push(shard);
                    }
                    std::cmp::Ordering::Equal => rarest.push(shard),
                    std::cmp::Ordering::Greater => {}
                }
            } else {
                blocked = true;
            }
        }
        if !rarest.is_empty() {
            let shard = middle_of_a_longest_run(&rarest, self.status.len(), rng);
            let from = self.least_loaded(payload, shard, &gold, rng);
            self.status[shard] = Status::InFlight;
            self.idle_since = None;
            *self.serving.entry(from.segment_name.clone()).or_default() += 1;
            return Next::Fetch { shard, from };
        }
        if in_flight {
            return Next::Wait;
        }
        if blocked {
            self.idle_since.get_or_insert_with(Instant::now);
            return Next::Wait;
        }
        match stuck.is_empty() {
            true => Next::Done,
            false => Next::Stuck(stuck),
        }
    }

    /// Shards this receiver is fetching from `source` now.
    fn load(&self, source: &Location) -> usize {
        self.serving.get(&source.segment_name).copied().unwrap_or(0)
    }

    /// Whether source `l` of `shard` may be asked now: under the per-source cap, and
    /// for a gold copy as `gold` allows.
    fn may_ask(&self, payload: &Payload, shard: usize, l: &Location, gold: &GoldRule) -> bool {
        if payload.shards[shard].gold.contains(l) {
            self.load(l) < gold.cap && gold.allows(shard, &self.own)
        } else {
            self.load(l) < self.per_source
        }
    }

    /// The source of `shard` that may be asked now serving this receiver least,
    /// replicas before gold, at random among equals.
    fn least_loaded(
        &self,
        payload: &Payload,
        shard: usize,
        rule: &GoldRule,
        rng: &mut fastrand::Rng,
    ) -> Location {
        let gold = &payload.shards[shard].gold;
        let key = |l: &Location| (self.load(l), gold.contains(l));
        let usable: Vec<&Location> = self
            .usable(payload, shard)
            .into_iter()
            .filter(|l| self.may_ask(payload, shard, l, rule))
            .collect();
        let best = usable.iter().map(|l| key(l)).min();
        let ties: Vec<&&Location> = usable.iter().filter(|l| Some(key(l)) == best).collect();
        (*ties[rng.usize(..ties.len())]).clone()
    }

    /// `shard` arrived from `from`.
    pub fn landed(&mut self, shard: usize, from: &Location) {
        self.release(from);
        self.status[shard] = Status::Landed;
    }

    /// Fetching `shard` from `from` failed; `dead` when its node is gone.
    pub fn failed(&mut self, shard: usize, from: &Location, dead: bool) {
        self.release(from);
        self.status[shard] = Status::Pending;
        *self.failures[shard]
            .entry(from.segment_name.clone())
            .or_default() += 1;
        if dead {
            self.dead.insert(from.segment_name.clone());
        }
    }

    fn release(&mut self, from: &Location) {
        if let Some(n) = self.serving.get_mut(&from.segment_name) {
            *n = n.saturating_sub(1);
        }
    }
}

/// When a receiver asks a gold copy (the node that registered the object, whose
/// upload every receiver shares) for a shard. Alone (no other receiver listed with
/// replicas) it asks freely. With others, each shard only the gold copy has belongs to
/// one receiver, chosen by rendezvous hashing over the receivers listed and this one:
/// only its owner asks the gold copy for it (so the gold copy sends it about once), one
/// shard at a time (so shards land, and spread, one after another rather than all at
/// the end), and the others fetch it from the owner once it is published. A receiver
/// with nothing in flight asks for any shard (an owner that is slow or gone does not
/// hold the others up).
struct GoldRule<'a> {
    /// The other receivers listed with replicas.
    others: Vec<&'a str>,
    /// This receiver has nothing in flight.
    idle: bool,
    /// Shards one receiver asks a gold copy for at a time.
    cap: usize,
}

impl<'a> GoldRule<'a> {
    fn new(payload: &'a Payload, own: &str, idle: bool, per_source: usize) -> GoldRule<'a> {
        let mut others: Vec<&str> = payload
            .shards
            .iter()
            .flat_map(|s| &s.replica_list)
            .map(|l| l.segment_name.as_str())
            .filter(|&n| n != own)
            .collect();
        others.sort_unstable();
        others.dedup();
        let cap = if others.is_empty() { per_source } else { 1 };
        GoldRule { others, idle, cap }
    }

    /// Whether receiver `own` may ask a gold copy for `shard`.
    fn allows(&self, shard: usize, own: &str) -> bool {
        if self.idle || self.others.is_empty() {
            return true;
        }
        let weight = |name: &str| xxhash_rust::xxh3::xxh3_64(format!("{name}#{shard}").as_bytes());
        let mine = weight(own);
        self.others.iter().all(|other| weight(other) < mine)
    }
}

/// A shard from the middle third of one of the longest runs of consecutive shards
/// (wrapping around) in `candidates` (sorted indexes below `count`): receivers that
/// start together spread over the object instead of asking for the same shards, and a
/// receiver asks for shards far from those others have just fetched (which break the
/// runs once published).
fn middle_of_a_longest_run(candidates: &[usize], count: usize, rng: &mut fastrand::Rng) -> usize {
    // Runs as (first index into `candidates`, length), joined across the wrap.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, &shard) in candidates.iter().enumerate() {
        match runs.last_mut() {
            Some((first, len)) if candidates[*first] + *len == shard => *len += 1,
            _ => runs.push((i, 1)),
        }
    }
    if runs.len() > 1 {
        let (last_first, last_len) = runs[runs.len() - 1];
        if candidates[last_first] + last_len == count && candidates[0] == 0 {
            runs.pop();
            runs[0] = (last_first, last_len + runs[0].1);
        }
    }
    let longest = runs.iter().map(|&(_, len)| len).max().unwrap_or(1);
    let ties: Vec<&(usize, usize)> = runs.iter().filter(|&&(_, len)| len == longest).collect();
    let &(first, len) = ties[rng.usize(..ties.len())];
    let margin = len / 3;
    let at = first + margin + rng.usize(..(len - 2 * margin).max(1));
    candidates[at % candidates.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(segment: &str, offset: u64) -> Location {
        Location {
            segment_name: segment.into(),
            offset,
        }
    }

    /// Four shards of one byte held by `seed`; shard 2 also by `peer`.
    fn payload() -> Payload {
        let mut p = Payload::registered("x", "seed", &[(1000, 4)], 1, None);
        p.add_replica(2, at("peer", 7));
        p
    }

    /// A plan that asks gold copies for anything as soon as nothing is in flight.
    fn quick(own: &str, landed: &[bool]) -> Plan {
        Plan::new(own, landed).escape_after(Duration::ZERO)
    }

    fn fetch(next: Next) -> (usize, Location) {
        match next {
            Next::Fetch { shard, from } => (shard, from),
            other => panic!("expected a fetch, got {other:?}"),
        }
    }

    #[test]
    fn the_rarest_shards_go_first_and_replicas_before_gold() {
        let p = payload();
        let mut plan = quick("me", &[false; 4]).escape_after(Duration::ZERO);
        let mut rng = fastrand::Rng::with_seed(1);
        let (first, from) = fetch(plan.next(&p, &mut rng));
        assert_eq!(from.segment_name, "seed");
        assert!(
            [0, 1, 3].contains(&first),
            "a shard only the seed has: {first}"
        );
        let (shard, from) = fetch(plan.next(&p, &mut rng));
        assert_eq!(
            (shard, from),
            (2, at("peer", 7)),
            "the replica, not the seed"
        );
        assert_eq!(
            plan.next(&p, &mut rng),
            Next::Wait,
            "one gold shard at a time"
        );
        plan.landed(first, &p.shards[first].gold[0].clone());
        plan.landed(2, &at("peer", 7));
        // Nothing in flight: the shards left come from the seed, those the peer owns
        // once this receiver has waited `escape_after` (no time here) for the peer.
        let mut left: Vec<usize> = [0, 1, 3].into_iter().filter(|&s| s != first).collect();
        while !left.is_empty() {
            match plan.next(&p, &mut rng) {
                Next::Fetch { shard, from } => {
                    assert_eq!(from.segment_name, "seed");
                    plan.landed(shard, &from);
                    left.retain(|&s| s != shard);
                }
                Next::Wait => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(plan.next(&p, &mut rng), Next::Done);
    }

    #[test]
    fn with_other_receivers_each_gold_shard_has_one_owner() {
        let mut p = Payload::registered("x", "seed", &[(1000, 64)], 1, None);
        for (s, node) in ["a", "b", "c", "me"].iter().enumerate() {
            p.add_replica(s, at(node, 1));
        }
        let rules: Vec<(&str, GoldRule)> = ["a", "b", "c", "me"]
            .into_iter()
            .map(|n| (n, GoldRule::new(&p, n, false, 4)))
            .collect();
        for shard in 0..64 {
            let owners = rules.iter().filter(|(n, r)| r.allows(shard, n)).count();
            assert_eq!(owners, 1, "shard {shard}");
        }
        let mine = (0..64).filter(|&s| rules[3].1.allows(s, "me")).count();
        assert!((6..=26).contains(&mine), "about a quarter each: {mine}");
        assert_eq!(rules[3].1.cap, 1);
        let idle = GoldRule::new(&p, "me", true, 4);
        assert!(
            (0..64).all(|s| idle.allows(s, "me")),
            "an idle receiver asks for anything"
        );
        let single = Payload::registered("y", "seed", &[(1, 4)], 1, None);
        let alone = GoldRule::new(&single, "me", false, 4);
        assert!(alone.allows(0, "me") && alone.cap == 4);
    }

    #[test]
    fn an_idle_receiver_waits_for_owners_before_asking_the_seed() {
        let p = payload();
        let rule = GoldRule::new(&p, "me", false, 4);
        let mut plan =
            quick("me", &[false, false, true, false]).escape_after(Duration::from_secs(3600));
        let mut rng = fastrand::Rng::with_seed(8);
        while let Next::Fetch { shard, from } = plan.next(&p, &mut rng) {
            assert!(rule.allows(shard, "me"), "shard {shard} is the peer's");
            plan.landed(shard, &from);
        }
        for s in [0, 1, 3] {
            let landed = plan.status()[s] == Status::Landed;
            assert_eq!(landed, rule.allows(s, "me"), "shard {s}");
        }
    }

    #[test]
    fn a_failing_source_is_dropped_after_its_tries_and_a_dead_one_at_once() {
        let p = payload();
        let mut plan = quick("me", &[true, true, false, true]);
        let mut rng = fastrand::Rng::with_seed(2);
        for _ in 0..TRIES_PER_SOURCE {
            let (shard, from) = fetch(plan.next(&p, &mut rng));
            assert_eq!((shard, &from.segment_name[..]), (2, "peer"));
            plan.failed(shard, &from, false);
        }
        let (shard, from) = fetch(plan.next(&p, &mut rng));
        assert_eq!((shard, &from.segment_name[..]), (2, "seed"));
        plan.failed(shard, &from, true);
        assert!(plan.dead().contains("seed"));
        assert_eq!(plan.next(&p, &mut rng), Next::Stuck(vec![2]));
        assert_eq!(plan.tried(2), "peer, seed");
    }

    #[test]
    fn a_node_is_never_its_own_source() {
        let p = payload();
        let mut plan = quick("peer", &[true, true, false, true]);
        let (_, from) = fetch(plan.next(&p, &mut fastrand::Rng::with_seed(3)));
        assert_eq!(from.segment_name, "seed");
    }

    #[test]
    fn a_plan_limited_to_some_peers_asks_only_them() {
        let p = payload();
        let mut plan = quick("me", &[false; 4]).only_from(&["peer".to_string()]);
        let mut rng = fastrand::Rng::with_seed(5);
        let (shard, from) = fetch(plan.next(&p, &mut rng));
        assert_eq!((shard, from), (2, at("peer", 7)));
        assert_eq!(plan.next(&p, &mut rng), Next::Wait);
        plan.landed(2, &at("peer", 7));
        assert_eq!(plan.next(&p, &mut rng), Next::Stuck(vec![0, 1, 3]));
    }

    #[test]
    fn a_capped_source_is_left_for_other_sources() {
        let p = payload();
        let mut plan = quick("me", &[false; 4]).per_source(1);
        let mut rng = fastrand::Rng::with_seed(6);
        let (first, from) = fetch(plan.next(&p, &mut rng));
        assert!([0, 1, 3].contains(&first) && from.segment_name == "seed");
        let (shard, from) = fetch(plan.next(&p, &mut rng));
        assert_eq!(
            (shard, from),
            (2, at("peer", 7)),
            "the seed is busy with this receiver"
        );
        assert_eq!(plan.next(&p, &mut rng), Next::Wait);
        plan.landed(first, &p.shards[first].gold[0].clone());
        let (shard, from) = fetch(plan.next(&p, &mut rng));
        assert!([0, 1, 3].contains(&shard) && shard != first && from.segment_name == "seed");
    }

    #[test]
    fn picks_come_from_the_middle_of_the_longest_stretch() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..50 {
            let all: Vec<usize> = (0..10).collect();
            assert!((3..=6).contains(&middle_of_a_longest_run(&all, 10, &mut rng)));
            let wrapped = middle_of_a_longest_run(&[0, 1, 2, 7, 8, 9], 10, &mut rng);
            assert!([9, 0].contains(&wrapped), "{wrapped}");
            let inner = middle_of_a_longest_run(&[2, 3, 4, 5, 6, 8], 10, &mut rng);
            assert!((3..=5).contains(&inner), "{inner}");
            assert_eq!(middle_of_a_longest_run(&[4], 10, &mut rng), 4);
        }
    }

    #[test]
    fn load_spreads_over_equal_sources() {
        let mut p = Payload::registered("x", "seed", &[(1000, 8)], 1, None);
        for s in 0..8 {
            p.add_replica(s, at("a", s as u64));
            p.add_replica(s, at("b", s as u64));
        }
        let mut plan = quick("me", &[false; 8]);
        let mut rng = fastrand::Rng::with_seed(4);
        let mut per_source: HashMap<String, usize> = HashMap::new();
        for _ in 0..6 {
            let (_, from) = fetch(plan.next(&p, &mut rng));
            *per_source.entry(from.segment_name).or_default() += 1;
        }
        let count = |s: &str| per_source.get(s).copied().unwrap_or(0);
        let (a, b, seed) = (count("a"), count("b"), count("seed"));
        assert_eq!(a + b + seed, 6);
        assert!(a.abs_diff(b) <= 1 && seed <= 1, "a {a}, b {b}, seed {seed}");
    }
}
