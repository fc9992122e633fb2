//! Memory for the object table's entries (`entries.rs`): slots in size classes 8 bytes
//! apart, cut from 256 KiB chunks. malloc adds an 8-byte header and rounds to 16
//! bytes, so an entry of 119 bytes (an 88-byte head and a 31-byte key) took a 128-byte
//! chunk there; here it takes a 120-byte slot.
//!
//! Each chunk starts with a [`ChunkHead`]: its free slots, its uncut space and how
//! many of its slots are in use; chunks are aligned to their size, so a slot's chunk is
//! its address rounded down. A class hands out slots from its chunks with room (a
//! freed slot before uncut space). A chunk whose last slot is freed is given back to
//! the system, unless it is its class's only chunk with room: memory follows
//! the entries down as well as up, and a class that grows and shrinks by one entry at a
//! chunk's boundary does not take and give back a chunk each time. Entries larger
//! than [`MAX_SLOT`] (keys over about 420 bytes), or aligned more strictly than
//! [`GRAIN`], come from the global allocator.

use std::alloc::{self, Layout};
use std::mem;
use std::ptr::{self, NonNull};

use parking_lot::Mutex;

/// Slot sizes are multiples of this, which is also every slot's alignment.
const GRAIN: usize = 8;
/// The largest slot.
const MAX_SLOT: usize = 512;
/// One class per multiple of [`GRAIN`] up to [`MAX_SLOT`].
const NUM_CLASSES: usize = MAX_SLOT / GRAIN;
/// What a class takes from the global allocator at a time (and its alignment).
const CHUNK: usize = 256 << 10;
/// Where a chunk's first slot starts: past its head.
const FIRST_SLOT: usize = mem::size_of::<ChunkHead>().next_multiple_of(GRAIN);

// Every class's slot fits a chunk past its head.
const _: () = assert!(FIRST_SLOT + MAX_SLOT <= CHUNK);

/// The start of a chunk.
#[repr(C)]
struct ChunkHead {
    /// The first free slot (null: none); each free slot's first word holds the next.
    free: *mut u8,
    /// Where the uncut space starts; slots are cut up to the chunk's end.
    cursor: *mut u8,
    /// The neighbours on its class's list of chunks with room (null at the ends).
    prev: *mut ChunkHead,
    next: *mut ChunkHead,
    /// Slots handed out.
    live: u32,
    /// Whether it is on its class's list.
    listed: bool,
}

/// One size class: its chunks with room.
struct Class {
    /// The first chunk with room (a free slot or uncut space for one); null: none.
    with_room: *mut ChunkHead,
    /// Chunks held, with room or full.
    chunks: usize,
}

// SAFETY: a `Class` is only reached through its `Mutex`; its chunks' heads and free
// slots are touched only under that lock (a slot in use belongs to its entry).
unsafe impl Send for Class {}

impl Class {
    const EMPTY: Class = Class {
        with_room: ptr::null_mut(),
        chunks: 0,
    };

    /// A slot of `slot` bytes.
    fn take(&mut self, slot: usize) -> NonNull<u8> {
        let mut c = self.with_room;
        if c.is_null() {
            c = new_chunk();
            self.chunks += 1;
            // SAFETY: `c` is a fresh chunk, on no list.
            unsafe { self.link(c) };
        }
        // SAFETY: `c` is a chunk of this class on its list, so it has room for a slot:
        // a free slot (whose first word links the next) or `slot` uncut bytes.
        unsafe {
            let p = (*c).free;
            let p = if p.is_null() {
                let cut = (*c).cursor;
                (*c).cursor = cut.add(slot);
                cut
            } else {
                (*c).free = p.cast::<*mut u8>().read();
                p
            };
            (*c).live += 1;
            if !has_room(c, slot) {
                self.unlink(c);
            }
            NonNull::new_unchecked(p)
        }
    }

    /// Takes back `p`; gives its chunk back (unmaps it) when that was its last slot in
    /// use, unless it is the class's only chunk with room.
    ///
    /// # Safety
    /// `p` was handed out by this class's `take` and is not in use or given back
    /// already.
    unsafe fn give(&mut self, p: NonNull<u8>) {
        let p = p.as_ptr();
        let c = p.wrapping_sub(p as usize & (CHUNK - 1)).cast::<ChunkHead>();
        // SAFETY: `p` lies in a live chunk of this class (the caller's contract), whose
        // head is at its aligned start; the slot is unused and holds at least a word.
        unsafe {
            p.cast::<*mut u8>().write((*c).free);
            (*c).free = p;
            (*c).live -= 1;
            if (*c).live > 0 {
                if !(*c).listed {
                    self.link(c);
                }
                return;
            }
            let only = self.with_room.is_null() || (self.with_room == c && (*c).next.is_null());
            if only {
                if !(*c).listed {
                    self.link(c);
                }
                return;
            }
            if (*c).listed {
                self.unlink(c);
            }
            chunk_memory::give(NonNull::new_unchecked(c.cast::<u8>()));
        }
        self.chunks -= 1;
    }

    /// Puts chunk `c` first on the list.
    ///
    /// # Safety
    /// `c` is a live chunk of this class, not on the list.
    unsafe fn link(&mut self, c: *mut ChunkHead) {
        let first = self.with_room;
        // SAFETY: `c` and `first` (when not null) are live chunks of this class.
        unsafe {
            (*c).prev = ptr::null_mut();
            (*c).next = first;
            (*c).listed = true;
            if !first.is_null() {
                (*first).prev = c;
            }
        }
        self.with_room = c;
    }

    /// Takes chunk `c` off the list.
    ///
    /// # Safety
    /// `c` is a live chunk of this class, on the list.
    unsafe fn unlink(&mut self, c: *mut ChunkHead) {
        // SAFETY: `c` and its neighbours on the list are live chunks of this class.
        unsafe {
            let (prev, next) = ((*c).prev, (*c).next);
            if prev.is_null() {
                self.with_room = next;
            } else {
                (*prev).next = next;
            }
            if !next.is_null() {
                (*next).prev = prev;
            }
            (*c).prev = ptr::null_mut();
            (*c).next = ptr::null_mut();
            (*c).listed = false;
        }
    }
}

/// Whether chunk `c` can hand out one more slot of `slot` bytes.
///
/// # Safety
/// `c` is a live chunk.
unsafe fn has_room(c: *mut ChunkHead, slot: usize) -> bool {
    // SAFETY: the caller's contract.
    let (free, cursor) = unsafe { ((*c).free, (*c).cursor) };
    let end = c as usize + CHUNK;
    !free.is_null() || end - cursor as usize >= slot
}

/// A fresh chunk: its head written, every slot uncut, on no list.
fn new_chunk() -> *mut ChunkHead {
    let raw = chunk_memory::take().as_ptr();
    let c = raw.cast::<ChunkHead>();
    // SAFETY: `raw` is fresh memory of `CHUNK` bytes aligned to `CHUNK`: the head fits
    // at its start, and its slots start at `FIRST_SLOT`, inside it.
    unsafe {
        c.write(ChunkHead {
            free: ptr::null_mut(),
            cursor: raw.add(FIRST_SLOT),
            prev: ptr::null_mut(),
            next: ptr::null_mut(),
            live: 0,
            listed: false,
        });
    }
    c
}

/// Where chunks come from: pages mapped for them (the global allocator would place an
/// aligned 256 KiB block among its own and keep the rest around it; 4 MB more at 1M
/// entries), or under Miri, which maps no pages, the global allocator.
mod chunk_memory {
    use super::CHUNK;
    use std::ptr::NonNull;

    /// A fresh chunk, `CHUNK` bytes aligned to `CHUNK`; ends the process as
    /// `alloc::alloc` callers do when the system has no memory.
    #[cfg(not(miri))]
    pub(super) fn take() -> NonNull<u8> {
        crate::host::mapping::map_aligned(CHUNK, CHUNK)
            .unwrap_or_else(|_| std::alloc::handle_alloc_error(layout()))
    }

    /// Gives back a chunk from [`take`].
    ///
    /// # Safety
    /// `c` came from `take` and nothing uses it after.
    #[cfg(not(miri))]
    pub(super) unsafe fn give(c: NonNull<u8>) {
        // SAFETY: `take` mapped `c` with this length (the caller's contract).
        unsafe { crate::host::mapping::unmap_aligned(c, CHUNK) }
    }

    /// A fresh chunk, `CHUNK` bytes aligned to `CHUNK`.
    #[cfg(miri)]
    pub(super) fn take() -> NonNull<u8> {
        // SAFETY: the layout is not zero-sized.
        let p = unsafe { std::alloc::alloc(layout()) };
        NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout()))
    }

    /// Gives back a chunk from [`take`].
    ///
    /// # Safety
    /// `c` came from `take` and nothing uses it after.
    #[cfg(miri)]
    pub(super) unsafe fn give(c: NonNull<u8>) {
        // SAFETY: `take` allocated `c` with this layout (the caller's contract).
        unsafe { std::alloc::dealloc(c.as_ptr(), layout()) }
    }

    /// The layout of one chunk.
    fn layout() -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(CHUNK, CHUNK).expect("a constant, valid layout")
    }
}

/// Every class, each behind its own lock.
static CLASSES: [Mutex<Class>; NUM_CLASSES] = [const { Mutex::new(Class::EMPTY) }; NUM_CLASSES];

/// The class `layout` is served from (its slot is `(class + 1) * GRAIN` bytes), or
/// `None` for the global allocator.
fn class_of(layout: Layout) -> Option<usize> {
    if layout.align() > GRAIN || layout.size() > MAX_SLOT {
        return None;
    }
    Some(layout.size().max(1).div_ceil(GRAIN) - 1)
}

/// Memory for `layout` (not zero-sized); ends the process as `alloc::alloc` callers
/// do when the system has none.
pub(super) fn allocate(layout: Layout) -> NonNull<u8> {
    match class_of(layout) {
        Some(c) => CLASSES[c].lock().take((c + 1) * GRAIN),
        None => {
            // SAFETY: the caller's layout is not zero-sized.
            let p = unsafe { alloc::alloc(layout) };
            NonNull::new(p).unwrap_or_else(|| alloc::handle_alloc_error(layout))
        }
    }
}

/// Gives back memory from [`allocate`].
///
/// # Safety
/// `p` came from `allocate(layout)` with this same `layout` and is not used again.
pub(super) unsafe fn release(p: NonNull<u8>, layout: Layout) {
    match class_of(layout) {
        // SAFETY: `allocate` took `p` from class `c`, and the caller gives it back once.
        Some(c) => unsafe { CLASSES[c].lock().give(p) },
        // SAFETY: `allocate` took `p` from the global allocator with `layout`.
        None => unsafe { alloc::dealloc(p.as_ptr(), layout) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 8).expect("valid")
    }

    /// Fills `len` bytes at `p` with `tag`.
    fn fill(p: NonNull<u8>, len: usize, tag: u8) {
        // SAFETY: the tests only fill memory they allocated with at least `len` bytes.
        unsafe { ptr::write_bytes(p.as_ptr(), tag, len) };
    }

    /// Whether `len` bytes at `p` all hold `tag`.
    fn holds(p: NonNull<u8>, len: usize, tag: u8) -> bool {
        // SAFETY: as in `fill`, and the bytes were written.
        let bytes = unsafe { std::slice::from_raw_parts(p.as_ptr(), len) };
        bytes == vec![tag; len].as_slice()
    }

    /// The bytes an allocation of `layout` occupies: its slot, or (from the global
    /// allocator) its size.
    fn footprint(layout: Layout) -> usize {
        class_of(layout).map_or(layout.size(), |c| (c + 1) * GRAIN)
    }

    #[test]
    fn an_entry_with_a_31_byte_key_takes_120_bytes() {
        assert_eq!(footprint(layout(88 + 31)), 120);
        assert_eq!(footprint(layout(88 + 32)), 120);
        assert_eq!(footprint(layout(88 + 33)), 128);
        assert_eq!(footprint(layout(MAX_SLOT)), MAX_SLOT);
        assert_eq!(footprint(layout(MAX_SLOT + 1)), MAX_SLOT + 1);
        let strict = Layout::from_size_align(64, 16).expect("valid");
        assert_eq!(class_of(strict), None);
    }

    #[test]
    fn live_slots_never_overlap_and_keep_their_bytes() {
        let sizes = [1, 8, 9, 119, 120, 121, 300, MAX_SLOT, MAX_SLOT + 40];
        let mut live = Vec::new();
        for round in 0..600usize {
            let size = sizes[round % sizes.len()];
            let p = allocate(layout(size));
            assert_eq!(p.as_ptr() as usize % GRAIN, 0);
            let tag = (round % 251) as u8;
            fill(p, size, tag);
            live.push((p, size, tag));
        }
        for &(p, size, tag) in &live {
            assert!(holds(p, size, tag));
        }
        for (p, size, _) in live {
            // SAFETY: each came from `allocate(layout(size))` and is released once.
            unsafe { release(p, layout(size)) };
        }
    }

    /// A class of its own for a test (the shared ones are used by other tests' threads
    /// at once); its chunks with room are freed at the end (the tests give back every
    /// slot first, so those are all it holds).
    struct OwnClass(Class);

    impl Drop for OwnClass {
        fn drop(&mut self) {
            while !self.0.with_room.is_null() {
                let c = self.0.with_room;
                // SAFETY: `c` is a live chunk of this class, on its list; nothing uses
                // it after it is freed.
                unsafe {
                    self.0.unlink(c);
                    chunk_memory::give(NonNull::new_unchecked(c.cast::<u8>()));
                }
            }
        }
    }

    #[test]
    fn a_freed_slot_is_handed_out_again() {
        let mut class = OwnClass(Class::EMPTY);
        let a = class.0.take(120);
        let b = class.0.take(120);
        assert_ne!(a, b);
        // SAFETY: `a` came from this class and is not used again.
        unsafe { class.0.give(a) };
        let c = class.0.take(120);
        assert_eq!(c, a);
        // SAFETY: both came from this class and are given back once.
        unsafe {
            class.0.give(b);
            class.0.give(c);
        }
        assert_eq!(class.0.chunks, 1);
    }

    #[test]
    fn chunks_follow_the_slots_in_use_up_and_down() {
        let mut class = OwnClass(Class::EMPTY);
        let slot = MAX_SLOT - 8;
        let per_chunk = (CHUNK - FIRST_SLOT) / slot;
        let n = 2 * per_chunk + 3;
        let slots: Vec<_> = (0..n).map(|_| class.0.take(slot)).collect();
        assert_eq!(class.0.chunks, 3);
        let distinct: HashSet<usize> = slots.iter().map(|p| p.as_ptr() as usize).collect();
        assert_eq!(distinct.len(), n);
        for (i, p) in slots.iter().enumerate() {
            fill(*p, slot, i as u8);
        }
        for (i, p) in slots.iter().enumerate() {
            assert!(holds(*p, slot, i as u8));
        }
        // A slot freed in a full chunk is the next one handed out.
        let first = slots[0];
        // SAFETY: `first` came from this class and is given back once.
        unsafe { class.0.give(first) };
        let again = class.0.take(slot);
        assert_eq!(again, first);
        // Every slot given back: one chunk kept for the next entry.
        for p in slots {
            // SAFETY: each came from this class (the first taken twice, given back
            // once in between) and is given back once here.
            unsafe { class.0.give(p) };
        }
        assert_eq!(class.0.chunks, 1);
        let p = class.0.take(slot);
        assert_eq!(class.0.chunks, 1);
        // SAFETY: `p` came from this class and is given back once.
        unsafe { class.0.give(p) };
    }

    #[test]
    fn threads_sharing_a_class_keep_their_slots_apart() {
        let l = layout(120);
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                std::thread::spawn(move || {
                    for round in 0..if cfg!(miri) { 20 } else { 200 } {
                        let mine: Vec<_> = (0..16).map(|_| allocate(l)).collect();
                        for p in &mine {
                            fill(*p, l.size(), t);
                        }
                        for p in &mine {
                            assert!(holds(*p, l.size(), t), "round {round}");
                        }
                        for p in mine {
                            // SAFETY: each came from `allocate(l)` and is released once.
                            unsafe { release(p, l) };
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("no panic");
        }
    }
}
