//! Snapshots (`--enable_snapshot=true --snapshot_backup_dir=D`): the master's metadata
//! on local disk, so a master killed and restarted on the same address serves again
//! every object whose segment owner is still alive.
//!
//! The writer is a follower of the replication log like a standby: an RPC that
//! changes metadata answers only after its records are written to `D/journal`
//! (`write(2)`: a killed process loses nothing; a machine crash may lose the last
//! second, which is `fdatasync`ed once a second). At start, and whenever the journal
//! passes [`COMPACT_AT`], the whole state is written to `D/snapshot.tmp`, synced, and
//! renamed over `D/snapshot`, and the journal starts again. Loading reads the
//! snapshot, then the journal, and stops at the first torn or corrupt frame.
//! Both files: an 8-byte magic, then frames `u32 length, record` (little-endian).
//!
//! Point-in-time copies (`--snapshot_interval_seconds`, `--snapshot_retention_count`):
//! every interval the writer also keeps the state as it is then in
//! `D/archive/<unix ms>/`, a directory like `D` itself (the snapshot file hard-linked,
//! the journal copied: at most [`COMPACT_AT`] bytes), so `--snapshot_backup_dir` set
//! to one restores that moment. The newest `retention_count` are kept.

use super::changelog::FollowerHandle;
use super::mirror::Mirror;
use super::record::Record;
use crate::master::MasterService;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const SNAPSHOT_MAGIC: &[u8; 8] = b"MCSNAP01";
const JOURNAL_MAGIC: &[u8; 8] = b"MCJRNL01";
/// Journal size that triggers a new snapshot.
pub const COMPACT_AT: u64 = 64 << 20;
/// Largest frame accepted when loading.
const MAX_FRAME: u32 = 64 << 20;
/// How often the journal is synced to the device.
const SYNC_EVERY: Duration = Duration::from_secs(1);

/// Where a master keeps its snapshot, and its point-in-time copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotPlan {
    /// `--snapshot_backup_dir`.
    pub dir: PathBuf,
    /// `--snapshot_interval_seconds`: how often a point-in-time copy is kept.
    pub archive_every: Duration,
    /// `--snapshot_retention_count`: point-in-time copies kept (0: none).
    pub archive_keep: usize,
}

impl SnapshotPlan {
    /// Snapshots in `dir` with upstream's defaults for the copies (every 600 s, 2 kept).
    pub fn new(dir: PathBuf) -> SnapshotPlan {
        SnapshotPlan {
            dir,
            archive_every: Duration::from_secs(600),
            archive_keep: 2,
        }
    }
}

/// The running writer; stops (and leaves consistent files) on drop.
pub struct SnapshotWriter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SnapshotWriter {
    /// Starts keeping `master`'s state in `plan.dir` (created if missing). The first
    /// snapshot is written before changes count as durable.
    pub fn start(plan: &SnapshotPlan, master: &Arc<MasterService>) -> io::Result<SnapshotWriter> {
        let dir = &plan.dir;
        std::fs::create_dir_all(dir)?;
        let probe = dir.join(".write-test");
        File::create(&probe)?;
        std::fs::remove_file(&probe)?;
        let follower = master.attach_follower();
        let stop = Arc::new(AtomicBool::new(false));
        let (plan, flag) = (plan.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("mc-snapshot".into())
            .spawn(move || {
                if let Err(e) = write_loop(&plan, &follower, &flag) {
                    log::error!(
                        "master snapshot in {}: {e}; snapshots stopped",
                        plan.dir.display()
                    );
                }
            })?;
        Ok(SnapshotWriter {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for SnapshotWriter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn write_loop(plan: &SnapshotPlan, follower: &FollowerHandle, stop: &AtomicBool) -> io::Result<()> {
    let dir = plan.dir.as_path();
    let mut mirror = Mirror::default();
    let mut journal: Option<Journal> = None;
    let mut last_sync = Instant::now();
    let mut last_archive = Instant::now();
    while !stop.load(Ordering::Acquire) {
        let Some(batch) = follower.next_batch(4096, Duration::from_millis(200)) else {
            return Err(io::Error::other("cut off (writes too slow)"));
        };
        let mut last = 0;
        for (seq, bytes) in &batch {
            let rec = Record::decode(bytes)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad record"))?;
            let dump_done = rec == Record::DumpDone;
            if let Some(j) = &mut journal {
                j.append(bytes)?;
            }
            mirror.apply(rec);
            last = *seq;
            if dump_done {
                journal = Some(compact(dir, &mirror)?);
            }
        }
        let Some(j) = &mut journal else { continue };
        j.flush()?;
        if last != 0 {
            follower.ack(last);
        }
        if last_sync.elapsed() >= SYNC_EVERY {
            j.sync()?;
            last_sync = Instant::now();
        }
        if j.len >= COMPACT_AT {
            journal = Some(compact(dir, &mirror)?);
        }
        if plan.archive_keep > 0 && last_archive.elapsed() >= plan.archive_every {
            last_archive = Instant::now();
            if let Err(e) = archive(dir, plan.archive_keep) {
                log::warn!(
                    "master snapshot: keeping a point-in-time copy in {}: {e}",
                    dir.display()
                );
            }
        }
    }
    if let Some(mut j) = journal {
        j.flush()?;
        j.sync()?;
    }
    Ok(())
}

struct Journal {
    out: BufWriter<File>,
    len: u64,
}

impl Journal {
    fn append(&mut self, rec: &[u8]) -> io::Result<()> {
        write_frame(&mut self.out, rec)?;
        self.len += 4 + rec.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn sync(&mut self) -> io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_data()
    }
}

fn write_frame(w: &mut impl Write, rec: &[u8]) -> io::Result<()> {
    let len = u32::try_from(rec.len())
        .ok()
        .filter(|l| *l <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "record too large"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(rec)
}

/// Writes `mirror` as the snapshot and starts an empty journal.
fn compact(dir: &Path, mirror: &Mirror) -> io::Result<Journal> {
    let tmp = dir.join("snapshot.tmp");
    {
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        w.write_all(SNAPSHOT_MAGIC)?;
        for rec in mirror.records() {
            write_frame(&mut w, &rec.encode())?;
        }
        w.flush()?;
        w.get_ref().sync_all()?;
    }
    std::fs::rename(&tmp, dir.join("snapshot"))?;
    // From here the snapshot holds everything: the journal starts over.
    let mut out = BufWriter::with_capacity(1 << 16, journal_file(dir, true)?);
    out.write_all(JOURNAL_MAGIC)?;
    out.flush()?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(Journal {
        out,
        len: JOURNAL_MAGIC.len() as u64,
    })
}

/// Keeps the state in `dir` as it is now (its snapshot and flushed journal) in
/// `dir/archive/<unix ms>/`, then deletes all but the newest `keep` copies.
fn archive(dir: &Path, keep: usize) -> io::Result<()> {
    let root = dir.join("archive");
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    // What a crash left half made goes first.
    if let Ok(entries) = std::fs::read_dir(&root) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with('.') {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let tmp = root.join(format!(".{ms}.tmp"));
    std::fs::create_dir_all(&tmp)?;
    // The snapshot file is replaced by rename, never written in place: a link keeps
    // this one. The journal is appended to, so it is copied.
    if std::fs::hard_link(dir.join("snapshot"), tmp.join("snapshot")).is_err() {
        std::fs::copy(dir.join("snapshot"), tmp.join("snapshot"))?;
    }
    std::fs::copy(dir.join("journal"), tmp.join("journal"))?;
    File::open(tmp.join("journal"))?.sync_all()?;
    // Room first, so that no more than `keep` copies are ever there.
    let mut copies: Vec<PathBuf> = std::fs::read_dir(&root)?
        .filter_map(|e| e.ok())
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    copies.sort();
    let excess = (copies.len() + 1).saturating_sub(keep);
    for old in &copies[..excess.min(copies.len())] {
        std::fs::remove_dir_all(old)?;
    }
    std::fs::rename(&tmp, root.join(format!("{ms:013}")))
}

fn journal_file(dir: &Path, truncate: bool) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(truncate)
        .open(dir.join("journal"))
}

/// The state kept in `dir`: the snapshot, then the journal. A missing directory or
/// file is an empty part; a torn or corrupt frame ends its file's part (logged).
pub fn load(dir: &Path) -> io::Result<Mirror> {
    let mut mirror = Mirror::default();
    let from_snapshot = read_into(&dir.join("snapshot"), SNAPSHOT_MAGIC, &mut mirror)?;
    let from_journal = read_into(&dir.join("journal"), JOURNAL_MAGIC, &mut mirror)?;
    if from_snapshot + from_journal > 0 {
        log::info!(
            "master snapshot: {} segments and {} objects from {} ({from_snapshot} + \
             {from_journal} records)",
            mirror.segments.len(),
            mirror.objects.len(),
            dir.display()
        );
    }
    Ok(mirror)
}

/// Applies the records of file `path` (magic `magic`) to `mirror`; how many.
fn read_into(path: &Path, magic: &[u8; 8], mirror: &mut Mirror) -> io::Result<usize> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut head = [0u8; 8];
    if r.read_exact(&mut head).is_err() || &head != magic {
        log::warn!("master snapshot: {} is not ours; ignored", path.display());
        return Ok(0);
    }
    let mut n = 0;
    let mut body = Vec::new();
    loop {
        let mut len = [0u8; 4];
        match r.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(n),
            Err(e) => return Err(e),
        }
        let len = u32::from_le_bytes(len);
        let torn = || {
            log::warn!(
                "master snapshot: {} ends with a torn or corrupt record after {n}",
                path.display()
            );
            Ok(n)
        };
        if len > MAX_FRAME {
            return torn();
        }
        body.resize(len as usize, 0);
        if r.read_exact(&mut body).is_err() {
            return torn();
        }
        let Some(rec) = Record::decode(&body) else {
            return torn();
        };
        mirror.apply(rec);
        n += 1;
    }
}

/// A copy of `master`'s whole state (a leader stepping down keeps it).
pub fn copy_of(master: &MasterService) -> Mirror {
    let follower = master.attach_follower();
    let mut mirror = Mirror::default();
    while !mirror.complete {
        let Some(batch) = follower.next_batch(usize::MAX, Duration::ZERO) else {
            break;
        };
        if batch.is_empty() {
            break;
        }
        for (_, bytes) in batch {
            if let Some(rec) = Record::decode(&bytes) {
                mirror.apply(rec);
            }
        }
    }
    mirror
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::master::MasterConfig;
    use crate::wire::master_api::{
        MasterApi, ObjectMeta, ReplicaType, ReplicateConfig, Segment, Uuid,
    };

    fn put(master: &MasterService, client: Uuid, key: &str) {
        master
            .put_start(client, key, 4096, &ReplicateConfig::default(), "default")
            .unwrap();
        let meta = ObjectMeta {
            key: key.into(),
            checksum: None,
        };
        master
            .put_end(client, &meta, ReplicaType::All, "default")
            .unwrap();
    }

    fn copies(dir: &Path) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join("archive"))
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        found.retain(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'));
        found.sort();
        found
    }

    #[test]
    fn point_in_time_copies_restore_their_moment_and_only_the_newest_stay() {
        let dir = std::env::temp_dir().join(format!(
            "mc-snapshot-archive-{}-{}",
            std::process::id(),
            crate::host::net::random_u64()
        ));
        let master = MasterService::new(MasterConfig::default());
        let client = Uuid {
            first: 1,
            second: 2,
        };
        let segment = Segment {
            id: Uuid {
                first: 9,
                second: 9,
            },
            name: "127.0.0.1:12345".into(),
            base: 0x7f00_0000_0000,
            size: 1 << 30,
            te_endpoint: "127.0.0.1:12345".into(),
            protocol: "tcp".into(),
            host_id: "h".into(),
        };
        master.mount_segment(&segment, client).unwrap();
        put(&master, client, "first");
        let plan = SnapshotPlan {
            dir: dir.clone(),
            archive_every: Duration::ZERO,
            archive_keep: 2,
        };
        let writer = SnapshotWriter::start(&plan, &master).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let wait_for = |what: &str, ok: &dyn Fn() -> bool| {
            while !ok() {
                assert!(Instant::now() < deadline, "timed out waiting for {what}");
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        wait_for("a copy holding 'first'", &|| {
            copies(&dir)
                .last()
                .is_some_and(|c| load(c).is_ok_and(|m| m.objects.len() == 1))
        });
        put(&master, client, "second");
        wait_for("a copy holding both", &|| {
            copies(&dir)
                .last()
                .is_some_and(|c| load(c).is_ok_and(|m| m.objects.len() == 2))
        });
        // Copies keep coming (every loop here); never more than two stay.
        let seen = copies(&dir);
        wait_for("newer copies", &|| copies(&dir).first() > seen.last());
        assert!(copies(&dir).len() <= 2, "{:?}", copies(&dir));
        drop(writer);
        assert!(copies(&dir).len() <= 2);
        assert_eq!(load(&dir).unwrap().objects.len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
