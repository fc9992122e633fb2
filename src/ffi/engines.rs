//! The table of live Transfer Engines behind `transfer_engine_t` handles.

use super::handles::HandleTable;
use crate::te::TransferEngine;

/// Every engine `createTransferEngine` or `mooncake_te_create` made and nobody
/// destroyed yet; tokens start with "MCTE".
pub(crate) static ENGINES: HandleTable<TransferEngine> = HandleTable::new(
    0x4D43_5445_0000_0000,
    "engine handle",
    "is not a live engine (already destroyed, or not returned by createTransferEngine)",
);
