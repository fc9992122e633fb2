//! coro_rpc framing (yalantinglibs v0.5.7, spec store.md §3.2): the 20-byte request
//! header, the 16-byte response header (both little-endian), function ids, the master's
//! method table, transport-level error bodies, and blocking frame I/O.

use super::master_rpcs::master_rpcs;
use super::struct_pack;
use md5::{Digest, Md5};
use std::io::{self, Read, Write};
use std::sync::OnceLock;

/// First byte of every header.
pub const MAGIC: u8 = 21;
/// The only protocol version.
pub const VERSION: u8 = 0;
/// `serialize_type` of struct_pack bodies.
pub const SERIALIZE_STRUCT_PACK: u8 = 0;
/// Request header length.
pub const REQ_HEADER_LEN: usize = 20;
/// Response header length.
pub const RESP_HEADER_LEN: usize = 16;
/// Default cap on a request body or attachment length; larger frames are refused.
pub const MAX_FRAME: usize = 64 << 20;
/// Cap on a response body the client accepts (replies such as `GetReplicaListByRegex`
/// over a large store can be big; memory is only committed as bytes arrive).
pub const MAX_RESPONSE: usize = 1 << 30;

/// Response `err_code`: success.
pub const ERR_OK: u8 = 0;
/// Response `err_code` 4: the arguments did not decode ("invalid rpc arg").
pub const ERR_INVALID_ARGUMENTS: u8 = 4;
/// Response `err_code` 9 (`operation_canceled`): a master that may not answer now
/// refused the request.
pub const ERR_OPERATION_CANCELED: u8 = 9;
/// Response `err_code` 10: the handler failed ("rpc throw exception").
pub const ERR_THROW_EXCEPTION: u8 = 10;
/// Response `err_code` 11: unknown function id ("function not registered").
pub const ERR_FUNCTION_NOT_REGISTERED: u8 = 11;
/// Upstream's message for [`ERR_INVALID_ARGUMENTS`].
pub const MSG_INVALID_ARGUMENTS: &str = "invalid rpc arg";
/// Upstream's message for [`ERR_FUNCTION_NOT_REGISTERED`].
pub const MSG_FUNCTION_NOT_REGISTERED: &str = "the rpc function not registered";

/// Prefix of every master function name hashed into a function id.
pub const SERVICE_PREFIX: &str = "mooncake::WrappedMasterService::";

/// A coro_rpc frame header: its wire bytes, how they parse, and the lengths of what
/// follows it.
pub trait FrameHeader: Sized {
    /// "request" or "response", for the errors.
    const KIND: &'static str;
    /// The header's bytes on the wire.
    type Bytes: AsMut<[u8]> + Default;
    /// The header these bytes hold, `None` when they are not one.
    fn parse(b: &Self::Bytes) -> Option<Self>;
    /// The body and attachment lengths the header announces.
    fn lens(&self) -> (u32, u32);
}

/// A coro_rpc request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// Always [`MAGIC`].
    pub magic: u8,
    /// Protocol version ([`VERSION`]).
    pub version: u8,
    /// Body serialization ([`SERIALIZE_STRUCT_PACK`]).
    pub serialize_type: u8,
    /// Message type (0).
    pub msg_type: u8,
    /// Caller-chosen sequence number, echoed in the response.
    pub seq: u32,
    /// The function id ([`function_id`]).
    pub function_id: u32,
    /// Body length.
    pub body_len: u32,
    /// Attachment length (follows the body).
    pub attach_len: u32,
}

impl RequestHeader {
    /// A request header for a struct_pack body.
    pub fn new(seq: u32, function_id: u32, body_len: u32) -> RequestHeader {
        RequestHeader {
            magic: MAGIC,
            version: VERSION,
            serialize_type: SERIALIZE_STRUCT_PACK,
            msg_type: 0,
            seq,
            function_id,
            body_len,
            attach_len: 0,
        }
    }

    /// The 20 wire bytes.
    pub fn to_bytes(&self) -> [u8; REQ_HEADER_LEN] {
        header_bytes(
            [self.magic, self.version, self.serialize_type, self.msg_type],
            [self.seq, self.function_id, self.body_len, self.attach_len],
        )
    }
}

impl FrameHeader for RequestHeader {
    const KIND: &'static str = "request";
    type Bytes = [u8; REQ_HEADER_LEN];

    /// Parses 20 wire bytes; `None` for a bad magic, version or serialize type.
    fn parse(b: &[u8; REQ_HEADER_LEN]) -> Option<RequestHeader> {
        let ([magic, version, serialize_type, msg_type], [seq, function_id, body_len, attach_len]) =
            header_fields(b);
        let h = RequestHeader {
            magic,
            version,
            serialize_type,
            msg_type,
            seq,
            function_id,
            body_len,
            attach_len,
        };
        (h.magic == MAGIC && h.version == VERSION && h.serialize_type == SERIALIZE_STRUCT_PACK)
            .then_some(h)
    }

    fn lens(&self) -> (u32, u32) {
        (self.body_len, self.attach_len)
    }
}

/// A coro_rpc response header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHeader {
    /// Always [`MAGIC`].
    pub magic: u8,
    /// Protocol version.
    pub version: u8,
    /// Transport-level error ([`ERR_OK`] on success).
    pub err_code: u8,
    /// Message type (0).
    pub msg_type: u8,
    /// The request's sequence number.
    pub seq: u32,
    /// Body length.
    pub body_len: u32,
    /// Attachment length.
    pub attach_len: u32,
}

impl ResponseHeader {
    /// A response header.
    pub fn new(seq: u32, err_code: u8, body_len: u32) -> ResponseHeader {
        ResponseHeader {
            magic: MAGIC,
            version: VERSION,
            err_code,
            msg_type: 0,
            seq,
            body_len,
            attach_len: 0,
        }
    }

    /// The 16 wire bytes.
    pub fn to_bytes(&self) -> [u8; RESP_HEADER_LEN] {
        header_bytes(
            [self.magic, self.version, self.err_code, self.msg_type],
            [self.seq, self.body_len, self.attach_len],
        )
    }
}

impl FrameHeader for ResponseHeader {
    const KIND: &'static str = "response";
    type Bytes = [u8; RESP_HEADER_LEN];

    /// Parses 16 wire bytes; `None` for a bad magic.
    fn parse(b: &[u8; RESP_HEADER_LEN]) -> Option<ResponseHeader> {
        let ([magic, version, err_code, msg_type], [seq, body_len, attach_len]) = header_fields(b);
        let h = ResponseHeader {
            magic,
            version,
            err_code,
            msg_type,
            seq,
            body_len,
            attach_len,
        };
        (h.magic == MAGIC).then_some(h)
    }

    fn lens(&self) -> (u32, u32) {
        (self.body_len, self.attach_len)
    }
}

/// A header's wire bytes: four single bytes, then `W` little-endian u32 words
/// (`N` = 4 + 4 `W`), the layout of both headers.
fn header_bytes<const N: usize, const W: usize>(bytes: [u8; 4], words: [u32; W]) -> [u8; N] {
    debug_assert_eq!(N, 4 + 4 * W);
    let mut b = [0u8; N];
    b[..4].copy_from_slice(&bytes);
    for (at, w) in b[4..].chunks_exact_mut(4).zip(words) {
        at.copy_from_slice(&w.to_le_bytes());
    }
    b
}

/// The four single bytes and `W` little-endian u32 words of a header's wire bytes.
fn header_fields<const N: usize, const W: usize>(b: &[u8; N]) -> ([u8; 4], [u32; W]) {
    debug_assert_eq!(N, 4 + 4 * W);
    let mut words = [0u32; W];
    for (w, at) in words.iter_mut().zip(b[4..].chunks_exact(4)) {
        *w = u32::from_le_bytes([at[0], at[1], at[2], at[3]]);
    }
    ([b[0], b[1], b[2], b[3]], words)
}

/// Function id of a fully qualified name: MD5's first four bytes, big-endian.
pub fn function_id_of(qualified: &str) -> u32 {
    let d = Md5::digest(qualified.as_bytes());
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// Function id of a master method name (`"Ping"` → MD5 of
/// `"mooncake::WrappedMasterService::Ping"`).
pub fn function_id(method: &str) -> u32 {
    function_id_of(&format!("{SERVICE_PREFIX}{method}"))
}

/// The `Method` enum from the RPC table ([`master_rpcs!`]), in the table's order.
macro_rules! methods {
    (all [$({
        $(#[$doc:meta])* $m:ident: $args:ty => $ret:ty;
        [$($kind:tt)*] fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $api_ret:ty;
    })+] master [$($master:tt)*] tier [$($tier:tt)*]) => {
        /// A master RPC served and called here (upstream's registered name).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Method {
            $(
                #[doc = concat!("`WrappedMasterService::", stringify!($m), "`.")]
                $m,
            )*
        }

        impl Method {
            /// Every method.
            pub const ALL: &'static [Method] = &[$(Method::$m),*];

            /// Upstream's method name.
            pub fn name(self) -> &'static str {
                match self { $(Method::$m => stringify!($m)),* }
            }
        }
    };
}

master_rpcs!(methods);

/// Function ids: by method (in [`Method::ALL`] order) and sorted by id.
struct IdTable {
    by_method: Vec<u32>,
    sorted: Vec<(u32, Method)>,
}

fn id_table() -> &'static IdTable {
    static TABLE: OnceLock<IdTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let by_method: Vec<u32> = Method::ALL.iter().map(|m| function_id(m.name())).collect();
        let mut sorted: Vec<(u32, Method)> = by_method
            .iter()
            .copied()
            .zip(Method::ALL.iter().copied())
            .collect();
        sorted.sort_by_key(|e| e.0);
        IdTable { by_method, sorted }
    })
}

impl Method {
    /// The function id (computed once, cached).
    pub fn id(self) -> u32 {
        id_table().by_method[self as usize]
    }

    /// The method with this function id.
    pub fn from_id(id: u32) -> Option<Method> {
        let t = &id_table().sorted;
        t.binary_search_by_key(&id, |e| e.0).ok().map(|i| t[i].1)
    }

    /// Whether this is a mooncake-rs extension (upstream's master does not register it
    /// and answers "function not registered").
    pub fn is_extension(self) -> bool {
        matches!(self, Method::BatchBeginRead | Method::BatchEndRead)
    }

    /// The method with this name.
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.iter().copied().find(|m| m.name() == name)
    }
}

/// The body of a transport-level error response: the struct_pack string `msg`.
pub fn error_body(msg: &str) -> Vec<u8> {
    struct_pack::serialize(&msg.to_string())
}

/// The message of a transport-level error body (`err_code` 255 bodies carry a
/// `(u16 code, string)` pair); a placeholder when it does not decode.
pub fn error_message(body: &[u8]) -> String {
    struct_pack::deserialize::<String>(body)
        .or_else(|_| struct_pack::deserialize::<(u16, String)>(body).map(|p| p.1))
        .unwrap_or_else(|_| String::from("<undecodable error body>"))
}

/// A whole request frame.
pub fn encode_request(seq: u32, function_id: u32, body: &[u8]) -> Vec<u8> {
    encode_request_attached(seq, function_id, body, &[])
}

/// A whole response frame.
pub fn encode_response(seq: u32, err_code: u8, body: &[u8]) -> Vec<u8> {
    encode_response_attached(seq, err_code, body, &[])
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// Fills `buf`; `Ok(false)` on a clean end of stream before the first byte.
fn read_full_or_eof(r: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Reads `len` bytes (`len <= max` already checked). Memory grows with the bytes that
/// actually arrive, so a header announcing a large body costs nothing until it is sent.
fn read_body(r: &mut impl Read, len: u32) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    read_body_into(r, len, &mut body)?;
    Ok(body)
}

/// [`read_body`] into `body` (emptied first), reusing its memory.
fn read_body_into(r: &mut impl Read, len: u32, body: &mut Vec<u8>) -> io::Result<()> {
    body.clear();
    const SMALL: usize = 64 << 10;
    if len as usize <= SMALL {
        body.resize(len as usize, 0);
        return r.read_exact(body);
    }
    body.reserve(SMALL);
    r.take(u64::from(len)).read_to_end(body)?;
    if body.len() != len as usize {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// Reads and discards an attachment of `len` bytes.
fn skip(r: &mut impl Read, len: u32) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let n = io::copy(&mut r.take(u64::from(len)), &mut io::sink())?;
    if n < u64::from(len) {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// Whether `buf` starts with a complete request frame (its body and attachment
/// included): a server that has one buffered can handle it without reading.
pub fn whole_request_at_front(buf: &[u8]) -> bool {
    let Some(head) = buf.get(..REQ_HEADER_LEN) else {
        return false;
    };
    let len = |i: usize| {
        u64::from(u32::from_le_bytes([
            head[i],
            head[i + 1],
            head[i + 2],
            head[i + 3],
        ]))
    };
    (buf.len() as u64) >= REQ_HEADER_LEN as u64 + len(12) + len(16)
}

/// Reads one request frame; `Ok(None)` on a clean end of stream. A bad header, or a
/// body or attachment over `max_body`, is an `InvalidData` error. Attachments are
/// read and dropped.
pub fn read_request(
    r: &mut impl Read,
    max_body: usize,
) -> io::Result<Option<(RequestHeader, Vec<u8>)>> {
    read_frame(r, max_body)
}

/// [`read_request`] with the body read into `body` (emptied first), so a server
/// reading request after request reuses one buffer.
pub fn read_request_into(
    r: &mut impl Read,
    max_body: usize,
    body: &mut Vec<u8>,
) -> io::Result<Option<RequestHeader>> {
    read_frame_into(r, max_body, body)
}

/// Reads one response frame; `Ok(None)` on a clean end of stream (same rules as
/// [`read_request`]).
pub fn read_response(
    r: &mut impl Read,
    max_body: usize,
) -> io::Result<Option<(ResponseHeader, Vec<u8>)>> {
    read_frame(r, max_body)
}

/// A frame's header, body and attachment.
pub type AttachedFrame<H> = (H, Vec<u8>, Vec<u8>);

/// Reads one request frame with its attachment (same rules as [`read_request`]).
pub fn read_request_attached(
    r: &mut impl Read,
    max_body: usize,
) -> io::Result<Option<AttachedFrame<RequestHeader>>> {
    read_frame_attached(r, max_body)
}

/// Reads one response frame with its attachment (same rules as [`read_request`]).
pub fn read_response_attached(
    r: &mut impl Read,
    max_body: usize,
) -> io::Result<Option<AttachedFrame<ResponseHeader>>> {
    read_frame_attached(r, max_body)
}

/// Reads one frame whose header is an `H`, keeping its attachment.
fn read_frame_attached<H: FrameHeader>(
    r: &mut impl Read,
    max_body: usize,
) -> io::Result<Option<AttachedFrame<H>>> {
    let Some(h) = read_header::<H>(r, max_body)? else {
        return Ok(None);
    };
    let (body_len, attach_len) = h.lens();
    let body = read_body(r, body_len)?;
    let attachment = read_body(r, attach_len)?;
    Ok(Some((h, body, attachment)))
}

/// Reads one frame's header and checks its lengths against `max_body` (`None`: the
/// stream ended cleanly before it).
fn read_header<H: FrameHeader>(r: &mut impl Read, max_body: usize) -> io::Result<Option<H>> {
    let kind = H::KIND;
    let mut hb = <H::Bytes>::default();
    if !read_full_or_eof(r, hb.as_mut())? {
        return Ok(None);
    }
    let h = H::parse(&hb).ok_or_else(|| invalid(&format!("bad coro_rpc {kind} header")))?;
    let (body_len, attach_len) = h.lens();
    if body_len as usize > max_body || attach_len as usize > max_body {
        return Err(invalid(&format!("coro_rpc {kind} frame too large")));
    }
    Ok(Some(h))
}

/// A request frame carrying `attachment` after `body`.
pub fn encode_request_attached(
    seq: u32,
    function_id: u32,
    body: &[u8],
    attachment: &[u8],
) -> Vec<u8> {
    let mut h = RequestHeader::new(seq, function_id, body.len() as u32);
    h.attach_len = attachment.len() as u32;
    let mut out = Vec::with_capacity(REQ_HEADER_LEN + body.len() + attachment.len());
    out.extend_from_slice(&h.to_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(attachment);
    out
}

/// A response frame carrying `attachment` after `body`.
pub fn encode_response_attached(seq: u32, err_code: u8, body: &[u8], attachment: &[u8]) -> Vec<u8> {
    let mut h = ResponseHeader::new(seq, err_code, body.len() as u32);
    h.attach_len = attachment.len() as u32;
    let mut out = Vec::with_capacity(RESP_HEADER_LEN + body.len() + attachment.len());
    out.extend_from_slice(&h.to_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(attachment);
    out
}

/// Reads one frame whose header is an `H`.
fn read_frame<H: FrameHeader>(
    r: &mut impl Read,
    max_body: usize,
) -> io::Result<Option<(H, Vec<u8>)>> {
    let mut body = Vec::new();
    Ok(read_frame_into(r, max_body, &mut body)?.map(|h| (h, body)))
}

/// Reads one frame whose header is an `H`, its body into `body` (emptied first).
fn read_frame_into<H: FrameHeader>(
    r: &mut impl Read,
    max_body: usize,
    body: &mut Vec<u8>,
) -> io::Result<Option<H>> {
    let Some(h) = read_header::<H>(r, max_body)? else {
        return Ok(None);
    };
    let (body_len, attach_len) = h.lens();
    read_body_into(r, body_len, body)?;
    skip(r, attach_len)?;
    Ok(Some(h))
}

/// Writes one whole frame.
pub fn write_frame(w: &mut impl Write, frame: &[u8]) -> io::Result<()> {
    w.write_all(frame)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_whole_only_with_its_body_and_attachment() {
        let plain = encode_request(7, Method::Ping.id(), b"body");
        let attached = encode_request_attached(8, Method::Ping.id(), b"body", b"extra");
        for frame in [&plain, &attached] {
            assert!(whole_request_at_front(frame));
            assert!(!whole_request_at_front(&frame[..frame.len() - 1]));
            assert!(!whole_request_at_front(&frame[..REQ_HEADER_LEN - 1]));
        }
        let mut two = plain.clone();
        two.extend_from_slice(&attached[..3]);
        assert!(whole_request_at_front(&two));
        assert!(!whole_request_at_front(&[]));
    }

    #[test]
    fn ids_from_spec() {
        assert_eq!(Method::Ping.id(), 0xd6c2dae5);
        assert_eq!(Method::PutStart.id(), 0x65ea9ac1);
        assert_eq!(Method::ServiceReady.id(), 0x7b81bb56);
        assert_eq!(Method::from_id(0xd6c2dae5), Some(Method::Ping));
        assert_eq!(Method::from_id(0), None);
        for &m in Method::ALL {
            assert_eq!(Method::from_id(m.id()), Some(m));
            assert_eq!(Method::from_name(m.name()), Some(m));
        }
    }

    #[test]
    fn headers_roundtrip() {
        let h = RequestHeader::new(7, 0xd6c2dae5, 28);
        assert_eq!(RequestHeader::parse(&h.to_bytes()), Some(h));
        assert_eq!(&h.to_bytes()[..4], &[21, 0, 0, 0]);
        let r = ResponseHeader::new(7, 4, 10);
        assert_eq!(ResponseHeader::parse(&r.to_bytes()), Some(r));
        let mut bad = h.to_bytes();
        bad[0] = 22;
        assert_eq!(RequestHeader::parse(&bad), None);
    }

    #[test]
    fn frames_io() {
        let f = encode_request(3, 99, b"abc");
        let mut cur = io::Cursor::new(f);
        let (h, b) = read_request(&mut cur, 16).unwrap().unwrap();
        assert_eq!((h.seq, h.function_id, b.as_slice()), (3, 99, &b"abc"[..]));
        assert!(read_request(&mut cur, 16).unwrap().is_none());
        let f = encode_request(3, 99, &[0u8; 17]);
        assert!(read_request(&mut io::Cursor::new(f), 16).is_err());
        let e = error_body(MSG_INVALID_ARGUMENTS);
        assert_eq!(error_message(&e), MSG_INVALID_ARGUMENTS);
        let f = encode_response(1, 11, &e);
        let (h, b) = read_response(&mut io::Cursor::new(f), 1 << 10)
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.err_code, error_message(&b).as_str()),
            (11, MSG_INVALID_ARGUMENTS)
        );
        // A truncated header is an error, not a clean end.
        assert!(read_response(&mut io::Cursor::new(vec![21u8, 0, 0]), 16).is_err());
    }
}
