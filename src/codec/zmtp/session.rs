//! One subscriber's side of the conversation, independent of sockets: the handshake of
//! a PUB socket, what each later frame asks for, and the topic filters it holds.

use std::collections::HashMap;
use std::io::{self, Read, Write};

use parking_lot::Mutex;

use super::codec::{self, Command, Frame, ProtocolError, Version, GREETING_LEN, MAX_FRAME};

/// Distinct topic prefixes one subscriber may hold; more is taken as abuse.
pub const MAX_SUBSCRIPTIONS: usize = 1024;

/// Runs the PUB side of the handshake: sends our greeting, reads and checks the
/// peer's, sends READY, then reads the peer's READY and checks its `Socket-Type`
/// (SUB or XSUB; another is sent an ERROR). Returns the peer's version.
pub fn handshake(r: &mut impl Read, w: &mut impl Write) -> io::Result<Version> {
    handshake_as(r, w, "PUB", &[b"SUB", b"XSUB"])
}

/// Runs either side of the NULL-mechanism handshake as a `ours` socket: sends our
/// greeting, reads and checks the peer's, sends READY, then reads the peer's READY and
/// checks that its `Socket-Type` is one of `peers` (another is sent an ERROR). An
/// ERROR from the peer instead of READY is a refusal. Returns the peer's version.
pub fn handshake_as(
    r: &mut impl Read,
    w: &mut impl Write,
    ours: &str,
    peers: &[&[u8]],
) -> io::Result<Version> {
    w.write_all(&codec::greeting())?;
    let mut greeting = [0u8; GREETING_LEN];
    r.read_exact(&mut greeting)?;
    let version = codec::parse_greeting(&greeting)?;
    w.write_all(&codec::ready(ours))?;
    let frame = codec::read_frame(r, MAX_FRAME)?;
    if !frame.command {
        return Err(ProtocolError::Sequence.into());
    }
    match codec::parse_command(&frame.body)? {
        Command::Ready(props) => {
            let socket_type = props
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(b"Socket-Type"))
                .map_or(&b""[..], |(_, value)| value);
            if !peers.contains(&socket_type) {
                let _ = w.write_all(&codec::error("Invalid socket type"));
                let shown = String::from_utf8_lossy(socket_type).into_owned();
                return Err(ProtocolError::SocketType(shown).into());
            }
            Ok(version)
        }
        Command::Error(reason) => Err(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            format!("peer refused: {}", String::from_utf8_lossy(reason)),
        )),
        _ => Err(ProtocolError::Sequence.into()),
    }
}

/// What a subscriber's frame asks of the publisher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// Add a topic prefix.
    Subscribe(&'a [u8]),
    /// Drop one subscription to a topic prefix.
    Cancel(&'a [u8]),
    /// Answer a PING with a PONG carrying this context.
    Pong(&'a [u8]),
    /// The peer sent ERROR: close the connection.
    Close,
    /// Nothing to do (another message, an unknown command).
    Nothing,
}

/// Reads a subscriber's frames after the handshake: ZMTP 3.1 SUBSCRIBE / CANCEL /
/// PING commands, and ZMTP 3.0 subscription messages (`01`/`00` + topic as the first
/// frame of a message; other messages are ignored, as a PUB socket does).
#[derive(Debug, Default)]
pub struct PeerInput {
    in_message: bool,
}

impl PeerInput {
    /// What `frame` asks for; a protocol error ends the connection.
    pub fn on_frame<'a>(&mut self, frame: &'a Frame) -> Result<Request<'a>, ProtocolError> {
        if frame.command {
            return Ok(match codec::parse_command(&frame.body)? {
                Command::Subscribe(topic) => Request::Subscribe(topic),
                Command::Cancel(topic) => Request::Cancel(topic),
                Command::Ping(context) => Request::Pong(context),
                Command::Error(_) => Request::Close,
                Command::Ready(_) => return Err(ProtocolError::Sequence),
                Command::Other(_) => Request::Nothing,
            });
        }
        let first = !self.in_message;
        self.in_message = frame.more;
        Ok(match codec::subscription_message(&frame.body) {
            Some((true, topic)) if first => Request::Subscribe(topic),
            Some((false, topic)) if first => Request::Cancel(topic),
            _ => Request::Nothing,
        })
    }
}

/// Serves a subscriber past its handshake: reads its frames, applies its
/// subscriptions to `filters` and answers its PINGs through `pong`, until it sends
/// ERROR (`Ok`), the input fails or ends, or it breaks the protocol (an error).
pub fn serve_requests(
    r: &mut impl Read,
    filters: &Mutex<Filters>,
    mut pong: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let mut input = PeerInput::default();
    loop {
        let frame = codec::read_frame(r, MAX_FRAME)?;
        match input.on_frame(&frame)? {
            Request::Subscribe(topic) => filters.lock().add(topic)?,
            Request::Cancel(topic) => filters.lock().remove(topic),
            Request::Pong(context) => pong(context)?,
            Request::Close => return Ok(()),
            Request::Nothing => {}
        }
    }
}

/// A subscriber's topic prefixes, counted: subscribing twice needs two cancels.
#[derive(Debug, Default)]
pub struct Filters {
    prefixes: HashMap<Vec<u8>, u32>,
}

impl Filters {
    /// Adds one subscription to `prefix`; refuses a new prefix beyond
    /// [`MAX_SUBSCRIPTIONS`].
    pub fn add(&mut self, prefix: &[u8]) -> Result<(), ProtocolError> {
        if let Some(n) = self.prefixes.get_mut(prefix) {
            *n = n.saturating_add(1);
            return Ok(());
        }
        if self.prefixes.len() >= MAX_SUBSCRIPTIONS {
            return Err(ProtocolError::Subscriptions);
        }
        self.prefixes.insert(prefix.to_vec(), 1);
        Ok(())
    }

    /// Drops one subscription to `prefix` (none held: nothing happens).
    pub fn remove(&mut self, prefix: &[u8]) {
        if let Some(n) = self.prefixes.get_mut(prefix) {
            *n -= 1;
            if *n == 0 {
                self.prefixes.remove(prefix);
            }
        }
    }

    /// Whether a message whose first frame is `topic` goes to this subscriber.
    pub fn matches(&self, topic: &[u8]) -> bool {
        self.prefixes.keys().any(|p| topic.starts_with(p))
    }

    /// Distinct prefixes held.
    pub fn prefixes(&self) -> usize {
        self.prefixes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzzing::zmtp_subscriber;
    use proptest::prelude::*;

    /// The bytes a libzmq SUB sends first: greeting 3.1 and READY.
    fn sub_hello(minor: u8, socket_type: &str) -> Vec<u8> {
        let mut g = codec::greeting().to_vec();
        g[11] = minor;
        let ready = codec::ready(socket_type);
        g.extend_from_slice(&ready);
        g
    }

    #[test]
    fn handshake_with_sub_and_xsub() {
        for (minor, socket_type) in [(1, "SUB"), (0, "XSUB")] {
            let input = sub_hello(minor, socket_type);
            let mut out = Vec::new();
            let v = handshake(&mut &input[..], &mut out).unwrap();
            assert_eq!(v, Version { major: 3, minor });
            let mut expect = codec::greeting().to_vec();
            expect.extend_from_slice(&codec::ready("PUB"));
            assert_eq!(out, expect);
        }
    }

    #[test]
    fn handshake_refusals_never_panic() {
        let mut out = Vec::new();
        let e = handshake(&mut &sub_hello(1, "REQ")[..], &mut out).unwrap_err();
        assert!(e.to_string().contains("REQ"), "{e}");
        assert!(out.ends_with(&codec::error("Invalid socket type")));
        // A message frame instead of READY; SUBSCRIBE before READY; ERROR.
        let mut hello = codec::greeting().to_vec();
        hello.extend_from_slice(&[0x00, 0x01, 0x01]);
        assert!(handshake(&mut &hello[..], &mut Vec::new()).is_err());
        let mut hello = codec::greeting().to_vec();
        hello.extend_from_slice(b"\x04\x0a\x09SUBSCRIBE");
        assert!(handshake(&mut &hello[..], &mut Vec::new()).is_err());
        let mut hello = codec::greeting().to_vec();
        hello.extend_from_slice(&codec::error("no"));
        let e = handshake(&mut &hello[..], &mut Vec::new()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionAborted);
        // Every truncation of a good hello, and garbage.
        let good = sub_hello(1, "SUB");
        for cut in 0..good.len() {
            assert!(
                handshake(&mut &good[..cut], &mut Vec::new()).is_err(),
                "{cut}"
            );
        }
        let garbage: Vec<u8> = (0..200u32).map(|i| (i * 37 + 11) as u8).collect();
        assert!(handshake(&mut &garbage[..], &mut Vec::new()).is_err());
        // Missing Socket-Type.
        let mut hello = codec::greeting().to_vec();
        hello.extend_from_slice(b"\x04\x06\x05READY");
        assert!(handshake(&mut &hello[..], &mut Vec::new()).is_err());
    }

    fn msg(more: bool, body: &[u8]) -> Frame {
        Frame {
            command: false,
            more,
            body: body.to_vec(),
        }
    }

    fn cmd(body: &[u8]) -> Frame {
        Frame {
            command: true,
            more: false,
            body: body.to_vec(),
        }
    }

    #[test]
    fn requests_from_frames() {
        let mut input = PeerInput::default();
        let f = cmd(b"\x09SUBSCRIBEab");
        assert_eq!(input.on_frame(&f), Ok(Request::Subscribe(b"ab")));
        let f = cmd(b"\x06CANCELab");
        assert_eq!(input.on_frame(&f), Ok(Request::Cancel(b"ab")));
        let f = cmd(b"\x04PING\x00\x01hi");
        assert_eq!(input.on_frame(&f), Ok(Request::Pong(b"hi")));
        let f = cmd(b"\x05ERROR\x00");
        assert_eq!(input.on_frame(&f), Ok(Request::Close));
        let f = cmd(b"\x05HELLO");
        assert_eq!(input.on_frame(&f), Ok(Request::Nothing));
        let f = cmd(b"\x05READY");
        assert_eq!(input.on_frame(&f), Err(ProtocolError::Sequence));
        let f = msg(false, b"\x01");
        assert_eq!(input.on_frame(&f), Ok(Request::Subscribe(b"")));
        let f = msg(false, b"\x00x");
        assert_eq!(input.on_frame(&f), Ok(Request::Cancel(b"x")));
        // Only the first frame of a message can be a subscription.
        let (a, b) = (msg(true, b"\x07data"), msg(false, b"\x01late"));
        assert_eq!(input.on_frame(&a), Ok(Request::Nothing));
        assert_eq!(input.on_frame(&b), Ok(Request::Nothing));
        let f = msg(false, b"\x01next");
        assert_eq!(input.on_frame(&f), Ok(Request::Subscribe(b"next")));
    }

    #[test]
    fn filters_count_prefixes() {
        let mut f = Filters::default();
        assert!(!f.matches(b""));
        f.add(b"ab").unwrap();
        f.add(b"ab").unwrap();
        assert!(f.matches(b"abc") && !f.matches(b"a"));
        f.remove(b"ab");
        assert!(f.matches(b"ab"));
        f.remove(b"ab");
        assert!(!f.matches(b"ab"));
        f.remove(b"never");
        f.add(b"").unwrap();
        assert!(f.matches(b"") && f.matches(b"anything"));
        for i in 1..MAX_SUBSCRIPTIONS {
            f.add(format!("t{i}").as_bytes()).unwrap();
        }
        assert_eq!(f.add(b"one too many"), Err(ProtocolError::Subscriptions));
        f.add(b"t1").unwrap();
    }

    #[test]
    fn serving_a_subscriber() {
        let mut bytes = sub_hello(1, "SUB");
        bytes.extend_from_slice(b"\x04\x0a\x09SUBSCRIBE");
        bytes.extend_from_slice(&codec::encode_message(&[b"\x01ab"]));
        bytes.extend_from_slice(b"\x04\x07\x04PING\x00\x00");
        bytes.extend_from_slice(b"\x04\x09\x06CANCELab");
        assert_eq!(
            zmtp_subscriber(&bytes),
            "end: UnexpectedEof, prefixes: 1, pongs: 1"
        );
        bytes.extend_from_slice(&codec::error("bye"));
        assert_eq!(
            zmtp_subscriber(&bytes),
            "end: closed, prefixes: 1, pongs: 1"
        );
        // A flood of distinct subscriptions is refused.
        let mut flood = sub_hello(0, "SUB");
        for i in 0..=MAX_SUBSCRIPTIONS {
            flood.extend_from_slice(&codec::encode_message(&[format!("\x01t{i}").as_bytes()]));
        }
        let end = zmtp_subscriber(&flood);
        assert!(end.starts_with("end: InvalidData, prefixes: 1024"), "{end}");
        assert!(zmtp_subscriber(b"\xff").starts_with("handshake: "));
    }

    /// Frames a subscriber might send: mostly well-formed headers, some not.
    fn frames() -> impl Strategy<Value = Vec<u8>> {
        let frame =
            (0u8..8, proptest::collection::vec(any::<u8>(), 0..40)).prop_map(|(f, body)| {
                let mut v = vec![f, body.len() as u8];
                v.extend(body);
                v
            });
        proptest::collection::vec(frame, 0..12).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = zmtp_subscriber(&bytes);
        }

        #[test]
        fn arbitrary_frames_after_a_good_hello_never_panic(tail in frames(), raw in any::<bool>(),
                                                          junk in proptest::collection::vec(any::<u8>(), 0..100)) {
            let mut bytes = sub_hello(1, "XSUB");
            bytes.extend(if raw { junk } else { tail });
            let _ = zmtp_subscriber(&bytes);
        }
    }
}
