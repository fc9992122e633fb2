//! A KV-event subscriber for the tests, written from the specs and independent of the
//! crate's own code: a ZMTP 3.1 SUB over a plain `TcpStream`, a msgpack decoder, and
//! the event maps upstream's publisher writes (spec tiers-events-conductor.md §2.6).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Longest any read may block (only reached when something is broken).
pub const READ_DEADLINE: Duration = Duration::from_secs(40);

/// A decoded msgpack value.
#[derive(Debug, Clone, PartialEq)]
pub enum V {
    Nil,
    Bool(bool),
    U(u64),
    I(i64),
    S(String),
    A(Vec<V>),
    /// String keys, in wire order.
    M(Vec<(String, V)>),
}

impl V {
    pub fn str(&self) -> &str {
        match self {
            V::S(s) => s,
            other => panic!("not a string: {other:?}"),
        }
    }

    pub fn uint(&self) -> u64 {
        match self {
            V::U(n) => *n,
            other => panic!("not an unsigned integer: {other:?}"),
        }
    }

    pub fn array(&self) -> &[V] {
        match self {
            V::A(a) => a,
            other => panic!("not an array: {other:?}"),
        }
    }

    /// The value of `key` in a map.
    pub fn get(&self, key: &str) -> Option<&V> {
        match self {
            V::M(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            other => panic!("not a map: {other:?}"),
        }
    }
}

/// Decodes exactly one value filling `bytes`.
pub fn decode(bytes: &[u8]) -> V {
    let mut at = 0;
    let v = value(bytes, &mut at);
    assert_eq!(at, bytes.len(), "trailing bytes after the value");
    v
}

fn take<'a>(b: &'a [u8], at: &mut usize, n: usize) -> &'a [u8] {
    let s = &b[*at..*at + n];
    *at += n;
    s
}

fn be(b: &[u8], at: &mut usize, n: usize) -> u64 {
    take(b, at, n)
        .iter()
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

fn value(b: &[u8], at: &mut usize) -> V {
    let tag = take(b, at, 1)[0];
    let text = |b: &[u8], at: &mut usize, n: usize| {
        V::S(String::from_utf8(take(b, at, n).to_vec()).expect("UTF-8 string"))
    };
    match tag {
        0x00..=0x7f => V::U(u64::from(tag)),
        0x80..=0x8f => map(b, at, usize::from(tag & 0x0f)),
        0x90..=0x9f => array(b, at, usize::from(tag & 0x0f)),
        0xa0..=0xbf => text(b, at, usize::from(tag & 0x1f)),
        0xc0 => V::Nil,
        0xc2 => V::Bool(false),
        0xc3 => V::Bool(true),
        0xcc => V::U(be(b, at, 1)),
        0xcd => V::U(be(b, at, 2)),
        0xce => V::U(be(b, at, 4)),
        0xcf => V::U(be(b, at, 8)),
        0xd0 => V::I(i64::from(take(b, at, 1)[0] as i8)),
        0xd1 => V::I(i64::from(be(b, at, 2) as u16 as i16)),
        0xd2 => V::I(i64::from(be(b, at, 4) as u32 as i32)),
        0xd3 => V::I(be(b, at, 8) as i64),
        0xd9 => {
            let n = be(b, at, 1) as usize;
            text(b, at, n)
        }
        0xda => {
            let n = be(b, at, 2) as usize;
            text(b, at, n)
        }
        0xdb => {
            let n = be(b, at, 4) as usize;
            text(b, at, n)
        }
        0xdc => {
            let n = be(b, at, 2) as usize;
            array(b, at, n)
        }
        0xde => {
            let n = be(b, at, 2) as usize;
            map(b, at, n)
        }
        0xe0..=0xff => V::I(i64::from(tag as i8)),
        other => panic!("msgpack tag {other:#x} is not expected in a KV event"),
    }
}

fn array(b: &[u8], at: &mut usize, n: usize) -> V {
    V::A((0..n).map(|_| value(b, at)).collect())
}

fn map(b: &[u8], at: &mut usize, n: usize) -> V {
    V::M(
        (0..n)
            .map(|_| match value(b, at) {
                V::S(k) => (k, value(b, at)),
                other => panic!("map key {other:?} is not a string"),
            })
            .collect(),
    )
}

/// One published message: sequence number, timestamp and events.
#[derive(Debug, Clone)]
pub struct Batch {
    pub seq: u64,
    pub timestamp: u64,
    pub events: Vec<V>,
}

impl Batch {
    /// Checks the frame layout (empty topic, 8-byte big-endian sequence, payload
    /// `[int ms, [maps], 0]`) and decodes it.
    pub fn parse(frames: &[Vec<u8>]) -> Batch {
        assert_eq!(frames.len(), 3, "three frames");
        assert!(frames[0].is_empty(), "empty topic");
        let seq: [u8; 8] = frames[1].as_slice().try_into().expect("8-byte sequence");
        let payload = decode(&frames[2]);
        let parts = payload.array();
        assert_eq!(parts.len(), 3, "[timestamp, events, dp_rank]");
        assert_eq!(parts[2], V::U(0), "batch dp_rank");
        Batch {
            seq: u64::from_be_bytes(seq),
            timestamp: parts[0].uint(),
            events: parts[1].array().to_vec(),
        }
    }
}

/// A ZMTP 3.1 SUB socket connected to a publisher.
pub struct Sub {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Sub {
    /// Connects and completes the NULL handshake (checking the publisher says PUB).
    pub fn connect(addr: SocketAddr) -> Sub {
        let stream = TcpStream::connect(addr).expect("connecting to the publisher");
        stream.set_read_timeout(Some(READ_DEADLINE)).unwrap();
        let mut greeting = [0u8; 64];
        greeting[0] = 0xff;
        greeting[9] = 0x7f;
        greeting[10] = 3;
        greeting[11] = 1;
        greeting[12..16].copy_from_slice(b"NULL");
        (&stream).write_all(&greeting).unwrap();
        (&stream)
            .write_all(&command(b"READY", &ready_metadata()))
            .unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut theirs = [0u8; 64];
        reader.read_exact(&mut theirs).unwrap();
        assert_eq!((theirs[0], theirs[9], theirs[10]), (0xff, 0x7f, 3));
        assert_eq!(&theirs[12..32], b"NULL\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0");
        let (is_command, _, body) = read_frame(&mut reader);
        assert!(is_command);
        let expect = [
            &[5][..],
            b"READY",
            &[11],
            b"Socket-Type",
            &[0, 0, 0, 3],
            b"PUB",
        ]
        .concat();
        assert_eq!(body, expect, "the publisher's READY");
        Sub { stream, reader }
    }

    /// Subscribes to every topic (a ZMTP 3.1 SUBSCRIBE command with an empty prefix).
    pub fn subscribe_all(&self) {
        (&self.stream)
            .write_all(&command(b"SUBSCRIBE", b""))
            .unwrap();
    }

    /// Sends a PING and waits for its PONG: every subscription sent before is in
    /// effect once this returns (the publisher handles a peer's commands in order).
    pub fn sync(&mut self) {
        (&self.stream)
            .write_all(&command(b"PING", b"\x00\x00sync"))
            .unwrap();
        let (is_command, _, body) = read_frame(&mut self.reader);
        assert!(is_command, "a message before the PONG");
        assert_eq!(body, [&[4][..], b"PONG", b"sync"].concat());
    }

    /// The next message, waiting at most `wait` for it to start; `None` if none came.
    pub fn try_recv(&mut self, wait: Duration) -> Option<Batch> {
        self.stream.set_read_timeout(Some(wait)).unwrap();
        let ready = match self.reader.fill_buf() {
            Ok(buf) => !buf.is_empty(),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                false
            }
            Err(e) => panic!("reading from the publisher: {e}"),
        };
        self.stream.set_read_timeout(Some(READ_DEADLINE)).unwrap();
        ready.then(|| self.recv())
    }

    /// The next message.
    pub fn recv(&mut self) -> Batch {
        let mut frames = Vec::new();
        loop {
            let (is_command, more, body) = read_frame(&mut self.reader);
            assert!(!is_command, "a command in the message stream");
            frames.push(body);
            if !more {
                return Batch::parse(&frames);
            }
        }
    }
}

fn ready_metadata() -> Vec<u8> {
    [&[11][..], b"Socket-Type", &[0, 0, 0, 3], b"SUB"].concat()
}

fn command(name: &[u8], data: &[u8]) -> Vec<u8> {
    let body = [&[name.len() as u8][..], name, data].concat();
    assert!(body.len() < 256);
    [&[0x04, body.len() as u8][..], &body].concat()
}

/// Reads one frame: (is a command, MORE, body).
fn read_frame(r: &mut BufReader<TcpStream>) -> (bool, bool, Vec<u8>) {
    let mut flags = [0u8; 1];
    r.read_exact(&mut flags).expect("frame flags");
    let flags = flags[0];
    assert_eq!(flags & 0xf8, 0, "reserved flag bits");
    let len = if flags & 0x02 != 0 {
        let mut b = [0u8; 8];
        r.read_exact(&mut b).unwrap();
        u64::from_be_bytes(b) as usize
    } else {
        let mut b = [0u8; 1];
        r.read_exact(&mut b).unwrap();
        usize::from(b[0])
    };
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).expect("frame body");
    (flags & 0x04 != 0, flags & 0x01 != 0, body)
}

/// What a test expects of one event; the rest of the map follows from the shape.
#[derive(Debug, Clone)]
pub struct Expect<'a> {
    /// `stored` (else `removed`).
    pub stored: bool,
    pub key: &'a str,
    /// The hash the key stands for.
    pub hash: Option<u64>,
    /// The group id ("" for none).
    pub group: &'a str,
}

/// The publisher's switches and identity.
#[derive(Debug, Clone)]
pub struct Shape {
    pub backend: String,
    pub legacy: bool,
    pub object_key: bool,
}

/// The whole map upstream writes for `e`, with its `id` and the batch's `timestamp`:
/// every key in order, nil where upstream writes nil, absent where it writes nothing.
pub fn expected_map(e: &Expect<'_>, id: u64, timestamp: u64, shape: &Shape) -> V {
    let s = |t: &str| V::S(t.to_string());
    let mut m: Vec<(&str, V)> = vec![
        ("event_id", V::U(id)),
        ("timestamp", V::U(timestamp)),
        ("event_type", s(if e.stored { "stored" } else { "removed" })),
    ];
    if shape.legacy {
        m.push((
            "type",
            s(if e.stored {
                "BlockStored"
            } else {
                "BlockRemoved"
            }),
        ));
    }
    for k in ["model_name", "block_size", "additional_salt", "lora_name"] {
        m.push((k, V::Nil));
    }
    m.push(("tenant_id", s("default")));
    m.push(("backend_id", s(&shape.backend)));
    m.push((
        "group_id",
        if e.group.is_empty() {
            V::Nil
        } else {
            s(e.group)
        },
    ));
    m.push(("medium", s("cpu")));
    m.push(("dp_rank", V::Nil));
    if shape.object_key {
        m.push(("object_key", s(e.key)));
    }
    m.push(("seq_hashes", V::A(e.hash.map(V::U).into_iter().collect())));
    if shape.legacy {
        let signed = e.hash.map(|h| {
            if h > i64::MAX as u64 {
                V::I(h as i64)
            } else {
                V::U(h)
            }
        });
        m.push(("block_hashes", V::A(signed.into_iter().collect())));
    }
    if e.stored {
        m.push(("base_block_idx", V::U(0)));
        m.push(("parent_hash", V::Nil));
        m.push(("token_ids", V::Nil));
        if shape.legacy {
            m.push(("parent_block_hash", V::Nil));
        }
    } else {
        m.push(("base_block_idx", V::Nil));
    }
    V::M(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
