//! The store operations of [`Client`](super::Client) (spec store.md §1.3, §2.2,
//! §2.3), with upstream's return codes, as thin operations over the write and read
//! pipelines. Every operation on a closed client returns `INVALID_PARAMS` (-600);
//! batch operations then report -600 for every item.

mod buffers;
mod keys;
mod ranges;
mod read;
mod sessions;
mod tasks;
pub(crate) mod whole;
mod write;

#[cfg(test)]
mod tasks_tests;
#[cfg(test)]
mod tests;
