//! The conductor's own view of each instance: what it is, the prefill work it was
//! given and not yet done (as the time its queue drains), and the requests it is
//! decoding.

use std::collections::HashMap;

use super::index::Slot;

/// What an instance does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Runs prefills; holds the prefix blocks it computed.
    Prefill,
    /// Runs decodes.
    Decode,
    /// Only holds blocks (a Mooncake Store fed to the conductor by KV events): a
    /// place prefixes can be pulled from, never scheduled on.
    Store,
}

impl Role {
    /// Reads a role as the HTTP API spells it (`prefill`, `decode`).
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "prefill" => Some(Role::Prefill),
            "decode" => Some(Role::Decode),
            _ => None,
        }
    }

    /// The role's name.
    pub fn name(self) -> &'static str {
        match self {
            Role::Prefill => "prefill",
            Role::Decode => "decode",
            Role::Store => "store",
        }
    }
}

/// An instance as registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceSpec {
    /// Its name (what schedule answers carry).
    pub id: String,
    /// What it does.
    pub role: Role,
    /// Blocks of KV cache it can hold (0: no limit).
    pub kv_capacity_blocks: u64,
    /// Most requests it decodes at once (0: no limit).
    pub max_batch: u64,
}

/// The requests a decode instance is running, as the conductor assigned them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecodeLoad {
    /// Requests.
    pub requests: u64,
    /// KV blocks they hold.
    pub blocks: u64,
    /// Tokens of context they hold.
    pub context: u64,
}

impl DecodeLoad {
    /// Adds a request of `blocks` blocks and `context` tokens.
    pub fn add(&mut self, blocks: u64, context: u64) {
        self.requests += 1;
        self.blocks += blocks;
        self.context += context;
    }

    /// Takes one back.
    pub fn release(&mut self, blocks: u64, context: u64) {
        self.requests = self.requests.saturating_sub(1);
        self.blocks = self.blocks.saturating_sub(blocks);
        self.context = self.context.saturating_sub(context);
    }
}

/// One registered instance.
#[derive(Debug, Clone)]
pub struct Instance {
    /// As registered.
    pub spec: InstanceSpec,
    /// Tells this registration from an earlier one in the same slot.
    pub generation: u64,
    /// When the prefill work assigned to it is predicted to be done (conductor ms).
    pub busy_until_ms: f64,
    /// Corrections applied to `busy_until_ms` from completions so far (a completion's
    /// error is only the part not already applied through earlier ones).
    pub shift_ms: f64,
    /// Prefills assigned and not yet completed.
    pub prefills: u64,
    /// Decodes assigned and not yet completed.
    pub decode: DecodeLoad,
}

impl Instance {
    /// Predicted wait before a new prefill starts, at `now`.
    pub fn queue_ms(&self, now: f64) -> f64 {
        (self.busy_until_ms - now).max(0.0)
    }

    /// Whether a decode of `blocks` more blocks fits.
    pub fn decode_has_room(&self, blocks: u64) -> bool {
        let spec = &self.spec;
        (spec.max_batch == 0 || self.decode.requests < spec.max_batch)
            && (spec.kv_capacity_blocks == 0
                || self.decode.blocks + blocks <= spec.kv_capacity_blocks)
    }
}

/// Registered instances: slots reused after removal (with a new generation), names
/// looked up in a map, the prefill and decode slots listed for the scheduler.
#[derive(Debug, Default)]
pub struct Instances {
    slots: Vec<Option<Instance>>,
    by_id: HashMap<String, Slot>,
    generations: u64,
    /// Live prefill slots, in registration order.
    pub prefill: Vec<Slot>,
    /// Live decode slots, in registration order.
    pub decode: Vec<Slot>,
}

impl Instances {
    /// The slot of the instance called `id`.
    pub fn slot_of(&self, id: &str) -> Option<Slot> {
        self.by_id.get(id).copied()
    }

    /// The instance in `slot`.
    pub fn get(&self, slot: Slot) -> Option<&Instance> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }

    /// The instance in `slot`, to change.
    pub fn get_mut(&mut self, slot: Slot) -> Option<&mut Instance> {
        self.slots.get_mut(slot as usize).and_then(Option::as_mut)
    }

    /// The instance in `slot` if it is still registration `generation`.
    pub fn live_mut(&mut self, slot: Slot, generation: u64) -> Option<&mut Instance> {
        self.get_mut(slot).filter(|i| i.generation == generation)
    }

    /// Adds an instance; its slot.
    pub fn insert(&mut self, spec: InstanceSpec, now: f64) -> Slot {
        self.generations += 1;
        let slot = match self.slots.iter().position(Option::is_none) {
            Some(free) => free as Slot,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as Slot
            }
        };
        match spec.role {
            Role::Prefill => self.prefill.push(slot),
            Role::Decode => self.decode.push(slot),
            Role::Store => {}
        }
        self.by_id.insert(spec.id.clone(), slot);
        self.slots[slot as usize] = Some(Instance {
            spec,
            generation: self.generations,
            busy_until_ms: now,
            shift_ms: 0.0,
            prefills: 0,
            decode: DecodeLoad::default(),
        });
        slot
    }

    /// Removes the instance called `id`; its slot and what it was.
    pub fn remove(&mut self, id: &str) -> Option<(Slot, Instance)> {
        let slot = self.by_id.remove(id)?;
        let instance = self.slots.get_mut(slot as usize)?.take()?;
        self.prefill.retain(|s| *s != slot);
        self.decode.retain(|s| *s != slot);
        Some((slot, instance))
    }

    /// Every live instance with its slot.
    pub fn iter(&self) -> impl Iterator<Item = (Slot, &Instance)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|s| (i as Slot, s)))
    }

    /// The name of the instance in `slot` (empty when none).
    pub fn name(&self, slot: Slot) -> &str {
        self.get(slot).map_or("", |i| i.spec.id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: &str, role: Role) -> InstanceSpec {
        InstanceSpec {
            id: id.into(),
            role,
            kv_capacity_blocks: 10,
            max_batch: 2,
        }
    }

    #[test]
    fn slots_are_reused_with_a_new_generation() {
        let mut all = Instances::default();
        let a = all.insert(spec("a", Role::Prefill), 0.0);
        let b = all.insert(spec("b", Role::Decode), 0.0);
        assert_eq!(
            (all.prefill.clone(), all.decode.clone()),
            (vec![a], vec![b])
        );
        let old = all.get(a).unwrap().generation;
        all.remove("a").unwrap();
        assert!(all.remove("a").is_none());
        let c = all.insert(spec("c", Role::Prefill), 0.0);
        assert_eq!(c, a);
        assert!(all.live_mut(c, old).is_none());
        assert_eq!(all.slot_of("c"), Some(c));
        assert_eq!(all.name(c), "c");
        assert_eq!(all.iter().count(), 2);
    }

    #[test]
    fn decode_room_counts_batch_and_blocks() {
        let mut all = Instances::default();
        let d = all.insert(spec("d", Role::Decode), 0.0);
        let i = all.get_mut(d).unwrap();
        assert!(i.decode_has_room(10));
        assert!(!i.decode_has_room(11));
        i.decode.add(4, 2000);
        i.decode.add(4, 2000);
        assert!(!i.decode_has_room(1));
        i.decode.release(4, 2000);
        assert!(i.decode_has_room(6));
        assert!(!i.decode_has_room(7));
        assert_eq!(i.queue_ms(5.0), 0.0);
    }
}
