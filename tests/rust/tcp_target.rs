//! The TCP data plane seen from a raw socket: byte-exact replies, address
//! validation (including regions registered as not remotely accessible), and
//! hostile peers that fail only their own connection. Also v1 framing end to end.

use mooncake::config::Config;
use mooncake::te::{Op, TaskStatus, TransferEngine, TransferRequest};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const OK: [u8; 8] = [0, 0, 0, 0, 0x56, 0x54, 0x43, 0x4D];
const REJECT: [u8; 8] = [1, 0, 0, 0, 0x56, 0x54, 0x43, 0x4D];

fn header(size: u64, addr: u64, opcode: u8) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[..8].copy_from_slice(&size.to_le_bytes());
    h[8..16].copy_from_slice(&addr.to_le_bytes());
    h[16] = opcode;
    h
}

struct Target {
    engine: TransferEngine,
    mem: Vec<u8>,
    private: Vec<u8>,
    port: u16,
}

fn target() -> Target {
    let engine = TransferEngine::new("P2PHANDSHAKE", "127.0.0.1", true).unwrap();
    let mut mem = vec![0u8; 1 << 20];
    let mut private = vec![0u8; 4096];
    engine
        .register_memory(mem.as_mut_ptr() as u64, 1 << 20, "cpu:0", true)
        .unwrap();
    engine
        .register_memory(private.as_mut_ptr() as u64, 4096, "cpu:0", false)
        .unwrap();
    let port = engine.segment_descriptor(0).unwrap().tcp_data_port;
    Target {
        engine,
        mem,
        private,
        port,
    }
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Sends a v2 write of `data` to `addr` and reads the 8-byte answer.
fn write(s: &mut TcpStream, addr: u64, data: &[u8]) -> [u8; 8] {
    s.write_all(&header(data.len() as u64, addr, 0x81)).unwrap();
    s.write_all(data).unwrap();
    let mut answer = [0u8; 8];
    s.read_exact(&mut answer).unwrap();
    answer
}

/// Whether the peer closed the connection (after whatever it still had to say).
fn closed(s: &mut TcpStream) -> bool {
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).is_ok() && rest.len() <= 8
}

#[test]
fn v2_write_ack_and_read_reply_are_byte_exact() {
    let t = target();
    let base = t.mem.as_ptr() as u64;
    let mut s = connect(t.port);
    assert_eq!(write(&mut s, base + 8, b"abcd"), OK);
    assert_eq!(&t.mem[8..12], b"abcd");
    s.write_all(&header(4, base + 8, 0x80)).unwrap();
    let mut reply = [0u8; 12];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[..8], &OK);
    assert_eq!(&reply[8..], b"abcd");
    // v1 read on the same connection, then an unknown opcode served as a read.
    s.write_all(&header(2, base + 9, 0x00)).unwrap();
    let mut two = [0u8; 2];
    s.read_exact(&mut two).unwrap();
    assert_eq!(&two, b"bc");
    s.write_all(&header(1, base + 8, 0x85)).unwrap();
    let mut r = [0u8; 9];
    s.read_exact(&mut r).unwrap();
    assert_eq!((&r[..8], r[8]), (&OK[..], b'a'));
    drop(t.engine);
}

#[test]
fn rejects_outside_zero_size_and_private_regions() {
    let t = target();
    let base = t.mem.as_ptr() as u64;
    let private = t.private.as_ptr() as u64;
    for (size, addr, op) in [
        (16u64, base + (1 << 20) - 8, 0x81u8),
        (0, base, 0x80),
        (16, private, 0x81),
        (16, private, 0x80),
        (u64::MAX, base, 0x81),
        (16, u64::MAX - 4, 0x80),
        (16, 0x10, 0x81),
    ] {
        let mut s = connect(t.port);
        s.write_all(&header(size, addr, op)).unwrap();
        let mut reply = [0u8; 8];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(reply, REJECT, "size {size} addr {addr:#x}");
        assert!(closed(&mut s));
    }
    assert!(t.private.iter().all(|b| *b == 0));
    // v1 rejection is a silent close.
    let mut s = connect(t.port);
    s.write_all(&header(16, 0x10, 0x01)).unwrap();
    assert!(closed(&mut s));
}

#[test]
fn hostile_peers_fail_only_their_connection() {
    let t = target();
    let base = t.mem.as_ptr() as u64;
    let mut garbage = connect(t.port);
    garbage.write_all(&[0xff; 100]).unwrap();
    // A peer that hangs up mid-write may leave part of its own range written (as
    // upstream does); it targets bytes the good request below does not touch.
    let mut half = connect(t.port);
    half.write_all(&header(1 << 16, base + 4096, 0x81)).unwrap();
    half.write_all(&[7u8; 1000]).unwrap();
    drop(half);
    let mut partial_header = connect(t.port);
    partial_header.write_all(&[1, 2, 3]).unwrap();

    let mut good = connect(t.port);
    assert_eq!(write(&mut good, base + 100, b"xyz"), OK);
    assert_eq!(&t.mem[100..103], b"xyz");
    assert!(closed(&mut garbage));
}

#[test]
fn unregister_waits_and_then_rejects() {
    let t = target();
    let base = t.mem.as_ptr() as u64;
    t.engine.unregister_memory(base).unwrap();
    let mut s = connect(t.port);
    s.write_all(&header(4, base, 0x81)).unwrap();
    let mut reply = [0u8; 8];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(reply, REJECT);
}

#[test]
fn v1_framing_end_to_end_confirms_writes() {
    let t = target();
    let cfg = Config {
        tcp_force_v1: true,
        ..Config::default()
    };
    let initiator = TransferEngine::with_config(cfg, "P2PHANDSHAKE", "127.0.0.1", true).unwrap();
    let id = initiator.open_segment(t.engine.segment_name()).unwrap();
    let src: Vec<u8> = (0..256 * 1024).map(|i| (i % 253) as u8).collect();
    let mut dst = vec![0u8; 256 * 1024];
    let base = t.mem.as_ptr() as u64;
    let reqs = [
        TransferRequest {
            op: Op::Write,
            source: src.as_ptr() as u64,
            target_id: id,
            target_offset: base,
            length: src.len() as u64,
        },
        TransferRequest {
            op: Op::Write,
            source: src.as_ptr() as u64,
            target_id: id,
            target_offset: base + (1 << 20) - 4,
            length: 8,
        },
    ];
    let batch = initiator.allocate_batch(3);
    initiator.submit(batch, &reqs).unwrap();
    let wait = |task| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (s, _) = initiator.transfer_status(batch, task).unwrap();
            if s.is_terminal() || Instant::now() > deadline {
                return s;
            }
            std::thread::yield_now();
        }
    };
    assert_eq!(wait(0), TaskStatus::Completed);
    assert_eq!(
        &t.mem[..src.len()],
        &src[..],
        "COMPLETED means the bytes landed"
    );
    assert_eq!(wait(1), TaskStatus::Failed);
    let read = TransferRequest {
        op: Op::Read,
        source: dst.as_mut_ptr() as u64,
        target_id: id,
        target_offset: base,
        length: dst.len() as u64,
    };
    initiator.submit(batch, &[read]).unwrap();
    assert_eq!(wait(2), TaskStatus::Completed);
    assert_eq!(dst, src);
}
