//! Process-wide host memory for buffers to register (upstream's Python
//! `MooncakeHostMemAllocator`): each allocation is a sealed shared-memory mapping
//! ([`Mapping::shared`]), so a dummy client's real client can map it (and then moves
//! data to and from it in place), while a real client registers it as any memory.

use super::memory::Mapping;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

/// Live allocations by base address.
static ALLOCATIONS: RwLock<BTreeMap<u64, Arc<Mapping>>> = RwLock::new(BTreeMap::new());

/// Allocates `size` (> 0) zeroed, page-aligned bytes of shared memory; the base
/// address.
pub fn alloc(size: u64) -> io::Result<u64> {
    let mapping = Mapping::shared(size)?;
    let addr = mapping.addr();
    ALLOCATIONS.write().insert(addr, Arc::new(mapping));
    Ok(addr)
}

/// Frees the allocation based at `addr` (its memory is unmapped once no caller of
/// [`holder`] still holds it); false when `addr` is no allocation's base.
pub fn free(addr: u64) -> bool {
    ALLOCATIONS.write().remove(&addr).is_some()
}

/// The allocation holding all of `[addr, addr + len)`, if one does.
pub fn holder(addr: u64, len: u64) -> Option<Arc<Mapping>> {
    ALLOCATIONS
        .read()
        .range(..=addr)
        .next_back()
        .map(|(_, m)| m)
        .filter(|m| m.contains(addr, len))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_shared_and_found_by_any_sub_range() {
        let addr = alloc(3 * 4096).unwrap();
        let m = holder(addr + 4096, 4096).expect("a sub-range is held");
        assert!(m.shared_file().is_some());
        assert_eq!(m.addr(), addr);
        assert!(holder(addr + 2 * 4096, 4097).is_none(), "past the end");
        assert!(!free(addr + 1), "only a base frees");
        assert!(free(addr));
        assert!(holder(addr, 1).is_none());
        assert!(!free(addr), "freed once");
    }
}
