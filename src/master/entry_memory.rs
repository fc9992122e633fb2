//! Memory for the object table's entries (`entries.rs`): slots in size classes 8 bytes
//! apart, cut from 256 KiB chunks. malloc adds an 8-byte header and rounds to 16
//! bytes, so an entry of 119 bytes (an 88-byte head and a 31-byte key) took a 128-byte
//! chunk there; here it takes a 120-byte slot, and entries of one class lie side by
//! side.
//!
//! A freed slot goes on its class's free list and is the next one that class hands
//! out. Chunks are kept for the life of the process (freed slots are reused, not given
//! back to the system), each linked from its class, so at most one partly cut chunk per
//! class is unused. Entries larger than [`MAX_SLOT`] (keys over about 420 bytes), or
//! aligned more strictly than [`GRAIN`], come from the global allocator.

use std::alloc::{self, Layout};
use std::ptr::{self, NonNull};

use parking_lot::Mutex;

/// Slot sizes are multiples of this, which is also every slot's alignment.
const GRAIN: usize = 8;
/// The largest slot.
const MAX_SLOT: usize = 512;
/// One class per multiple of [`GRAIN`] up to [`MAX_SLOT`].
const NUM_CLASSES: usize = MAX_SLOT / GRAIN;
/// What a class takes from the global allocator at a time.
const CHUNK: usize = 256 << 10;
/// A chunk's first word links the chunk its class took before it; slots follow.
const CHUNK_HEADER: usize = GRAIN;

/// One size class: its free slots, and the chunk being cut.
struct Class {
    /// The first free slot (null: none); each free slot's first word holds the next.
    free: *mut u8,
    /// Where the current chunk's next uncut slot starts (null before the first chunk).
    cursor: *mut u8,
    /// The end of the current chunk.
    end: *mut u8,
    /// The newest chunk (null: none); each chunk's first word links the one before, so
    /// every chunk stays reachable.
    chunks: *mut u8,
}

// SAFETY: a `Class` is only reached through its `Mutex`; the memory its pointers
// address belongs to the class (free slots, uncut chunk space) and is touched only
// under that lock.
unsafe impl Send for Class {}

impl Class {
    const EMPTY: Class = Class {
        free: ptr::null_mut(),
        cursor: ptr::null_mut(),
        end: ptr::null_mut(),
        chunks: ptr::null_mut(),
    };

    /// A slot of `slot` bytes: the newest freed one, else the next one cut.
    fn take(&mut self, slot: usize) -> NonNull<u8> {
        if let Some(p) = NonNull::new(self.free) {
            // SAFETY: `p` is a free slot of this class: `give` wrote the next free
            // slot's address into its first word, which is aligned to `GRAIN`.
            self.free = unsafe { p.as_ptr().cast::<*mut u8>().read() };
            return p;
        }
        if (self.end as usize) - (self.cursor as usize) < slot {
            self.new_chunk();
        }
        let p = self.cursor;
        // SAFETY: `new_chunk` (or an earlier cut) left at least `slot` bytes between
        // `cursor` and `end`, in one chunk.
        self.cursor = unsafe { p.add(slot) };
        // SAFETY: `p` lies inside a chunk, which is not null.
        unsafe { NonNull::new_unchecked(p) }
    }

    /// Puts `p` on the free list.
    ///
    /// # Safety
    /// `p` was handed out by this class's `take` and is not in use or free already.
    unsafe fn give(&mut self, p: NonNull<u8>) {
        // SAFETY: the slot is this class's, unused, at least `GRAIN` bytes long and
        // aligned to `GRAIN` (the caller's contract).
        unsafe { p.as_ptr().cast::<*mut u8>().write(self.free) };
        self.free = p.as_ptr();
    }

    /// Takes a fresh chunk and links it; what was left of the last one (less than a
    /// slot) stays unused.
    fn new_chunk(&mut self) {
        let layout = chunk_layout();
        // SAFETY: the layout is not zero-sized.
        let chunk = unsafe { alloc::alloc(layout) };
        if chunk.is_null() {
            alloc::handle_alloc_error(layout);
        }
        // SAFETY: `chunk` is a fresh allocation of `CHUNK` bytes aligned to `GRAIN`:
        // its first word takes the link, and the slots start past it.
        unsafe {
            chunk.cast::<*mut u8>().write(self.chunks);
            self.cursor = chunk.add(CHUNK_HEADER);
            self.end = chunk.add(CHUNK);
        }
        self.chunks = chunk;
    }
}

/// The layout of one chunk.
fn chunk_layout() -> Layout {
    Layout::from_size_align(CHUNK, GRAIN).expect("a constant, valid layout")
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
        unsafe { std::slice::from_raw_parts(p.as_ptr(), len) }
            .iter()
            .all(|&b| b == tag)
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
    /// at once), its chunks freed at the end.
    struct OwnClass(Class);

    impl Drop for OwnClass {
        fn drop(&mut self) {
            let mut chunk = self.0.chunks;
            while !chunk.is_null() {
                // SAFETY: every linked chunk came from `alloc` with `chunk_layout()`,
                // its first word links the one before, and nothing uses it any more.
                unsafe {
                    let before = chunk.cast::<*mut u8>().read();
                    alloc::dealloc(chunk, chunk_layout());
                    chunk = before;
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
        assert_eq!(class.0.take(120), a);
        assert_eq!(class.0.free, ptr::null_mut());
    }

    #[test]
    fn a_class_spans_many_chunks() {
        let mut class = OwnClass(Class::EMPTY);
        let slot = MAX_SLOT - 8;
        let per_chunk = (CHUNK - CHUNK_HEADER) / slot;
        let n = 2 * per_chunk + 3;
        let slots: Vec<_> = (0..n).map(|_| class.0.take(slot)).collect();
        let distinct: HashSet<usize> = slots.iter().map(|p| p.as_ptr() as usize).collect();
        assert_eq!(distinct.len(), n);
        for (i, p) in slots.iter().enumerate() {
            fill(*p, slot, i as u8);
        }
        for (i, p) in slots.iter().enumerate() {
            assert!(holds(*p, slot, i as u8));
        }
        let mut chunks = 0;
        let mut chunk = class.0.chunks;
        while !chunk.is_null() {
            chunks += 1;
            // SAFETY: a linked chunk's first word holds the link.
            chunk = unsafe { chunk.cast::<*mut u8>().read() };
        }
        assert_eq!(chunks, 3);
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
