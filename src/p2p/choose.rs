//! Which shard a receiver fetches next and from where: the rarest shard first (the one
//! with the fewest sources it can still use, so that copies no other receiver has yet
//! spread first), from the source serving this receiver the least, a copy another
//! receiver made before the registering node's (which every new receiver would
//! otherwise crowd), at random among equals. A source that failed a shard twice is not
//! asked for it again; a dead one for nothing.

use super::payload::{Location, Payload};
use std::collections::{HashMap, HashSet};

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
        }
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
        let mut rarest: Vec<usize> = Vec::new();
        let mut fewest = usize::MAX;
        let mut stuck = Vec::new();
        let mut in_flight = false;
        for (shard, status) in self.status.iter().enumerate() {
            match status {
                Status::Landed => continue,
                Status::InFlight => {
                    in_flight = true;
                    continue;
                }
                Status::Pending => {}
            }
            let n = self.usable(payload, shard).len();
            if n == 0 {
                stuck.push(shard);
            } else if n < fewest {
                fewest = n;
                rarest.clear();
                rarest.push(shard);
            } else if n == fewest {
                rarest.push(shard);
            }
        }
        if !rarest.is_empty() {
            let shard = rarest[rng.usize(..rarest.len())];
            let from = self.least_loaded(payload, shard, rng);
            self.status[shard] = Status::InFlight;
            *self.serving.entry(from.segment_name.clone()).or_default() += 1;
            return Next::Fetch { shard, from };
        }
        match (stuck.is_empty(), in_flight) {
            (true, false) => Next::Done,
            (_, true) => Next::Wait,
            (false, false) => Next::Stuck(stuck),
        }
    }

    /// The usable source of `shard` serving this receiver least, replicas before gold.
    fn least_loaded(&self, payload: &Payload, shard: usize, rng: &mut fastrand::Rng) -> Location {
        let gold = &payload.shards[shard].gold;
        let key = |l: &Location| {
            let load = self.serving.get(&l.segment_name).copied().unwrap_or(0);
            (load, gold.contains(l))
        };
        let usable = self.usable(payload, shard);
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

    fn fetch(next: Next) -> (usize, Location) {
        match next {
            Next::Fetch { shard, from } => (shard, from),
            other => panic!("expected a fetch, got {other:?}"),
        }
    }

    #[test]
    fn the_rarest_shards_go_first_and_replicas_before_gold() {
        let p = payload();
        let mut plan = Plan::new("me", &[false; 4]);
        let mut rng = fastrand::Rng::with_seed(1);
        let mut first = Vec::new();
        for _ in 0..3 {
            let (shard, from) = fetch(plan.next(&p, &mut rng));
            assert_eq!(from.segment_name, "seed");
            first.push(shard);
        }
        first.sort_unstable();
        assert_eq!(first, [0, 1, 3], "shards only the seed has go first");
        let (shard, from) = fetch(plan.next(&p, &mut rng));
        assert_eq!(
            (shard, from),
            (2, at("peer", 7)),
            "the replica, not the busy seed"
        );
        assert_eq!(plan.next(&p, &mut rng), Next::Wait);
        for s in 0..4 {
            let from = if s == 2 {
                at("peer", 7)
            } else {
                p.shards[s].gold[0].clone()
            };
            plan.landed(s, &from);
        }
        assert_eq!(plan.next(&p, &mut rng), Next::Done);
    }

    #[test]
    fn a_failing_source_is_dropped_after_its_tries_and_a_dead_one_at_once() {
        let p = payload();
        let mut plan = Plan::new("me", &[true, true, false, true]);
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
        let mut plan = Plan::new("peer", &[true, true, false, true]);
        let (_, from) = fetch(plan.next(&p, &mut fastrand::Rng::with_seed(3)));
        assert_eq!(from.segment_name, "seed");
    }

    #[test]
    fn a_plan_limited_to_some_peers_asks_only_them() {
        let p = payload();
        let mut plan = Plan::new("me", &[false; 4]).only_from(&["peer".to_string()]);
        let mut rng = fastrand::Rng::with_seed(5);
        let (shard, from) = fetch(plan.next(&p, &mut rng));
        assert_eq!((shard, from), (2, at("peer", 7)));
        assert_eq!(plan.next(&p, &mut rng), Next::Wait);
        plan.landed(2, &at("peer", 7));
        assert_eq!(plan.next(&p, &mut rng), Next::Stuck(vec![0, 1, 3]));
    }

    #[test]
    fn load_spreads_over_equal_sources() {
        let mut p = Payload::registered("x", "seed", &[(1000, 8)], 1, None);
        for s in 0..8 {
            p.add_replica(s, at("a", s as u64));
            p.add_replica(s, at("b", s as u64));
        }
        let mut plan = Plan::new("me", &[false; 8]);
        let mut rng = fastrand::Rng::with_seed(4);
        let mut per_source: HashMap<String, usize> = HashMap::new();
        for _ in 0..6 {
            let (_, from) = fetch(plan.next(&p, &mut rng));
            *per_source.entry(from.segment_name).or_default() += 1;
        }
        let count = |s: &str| per_source.get(s).copied().unwrap_or(0);
        assert_eq!((count("a"), count("b"), count("seed")), (2, 2, 2));
    }
}
