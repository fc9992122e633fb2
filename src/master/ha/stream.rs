//! The replication stream between a leader and its standbys, over TCP.
//!
//! A standby connects to the leader's replication port and sends [`MAGIC`]. The
//! leader attaches it as a follower and sends frames `u32 length, u64 number, record`
//! (length counts number and record): first a full dump, then every change; an empty
//! frame (`length` 8, number 0) every [`IDLE_PING`] when there is nothing to send.
//! The standby answers with the `u64` number of the last record it applied whenever
//! it has applied everything it has read. Little-endian throughout.
//!
//! The leader serves at most [`MAX_STANDBYS`] connections ([`MAX_STANDBYS_PER_HOST`]
//! from one host); a connection that does not send the magic within [`SILENCE`], or
//! stops reading for [`SILENCE`] times [`WRITE_SILENCES`], is closed.

use super::changelog::FollowerHandle;
use super::mirror::Mirror;
use super::record::Record;
use crate::master::MasterService;
use crate::runtime::conn_threads::ConnLimits;
use crate::runtime::tcp_acceptor::{StreamTimeouts, TcpAcceptor};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a standby sends first (the stream's format version).
pub(crate) const MAGIC: &[u8; 8] = b"MCHAREP1";
/// Largest frame accepted.
const MAX_FRAME: u32 = 64 << 20;
/// How often an idle stream carries an empty frame.
const IDLE_PING: Duration = Duration::from_millis(500);
/// A stream silent this long is dead.
const SILENCE: Duration = Duration::from_secs(3);
/// Records per write.
const BATCH: usize = 4096;
/// Replication connections served at once (standbys, and anything else that connects).
pub const MAX_STANDBYS: usize = 64;
/// Replication connections one host may hold.
pub const MAX_STANDBYS_PER_HOST: usize = 8;
/// A standby that accepts no bytes for this many [`SILENCE`]s is cut off.
const WRITE_SILENCES: u32 = 10;

/// The leader's replication listener: one sender and one acknowledgement reader
/// thread per standby. Dropping it closes every stream and joins every thread.
pub struct ReplicationServer {
    acceptor: TcpAcceptor,
}

impl ReplicationServer {
    /// Listens on `bind` (port 0: any) and streams `master`'s state to each standby.
    pub fn start(bind: SocketAddr, master: &Arc<MasterService>) -> io::Result<ReplicationServer> {
        let listener = TcpListener::bind(bind)?;
        let master = Arc::downgrade(master);
        let acceptor = TcpAcceptor::start(
            listener,
            "mc-ha-send",
            ConnLimits::new(MAX_STANDBYS, MAX_STANDBYS_PER_HOST),
            StreamTimeouts::default(),
            move |stream, peer| {
                let Some(m) = master.upgrade() else { return };
                if let Err(e) = serve_standby(stream, &m) {
                    log::warn!("master ha: standby {peer}: {e}");
                }
            },
        )?;
        Ok(ReplicationServer { acceptor })
    }

    /// The address standbys connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.acceptor.local_addr()
    }
}

fn serve_standby(stream: &TcpStream, master: &MasterService) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(SILENCE))?;
    stream.set_write_timeout(Some(SILENCE * WRITE_SILENCES))?;
    read_magic(stream)?;
    let peer = stream.peer_addr()?;
    let follower = Arc::new(master.attach_follower());
    log::info!("master ha: standby {peer} attached; sending the full state");
    let acks = {
        let (stream, follower) = (stream.try_clone()?, follower.clone());
        std::thread::Builder::new()
            .name("mc-ha-acks".into())
            .spawn(move || read_acks(stream, &follower))?
    };
    let result = send_records(stream, &follower);
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = acks.join();
    log::info!("master ha: standby {peer} detached");
    result
}

/// Reads [`MAGIC`] within [`SILENCE`] in all (not per byte), or fails.
fn read_magic(stream: &TcpStream) -> io::Result<()> {
    let deadline = Instant::now() + SILENCE;
    let mut magic = [0u8; 8];
    let mut got = 0;
    while got < magic.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "no magic in time"));
        }
        stream.set_read_timeout(Some(left))?;
        match (&*stream).read(&mut magic[got..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    stream.set_read_timeout(Some(SILENCE))?;
    if &magic != MAGIC {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not a standby"));
    }
    Ok(())
}

/// Sends the follower's records until the stream fails (the standby left, or the
/// server stopped and shut the socket down) or the follower is cut off.
fn send_records(stream: &TcpStream, follower: &FollowerHandle) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 16, stream);
    loop {
        let Some(batch) = follower.next_batch(BATCH, IDLE_PING) else {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "cut off"));
        };
        if batch.is_empty() {
            write_frame(&mut w, 0, &[])?;
        }
        for (seq, bytes) in &batch {
            write_frame(&mut w, *seq, bytes)?;
        }
        w.flush()?;
    }
}

fn write_frame(w: &mut impl Write, seq: u64, bytes: &[u8]) -> io::Result<()> {
    let len = u32::try_from(bytes.len() + 8)
        .ok()
        .filter(|l| *l <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "record too large"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(&seq.to_le_bytes())?;
    w.write_all(bytes)
}

fn read_acks(stream: TcpStream, follower: &FollowerHandle) {
    let mut r = BufReader::new(stream);
    let mut word = [0u8; 8];
    while r.read_exact(&mut word).is_ok() {
        follower.ack(u64::from_le_bytes(word));
    }
}

/// Why a standby's stream ended.
#[derive(Debug)]
pub enum StreamEnd {
    /// Could not connect.
    Unreachable(io::Error),
    /// The leader closed the stream or went silent.
    Lost(io::Error),
    /// `keep_going` returned false.
    Stopped,
    /// The leader sent something that is not a record.
    Corrupt,
}

/// Connects to the leader's stream at `addr` and applies it to `mirror` until the
/// stream ends or `keep_going` (given the mirror) returns false; it is asked at least
/// every [`IDLE_PING`].
pub fn follow(addr: &str, mirror: &mut Mirror, keep_going: &dyn Fn(&Mirror) -> bool) -> StreamEnd {
    let stream = match connect(addr) {
        Ok(s) => s,
        Err(e) => return StreamEnd::Unreachable(e),
    };
    match apply_stream(&stream, mirror, keep_going) {
        Ok(end) => end,
        Err(e) => StreamEnd::Lost(e),
    }
}

fn connect(addr: &str) -> io::Result<TcpStream> {
    use std::net::ToSocketAddrs;
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("no address in {addr}"));
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, Duration::from_secs(1)) {
            Ok(s) => {
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(SILENCE))?;
                (&s).write_all(MAGIC)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn apply_stream(
    stream: &TcpStream,
    mirror: &mut Mirror,
    keep_going: &dyn Fn(&Mirror) -> bool,
) -> io::Result<StreamEnd> {
    let mut r = BufReader::with_capacity(1 << 16, stream);
    let mut last = 0u64;
    let mut body = Vec::new();
    loop {
        if !keep_going(mirror) {
            return Ok(StreamEnd::Stopped);
        }
        let mut head = [0u8; 4];
        r.read_exact(&mut head)?;
        let len = u32::from_le_bytes(head);
        if !(8..=MAX_FRAME).contains(&len) {
            return Ok(StreamEnd::Corrupt);
        }
        body.resize(len as usize, 0);
        r.read_exact(&mut body)?;
        let seq = u64::from_le_bytes(body[..8].try_into().unwrap_or_default());
        if seq != 0 {
            let Some(rec) = Record::decode(&body[8..]) else {
                return Ok(StreamEnd::Corrupt);
            };
            mirror.apply(rec);
            last = seq;
        }
        if r.buffer().is_empty() && last != 0 {
            (&*stream).write_all(&last.to_le_bytes())?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::master::MasterConfig;
    use crate::wire::master_api::{
        MasterApi, ObjectMeta, ReplicaStatus, ReplicaType, ReplicateConfig, Uuid, DEFAULT_TENANT,
    };

    const CLIENT: Uuid = Uuid {
        first: 1,
        second: 1,
    };
    const WRITERS: usize = 2;
    const PUTS: usize = 100;

    use super::super::state::tests::segment;

    fn all_complete(mirror: &Mirror) -> bool {
        mirror.complete
            && mirror.objects.len() == WRITERS * PUTS
            && mirror.objects.values().all(|o| {
                o.replicas
                    .iter()
                    .all(|r| r.status == ReplicaStatus::Complete)
            })
    }

    /// A standby streams while writers put concurrently (each put waits for the
    /// standby's acknowledgement): it ends with every object, as the leader has it.
    #[test]
    fn a_standby_follows_concurrent_writers() {
        let master = Arc::new(MasterService::new(MasterConfig::default()));
        master.mount_segment(&segment(), CLIENT).unwrap();
        let server = ReplicationServer::start("127.0.0.1:0".parse().unwrap(), &master).unwrap();
        let addr = server.local_addr().to_string();
        let standby = std::thread::spawn(move || {
            let mut mirror = Mirror::default();
            let end = follow(&addr, &mut mirror, &|m| !all_complete(m));
            (end, mirror)
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let master = master.clone();
                std::thread::spawn(move || {
                    for i in 0..PUTS {
                        let key = format!("w{w}-{i}");
                        let config = ReplicateConfig::default();
                        master
                            .put_start(CLIENT, &key, 4096, &config, DEFAULT_TENANT)
                            .unwrap();
                        let meta = ObjectMeta {
                            key,
                            checksum: None,
                        };
                        master
                            .put_end(CLIENT, &meta, ReplicaType::All, DEFAULT_TENANT)
                            .unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let (end, mirror) = standby.join().unwrap();
        assert!(matches!(end, StreamEnd::Stopped), "{end:?}");
        for ((tenant, key), state) in &mirror.objects {
            let replicas = master.get_replica_list(key, tenant).unwrap().replicas;
            assert_eq!(replicas.len(), state.replicas.len(), "{key}");
        }
        drop(server);
    }
}
