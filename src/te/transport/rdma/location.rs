//! Where registered memory lives (spec transfer-engine.md §5.1, "Locations for
//! memory"): a registration with location `"*"` takes the location of its first page,
//! `cuda:<device>` for GPU memory, else `cpu:<numa node>` (asked of the kernel with
//! `move_pages`), else `"*"`.

use super::topology::{Topology, WILDCARD};

/// The NUMA node of the page holding `addr`, if the kernel says (the page must be
/// resident; untouched memory has none yet).
pub fn numa_node_of(addr: u64) -> Option<u32> {
    let page_size = 4096u64;
    let mut page = (addr & !(page_size - 1)) as usize as *mut libc::c_void;
    let mut status: libc::c_int = -1;
    // SAFETY: move_pages with a NULL node list only reports; one page, one status.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            1usize,
            &mut page as *mut *mut libc::c_void,
            std::ptr::null::<libc::c_int>(),
            &mut status as *mut libc::c_int,
            0,
        )
    };
    (rc == 0 && status >= 0).then_some(status as u32)
}

/// The location a region registered as `requested` publishes: the request itself
/// unless it is `"*"` (or empty), then what the memory says, limited to locations the
/// topology knows.
pub fn resolve(requested: &str, addr: u64, topology: &Topology, gpu: Option<u32>) -> String {
    if !requested.is_empty() && requested != WILDCARD {
        return requested.to_string();
    }
    if let Some(device) = gpu {
        return format!("cuda:{device}");
    }
    let known = |l: &str| topology.locations().any(|k| k == l);
    match numa_node_of(addr) {
        Some(node) if known(&format!("cpu:{node}")) => format!("cpu:{node}"),
        _ if known("cpu:0") => "cpu:0".into(),
        _ => WILDCARD.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_locations_stay() {
        let t = Topology::parse(r#"{"cpu:0": [["a"], []]}"#).unwrap();
        assert_eq!(resolve("cuda:3", 0x1000, &t, None), "cuda:3");
        assert_eq!(resolve("*", 0x1000, &t, Some(2)), "cuda:2");
        let v = vec![1u8; 8192];
        assert_eq!(resolve("*", v.as_ptr() as u64, &t, None), "cpu:0");
        assert_eq!(resolve("", 0x1000, &Topology::default(), None), "*");
    }
}
