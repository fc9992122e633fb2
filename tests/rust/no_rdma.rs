//! A host without rdma-core, simulated with `MC_IBVERBS_LIBRARY` pointing at nothing:
//! the library still loads and works over TCP, auto-discovery installs TCP, and asking
//! for RDMA fails with the reason in the thread's last error (never a crash); under
//! `MC_FORCE_TCP` asking for RDMA installs TCP.

use mooncake::ffi::ext::mooncake_last_error_message;
use mooncake::ffi::te::engine::{createTransferEngine, destroyTransferEngine, installTransport};
use mooncake::te::{Op, TaskStatus, TransferEngine, TransferRequest};
use std::ffi::CStr;
use std::time::{Duration, Instant};

#[test]
fn without_libibverbs_engines_fall_back_to_tcp() {
    // No other test of this binary loads verbs: nothing has loaded them yet.
    std::env::set_var("MC_IBVERBS_LIBRARY", "/nonexistent/libibverbs.so.1");
    std::env::set_var("MC_TCP_BIND_ADDRESS", "127.0.0.1");

    // SAFETY: NUL-terminated strings; the handle is destroyed once.
    unsafe {
        let e = createTransferEngine(
            c"P2PHANDSHAKE".as_ptr(),
            c"127.0.0.1".as_ptr(),
            c"".as_ptr(),
            0,
            0,
        );
        assert!(!e.is_null());
        let t = installTransport(e, c"rdma".as_ptr(), std::ptr::null_mut());
        assert!(t.is_null(), "rdma installed without libibverbs");
        let why = CStr::from_ptr(mooncake_last_error_message())
            .to_string_lossy()
            .into_owned();
        assert!(why.contains("libibverbs"), "last error: {why}");
        assert!(!installTransport(e, c"tcp".as_ptr(), std::ptr::null_mut()).is_null());
        destroyTransferEngine(e);
    }

    let target = TransferEngine::new("P2PHANDSHAKE", "127.0.0.1:0", true).unwrap();
    let initiator = TransferEngine::new("P2PHANDSHAKE", "127.0.0.1:0", true).unwrap();
    assert!(target.has_transport("tcp") && !target.has_transport("rdma"));
    let mut remote = vec![0u8; 1 << 20];
    let local: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    target
        .register_memory(remote.as_mut_ptr() as u64, 1 << 20, "cpu:0", true)
        .unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    let batch = initiator.allocate_batch(1);
    initiator
        .submit(
            batch,
            &[TransferRequest {
                op: Op::Write,
                source: local.as_ptr() as u64,
                target_id: id,
                target_offset: remote.as_ptr() as u64,
                length: 1 << 20,
            }],
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let (s, _) = initiator.transfer_status(batch, 0).unwrap();
        if s.is_terminal() || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(status, TaskStatus::Completed);
    initiator.free_batch(batch).unwrap();
    assert_eq!(remote, local);
}

/// Under `MC_FORCE_TCP`, asking for RDMA by name installs TCP, as upstream's variable
/// says ("TCP as the active transport regardless"), so programs that always install
/// RDMA run over TCP.
#[test]
fn force_tcp_installs_tcp_where_rdma_is_asked_for() {
    let config = mooncake::config::Config {
        force_tcp: true,
        ..mooncake::config::Config::default()
    };
    let engine = TransferEngine::with_config(config, "P2PHANDSHAKE", "127.0.0.1", false).unwrap();
    engine
        .install("rdma", Some(r#"{"cpu:0": [["mlx5_2"], []]}"#))
        .unwrap();
    assert!(engine.has_transport("tcp") && !engine.has_transport("rdma"));
}
