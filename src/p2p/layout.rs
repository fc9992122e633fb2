//! Where each shard of an object lands in a receiver's buffers: the shards laid end
//! to end through the buffers in order, so the buffers hold the object's bytes in
//! order. A shard may not straddle two buffers: the buffers must split the object at
//! shard boundaries (as the buffers of the node that registered it did), or be one
//! buffer large enough.

use super::error::{P2pError, P2pResult};

/// The destination address of each shard of sizes `shard_sizes` in `buffers`
/// (`(addr, len)`), or why the buffers cannot hold them.
pub fn lay_out(shard_sizes: &[u64], buffers: &[(u64, u64)]) -> P2pResult<Vec<u64>> {
    let invalid = |why: String| Err(P2pError::InvalidArgument(why));
    if let Some(i) = buffers
        .iter()
        .position(|&(addr, len)| addr == 0 || len == 0)
    {
        return invalid(format!("buffer {i} is NULL or empty"));
    }
    if let Some(i) = buffers
        .iter()
        .position(|&(addr, len)| addr.checked_add(len).is_none())
    {
        return invalid(format!("buffer {i} wraps around the address space"));
    }
    let need: u64 = shard_sizes.iter().sum();
    let have: u64 = buffers.iter().map(|&(_, len)| len).sum();
    if have < need {
        return invalid(format!(
            "the buffers hold {have} bytes, the object has {need}"
        ));
    }
    let mut dests = Vec::with_capacity(shard_sizes.len());
    let mut buffer = 0;
    let mut used = 0u64;
    for (shard, &size) in shard_sizes.iter().enumerate() {
        if used == buffers[buffer].1 {
            buffer += 1;
            used = 0;
        }
        let (addr, len) = buffers[buffer];
        if size > len - used {
            return invalid(format!(
                "shard {shard} ({size} bytes) would straddle buffers {buffer} and {}: \
                 the buffers must split the object at shard boundaries",
                buffer + 1
            ));
        }
        dests.push(addr + used);
        used += size;
    }
    Ok(dests)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(sizes: &[u64], buffers: &[(u64, u64)], why: &str) {
        match lay_out(sizes, buffers) {
            Err(P2pError::InvalidArgument(got)) => assert!(got.contains(why), "{got}"),
            other => panic!("{sizes:?} in {buffers:?}: {other:?}"),
        }
    }

    #[test]
    fn shards_follow_each_other_through_the_buffers() {
        assert_eq!(lay_out(&[2, 2, 1], &[(100, 8)]).unwrap(), [100, 102, 104]);
        assert_eq!(
            lay_out(&[2, 1, 2], &[(100, 3), (500, 2)]).unwrap(),
            [100, 102, 500]
        );
        assert!(lay_out(&[], &[(100, 1)]).unwrap().is_empty());
    }

    #[test]
    fn buffers_that_cannot_hold_the_object_are_refused() {
        refused(&[2, 2], &[(100, 3)], "hold 3 bytes, the object has 4");
        refused(&[2, 2], &[(100, 3), (500, 3)], "straddle buffers 0 and 1");
        refused(&[1], &[(0, 3)], "buffer 0 is NULL");
        refused(&[1], &[(100, 3), (200, 0)], "buffer 1 is NULL or empty");
        refused(&[1], &[(u64::MAX - 1, 3)], "wraps");
    }
}
