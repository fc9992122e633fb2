//! The phases of `--mode=master_load`.

/// A load phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `PutStart` + `PutEnd` of new keys (one op = both calls).
    Put,
    /// `GetReplicaList` of existing keys.
    GetReplicaList,
    /// `ExistKey` of existing keys.
    ExistKey,
    /// The three above in turn.
    Mixed,
}

impl Phase {
    /// Every phase, in the order a load runs them by default.
    pub const ALL: [Phase; 4] = [
        Phase::Put,
        Phase::GetReplicaList,
        Phase::ExistKey,
        Phase::Mixed,
    ];

    /// The phase called `name` (as its rows print it).
    pub fn parse(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The phase's name, as its rows print it.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Put => "put_start_end",
            Phase::GetReplicaList => "get_replica_list",
            Phase::ExistKey => "exist_key",
            Phase::Mixed => "mixed",
        }
    }
}
