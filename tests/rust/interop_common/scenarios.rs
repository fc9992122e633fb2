//! The interop scenarios, each run in P2PHANDSHAKE and HTTP-metadata variants by
//! `interop_p2p.rs` and `interop_http.rs`.

use super::*;
use mooncake::te::Op::{Read, Write};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

/// Applies `data` at `off` in a byte model.
fn apply(model: &mut [u8], off: u64, data: &[u8]) {
    model[off as usize..off as usize + data.len()].copy_from_slice(data);
}

fn slice(model: &[u8], off: u64, len: u64) -> &[u8] {
    &model[off as usize..(off + len) as usize]
}

/// Our initiator -> upstream python target (`peer_engine.py`).
///
/// Proves: our engine opens an upstream segment (descriptor decoded: name, protocol,
/// the one buffer's addr/length), writes and reads it over TCP v2 at odd sizes and
/// offsets including the buffer's last byte, with the whole upstream buffer verified
/// byte for byte after every phase; requests the upstream target rejects (past the end,
/// straddling either end, a wild address; write and read) finish FAILED without touching
/// either side's memory; a batch mixing rejected and valid requests fails only the
/// rejected one; the same engine keeps completing valid transfers afterwards; our
/// `probe` reaches upstream's RPC daemon; and `submit_with_notify` delivers its notify
/// to upstream's `get_notifies()` once the batch completed.
pub fn rust_initiator_to_upstream_target(
    peer: &Peer,
    metadata: &str,
    py_hostname: &str,
    ours: &TransferEngine,
) {
    let py_size = MIB;
    let mut py = PyEngine::start(peer, metadata, py_hostname, py_size, 0x11);
    let (pa, ps) = (py.info.addr, py.info.size);
    assert_eq!(ps, py_size);
    let mut remote_model = pattern(py_size as usize, 0x11);

    let local = Region::with_pattern((2 * MIB) as usize, 0x5a);
    let mut local_model = local.read(0, local.len());
    ours.register_memory(local.addr(), local.len(), "cpu:0", true)
        .expect("register local memory");
    let la = local.addr();

    let id = ours
        .open_segment(&py.info.segment)
        .expect("open the upstream segment");
    assert_ne!(id, 0, "a remote segment must not get the local id");
    let desc = ours
        .segment_descriptor(id)
        .expect("descriptor of the opened segment");
    assert_eq!(desc.name, py.info.segment);
    assert_eq!(desc.protocol, protocol());
    assert!(
        desc.buffers.iter().any(|b| b.addr == pa && b.length == ps),
        "upstream buffer {pa:#x}+{ps} missing from {:?}",
        desc.buffers
    );
    if protocol() == "tcp" {
        assert!(desc.tcp_data_port != 0);
    } else {
        let rdma = desc.rdma.as_ref().expect("an RDMA descriptor");
        assert_eq!(rdma.devices[0].name, rdma_device().unwrap());
    }

    // Writes: (remote offset, local offset, length); disjoint remote ranges, the last
    // one ending exactly at the upstream buffer's end.
    let writes = [
        (0, 0, 1),
        (100, 1000, 4 * KIB - 7),
        (8 * KIB, 50_000, 64 * KIB + 13),
        (200_000, 300_000, 300_001),
        (py_size - 4 * KIB, 7, 4 * KIB),
    ];
    let reqs: Vec<_> = writes
        .iter()
        .map(|&(ro, lo, n)| req(Write, la + lo, id, pa + ro, n))
        .collect();
    let st = run_batch(ours, &reqs);
    assert!(
        st.iter().all(|s| *s == TaskStatus::Completed),
        "writes to upstream: {st:?}\n{}",
        py.log_tail()
    );
    for &(ro, lo, n) in &writes {
        let data = slice(&local_model, lo, n).to_vec();
        apply(&mut remote_model, ro, &data);
    }
    assert_bytes_eq(
        &py.dump(0, py_size),
        &remote_model,
        "upstream buffer after our writes",
    );

    // Reads: fresh known content on the upstream side, read into disjoint local ranges.
    py.cmd(&format!("pattern 0 {py_size} 34"));
    remote_model = pattern(py_size as usize, 34);
    let reads = [
        (0, 0, 1),
        (3 * 4096 + 5, 1_000_000, 70_000),
        (py_size - 64 * KIB, 1_500_000, 64 * KIB),
        (300_000, 400_000, 500_000),
    ];
    let reqs: Vec<_> = reads
        .iter()
        .map(|&(ro, lo, n)| req(Read, la + lo, id, pa + ro, n))
        .collect();
    let st = run_batch(ours, &reqs);
    assert!(
        st.iter().all(|s| *s == TaskStatus::Completed),
        "reads from upstream: {st:?}\n{}",
        py.log_tail()
    );
    for &(ro, lo, n) in &reads {
        let data = slice(&remote_model, ro, n).to_vec();
        apply(&mut local_model, lo, &data);
    }
    assert_bytes_eq(
        &local.read(0, local.len()),
        &local_model,
        "our buffer after reads",
    );

    // Rejected by the upstream target: each alone in its own batch.
    let rejected = [
        req(Write, la, id, pa + ps, 4 * KIB),        // just past the end
        req(Write, la, id, pa + ps - 100, 4 * KIB),  // straddles the end
        req(Write, la, id, 16, 8),                   // wild address
        req(Read, la + 4096, id, pa - 16, 64),       // straddles the start
        req(Read, la + 4096, id, pa + ps, 64 * KIB), // past the end
    ];
    for r in &rejected {
        let st = run_batch(ours, std::slice::from_ref(r));
        assert_eq!(
            st,
            vec![TaskStatus::Failed],
            "out-of-range request {r:?} must fail\n{}",
            py.log_tail()
        );
    }
    assert_bytes_eq(
        &py.dump(0, py_size),
        &remote_model,
        "upstream buffer after rejected requests",
    );
    assert_bytes_eq(
        &local.read(0, local.len()),
        &local_model,
        "our buffer after rejected reads",
    );

    // A batch mixing valid and rejected requests: only the rejected one fails.
    let mixed = [
        req(Write, la + 10, id, pa + 4096, 8 * KIB),
        req(Write, la, id, pa + ps - 10, 20),
        req(Read, la + 1_800_000, id, pa + 600_000, 100_000),
        req(Read, la, id, pa + ps, 1),
        req(Write, la + 77, id, pa + 900_000, 33),
    ];
    let st = run_batch(ours, &mixed);
    assert_eq!(
        st,
        vec![
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Completed
        ],
        "mixed batch\n{}",
        py.log_tail()
    );
    let d = slice(&local_model, 10, 8 * KIB).to_vec();
    apply(&mut remote_model, 4096, &d);
    let d = slice(&local_model, 77, 33).to_vec();
    apply(&mut remote_model, 900_000, &d);
    let d = slice(&remote_model, 600_000, 100_000).to_vec();
    apply(&mut local_model, 1_800_000, &d);
    assert_bytes_eq(
        &py.dump(0, py_size),
        &remote_model,
        "upstream buffer after the mixed batch",
    );
    assert_bytes_eq(
        &local.read(0, local.len()),
        &local_model,
        "our buffer after the mixed batch",
    );

    // The same engine still completes ordinary transfers afterwards.
    let fresh = pattern(128 * KIB as usize, 0x77);
    local.write(0, &fresh);
    apply(&mut local_model, 0, &fresh);
    let st = run_batch(ours, &[req(Write, la, id, pa + 100_000, 128 * KIB)]);
    assert_eq!(
        st,
        vec![TaskStatus::Completed],
        "write after rejections\n{}",
        py.log_tail()
    );
    apply(&mut remote_model, 100_000, &fresh);
    let st = run_batch(ours, &[req(Read, la + MIB, id, pa + 500, 4 * KIB)]);
    assert_eq!(
        st,
        vec![TaskStatus::Completed],
        "read after rejections\n{}",
        py.log_tail()
    );
    let d = slice(&remote_model, 500, 4 * KIB).to_vec();
    apply(&mut local_model, MIB, &d);

    // Our probe reaches upstream's RPC daemon; a batch submitted with a notify
    // delivers it to upstream's get_notifies() once complete.
    ours.probe(&py.info.segment)
        .expect("probe of the upstream engine");
    let st = run_batch_notify(
        ours,
        &[req(Write, la + 5, id, pa + 700_000, 4 * KIB)],
        "rust-batch",
        "batch-done",
    );
    assert_eq!(
        st,
        vec![TaskStatus::Completed],
        "write with notify\n{}",
        py.log_tail()
    );
    let d = slice(&local_model, 5, 4 * KIB).to_vec();
    apply(&mut remote_model, 700_000, &d);
    let mut got = Vec::new();
    poll_until(
        Duration::from_secs(20),
        "our batch notify at upstream",
        || {
            got.extend(py.notifies());
            got.iter()
                .any(|(n, m)| n == "rust-batch" && m == "batch-done")
                .then_some(())
        },
    );
    assert_bytes_eq(
        &py.dump(0, py_size),
        &remote_model,
        "upstream buffer at the end",
    );
    assert_bytes_eq(
        &local.read(0, local.len()),
        &local_model,
        "our buffer at the end",
    );

    py.quit();
    ours.unregister_memory(la).expect("unregister");
}

/// Upstream `transfer_engine_bench --mode=initiator` (TCP or RDMA) against our target,
/// for `write` and `read`. Proves upstream's C++ initiator decodes our published
/// descriptor (P2P: over RPC type 1; HTTP: from the metadata server, plus our rpc_meta /
/// tcp_data_host), and that every one of its v2 requests, with the last block ending
/// exactly at our buffer's end, completes (the bench exit(1)s on any FAILED task).
pub fn bench_against_rust_target(
    peer: &Peer,
    metadata: &str,
    bench_name: impl Fn(&str) -> String,
    ours: &TransferEngine,
) {
    let target = Region::with_pattern(BENCH_TARGET_BYTES as usize, 0x21);
    ours.register_memory(target.addr(), target.len(), "cpu:0", true)
        .expect("register");
    for op in ["write", "read"] {
        let (status, out) =
            run_bench_initiator(peer, metadata, &bench_name(op), ours.segment_name(), op);
        let status = status
            .unwrap_or_else(|| panic!("bench --operation={op} did not finish in time\n{out}"));
        assert!(
            status.success(),
            "bench --operation={op} exited with {status}\n{out}"
        );
        let line = out
            .lines()
            .find(|l| l.contains("Test completed"))
            .unwrap_or_else(|| panic!("bench --operation={op}: no 'Test completed'\n{out}"));
        let batches: u64 = line
            .split("batch count ")
            .nth(1)
            .and_then(|s| s.split(',').next())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| panic!("cannot parse the batch count in {line:?}"));
        assert!(
            batches > 0,
            "bench --operation={op} completed no batch: {line}"
        );
    }
    ours.unregister_memory(target.addr()).expect("unregister");
}

/// Upstream python `TransferEngine` as initiator -> our target.
///
/// Proves: upstream decodes our descriptor (`get_first_buffer_address` == our buffer);
/// `transfer_sync_write` / `transfer_sync_read` / `batch_transfer_sync_write` /
/// `batch_transfer_sync_read` against our memory move exactly the right bytes in both
/// directions (our whole buffer and the whole python buffer verified after each step),
/// including a transfer ending at our buffer's last byte; out-of-range writes and reads
/// return non-zero and leave both sides unchanged; valid transfers still work after
/// them; `send_probe` to our engine returns 0; a notify from our engine reaches
/// upstream's `get_notifies()`; and a notify attached by upstream to a transfer
/// (`transfer_sync(..., notify)`) reaches our `take_notifies()`.
pub fn python_initiator_to_rust_target(
    peer: &Peer,
    metadata: &str,
    py_hostname: &str,
    ours: &TransferEngine,
) {
    let size = 2 * MIB;
    let target = Region::with_pattern(size as usize, 0x33);
    let ta = target.addr();
    let mut model = target.read(0, size);
    ours.register_memory(ta, size, "cpu:0", true)
        .expect("register our buffer");
    let seg = ours.segment_name().to_string();

    let py_size = MIB;
    let mut py = PyEngine::start(peer, metadata, py_hostname, py_size, 0x44);
    let mut py_model = pattern(py_size as usize, 0x44);

    let v = py.cmd(&format!("first_buffer {seg}"));
    assert_eq!(
        v["addr"].as_u64(),
        Some(ta),
        "upstream's view of our first buffer\n{}",
        py.log_tail()
    );

    // transfer_sync_write: small, large and unaligned, and one ending at our last byte.
    for (po, to, n) in [
        (0, 4096, 64 * KIB),
        (64 * KIB, MIB - 7, MIB - 64 * KIB),
        (5, size - 1000, 1000),
        (9, 0, 1),
    ] {
        assert_eq!(
            py.rc(&format!("write {seg} {po} {} {n}", ta + to)),
            0,
            "transfer_sync_write {po} -> {to}+{n}\n{}",
            py.log_tail()
        );
        let d = slice(&py_model, po, n).to_vec();
        apply(&mut model, to, &d);
        assert_bytes_eq(
            &target.read(0, size),
            &model,
            "our buffer after transfer_sync_write",
        );
    }

    // transfer_sync_read: we set known bytes, upstream reads them.
    let fresh = pattern(300_000, 0x55);
    target.write(123_457, &fresh);
    apply(&mut model, 123_457, &fresh);
    assert_eq!(
        py.rc(&format!("read {seg} 500000 {} 300000", ta + 123_457)),
        0,
        "transfer_sync_read\n{}",
        py.log_tail()
    );
    apply(&mut py_model, 500_000, &fresh);
    assert_eq!(
        py.rc(&format!(
            "read {seg} {} {} 4096",
            py_size - 4096,
            ta + size - 4096
        )),
        0,
        "read of our last page"
    );
    let d = slice(&model, size - 4096, 4096).to_vec();
    apply(&mut py_model, py_size - 4096, &d);
    assert_bytes_eq(
        &py.dump(0, py_size),
        &py_model,
        "python buffer after transfer_sync_read",
    );

    // batch_transfer_sync_write / batch_transfer_sync_read.
    let triples = [
        (0, 0, 1),
        (10, 700_000, 4096),
        (20_000, size - 64 * KIB, 64 * KIB),
    ];
    let js = |t: &[(u64, u64, u64)]| {
        serde_json::to_string(
            &t.iter()
                .map(|&(po, to, n)| [po, ta + to, n])
                .collect::<Vec<_>>(),
        )
        .unwrap()
    };
    assert_eq!(
        py.rc(&format!("batch_write {seg} {}", js(&triples))),
        0,
        "batch_transfer_sync_write\n{}",
        py.log_tail()
    );
    for &(po, to, n) in &triples {
        let d = slice(&py_model, po, n).to_vec();
        apply(&mut model, to, &d);
    }
    assert_bytes_eq(
        &target.read(0, size),
        &model,
        "our buffer after batch_transfer_sync_write",
    );
    let fresh = pattern(size as usize, 0x66);
    target.write(0, &fresh);
    model = fresh;
    let triples = [
        (100, 3, 17),
        (4096, MIB + 1, 100_000),
        (600_000, size - 4096, 4096),
    ];
    assert_eq!(
        py.rc(&format!("batch_read {seg} {}", js(&triples))),
        0,
        "batch_transfer_sync_read\n{}",
        py.log_tail()
    );
    for &(po, to, n) in &triples {
        let d = slice(&model, to, n).to_vec();
        apply(&mut py_model, po, &d);
    }
    assert_bytes_eq(
        &py.dump(0, py_size),
        &py_model,
        "python buffer after batch_transfer_sync_read",
    );

    // Rejected: outside our registered buffer; nothing changes on either side.
    for line in [
        format!("write {seg} 0 {} 4096", ta + size),
        format!("write {seg} 0 {} 4096", ta + size - 100),
        format!("write {seg} 0 {} 64", ta - 32),
        format!("write {seg} 0 16 8"),
        format!("read {seg} 0 {} 64", ta - 8),
        format!("read {seg} 0 {} 4096", ta + size),
    ] {
        let rc = py.rc(&line);
        assert_ne!(rc, 0, "out-of-range `{line}` must fail\n{}", py.log_tail());
    }
    if protocol() == "rdma" {
        // Upstream's RDMA initiator cuts slices at our buffer's end and posts the part
        // inside it before the rest fails (our TCP target refuses the whole request).
        let d = slice(&py_model, 0, 100).to_vec();
        apply(&mut model, size - 100, &d);
    }
    assert_bytes_eq(
        &target.read(0, size),
        &model,
        "our buffer after rejected requests",
    );
    assert_bytes_eq(
        &py.dump(0, py_size),
        &py_model,
        "python buffer after rejected reads",
    );

    // Over RDMA, a buffer registered without remote access is refused by the NIC
    // itself (the upstream initiator sees a remote access error on every attempt).
    if protocol() == "rdma" {
        let private = Region::with_pattern((64 * KIB) as usize, 0x77);
        ours.register_memory(private.addr(), private.len(), "cpu:0", false)
            .expect("register a private buffer");
        for line in [
            format!("write {seg} 0 {} 4096", private.addr()),
            format!("read {seg} 0 {} 4096", private.addr()),
        ] {
            assert_ne!(py.rc(&line), 0, "`{line}` on a private buffer must fail");
        }
        assert_bytes_eq(
            &private.read(0, private.len()),
            &pattern((64 * KIB) as usize, 0x77),
            "our private buffer after upstream's attempts",
        );
        assert_bytes_eq(
            &py.dump(0, py_size),
            &py_model,
            "python buffer after reading a private buffer",
        );
        ours.unregister_memory(private.addr()).expect("unregister");
    }

    // Still works afterwards.
    assert_eq!(
        py.rc(&format!("write {seg} 1000 {} 4096", ta + 8)),
        0,
        "write after rejections\n{}",
        py.log_tail()
    );
    let d = slice(&py_model, 1000, 4096).to_vec();
    apply(&mut model, 8, &d);
    assert_bytes_eq(
        &target.read(0, size),
        &model,
        "our buffer after the write following rejections",
    );
    assert_eq!(
        py.rc(&format!("read {seg} 0 {} 4096", ta + 8)),
        0,
        "read after rejections"
    );
    let d = slice(&model, 8, 4096).to_vec();
    apply(&mut py_model, 0, &d);
    assert_bytes_eq(
        &py.dump(0, py_size),
        &py_model,
        "python buffer after the read following rejections",
    );

    // send_probe to our engine.
    assert_eq!(
        py.rc(&format!("probe {seg}")),
        0,
        "send_probe to our engine\n{}",
        py.log_tail()
    );

    // Notify: ours -> upstream.
    let id = ours
        .open_segment(&py.info.segment)
        .expect("open the python segment");
    ours.send_notify(id, "rust-notifier", "hello-from-rust")
        .expect("send_notify to upstream");
    let mut got = Vec::new();
    poll_until(Duration::from_secs(20), "our notify at upstream", || {
        got.extend(py.notifies());
        got.iter()
            .any(|(n, m)| n == "rust-notifier" && m == "hello-from-rust")
            .then_some(())
    });

    // Notify: upstream -> ours, attached to a transfer.
    assert_eq!(
        py.rc(&format!(
            "write_notify {seg} 0 {} 16 py-notifier hello-from-upstream",
            ta + 64
        )),
        0,
        "transfer_sync with notify\n{}",
        py.log_tail()
    );
    let d = slice(&py_model, 0, 16).to_vec();
    apply(&mut model, 64, &d);
    assert_bytes_eq(
        &target.read(0, size),
        &model,
        "our buffer after transfer_sync with notify",
    );
    let mut notes = Vec::new();
    poll_until(
        Duration::from_secs(20),
        "upstream's notify at our engine",
        || {
            notes.extend(ours.take_notifies());
            notes
                .iter()
                .any(|n| n.name == "py-notifier" && n.msg == "hello-from-upstream")
                .then_some(())
        },
    );

    py.quit();
    ours.unregister_memory(ta).expect("unregister");
}
