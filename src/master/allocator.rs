//! A contiguous range allocator over `[base, base + size)`: two-level segregated fit
//! (spec store.md §2.7 only requires "a contiguous buffer per replica, -200 when nothing
//! fits").
//!
//! Free blocks live in 496 size classes (8 exact classes below 16 bytes, then 8 linear
//! sub-classes per power of two). `allocate` rounds the request up to a class boundary
//! and takes the head of the first non-empty class at or above it (a bitmap lookup), so
//! any block found there fits; when none does, it scans the request's own class for a
//! block that is large enough, so a free block of sufficient size is always found.
//! Blocks keep address-order neighbour links: `free` merges with free neighbours in
//! O(1), so freeing everything restores a single block of the full size.
//!
//! An allocation is identified by its address and its block index ([`Allocation`]);
//! the caller keeps both and hands them back to `free`, so the allocator needs no
//! address index (24 bytes of state per live allocation in all: a block's length is
//! not stored, it is the distance to the next block in address order). `free` checks that
//! the block is live and starts at that address, so a stale, forged or repeated free
//! changes nothing.

const NONE: u32 = u32::MAX;
/// `next_free` of a block that is handed out (free blocks hold a list link or `NONE`).
const USED: u32 = u32::MAX - 1;
const NUM_CLASSES: usize = 496;
const BITMAP_WORDS: usize = NUM_CLASSES.div_ceil(64);

/// The class whose range contains `size` (`size > 0`).
fn class_floor(size: u64) -> usize {
    if size < 16 {
        return size as usize;
    }
    let e = 63 - size.leading_zeros() as u64; // >= 4
    let m = (size >> (e - 3)) & 7;
    ((e - 2) * 8 + m) as usize
}

/// The smallest size in class `c`.
fn class_min(c: usize) -> u64 {
    if c < 16 {
        return c as u64;
    }
    let e = (c / 8 + 2) as u64;
    let m = (c % 8) as u64;
    (8 + m) << (e - 3)
}

/// The first class whose every block is at least `size` bytes.
fn class_ceil(size: u64) -> usize {
    let f = class_floor(size);
    if class_min(f) == size {
        f
    } else {
        f + 1
    }
}

/// A block: a handed-out range (`next_free == USED`), a free range (on a free list),
/// or a spare slot (free, on no list, reused by the next split). It ends where the next
/// block in address order starts (or at the end of the range): a block's offset never
/// changes while it is linked, so its length is derived rather than stored.
#[derive(Debug, Clone)]
struct Block {
    offset: u64,
    prev_phys: u32,
    next_phys: u32,
    prev_free: u32,
    next_free: u32,
}

impl Block {
    fn is_used(&self) -> bool {
        self.next_free == USED
    }
}

/// A live allocation: its absolute address and the allocator's block index, both
/// needed to free it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    /// Absolute start address.
    pub addr: u64,
    /// Block index inside the allocator.
    pub block: u32,
}

/// A range allocator: `allocate(size)` returns a free contiguous range of `size`
/// bytes, `free(addr, block)` gives it back. Not thread-safe by itself; the master
/// keeps one per mounted segment behind the segment table's lock.
#[derive(Debug, Clone)]
pub struct RangeAllocator {
    base: u64,
    size: u64,
    used: u64,
    live: usize,
    blocks: Vec<Block>,
    spare: Vec<u32>,
    heads: Vec<u32>,
    bitmap: [u64; BITMAP_WORDS],
}

impl RangeAllocator {
    /// An allocator over `[base, base + size)`. A range that would overflow `u64` is
    /// truncated at `u64::MAX`.
    pub fn new(base: u64, size: u64) -> RangeAllocator {
        let size = size.min(u64::MAX - base);
        let mut a = RangeAllocator {
            base,
            size,
            used: 0,
            live: 0,
            blocks: Vec::new(),
            spare: Vec::new(),
            heads: vec![NONE; NUM_CLASSES],
            bitmap: [0; BITMAP_WORDS],
        };
        if size > 0 {
            let b = a.new_block(0);
            a.push_free(b);
        }
        a
    }

    /// Length of linked block `idx`: up to the next block in address order, or to the
    /// end of the range.
    fn len(&self, idx: u32) -> u64 {
        let b = &self.blocks[idx as usize];
        let end = match b.next_phys {
            NONE => self.size,
            next => self.blocks[next as usize].offset,
        };
        end - b.offset
    }

    /// First address of the range.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Size of the whole range in bytes.
    pub fn capacity(&self) -> u64 {
        self.size
    }

    /// Bytes currently handed out.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Number of live allocations.
    pub fn allocation_count(&self) -> usize {
        self.live
    }

    /// Allocates `size` contiguous bytes; `None` when `size` is 0 or no free range of
    /// that size exists.
    pub fn allocate(&mut self, size: u64) -> Option<Allocation> {
        if size == 0 || size > self.size - self.used {
            return None;
        }
        let idx = match self.first_class_from(class_ceil(size)) {
            Some(c) => self.heads[c],
            None => self.scan_class(class_floor(size), size)?,
        };
        self.unlink_free(idx);
        let offset = self.blocks[idx as usize].offset;
        if self.len(idx) > size {
            let rest = self.split(idx, size);
            self.push_free(rest);
        }
        self.hand_out(idx);
        Some(Allocation {
            addr: self.base + offset,
            block: idx,
        })
    }

    /// An allocator over `[base, base + size)` in which the `ranges` (address, size)
    /// are already allocated, built in one pass (restoring a replicated state). Returns
    /// each range's block index, `None` for an empty range, one that leaves the
    /// segment or overlaps a range before it.
    pub fn with_allocations(
        base: u64,
        size: u64,
        ranges: &[(u64, u64)],
    ) -> (RangeAllocator, Vec<Option<u32>>) {
        let mut a = RangeAllocator::new(base, size);
        let mut blocks = vec![None; ranges.len()];
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_by_key(|&i| ranges[i].0);
        // Ranges are cut, in address order, from the free block at the tail.
        let mut tail = (a.size > 0).then_some(0u32);
        for i in order {
            let Some(t) = tail else { break };
            let (addr, len) = ranges[i];
            let (t_off, t_len) = (a.blocks[t as usize].offset, a.len(t));
            let Some(off) = addr.checked_sub(a.base) else {
                continue;
            };
            let fits = off >= t_off && off.checked_add(len).is_some_and(|e| e <= t_off + t_len);
            if len == 0 || !fits {
                continue;
            }
            a.unlink_free(t);
            let mut idx = t;
            if off > t_off {
                idx = a.split(t, off - t_off);
                a.push_free(t);
            }
            tail = None;
            if a.len(idx) > len {
                let rest = a.split(idx, len);
                a.push_free(rest);
                tail = Some(rest);
            }
            a.hand_out(idx);
            blocks[i] = Some(idx);
        }
        (a, blocks)
    }

    /// Cuts block `idx` (off the free lists) after `keep` bytes; returns the new
    /// block holding the rest (on no list).
    fn split(&mut self, idx: u32, keep: u64) -> u32 {
        let (offset, next) = {
            let b = &self.blocks[idx as usize];
            (b.offset, b.next_phys)
        };
        let rest = self.new_block(offset + keep);
        {
            let r = &mut self.blocks[rest as usize];
            r.prev_phys = idx;
            r.next_phys = next;
        }
        if next != NONE {
            self.blocks[next as usize].prev_phys = rest;
        }
        self.blocks[idx as usize].next_phys = rest;
        rest
    }

    /// Marks block `idx` (off the free lists) handed out.
    fn hand_out(&mut self, idx: u32) {
        let len = self.len(idx);
        self.blocks[idx as usize].next_free = USED;
        self.live += 1;
        self.used += len;
    }

    /// Frees the allocation `block` starting at `addr`, merging it with free
    /// neighbours. Returns the number of bytes released, or `None` if that is not a
    /// live allocation (nothing changes then).
    pub fn free(&mut self, addr: u64, block: u32) -> Option<u64> {
        let mut idx = self.live_block(addr, block)?;
        let len = self.len(idx);
        self.used -= len;
        self.live -= 1;
        self.blocks[idx as usize].next_free = NONE;

        let prev = self.blocks[idx as usize].prev_phys;
        if prev != NONE && !self.blocks[prev as usize].is_used() {
            self.unlink_free(prev);
            self.absorb_next(prev, idx);
            idx = prev;
        }
        let next = self.blocks[idx as usize].next_phys;
        if next != NONE && !self.blocks[next as usize].is_used() {
            self.unlink_free(next);
            self.absorb_next(idx, next);
        }
        self.push_free(idx);
        Some(len)
    }

    /// Size of the live allocation `block` starting at `addr`, if it is one.
    pub fn allocation_size(&self, addr: u64, block: u32) -> Option<u64> {
        let idx = self.live_block(addr, block)?;
        Some(self.len(idx))
    }

    /// `block` when it is a handed-out block starting at `addr`.
    fn live_block(&self, addr: u64, block: u32) -> Option<u32> {
        let offset = addr.checked_sub(self.base)?;
        let b = self.blocks.get(block as usize)?;
        (b.is_used() && b.offset == offset).then_some(block)
    }

    /// Length of the largest free range (linear in the number of non-empty classes'
    /// top entries; for diagnostics and tests).
    pub fn largest_free(&self) -> u64 {
        let mut best = 0;
        for c in (0..NUM_CLASSES).rev() {
            let mut i = self.heads[c];
            while i != NONE {
                best = best.max(self.len(i));
                i = self.blocks[i as usize].next_free;
            }
            if best >= class_min(c) && best > 0 {
                break;
            }
        }
        best
    }

    /// Number of free ranges (for tests: 1 after everything has been freed).
    pub fn free_range_count(&self) -> usize {
        self.blocks.len() - self.spare.len() - self.live
    }

    /// Merges block `b` (physically after `a`) into `a`; both must be off the free
    /// lists. `b` becomes a spare slot.
    fn absorb_next(&mut self, a: u32, b: u32) {
        let bnext = {
            let bb = &mut self.blocks[b as usize];
            bb.prev_free = NONE;
            bb.next_free = NONE;
            bb.next_phys
        };
        self.blocks[a as usize].next_phys = bnext;
        if bnext != NONE {
            self.blocks[bnext as usize].prev_phys = a;
        }
        self.spare.push(b);
    }

    fn new_block(&mut self, offset: u64) -> u32 {
        let block = Block {
            offset,
            prev_phys: NONE,
            next_phys: NONE,
            prev_free: NONE,
            next_free: NONE,
        };
        match self.spare.pop() {
            Some(i) => {
                self.blocks[i as usize] = block;
                i
            }
            None => {
                // Indexes up to USED - 1: far beyond any segment's allocation count.
                assert!(
                    self.blocks.len() < USED as usize,
                    "allocator block overflow"
                );
                self.blocks.push(block);
                (self.blocks.len() - 1) as u32
            }
        }
    }

    fn push_free(&mut self, idx: u32) {
        let c = class_floor(self.len(idx));
        let head = self.heads[c];
        {
            let b = &mut self.blocks[idx as usize];
            b.prev_free = NONE;
            b.next_free = head;
        }
        if head != NONE {
            self.blocks[head as usize].prev_free = idx;
        }
        self.heads[c] = idx;
        self.bitmap[c / 64] |= 1 << (c % 64);
    }

    fn unlink_free(&mut self, idx: u32) {
        let c = class_floor(self.len(idx));
        let (prev, next) = {
            let b = &self.blocks[idx as usize];
            (b.prev_free, b.next_free)
        };
        if prev != NONE {
            self.blocks[prev as usize].next_free = next;
        } else {
            self.heads[c] = next;
            if next == NONE {
                self.bitmap[c / 64] &= !(1 << (c % 64));
            }
        }
        if next != NONE {
            self.blocks[next as usize].prev_free = prev;
        }
        let b = &mut self.blocks[idx as usize];
        b.prev_free = NONE;
        b.next_free = NONE;
    }

    /// The first non-empty class at or above `c`.
    fn first_class_from(&self, c: usize) -> Option<usize> {
        if c >= NUM_CLASSES {
            return None;
        }
        let mut w = c / 64;
        let mut word = self.bitmap[w] & (!0u64 << (c % 64));
        loop {
            if word != 0 {
                return Some(w * 64 + word.trailing_zeros() as usize);
            }
            w += 1;
            if w >= BITMAP_WORDS {
                return None;
            }
            word = self.bitmap[w];
        }
    }

    /// A block of at least `size` bytes in class `c`, if any.
    fn scan_class(&self, c: usize, size: u64) -> Option<u32> {
        let mut i = self.heads[c];
        while i != NONE {
            if self.len(i) >= size {
                return Some(i);
            }
            i = self.blocks[i as usize].next_free;
        }
        None
    }
}

#[cfg(test)]
#[path = "allocator_tests.rs"]
mod tests;
