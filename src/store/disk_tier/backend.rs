//! The owner's disk store: objects in append-only bucket files under one directory
//! (our format; upstream's is internal to its client, spec tiers-events-conductor.md
//! §1.8). A bucket holds up to a number of objects or bytes and is written whole: to
//! `<id>.bucket.tmp`, synced, renamed to `<id>.bucket`, the directory synced; so after
//! a crash a bucket is there entirely or not at all, and what a restart finds is what
//! was reported durable. Buckets are never changed afterwards, only deleted whole
//! (oldest first, when the disk is over its limit, or all on `RemoveAll`).
//!
//! File layout, little-endian: the magic `MCRSBKT1`, then per object
//! `u32 key length | u64 value length | u32 CRC-32C of the value | key | value`.
//! A restart reads the record headers (not the values) to rebuild the index; a bucket
//! whose headers do not add up to its length is skipped (and left alone).

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// First bytes of every bucket file.
const MAGIC: &[u8; 8] = b"MCRSBKT1";
/// Bytes of a record header.
const RECORD_HEADER: u64 = 4 + 8 + 4;
/// Longest key accepted.
const MAX_KEY: usize = 1 << 20;

/// Where one object lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Location {
    /// Its bucket.
    pub bucket: u64,
    /// Offset of the value in the bucket file.
    pub offset: u64,
    /// Value length.
    pub len: u64,
    /// CRC-32C of the value.
    pub crc: u32,
}

/// One bucket file.
#[derive(Debug, Clone)]
struct Bucket {
    /// Bytes on disk.
    bytes: u64,
    /// Its keys.
    keys: Vec<String>,
}

/// The objects of one bucket to write: (storage key, value).
pub(crate) type Batch<'a> = [(String, &'a [u8])];

/// The disk store of one client.
pub(crate) struct DiskStore {
    dir: PathBuf,
    index: HashMap<String, Location>,
    /// Bucket id -> its files' facts, oldest first.
    buckets: BTreeMap<u64, Bucket>,
    next_bucket: u64,
    bytes: u64,
}

fn bucket_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id}.bucket"))
}

/// CRC-32C (Castagnoli) of `data`, from the `crc32c` crate: the CPU's instruction where
/// it has one (x86-64 SSE4.2, aarch64 CRC), else tables.
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    ::crc32c::crc32c(data)
}

impl DiskStore {
    /// Opens the store in `dir` (an existing directory), indexing every bucket found.
    pub fn open(dir: &Path) -> io::Result<DiskStore> {
        let meta = fs::symlink_metadata(dir)?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a directory", dir.display()),
            ));
        }
        let mut store = DiskStore {
            dir: dir.to_path_buf(),
            index: HashMap::new(),
            buckets: BTreeMap::new(),
            next_bucket: 1,
            bytes: 0,
        };
        for entry in fs::read_dir(dir)? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.ends_with(".bucket.tmp") {
                // A bucket whose write never finished: never reported, not kept.
                let _ = fs::remove_file(&path);
                continue;
            }
            let Some(id) = name
                .strip_suffix(".bucket")
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            match scan(&path, id) {
                Ok((bucket, records)) => {
                    // A key written twice lives in its newest bucket (ids grow).
                    for (key, loc) in records {
                        let slot = store.index.entry(key).or_insert(loc);
                        if loc.bucket >= slot.bucket {
                            *slot = loc;
                        }
                    }
                    store.bytes += bucket.bytes;
                    store.buckets.insert(id, bucket);
                    store.next_bucket = store.next_bucket.max(id + 1);
                }
                Err(e) => log::warn!("offload: skipping {}: {e}", path.display()),
            }
        }
        Ok(store)
    }

    /// Number of objects stored.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Bytes of bucket files.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Every object: (storage key, location).
    pub fn objects(&self) -> impl Iterator<Item = (&String, &Location)> {
        self.index.iter()
    }

    /// Where `key` is.
    pub fn get(&self, key: &str) -> Option<Location> {
        self.index.get(key).copied()
    }

    /// Writes `batch` as one new bucket, durably; returns its id and each object's
    /// location (in batch order).
    #[cfg(test)]
    pub fn write_bucket(&mut self, batch: &Batch<'_>) -> io::Result<(u64, Vec<Location>)> {
        let (dir, id) = self.new_bucket();
        let written = write_bucket_file(&dir, id, batch)?;
        let result = (id, written.locations.clone());
        self.commit(written);
        Ok(result)
    }

    /// The directory and id of a new bucket, for [`write_bucket_file`] (which may run
    /// without holding the store).
    pub fn new_bucket(&mut self) -> (PathBuf, u64) {
        let id = self.next_bucket;
        self.next_bucket += 1;
        (self.dir.clone(), id)
    }

    /// Indexes a bucket [`write_bucket_file`] wrote.
    pub fn commit(&mut self, written: WrittenBucket) {
        self.bytes += written.bytes;
        for (key, loc) in written.keys.iter().zip(&written.locations) {
            self.index.insert(key.clone(), *loc);
        }
        self.buckets.insert(
            written.id,
            Bucket {
                bytes: written.bytes,
                keys: written.keys,
            },
        );
    }

    /// Opens the bucket holding `key`: the file (still readable if the bucket is
    /// deleted meanwhile) and where the value is in it; `None` for an unknown key.
    pub fn open_object(&self, key: &str) -> io::Result<Option<(File, Location)>> {
        let Some(loc) = self.get(key) else {
            return Ok(None);
        };
        Ok(Some((self.open_bucket(loc.bucket)?, loc)))
    }

    /// Opens bucket `id`'s file (still readable if the bucket is deleted meanwhile).
    pub fn open_bucket(&self, id: u64) -> io::Result<File> {
        File::open(bucket_path(&self.dir, id))
    }

    /// Reads `loc`'s value into `out` (of its length), checking its CRC.
    #[cfg(test)]
    pub fn read(&self, loc: &Location, out: &mut [u8]) -> io::Result<()> {
        read_at(&File::open(bucket_path(&self.dir, loc.bucket))?, loc, out)
    }

    /// The oldest bucket's keys that still live there (to announce before deleting
    /// it), or `None` when there is none.
    pub fn oldest_bucket(&self) -> Option<(u64, Vec<String>)> {
        let (&id, b) = self.buckets.iter().next()?;
        let live = b
            .keys
            .iter()
            .filter(|k| self.index.get(*k).is_some_and(|l| l.bucket == id))
            .cloned()
            .collect();
        Some((id, live))
    }

    /// Deletes bucket `id` and forgets the objects that lived there.
    pub fn delete_bucket(&mut self, id: u64) -> io::Result<()> {
        let Some(b) = self.buckets.remove(&id) else {
            return Ok(());
        };
        for k in &b.keys {
            if self.index.get(k).is_some_and(|l| l.bucket == id) {
                self.index.remove(k);
            }
        }
        self.bytes = self.bytes.saturating_sub(b.bytes);
        match fs::remove_file(bucket_path(&self.dir, id)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Deletes every bucket.
    pub fn clear(&mut self) -> io::Result<()> {
        let ids: Vec<u64> = self.buckets.keys().copied().collect();
        for id in ids {
            self.delete_bucket(id)?;
        }
        Ok(())
    }
}

/// A bucket [`write_bucket_file`] wrote, to [`DiskStore::commit`].
pub(crate) struct WrittenBucket {
    id: u64,
    bytes: u64,
    keys: Vec<String>,
    /// Where each object of the batch is, in batch order.
    pub locations: Vec<Location>,
}

/// Writes `batch` durably as bucket `id` in `dir` (from [`DiskStore::new_bucket`]):
/// to a temporary file, synced, renamed, the directory synced.
pub(crate) fn write_bucket_file(
    dir: &Path,
    id: u64,
    batch: &Batch<'_>,
) -> io::Result<WrittenBucket> {
    let tmp = dir.join(format!("{id}.bucket.tmp"));
    let mut locations = Vec::with_capacity(batch.len());
    let written = (|| {
        let mut f = io::BufWriter::with_capacity(
            1 << 20,
            OpenOptions::new().write(true).create_new(true).open(&tmp)?,
        );
        f.write_all(MAGIC)?;
        let mut offset = MAGIC.len() as u64;
        for (key, value) in batch {
            if key.len() > MAX_KEY {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "key too long"));
            }
            let crc = crc32c(value);
            f.write_all(&(key.len() as u32).to_le_bytes())?;
            f.write_all(&(value.len() as u64).to_le_bytes())?;
            f.write_all(&crc.to_le_bytes())?;
            f.write_all(key.as_bytes())?;
            f.write_all(value)?;
            offset += RECORD_HEADER + key.len() as u64;
            locations.push(Location {
                bucket: id,
                offset,
                len: value.len() as u64,
                crc,
            });
            offset += value.len() as u64;
        }
        let f = f.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        fs::rename(&tmp, bucket_path(dir, id))?;
        File::open(dir)?.sync_all()?;
        Ok(offset)
    })();
    match written {
        Ok(bytes) => Ok(WrittenBucket {
            id,
            bytes,
            keys: batch.iter().map(|(k, _)| k.clone()).collect(),
            locations,
        }),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Reads `loc`'s value from its opened bucket `file` into `out` (of its length),
/// checking its CRC.
pub(crate) fn read_at(file: &File, loc: &Location, out: &mut [u8]) -> io::Result<()> {
    if out.len() as u64 != loc.len {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "wrong length"));
    }
    file.read_exact_at(out, loc.offset)?;
    if crc32c(out) != loc.crc {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bucket {}: checksum mismatch", loc.bucket),
        ));
    }
    Ok(())
}

/// Reads a bucket's record headers: the bucket and (key, location) of each record.
fn scan(path: &Path, id: u64) -> io::Result<(Bucket, Vec<(String, Location)>)> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let mut magic = [0u8; 8];
    f.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Err(bad("not a bucket file"));
    }
    let mut offset = MAGIC.len() as u64;
    let mut records = Vec::new();
    while offset < len {
        let mut head = [0u8; RECORD_HEADER as usize];
        f.read_exact(&mut head)
            .map_err(|_| bad("truncated record header"))?;
        let key_len = u32::from_le_bytes(head[0..4].try_into().expect("4 bytes")) as usize;
        let value_len = u64::from_le_bytes(head[4..12].try_into().expect("8 bytes"));
        let crc = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes"));
        let value_at = offset + RECORD_HEADER + key_len as u64;
        let fits = matches!(value_at.checked_add(value_len), Some(end) if end <= len);
        if key_len > MAX_KEY || !fits {
            return Err(bad("record runs past the end"));
        }
        let mut key = vec![0u8; key_len];
        f.read_exact(&mut key)?;
        let key = String::from_utf8(key).map_err(|_| bad("key is not UTF-8"))?;
        f.seek(SeekFrom::Start(value_at + value_len))?;
        records.push((
            key,
            Location {
                bucket: id,
                offset: value_at,
                len: value_len,
                crc,
            },
        ));
        offset = value_at + value_len;
    }
    let keys = records.iter().map(|(k, _)| k.clone()).collect();
    Ok((Bucket { bytes: len, keys }, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mc-disk-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn read(s: &DiskStore, key: &str) -> Vec<u8> {
        let loc = s.get(key).unwrap();
        let mut out = vec![0; loc.len as usize];
        s.read(&loc, &mut out).unwrap();
        out
    }

    #[test]
    fn crc32c_known_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let bitwise = |data: &[u8]| {
            let mut crc = !0u32;
            for &b in data {
                crc ^= u32::from(b);
                for _ in 0..8 {
                    crc = (crc >> 1) ^ (0x82F6_3B78 & (crc & 1).wrapping_neg());
                }
            }
            !crc
        };
        let data: Vec<u8> = (0..100u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..data.len() {
            assert_eq!(crc32c(&data[..len]), bitwise(&data[..len]), "length {len}");
            assert_eq!(crc32c(&data[len..]), bitwise(&data[len..]), "from {len}");
        }
    }

    #[test]
    fn buckets_survive_a_reopen_and_go_oldest_first() {
        let dir = tempdir("reopen");
        let mut s = DiskStore::open(&dir).unwrap();
        let a = vec![1u8; 1000];
        let b = [2u8; 10];
        s.write_bucket(&[("default\0a".into(), &a[..]), ("default\0b".into(), &b[..])])
            .unwrap();
        let b2 = vec![3u8; 20];
        s.write_bucket(&[("default\0b".into(), &b2[..])]).unwrap();
        // A write that never finished is dropped at open.
        fs::write(dir.join("9.bucket.tmp"), b"junk").unwrap();
        fs::write(dir.join("8.bucket"), b"not a bucket").unwrap();
        drop(s);
        let mut s = DiskStore::open(&dir).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(read(&s, "default\0a"), a);
        assert_eq!(read(&s, "default\0b"), b2, "the newest copy wins");
        assert!(!dir.join("9.bucket.tmp").exists());
        let (oldest, live) = s.oldest_bucket().unwrap();
        assert_eq!(live, vec!["default\0a".to_string()]);
        s.delete_bucket(oldest).unwrap();
        assert_eq!(s.get("default\0a"), None);
        assert_eq!(read(&s, "default\0b"), b2);
        let (id, _) = s.write_bucket(&[("default\0c".into(), &a[..])]).unwrap();
        assert!(id > 2, "ids keep growing after a reopen");
        s.clear().unwrap();
        assert_eq!((s.len(), s.bytes()), (0, 0));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn corruption_is_detected() {
        let dir = tempdir("corrupt");
        let mut s = DiskStore::open(&dir).unwrap();
        let v = [7u8; 64];
        s.write_bucket(&[("default\0k".into(), &v[..])]).unwrap();
        let loc = s.get("default\0k").unwrap();
        let f = OpenOptions::new()
            .write(true)
            .open(bucket_path(&dir, loc.bucket))
            .unwrap();
        f.write_all_at(&[8], loc.offset + 3).unwrap();
        let mut out = vec![0; 64];
        assert_eq!(
            s.read(&loc, &mut out).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        // A truncated bucket is skipped at open.
        f.set_len(loc.offset + 10).unwrap();
        let s = DiskStore::open(&dir).unwrap();
        assert_eq!(s.len(), 0);
        let _ = fs::remove_dir_all(&dir);
    }
}
