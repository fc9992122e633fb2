//! The read pipeline: lease ([`lease`], with objects only a disk holds staged by
//! their owners, [`disk_stage`]) -> choose ([`choose`]: own segment > same host >
//! remote) -> execute -> check ([`batch`]). Every read operation of the store goes
//! through [`batch::ReadBatch`].

pub(crate) mod batch;
pub(crate) mod choose;
pub(crate) mod disk_stage;
pub(crate) mod lease;
