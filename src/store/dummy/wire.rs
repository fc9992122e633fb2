//! The dummy-client protocol on its Unix socket: a request is `u32` body length
//! (little endian), an operation byte and a struct_pack body (the arguments); the
//! reply is `u32` body length and a struct_pack body (the result). A shared-memory
//! file travels beside the `MAP` request as `SCM_RIGHTS`. Decoders bound every length
//! and never trust the peer.

use crate::host::fd_passing;
use crate::wire::struct_pack::{self, DecodeError, Pack};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;

/// The largest frame either side accepts (a batch of many long keys fits easily).
pub const MAX_FRAME: u32 = 64 << 20;

/// Protocol version a dummy announces in `HELLO`; the real client refuses others.
pub const VERSION: u32 = 1;

/// The operations a dummy client sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    /// `(version, session)` → `Result<(hostname, new session), code>`: joins (or
    /// opens) a session.
    Hello = 1,
    /// `(dummy address, length, offset in the file)` + file → `Result<(), code>`:
    /// maps dummy memory.
    Map = 2,
    /// `dummy address` → `Result<(), code>`: unmaps it.
    Unmap = 3,
    /// `(upsert, keys, pieces, config)` → per key `Result<(), code>`.
    Write = 4,
    /// `(keys, pieces)` → per key `Result<size, code>`.
    Read = 5,
    /// ranged reads → per buffer, key, fragment `Result<bytes, code>`.
    Ranges = 6,
    /// `keys` → per key `Result<bool, code>`.
    Exist = 7,
    /// `keys` → per key `Result<size, code>`.
    Size = 8,
    /// `keys` → per key `Result<replicas, code>`.
    Replicas = 9,
    /// `(keys, force)` → per key `Result<(), code>`.
    Remove = 10,
    /// `(pattern, force)` → `Result<count, code>`.
    RemoveRegex = 11,
    /// `force` → `Result<count, code>`.
    RemoveAll = 12,
    /// `(keys, segment)` → `Result<cleared keys, code>`.
    ReplicaClear = 13,
    /// `()` → the real client's health (0, 1, 2).
    Health = 14,
    /// `(keys, staging (address, capacity))` → per key `Result<(size, address in the
    /// real client's segment or 0, lease TTL ms), (code, size needed)>`: whole objects
    /// in the real client's own segment located (when the dummy maps it) and held
    /// until [`Op::Done`], others read into the staging given, or -10 (buffer
    /// overflow) and the object's size when they did not fit.
    Fetch = 15,
    /// `()`, no reply: the dummy copied what the last fetch on this connection
    /// located; its reads end.
    Done = 16,
    /// `false` → the real client's segments `(base, length)`, their files beside the
    /// reply (for a dummy of the real client's own user; none otherwise); `true` (the
    /// dummy mapped them all) → nothing, and fetches locate objects there from now on.
    Segments = 17,
    /// `(key, targets)` → `Result<task id, code>`.
    CreateCopyTask = 18,
    /// `(key, source, target)` → `Result<task id, code>`.
    CreateMoveTask = 19,
    /// `task id` → `Result<QueryTaskResponse, code>`.
    QueryTask = 20,
}

impl Op {
    /// The operation a byte names, if any.
    pub fn from_byte(b: u8) -> Option<Op> {
        use Op::*;
        [
            Hello,
            Map,
            Unmap,
            Write,
            Read,
            Ranges,
            Exist,
            Size,
            Replicas,
            Remove,
            RemoveRegex,
            RemoveAll,
            ReplicaClear,
            Health,
            Fetch,
            Done,
            Segments,
            CreateCopyTask,
            CreateMoveTask,
            QueryTask,
        ]
        .into_iter()
        .find(|op| *op as u8 == b)
    }
}

/// A fetch's per-key answer: the object's size, where it lies in the real client's
/// segment (0: in the staging), its lease TTL in ms; or a code and (for -10) its size.
pub type FetchResult = Result<(u64, u64, u64), (crate::store::ErrorCode, u64)>;

/// A ranged read on the wire: destination address and, per key, its fragments
/// `(dst, src, len)`.
pub type WireRangedRead = (u64, Vec<(String, Vec<(u64, u64, u64)>)>);

fn decode_error(e: DecodeError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("dummy protocol: {e}"))
}

/// Decodes a body as a `T`.
pub fn decode<T: Pack + 'static>(body: &[u8]) -> io::Result<T> {
    struct_pack::deserialize(body).map_err(decode_error)
}

/// `u32` body length, the operation byte for a request, the struct_pack body.
fn frame<T: Pack + 'static>(op: Option<Op>, value: &T) -> io::Result<Vec<u8>> {
    let body = struct_pack::serialize(value);
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    let mut frame = Vec::with_capacity(5 + body.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend(op.map(|op| op as u8));
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Writes a frame, with `files` attached to its first bytes when there are any.
fn send_frame(stream: &UnixStream, frame: &[u8], files: &[&OwnedFd]) -> io::Result<()> {
    if files.is_empty() {
        (&*stream).write_all(frame)
    } else {
        fd_passing::send_with_fds(stream, frame, files)
    }
}

/// Reads a frame's fixed head and the files that came with it; `None` when the peer
/// closed the connection before its first byte.
fn read_head<const N: usize>(stream: &UnixStream) -> io::Result<Option<([u8; N], Vec<OwnedFd>)>> {
    let mut head = [0u8; N];
    Ok(fd_passing::read_exact_with_fds(stream, &mut head)?.map(|files| (head, files)))
}

/// Sends one request, with `file` attached when given.
pub fn send_request<T: Pack + 'static>(
    stream: &UnixStream,
    op: Op,
    args: &T,
    file: Option<&OwnedFd>,
) -> io::Result<()> {
    send_frame(stream, &frame(Some(op), args)?, file.as_slice())
}

/// Sends one reply.
pub fn send_reply<T: Pack + 'static>(stream: &UnixStream, result: &T) -> io::Result<()> {
    send_reply_with_files(stream, result, &[])
}

/// Sends one reply with `files` attached.
pub fn send_reply_with_files<T: Pack + 'static>(
    stream: &UnixStream,
    result: &T,
    files: &[&OwnedFd],
) -> io::Result<()> {
    send_frame(stream, &frame(None, result)?, files)
}

/// Reads one reply body.
pub fn read_reply(stream: &UnixStream) -> io::Result<Vec<u8>> {
    read_reply_with_files(stream).map(|(body, _)| body)
}

/// Reads one reply body and the files that came with it.
pub fn read_reply_with_files(stream: &UnixStream) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let (head, files) = read_head::<4>(stream)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed"))?;
    Ok((read_body(stream, u32::from_le_bytes(head))?, files))
}

/// One request as received: the operation byte, the body and any attached file.
pub struct Request {
    /// The operation byte (unknown values are answered with an error).
    pub op: u8,
    /// The struct_pack body.
    pub body: Vec<u8>,
    /// The file that came with the request's first bytes.
    pub file: Option<OwnedFd>,
}

/// Reads one request; `Ok(None)` when the peer closed the connection between requests.
pub fn read_request(stream: &UnixStream) -> io::Result<Option<Request>> {
    let Some((head, files)) = read_head::<5>(stream)? else {
        return Ok(None);
    };
    let file = files.into_iter().next();
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let body = read_body(stream, len)?;
    Ok(Some(Request {
        op: head[4],
        body,
        file,
    }))
}

fn read_body(mut stream: &UnixStream, len: u32) -> io::Result<Vec<u8>> {
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("dummy protocol: frame of {len} bytes exceeds {MAX_FRAME}"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    stream.read_exact(&mut body)?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_replies_and_files_round_trip() {
        let (a, b) = UnixStream::pair().unwrap();
        let file = crate::store::memory::Mapping::shared(4096).unwrap();
        send_request(&a, Op::Map, &(7u64, 4096u64), file.shared_file()).unwrap();
        send_request(&a, Op::Exist, &vec!["k".to_string()], None).unwrap();
        let r = read_request(&b).unwrap().unwrap();
        assert_eq!(Op::from_byte(r.op), Some(Op::Map));
        assert_eq!(decode::<(u64, u64)>(&r.body).unwrap(), (7, 4096));
        assert!(r.file.is_some());
        let r = read_request(&b).unwrap().unwrap();
        assert_eq!(Op::from_byte(r.op), Some(Op::Exist));
        assert!(r.file.is_none());
        assert_eq!(decode::<Vec<String>>(&r.body).unwrap(), vec!["k"]);
        send_reply(&b, &vec![Ok::<bool, crate::store::ErrorCode>(true)]).unwrap();
        let body = read_reply(&a).unwrap();
        assert_eq!(
            decode::<Vec<Result<bool, crate::store::ErrorCode>>>(&body).unwrap(),
            vec![Ok(true)]
        );
        drop(a);
        assert!(read_request(&b).unwrap().is_none());
    }

    #[test]
    fn oversized_and_mistyped_frames_are_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(&(MAX_FRAME + 1).to_le_bytes()).unwrap();
        (&a).write_all(&[Op::Exist as u8]).unwrap();
        assert!(read_request(&b).is_err());
        send_reply(&a, &7u64).unwrap();
        let body = read_reply(&b).unwrap();
        assert!(decode::<Vec<String>>(&body).is_err());
        assert_eq!(Op::from_byte(0), None);
        assert_eq!(Op::from_byte(200), None);
    }
}
