//! The one retry policy of every write: an object whose replicas could not be
//! written (`TRANSFER_FAIL`, revoked) or that vanished with its segment before the End
//! (`OBJECT_NOT_FOUND`) is written again, placed anew by the master (a segment owner
//! that just died is excluded from placement by then), while attempts and time
//! allow.

use std::time::{Duration, Instant};

/// Attempts of one write whose replicas could not be written.
const ATTEMPTS: u32 = 3;
/// No write is tried again once this much time has passed since it began.
const BUDGET: Duration = Duration::from_secs(5);

/// The attempts of one write so far.
pub(crate) struct Retries {
    began: Instant,
    made: u32,
}

impl Retries {
    /// A write beginning now (its first attempt about to be made).
    pub(crate) fn begin() -> Retries {
        Retries {
            began: Instant::now(),
            made: 1,
        }
    }

    /// Whether another attempt may be made (and counts it).
    pub(crate) fn another(&mut self) -> bool {
        if self.made >= ATTEMPTS || self.began.elapsed() >= BUDGET {
            return false;
        }
        self.made += 1;
        true
    }
}
