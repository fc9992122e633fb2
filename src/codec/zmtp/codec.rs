//! ZMTP 3.x bytes (rfc.zeromq.org specs 23 and 37): the greeting, frames, commands and
//! the READY metadata of the NULL mechanism. Decoders take untrusted peer input: every
//! length is checked against what is there and against [`MAX_FRAME`], nothing panics.

use std::fmt;
use std::io::{self, Read};

/// Length of a ZMTP 3 greeting.
pub const GREETING_LEN: usize = 64;
/// The largest frame accepted from a peer (subscriptions and commands are small; a
/// libzmq subscriber sends nothing bigger than its longest topic prefix).
pub const MAX_FRAME: usize = 64 << 10;

/// More frames of the same message follow.
const FLAG_MORE: u8 = 0x01;
/// The size is 8 bytes, not 1.
const FLAG_LONG: u8 = 0x02;
/// The frame is a command.
const FLAG_COMMAND: u8 = 0x04;
/// Longest context of a PING that a PONG echoes.
const PING_CONTEXT_MAX: usize = 16;

/// What makes peer input unacceptable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// The greeting does not start with `FF .. 7F`.
    Signature,
    /// A major version below 3.
    Version(u8, u8),
    /// A security mechanism other than NULL.
    Mechanism,
    /// A frame with reserved flag bits set.
    Flags(u8),
    /// A frame over [`MAX_FRAME`].
    TooLarge(u64),
    /// A command frame with the MORE flag.
    MoreOnCommand,
    /// A command whose name or body is malformed.
    Command,
    /// READY metadata that does not parse.
    Metadata,
    /// A handshake that is not greeting then READY, or READY again later.
    Sequence,
    /// A peer whose socket type cannot talk to a PUB socket.
    SocketType(String),
    /// More distinct subscriptions than one subscriber may hold.
    Subscriptions,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::Signature => f.write_str("not a ZMTP greeting"),
            ProtocolError::Version(a, b) => write!(f, "ZMTP version {a}.{b} is not 3.x"),
            ProtocolError::Mechanism => f.write_str("security mechanism is not NULL"),
            ProtocolError::Flags(b) => write!(f, "frame flags {b:#04x} have reserved bits"),
            ProtocolError::TooLarge(n) => write!(f, "frame of {n} bytes exceeds {MAX_FRAME}"),
            ProtocolError::MoreOnCommand => f.write_str("command frame with MORE"),
            ProtocolError::Command => f.write_str("malformed command"),
            ProtocolError::Metadata => f.write_str("malformed READY metadata"),
            ProtocolError::Sequence => f.write_str("unexpected command for this stage"),
            ProtocolError::SocketType(t) => write!(f, "peer socket type {t:?} is not SUB/XSUB"),
            ProtocolError::Subscriptions => f.write_str("too many subscriptions"),
        }
    }
}

impl std::error::Error for ProtocolError {}

impl From<ProtocolError> for io::Error {
    fn from(e: ProtocolError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }
}

/// Our greeting: version 3.1, mechanism NULL, as-server 0. The padding holds 1 (big
/// endian), as libzmq writes it, which a ZMTP 1.0 peer would read as an empty identity.
pub fn greeting() -> [u8; GREETING_LEN] {
    let mut g = [0u8; GREETING_LEN];
    g[0] = 0xff;
    g[8] = 0x01;
    g[9] = 0x7f;
    g[10] = 3;
    g[11] = 1;
    g[12..16].copy_from_slice(b"NULL");
    g
}

/// The peer's protocol version, from its greeting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    /// Major version (3 or more).
    pub major: u8,
    /// Minor version (0 for ZMTP 3.0, 1 for 3.1).
    pub minor: u8,
}

/// Checks a peer's greeting: signature, version 3.x (a later major version is
/// accepted: such a peer adapts to ours), mechanism NULL. `as-server` and the filler
/// are not looked at, as libzmq does not.
pub fn parse_greeting(g: &[u8; GREETING_LEN]) -> Result<Version, ProtocolError> {
    if g[0] != 0xff || g[9] != 0x7f {
        return Err(ProtocolError::Signature);
    }
    let version = Version {
        major: g[10],
        minor: g[11],
    };
    if version.major < 3 {
        return Err(ProtocolError::Version(version.major, version.minor));
    }
    let mechanism = &g[12..32];
    if &mechanism[..4] != b"NULL" || mechanism[4..].iter().any(|&b| b != 0) {
        return Err(ProtocolError::Mechanism);
    }
    Ok(version)
}

/// One frame read from a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// A command (else a message frame).
    pub command: bool,
    /// More frames of the same message follow (never on a command).
    pub more: bool,
    /// The frame's bytes.
    pub body: Vec<u8>,
}

/// Reads one frame, refusing reserved flags, MORE on a command and bodies over `max`
/// bytes (before allocating them).
pub fn read_frame(r: &mut impl Read, max: usize) -> io::Result<Frame> {
    let mut flags = [0u8; 1];
    r.read_exact(&mut flags)?;
    let flags = flags[0];
    if flags & !(FLAG_MORE | FLAG_LONG | FLAG_COMMAND) != 0 {
        return Err(ProtocolError::Flags(flags).into());
    }
    let command = flags & FLAG_COMMAND != 0;
    let more = flags & FLAG_MORE != 0;
    if command && more {
        return Err(ProtocolError::MoreOnCommand.into());
    }
    let size = if flags & FLAG_LONG != 0 {
        let mut b = [0u8; 8];
        r.read_exact(&mut b)?;
        u64::from_be_bytes(b)
    } else {
        let mut b = [0u8; 1];
        r.read_exact(&mut b)?;
        u64::from(b[0])
    };
    let len = usize::try_from(size)
        .ok()
        .filter(|n| *n <= max)
        .ok_or(ProtocolError::TooLarge(size))?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(Frame {
        command,
        more,
        body,
    })
}

/// Appends a frame header: short form up to 255 bytes, long form beyond.
fn push_header(out: &mut Vec<u8>, flags: u8, len: usize) {
    match u8::try_from(len) {
        Ok(n) => out.extend_from_slice(&[flags, n]),
        Err(_) => {
            out.push(flags | FLAG_LONG);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
}

/// A whole multipart message as it goes on the wire: MORE on every frame but the last.
pub fn encode_message(frames: &[&[u8]]) -> Vec<u8> {
    let total: usize = frames.iter().map(|f| f.len() + 9).sum();
    let mut out = Vec::with_capacity(total);
    for (i, f) in frames.iter().enumerate() {
        let flags = if i + 1 < frames.len() { FLAG_MORE } else { 0 };
        push_header(&mut out, flags, f.len());
        out.extend_from_slice(f);
    }
    out
}

/// A command frame: `name` (at most 255 bytes) and its data.
fn encode_command(name: &str, data: &[u8]) -> Vec<u8> {
    let name = &name.as_bytes()[..name.len().min(255)];
    let mut body = Vec::with_capacity(1 + name.len() + data.len());
    body.push(name.len() as u8);
    body.extend_from_slice(name);
    body.extend_from_slice(data);
    let mut out = Vec::with_capacity(body.len() + 9);
    push_header(&mut out, FLAG_COMMAND, body.len());
    out.extend_from_slice(&body);
    out
}

/// Our READY command, with the one property a NULL peer needs: `Socket-Type`.
pub fn ready(socket_type: &str) -> Vec<u8> {
    let mut meta = Vec::new();
    let name = b"Socket-Type";
    meta.push(name.len() as u8);
    meta.extend_from_slice(name);
    meta.extend_from_slice(&(socket_type.len() as u32).to_be_bytes());
    meta.extend_from_slice(socket_type.as_bytes());
    encode_command("READY", &meta)
}

/// A ZMTP 3.1 SUBSCRIBE command for the topic prefix `topic` (empty: everything).
pub fn subscribe(topic: &[u8]) -> Vec<u8> {
    encode_command("SUBSCRIBE", topic)
}

/// The PONG answering a PING with `context`.
pub fn pong(context: &[u8]) -> Vec<u8> {
    encode_command("PONG", context)
}

/// An ERROR command with `reason` (cut at 255 bytes).
pub fn error(reason: &str) -> Vec<u8> {
    let reason = &reason.as_bytes()[..reason.len().min(255)];
    let mut data = vec![reason.len() as u8];
    data.extend_from_slice(reason);
    encode_command("ERROR", &data)
}

/// READY metadata: (name, value) properties, in order.
pub type Properties<'a> = Vec<(&'a [u8], &'a [u8])>;

/// A command received from a peer, borrowing from its frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    /// READY and its metadata properties (name, value), in order.
    Ready(Properties<'a>),
    /// ZMTP 3.1 SUBSCRIBE: a topic prefix.
    Subscribe(&'a [u8]),
    /// ZMTP 3.1 CANCEL: a topic prefix.
    Cancel(&'a [u8]),
    /// ZMTP 3.1 PING: the context to echo in a PONG (its TTL is not used by a PUB).
    Ping(&'a [u8]),
    /// ERROR: the peer's reason; it closes the connection.
    Error(&'a [u8]),
    /// Any other command (PONG, or one from a later minor version): ignored.
    Other(&'a [u8]),
}

/// Parses a command frame's body: name size, name, data.
pub fn parse_command(body: &[u8]) -> Result<Command<'_>, ProtocolError> {
    let (&n, rest) = body.split_first().ok_or(ProtocolError::Command)?;
    let n = usize::from(n);
    if n == 0 || rest.len() < n {
        return Err(ProtocolError::Command);
    }
    let (name, data) = rest.split_at(n);
    Ok(match name {
        b"READY" => Command::Ready(parse_metadata(data)?),
        b"SUBSCRIBE" => Command::Subscribe(data),
        b"CANCEL" => Command::Cancel(data),
        b"PING" => {
            // TTL (2 bytes), then up to 16 bytes of context (longer ones are cut).
            let context = data.get(2..).ok_or(ProtocolError::Command)?;
            Command::Ping(&context[..context.len().min(PING_CONTEXT_MAX)])
        }
        b"ERROR" => {
            let (&len, reason) = data.split_first().ok_or(ProtocolError::Command)?;
            Command::Error(reason.get(..usize::from(len)).unwrap_or(reason))
        }
        other => Command::Other(other),
    })
}

/// Parses READY metadata: properties of (name size u8 > 0, name, value size u32 BE,
/// value) up to the end of the data.
pub fn parse_metadata(mut data: &[u8]) -> Result<Properties<'_>, ProtocolError> {
    let mut props = Vec::new();
    while let Some((&n, rest)) = data.split_first() {
        let n = usize::from(n);
        if n == 0 || rest.len() < n + 4 {
            return Err(ProtocolError::Metadata);
        }
        let (name, rest) = rest.split_at(n);
        let (size, rest) = rest.split_at(4);
        let size = u32::from_be_bytes([size[0], size[1], size[2], size[3]]);
        let size = usize::try_from(size).map_err(|_| ProtocolError::Metadata)?;
        if rest.len() < size {
            return Err(ProtocolError::Metadata);
        }
        let (value, rest) = rest.split_at(size);
        props.push((name, value));
        data = rest;
    }
    Ok(props)
}

/// A ZMTP 3.0 subscription message (the first frame of a message from a SUB):
/// `01 topic` subscribes, `00 topic` cancels; `(subscribe, topic)`, or `None` for
/// any other message (ignored by a PUB).
pub fn subscription_message(first_frame: &[u8]) -> Option<(bool, &[u8])> {
    match first_frame.split_first() {
        Some((1, topic)) => Some((true, topic)),
        Some((0, topic)) => Some((false, topic)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(bytes: &[u8]) -> io::Result<Frame> {
        read_frame(&mut &bytes[..], MAX_FRAME)
    }

    fn kind(r: io::Result<Frame>) -> Option<ProtocolError> {
        let e = r.err()?;
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<ProtocolError>())
            .cloned()
    }

    #[test]
    fn greeting_round_trip_and_refusals() {
        let ours = greeting();
        assert_eq!(&ours[..12], [0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 1]);
        assert_eq!(&ours[12..17], b"NULL\0");
        assert_eq!(ours[32], 0, "as-server");
        assert_eq!(parse_greeting(&ours), Ok(Version { major: 3, minor: 1 }));
        let mut v30 = ours;
        v30[11] = 0;
        assert_eq!(parse_greeting(&v30), Ok(Version { major: 3, minor: 0 }));
        let mut v2 = ours;
        v2[10] = 2;
        assert_eq!(parse_greeting(&v2), Err(ProtocolError::Version(2, 1)));
        let mut plain = ours;
        plain[12..18].copy_from_slice(b"PLAIN\0");
        assert_eq!(parse_greeting(&plain), Err(ProtocolError::Mechanism));
        let mut junk_mech = ours;
        junk_mech[20] = b'x';
        assert_eq!(parse_greeting(&junk_mech), Err(ProtocolError::Mechanism));
        let mut http = [0u8; GREETING_LEN];
        http[..16].copy_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(parse_greeting(&http), Err(ProtocolError::Signature));
    }

    #[test]
    fn frames_short_long_and_refused() {
        assert_eq!(
            frame(&[0x00, 3, 1, b'a', b'b']).unwrap(),
            Frame {
                command: false,
                more: false,
                body: vec![1, b'a', b'b']
            }
        );
        let f = frame(&[0x03, 0, 0, 0, 0, 0, 0, 0, 2, 7, 8]).unwrap();
        assert!(f.more && !f.command);
        assert_eq!(f.body, [7, 8]);
        assert!(frame(&[0x04, 0]).unwrap().command);
        assert_eq!(kind(frame(&[0x08, 0])), Some(ProtocolError::Flags(0x08)));
        assert_eq!(kind(frame(&[0x05, 0])), Some(ProtocolError::MoreOnCommand));
        let huge = [0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(kind(frame(&huge)), Some(ProtocolError::TooLarge(u64::MAX)));
        let over = [0x02, 0, 0, 0, 0, 0, 1, 0, 1];
        assert_eq!(
            kind(frame(&over)),
            Some(ProtocolError::TooLarge(MAX_FRAME as u64 + 1))
        );
        // Truncated anywhere: an I/O error, no panic.
        for bytes in [&[][..], &[0x00], &[0x02, 0, 0], &[0x00, 5, 1, 2]] {
            let e = frame(bytes).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{bytes:?}");
        }
    }

    #[test]
    fn messages_use_short_and_long_sizes() {
        let seq = 7u64.to_be_bytes();
        let wire = encode_message(&[b"", &seq, b"xyz"]);
        let mut expect = vec![0x01, 0x00, 0x01, 0x08];
        expect.extend_from_slice(&seq);
        expect.extend_from_slice(&[0x00, 0x03, b'x', b'y', b'z']);
        assert_eq!(wire, expect);
        let big = vec![9u8; 300];
        let wire = encode_message(&[&big]);
        assert_eq!(&wire[..9], [0x02, 0, 0, 0, 0, 0, 0, 1, 44]);
        assert_eq!(wire.len(), 9 + 300);
        let back = read_frame(&mut &wire[..], MAX_FRAME).unwrap();
        assert_eq!(back.body, big);
    }

    #[test]
    fn commands() {
        let r = ready("PUB");
        let mut expect = vec![0x04, 25, 5];
        expect.extend_from_slice(b"READY");
        expect.push(11);
        expect.extend_from_slice(b"Socket-Type");
        expect.extend_from_slice(&[0, 0, 0, 3]);
        expect.extend_from_slice(b"PUB");
        assert_eq!(r, expect);
        let f = read_frame(&mut &r[..], MAX_FRAME).unwrap();
        assert_eq!(
            parse_command(&f.body),
            Ok(Command::Ready(vec![(&b"Socket-Type"[..], &b"PUB"[..])]))
        );
        assert_eq!(
            parse_command(b"\x09SUBSCRIBEtopic"),
            Ok(Command::Subscribe(b"topic"))
        );
        assert_eq!(parse_command(b"\x06CANCEL"), Ok(Command::Cancel(b"")));
        assert_eq!(
            parse_command(b"\x04PING\x00\x0aabc"),
            Ok(Command::Ping(b"abc"))
        );
        let long_ping = [&b"\x04PING\x00\x01"[..], &[7u8; 40]].concat();
        assert_eq!(parse_command(&long_ping), Ok(Command::Ping(&[7u8; 16])));
        assert_eq!(parse_command(b"\x04PING\x00"), Err(ProtocolError::Command));
        assert_eq!(
            parse_command(b"\x05ERROR\x03bad"),
            Ok(Command::Error(b"bad"))
        );
        assert_eq!(
            parse_command(b"\x05ERROR\x09bad"),
            Ok(Command::Error(b"bad"))
        );
        assert_eq!(parse_command(b"\x05ERROR"), Err(ProtocolError::Command));
        assert_eq!(parse_command(b"\x04PONGxy"), Ok(Command::Other(b"PONG")));
        assert_eq!(parse_command(b""), Err(ProtocolError::Command));
        assert_eq!(parse_command(b"\x00"), Err(ProtocolError::Command));
        assert_eq!(parse_command(b"\x09SUB"), Err(ProtocolError::Command));
        let pong = pong(b"ctx");
        assert_eq!(pong, [0x04, 8, 4, b'P', b'O', b'N', b'G', b'c', b't', b'x']);
        let err = error("Invalid socket type");
        assert_eq!(
            parse_command(&read_frame(&mut &err[..], MAX_FRAME).unwrap().body),
            Ok(Command::Error(b"Invalid socket type"))
        );
    }

    #[test]
    fn metadata_lengths_are_checked() {
        assert_eq!(parse_metadata(b""), Ok(vec![]));
        let two = b"\x01a\x00\x00\x00\x01x\x02bc\x00\x00\x00\x00";
        assert_eq!(
            parse_metadata(two),
            Ok(vec![(&b"a"[..], &b"x"[..]), (&b"bc"[..], &b""[..])])
        );
        for bad in [
            &b"\x00"[..],
            b"\x05ab",
            b"\x01a\x00\x00",
            b"\x01a\x00\x00\x00\x05xy",
            b"\x01a\xff\xff\xff\xffx",
        ] {
            assert_eq!(parse_metadata(bad), Err(ProtocolError::Metadata), "{bad:?}");
        }
    }

    #[test]
    fn zmtp30_subscription_messages() {
        assert_eq!(subscription_message(b"\x01abc"), Some((true, &b"abc"[..])));
        assert_eq!(subscription_message(b"\x01"), Some((true, &b""[..])));
        assert_eq!(subscription_message(b"\x00ab"), Some((false, &b"ab"[..])));
        assert_eq!(subscription_message(b"\x02ab"), None);
        assert_eq!(subscription_message(b""), None);
    }
}
