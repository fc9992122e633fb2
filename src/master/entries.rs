//! One tenant's objects in one shard: a hash table whose buckets are one pointer each,
//! to a single allocation holding the object and then its key. A lookup touches the
//! bucket's control bytes, the pointer and that one allocation (the key is compared
//! where the object is), where a map of boxed keys to boxed objects touches a third
//! place; and each object costs one allocation and an 8-byte bucket instead of two
//! allocations and a 24-byte bucket. Entries take their memory from `entry_memory`,
//! whose slots are 8 bytes apart where malloc's chunks are 16.

use std::alloc::Layout;
use std::hash::BuildHasher;
use std::mem;
use std::ptr::{self, NonNull};

use hashbrown::HashTable;

use super::entry_memory;
use super::object::Object;

/// The start of an entry's allocation; the key's `key_len` bytes follow at [`KEY_AT`].
#[repr(C)]
struct Head {
    object: Object,
    key_len: usize,
}

/// Offset of the key's bytes in an entry's allocation.
const KEY_AT: usize = mem::size_of::<Head>();

/// The layout of an entry whose key is `key_len` bytes long.
fn layout(key_len: usize) -> Layout {
    // A key is a `str` in memory, so its length is far below `isize::MAX - KEY_AT`.
    Layout::from_size_align(KEY_AT + key_len, mem::align_of::<Head>())
        .expect("a key's length fits an allocation")
}

/// An object and its key in one allocation, owned like a `Box`.
struct Entry(NonNull<Head>);

// SAFETY: an `Entry` owns its allocation exclusively, as a `Box<Head>` would; `Object`
// is `Send` and `Sync`, and the key's bytes are plain data.
unsafe impl Send for Entry {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Entry {}

impl Entry {
    fn new(key: &str, object: Object) -> Entry {
        let raw = entry_memory::allocate(layout(key.len()));
        let head = raw.cast::<Head>();
        // SAFETY: `raw` is a fresh allocation of `layout`: a `Head` fits at its start,
        // aligned as `Head`, and `key.len()` bytes at `KEY_AT`.
        unsafe {
            head.as_ptr().write(Head {
                object,
                key_len: key.len(),
            });
            ptr::copy_nonoverlapping(key.as_ptr(), raw.as_ptr().add(KEY_AT), key.len());
        }
        Entry(head)
    }

    fn head(&self) -> &Head {
        // SAFETY: `self.0` points to a `Head` initialised by `new`, owned by `self`.
        unsafe { self.0.as_ref() }
    }

    fn key(&self) -> &str {
        let len = self.head().key_len;
        // SAFETY: `new` copied `len` bytes of a `str` to `KEY_AT` in this allocation,
        // which lives as long as `self`; nothing writes them afterwards.
        unsafe {
            let bytes = self.0.as_ptr().cast::<u8>().add(KEY_AT);
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(bytes, len))
        }
    }

    fn object(&self) -> &Object {
        &self.head().object
    }

    /// The key, and the object mutably (disjoint parts of the allocation).
    fn parts_mut(&mut self) -> (&str, &mut Object) {
        let head = self.0.as_ptr();
        // SAFETY: `head` points to an initialised `Head` owned by `self`, borrowed
        // mutably here; the key's bytes lie after the `Head`, so the two borrows do
        // not overlap, and both end with the borrow of `self`.
        unsafe {
            let len = (*head).key_len;
            let bytes = head.cast::<u8>().add(KEY_AT);
            let key = std::str::from_utf8_unchecked(std::slice::from_raw_parts(bytes, len));
            (key, &mut (*head).object)
        }
    }

    /// Swaps the object for `object`, returning the old one.
    fn replace(&mut self, object: Object) -> Object {
        mem::replace(self.parts_mut().1, object)
    }

    /// The object, the allocation freed.
    fn into_object(self) -> Object {
        let this = mem::ManuallyDrop::new(self);
        let head = this.0.as_ptr();
        // SAFETY: `head` is initialised and owned by `this`, which is never used or
        // dropped again: the object is moved out once and the allocation freed with
        // the layout it was made with.
        unsafe {
            let object = ptr::read(&(*head).object);
            let layout = layout((*head).key_len);
            entry_memory::release(this.0.cast::<u8>(), layout);
            object
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let head = self.0.as_ptr();
        // SAFETY: `head` is initialised and owned by `self`, dropped once here; the
        // allocation is freed with the layout it was made with.
        unsafe {
            let layout = layout((*head).key_len);
            ptr::drop_in_place(&mut (*head).object);
            entry_memory::release(self.0.cast::<u8>(), layout);
        }
    }
}

/// Key -> object, each pair in one allocation (see the module's doc).
#[derive(Default)]
pub(crate) struct Entries {
    table: HashTable<Entry>,
    /// Seeded at random: keys come from clients.
    hasher: foldhash::fast::RandomState,
}

impl Entries {
    fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The object at `key`.
    pub fn get(&self, key: &str) -> Option<&Object> {
        self.table
            .find(self.hash(key), |e| e.key() == key)
            .map(Entry::object)
    }

    /// The object at `key`, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Object> {
        let hash = self.hash(key);
        self.table
            .find_mut(hash, |e| e.key() == key)
            .map(|e| e.parts_mut().1)
    }

    /// Puts `object` at `key`; returns the object it replaced.
    pub fn insert(&mut self, key: &str, object: Object) -> Option<Object> {
        let hash = self.hash(key);
        if let Some(e) = self.table.find_mut(hash, |e| e.key() == key) {
            return Some(e.replace(object));
        }
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, Entry::new(key, object), |e| hasher.hash_one(e.key()));
        None
    }

    /// Removes and returns the object at `key`.
    pub fn remove(&mut self, key: &str) -> Option<Object> {
        let hash = self.hash(key);
        let found = self.table.find_entry(hash, |e| e.key() == key).ok()?;
        Some(found.remove().0.into_object())
    }

    /// Keeps the objects for which `keep(key, object)` returns `true`.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &mut Object) -> bool) {
        self.table.retain(|e| {
            let (key, object) = e.parts_mut();
            keep(key, object)
        });
    }

    /// Every (key, object).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Object)> {
        self.table.iter().map(|e| (e.key(), e.object()))
    }

    /// Whether it holds no object.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::master::object::PendingPin;
    use crate::master::replica::Replicas;
    use crate::wire::master_api::{SoftPinAction, Uuid};

    fn object(size: u64) -> Object {
        Object::new(
            Uuid::default(),
            1,
            size,
            Replicas::default(),
            false,
            None,
            PendingPin {
                action: SoftPinAction::Preserve,
                ttl_ns: 0,
            },
            if size % 2 == 0 { "group" } else { "" },
        )
    }

    #[test]
    fn keys_of_every_length_map_to_their_objects() {
        let mut entries = Entries::default();
        let keys: Vec<String> = (0..70).map(|i| "k".repeat(i)).collect();
        for (i, k) in keys.iter().enumerate() {
            assert!(entries.insert(k, object(i as u64)).is_none());
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(entries.get(k).map(Object::size), Some(i as u64), "{k:?}");
        }
        assert!(entries.get("x").is_none());
        let mut seen: Vec<(String, u64)> = entries
            .iter()
            .map(|(k, o)| (k.to_string(), o.size()))
            .collect();
        seen.sort_by_key(|(_, s)| *s);
        let want: Vec<(String, u64)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), i as u64))
            .collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn insert_replaces_get_mut_changes_remove_returns() {
        let mut entries = Entries::default();
        assert!(entries.insert("a", object(1)).is_none());
        assert_eq!(entries.insert("a", object(2)).map(|o| o.size()), Some(1));
        entries.get_mut("a").expect("present").lease_timeout = 9;
        assert_eq!(entries.get("a").map(|o| o.lease_timeout), Some(9));
        assert!(entries.get_mut("b").is_none());
        let removed = entries.remove("a").expect("present");
        assert_eq!((removed.size(), removed.lease_timeout), (2, 9));
        assert!(entries.remove("a").is_none());
        assert!(entries.is_empty());
    }

    #[test]
    fn retain_sees_keys_and_drops_what_it_rejects() {
        let mut entries = Entries::default();
        for i in 0..40u64 {
            entries.insert(&format!("key-{i}"), object(i));
        }
        entries.retain(|k, o| {
            assert_eq!(k, format!("key-{}", o.size()));
            o.lease_timeout = o.size();
            o.size() % 3 == 0
        });
        let mut left: Vec<u64> = entries.iter().map(|(_, o)| o.lease_timeout).collect();
        left.sort_unstable();
        assert_eq!(left, (0..40).filter(|i| i % 3 == 0).collect::<Vec<_>>());
    }

    #[test]
    fn growth_and_dropping_the_table_keep_every_entry_whole() {
        let mut entries = Entries::default();
        for i in 0..300u64 {
            entries.insert(&format!("{i:0>40}"), object(i));
        }
        for i in (0..300u64).step_by(7) {
            assert_eq!(entries.get(&format!("{i:0>40}")).map(Object::size), Some(i));
        }
        for i in (0..300u64).step_by(2) {
            assert!(entries.remove(&format!("{i:0>40}")).is_some());
        }
        assert_eq!(entries.iter().count(), 150);
    }
}
