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

use super::changelog::FollowerHandle;
use super::mirror::Mirror;
use super::record::Record;
use crate::master::MasterService;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;
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

/// The running writer; stops (and leaves consistent files) on drop.
pub struct SnapshotWriter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SnapshotWriter {
    /// Starts keeping `master`'s state in `dir` (created if missing). The first
    /// snapshot is written before changes count as durable.
    pub fn start(dir: &Path, master: &Arc<MasterService>) -> io::Result<SnapshotWriter> {
        std::fs::create_dir_all(dir)?;
        let probe = dir.join(".write-test");
        File::create(&probe)?;
        std::fs::remove_file(&probe)?;
        let follower = master.attach_follower();
        let stop = Arc::new(AtomicBool::new(false));
        let (dir, flag) = (dir.to_path_buf(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("mc-snapshot".into())
            .spawn(move || {
                if let Err(e) = write_loop(&dir, &follower, &flag) {
                    log::error!(
                        "master snapshot in {}: {e}; snapshots stopped",
                        dir.display()
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

fn write_loop(dir: &Path, follower: &FollowerHandle, stop: &AtomicBool) -> io::Result<()> {
    let mut mirror = Mirror::default();
    let mut journal: Option<Journal> = None;
    let mut last_sync = Instant::now();
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
