//! Interop with the upstream Mooncake 0.3.13 peer over P2PHANDSHAKE (no metadata
//! server): descriptors travel over the RPC daemon, data over TCP v2. Needs the peer
//! from `bash scripts/upstream-peer.sh`; `MOONCAKE_SKIP_INTEROP=1` skips.

mod interop_common;

use interop_common::scenarios;
use interop_common::*;

/// Our initiator -> upstream python target: write/read verified byte for byte,
/// rejected out-of-range requests FAILED, the engine keeps working.
#[test]
fn p2p_rust_initiator_to_upstream_target() {
    let Some(peer) = peer("p2p_rust_initiator_to_upstream_target") else {
        return;
    };
    let ours = our_p2p_engine();
    scenarios::rust_initiator_to_upstream_target(&peer, "P2PHANDSHAKE", "127.0.0.1", &ours);
}

/// Upstream `transfer_engine_bench` initiator (write, then read) -> our target.
#[test]
fn p2p_upstream_bench_initiator_to_rust_target() {
    let Some(peer) = peer("p2p_upstream_bench_initiator_to_rust_target") else {
        return;
    };
    let ours = our_p2p_engine();
    // In P2P mode only the host part of the bench's name is used.
    scenarios::bench_against_rust_target(
        &peer,
        "P2PHANDSHAKE",
        |_| "127.0.0.1:12346".into(),
        &ours,
    );
}

/// Upstream python initiator -> our target: sync/batch writes and reads verified on
/// both sides, rejected requests, probe, and notifies both ways.
#[test]
fn p2p_upstream_python_initiator_to_rust_target() {
    let Some(peer) = peer("p2p_upstream_python_initiator_to_rust_target") else {
        return;
    };
    let ours = our_p2p_engine();
    scenarios::python_initiator_to_rust_target(&peer, "P2PHANDSHAKE", "127.0.0.1", &ours);
}

/// A TENT-API engine (ours, `tent/transfer_engine.h`) and upstream's classic engine
/// (its Python `TransferEngine`) over P2PHANDSHAKE: ours writes into upstream's buffer
/// and reads it back, upstream writes into our TENT segment and reads from it, a
/// notification goes each way; every byte is checked on both sides.
#[test]
fn p2p_tent_engine_and_upstream_classic_engine() {
    use mooncake::ffi::tent::{batch::*, engine::*, memory::*, notify::*, segment::*};
    use mooncake::ffi::tent_types::*;
    use std::ffi::{c_char, CStr, CString};
    let Some(peer) = peer("p2p_tent_engine_and_upstream_classic_engine") else {
        return;
    };
    let size: u64 = 1 << 20;
    let mut py = PyEngine::start(&peer, "P2PHANDSHAKE", "127.0.0.1", size, 0x21);
    let (pa, ps) = (py.info.addr, py.info.size);
    assert_eq!(ps, size);

    let key = |k: &str| CString::new(k).unwrap();
    // SAFETY: NUL-terminated strings that outlive each call; outputs are local
    // variables; the memory registered stays mapped until freed below.
    unsafe {
        mooncake::ffi::tent::config::tent_set_config(
            key("metadata_type").as_ptr(),
            key("p2p").as_ptr(),
        );
        mooncake::ffi::tent::config::tent_set_config(
            key("rpc_server_hostname").as_ptr(),
            key("127.0.0.1").as_ptr(),
        );
        let e = tent_create_engine();
        assert!(!e.is_null(), "tent_create_engine failed");
        let mut name = [0 as c_char; 128];
        assert_eq!(tent_segment_name(e, name.as_mut_ptr(), name.len()), 0);
        let our_name = CStr::from_ptr(name.as_ptr()).to_str().unwrap().to_string();

        let mut buf: *mut std::ffi::c_void = std::ptr::null_mut();
        let cpu = key("cpu");
        assert_eq!(
            tent_allocate_memory(e, &mut buf, 2 * size as usize, cpu.as_ptr()),
            0
        );
        assert_eq!(tent_register_memory(e, buf, 2 * size as usize), 0);
        let ours = std::slice::from_raw_parts_mut(buf.cast::<u8>(), 2 * size as usize);
        ours[..size as usize].copy_from_slice(&pattern(size as usize, 0x42));

        let mut seg: tent_segment_id_t = 0;
        let py_name = key(&py.info.segment);
        assert_eq!(tent_open_segment(e, &mut seg, py_name.as_ptr()), 0);
        assert_ne!(seg, 0);
        let run = |op: i32, local: u64, remote: u64, len: u64| {
            let batch = tent_allocate_batch(e, 1);
            let mut r = tent_request {
                opcode: op,
                source: local as *mut std::ffi::c_void,
                target_id: seg,
                target_offset: remote,
                length: len,
                priority: 0,
                transport_hint: TRANSPORT_UNSPEC,
            };
            assert_eq!(tent_submit(e, batch, &mut r, 1), 0);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            let mut st = tent_status::default();
            loop {
                assert_eq!(tent_overall_status(e, batch, &mut st), 0);
                if st.status == STATUS_COMPLETED || st.status == STATUS_FAILED {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "transfer never finished"
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            assert_eq!(tent_free_batch(e, batch), 0);
            st.status
        };
        // Ours -> upstream: write the whole buffer, check it there, read it back.
        let base = buf as u64;
        assert_eq!(
            run(OPCODE_WRITE, base, pa, size),
            STATUS_COMPLETED,
            "{}",
            py.log_tail()
        );
        assert_eq!(py.dump(0, size), pattern(size as usize, 0x42));
        assert_eq!(run(OPCODE_READ, base + size, pa, size), STATUS_COMPLETED);
        assert_eq!(&ours[size as usize..], &pattern(size as usize, 0x42)[..]);

        // Upstream -> our TENT segment: a write of its own pattern, then a read.
        py.cmd(&format!("pattern 0 {size} 7"));
        let rc = py.rc(&format!("write {our_name} 0 {} {size}", base + size));
        assert_eq!(rc, 0, "{}", py.log_tail());
        assert_eq!(&ours[size as usize..], &pattern(size as usize, 7)[..]);
        let rc = py.rc(&format!("read {our_name} 0 {base} {size}"));
        assert_eq!(rc, 0);
        assert_eq!(py.dump(0, size), pattern(size as usize, 0x42));

        // Notifications both ways.
        let (n, m) = (key("from-tent"), key("hi"));
        assert_eq!(tent_send_notifs(e, seg, n.as_ptr(), m.as_ptr()), 0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !py
            .notifies()
            .iter()
            .any(|(a, b)| a == "from-tent" && b == "hi")
        {
            assert!(
                std::time::Instant::now() < deadline,
                "upstream never got the notify"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let rc = py.rc(&format!(
            "write_notify {our_name} 0 {base} 16 from-upstream hello"
        ));
        assert_eq!(rc, 0);
        let mut got = false;
        while !got {
            let mut info = tent_notifi_info {
                num_records: 0,
                records: std::ptr::null_mut(),
            };
            assert_eq!(tent_recv_notifs(e, &mut info), 0);
            for i in 0..info.num_records as usize {
                let r = &*info.records.add(i);
                got |= CStr::from_ptr(r.name.as_ptr()).to_str() == Ok("from-upstream")
                    && CStr::from_ptr(r.msg.as_ptr()).to_str() == Ok("hello");
            }
            tent_free_notifs(&mut info);
            assert!(
                std::time::Instant::now() < deadline,
                "the TENT engine never got the notify"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }

        assert_eq!(tent_unregister_memory(e, buf, 0), 0);
        assert_eq!(tent_free_memory(e, buf), 0);
        tent_destroy_engine(e);
    }
}
