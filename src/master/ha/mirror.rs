//! A copy of a master's metadata built from its records: what a standby holds and
//! promotes, and what a snapshot stores.

use super::record::{ObjectState, Record};
use crate::wire::master_api::{Segment, Uuid};
use std::collections::HashMap;

/// Segments and objects as the records left them.
#[derive(Debug, Default, Clone)]
pub struct Mirror {
    /// Mounted segments by id, with their owner.
    pub segments: HashMap<Uuid, (Segment, Uuid)>,
    /// Objects by (tenant, key).
    pub objects: HashMap<(String, String), ObjectState>,
    /// Whether a full dump has been applied (the mirror holds the whole state).
    pub complete: bool,
}

impl Mirror {
    /// Applies one record.
    pub fn apply(&mut self, rec: Record) {
        match rec {
            Record::Mount { segment, client } => {
                self.segments.insert(segment.id, (segment, client));
            }
            Record::Unmount { id } => {
                self.segments.remove(&id);
            }
            Record::Object { tenant, key, state } => {
                self.objects.insert((tenant, key), state);
            }
            Record::Removed { tenant, key } => {
                self.objects.remove(&(tenant, key));
            }
            Record::DumpDone => self.complete = true,
        }
    }

    /// The whole mirror as records (segments first, then objects, then
    /// [`Record::DumpDone`]).
    pub fn records(&self) -> impl Iterator<Item = Record> + '_ {
        let segments = self.segments.values().map(|(s, c)| Record::Mount {
            segment: s.clone(),
            client: *c,
        });
        let objects = self.objects.iter().map(|((t, k), s)| Record::Object {
            tenant: t.clone(),
            key: k.clone(),
            state: s.clone(),
        });
        segments
            .chain(objects)
            .chain(std::iter::once(Record::DumpDone))
    }
}
