//! GPU memory paths on any machine: a fake GPU runtime (host ranges playing device
//! memory, counted copies) is installed for this whole test binary. Proves that the
//! TCP transport stages device memory through host buffers on both sides, that the
//! own-segment copy goes through the runtime, and that RDMA registration resolves
//! `"*"` to `cuda:N`, publishes a `cuda:N` topology entry, and falls back to dma-buf
//! when the NIC refuses plain registration. Real GPUs: `scripts/device-check.sh`.

mod te_support;

use mooncake::config::Config;
use mooncake::sys::cuda::fake::FakeGpu;
use mooncake::sys::verbs::fake::{Fabric, FakeVerbs};
use mooncake::te::{Op, TaskStatus, TransferEngine};
use std::sync::{Arc, OnceLock};
use te_support::{in_two, pattern, req, run};

fn gpu() -> &'static Arc<FakeGpu> {
    static GPU: OnceLock<Arc<FakeGpu>> = OnceLock::new();
    GPU.get_or_init(|| {
        let g = Arc::new(FakeGpu::new(2));
        assert!(
            mooncake::sys::cuda::use_provider(g.clone()).is_ok(),
            "a GPU runtime was chosen before the fake was installed"
        );
        g
    })
}

/// Host memory that the fake runtime reports as memory of `device`.
fn device_memory(device: u32, len: usize, seed: u8) -> Vec<u8> {
    let v = pattern(len, seed);
    gpu().mark_device_memory(device, v.as_ptr() as u64, len as u64);
    v
}

fn tcp_engine() -> TransferEngine {
    gpu();
    let cfg = Config {
        advertised_ip: Some("127.0.0.1".into()),
        ..Config::default()
    };
    let e = TransferEngine::with_config(cfg, "P2PHANDSHAKE", "127.0.0.1:0", false).unwrap();
    e.install("tcp", None).unwrap();
    e
}

#[test]
fn tcp_target_stages_writes_and_reads_of_its_gpu_memory() {
    let target = tcp_engine();
    let initiator = tcp_engine();
    let len = 6 << 20;
    let mut on_gpu = device_memory(1, len, 0);
    let local = pattern(len, 9);
    target
        .register_memory(on_gpu.as_mut_ptr() as u64, len as u64, "cuda:1", true)
        .unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    let (copies, _) = gpu().copies();
    let st = run(
        &initiator,
        &[req(
            Op::Write,
            local.as_ptr() as u64,
            id,
            on_gpu.as_ptr() as u64,
            len as u64,
        )],
    );
    assert_eq!(st, vec![TaskStatus::Completed]);
    assert_eq!(on_gpu, local);
    assert!(
        gpu().copies().0 > copies,
        "the write went through the GPU runtime"
    );

    let fresh = pattern(len, 44);
    on_gpu.copy_from_slice(&fresh);
    let mut back = vec![0u8; len];
    let (copies, _) = gpu().copies();
    let (back_at, gpu_at) = (back.as_mut_ptr() as u64, on_gpu.as_ptr() as u64);
    let st = run(
        &initiator,
        &in_two(Op::Read, back_at, id, gpu_at, len as u64, 4096),
    );
    assert_eq!(st, vec![TaskStatus::Completed; 2]);
    assert_eq!(back, fresh);
    assert!(gpu().copies().0 >= copies + 2);
}

#[test]
fn tcp_initiator_stages_its_gpu_memory() {
    let target = tcp_engine();
    let initiator = tcp_engine();
    let len = 70 << 20; // more than one staging chunk
    let mut host = vec![0u8; len];
    target
        .register_memory(host.as_mut_ptr() as u64, len as u64, "cpu:0", true)
        .unwrap();
    let mut on_gpu = device_memory(0, len, 5);
    initiator
        .register_memory(on_gpu.as_mut_ptr() as u64, len as u64, "*", true)
        .unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    let (_, bytes) = gpu().copies();
    let st = run(
        &initiator,
        &[req(
            Op::Write,
            on_gpu.as_ptr() as u64,
            id,
            host.as_ptr() as u64,
            len as u64,
        )],
    );
    assert_eq!(st, vec![TaskStatus::Completed]);
    assert_eq!(host, pattern(len, 5));
    assert!(gpu().copies().1 >= bytes + len as u64);

    let fresh = pattern(len, 77);
    host.copy_from_slice(&fresh);
    let (gpu_at, host_at) = (on_gpu.as_mut_ptr() as u64, host.as_ptr() as u64);
    let st = run(
        &initiator,
        &in_two(Op::Read, gpu_at, id, host_at, len as u64, 1000),
    );
    assert_eq!(st, vec![TaskStatus::Completed; 2]);
    assert_eq!(on_gpu, fresh);

    // A target that refuses fails the staged task, and nothing is copied back.
    let before = on_gpu.clone();
    let st = run(
        &initiator,
        &[req(
            Op::Read,
            on_gpu.as_mut_ptr() as u64,
            id,
            host.as_ptr() as u64 + len as u64 - 10,
            4096,
        )],
    );
    assert_eq!(st, vec![TaskStatus::Failed]);
    assert_eq!(on_gpu, before);
}

#[test]
fn own_segment_copies_with_gpu_memory_use_the_runtime() {
    gpu();
    let cfg = Config {
        advertised_ip: Some("127.0.0.1".into()),
        ..Config::default()
    };
    let e = TransferEngine::with_config(cfg, "P2PHANDSHAKE", "127.0.0.1:0", false).unwrap();
    let len = 1 << 20;
    let mut on_gpu = device_memory(0, len, 1);
    let src = pattern(len, 200);
    e.register_memory(on_gpu.as_mut_ptr() as u64, len as u64, "*", true)
        .unwrap();
    let (copies, _) = gpu().copies();
    let st = run(
        &e,
        &[req(
            Op::Write,
            src.as_ptr() as u64,
            0,
            on_gpu.as_ptr() as u64,
            len as u64,
        )],
    );
    assert_eq!(st, vec![TaskStatus::Completed]);
    assert_eq!(on_gpu, src);
    assert_eq!(gpu().copies().0, copies + 1);
}

#[test]
fn rdma_registers_gpu_memory_as_cuda_and_through_dmabuf() {
    gpu();
    let fabric = Fabric::new();
    let engine = |nic: &str| {
        let e =
            TransferEngine::with_config(Config::default(), "P2PHANDSHAKE", "127.0.0.1:0", false)
                .unwrap();
        e.install_rdma(
            Some(Arc::new(FakeVerbs::new(fabric.clone(), &[nic]))),
            None,
            &[],
        )
        .unwrap();
        e
    };
    let target = engine("gpu_tgt_0");
    let initiator = engine("gpu_ini_0");
    let len = 2 << 20;
    let mut on_gpu = device_memory(1, len, 0);
    // No peer-memory driver: only a dma-buf registration is accepted.
    fabric.require_dmabuf(on_gpu.as_ptr() as u64, len as u64);
    target
        .register_memory(on_gpu.as_mut_ptr() as u64, len as u64, "*", true)
        .unwrap();
    let local = pattern(len, 61);
    initiator
        .register_memory(local.as_ptr() as u64, len as u64, "cpu:0", true)
        .unwrap();
    let id = initiator.open_segment(target.segment_name()).unwrap();
    let desc = initiator.segment_descriptor(id).unwrap();
    let buffer = desc
        .buffers
        .iter()
        .find(|b| b.addr == on_gpu.as_ptr() as u64)
        .expect("the GPU buffer is published");
    assert_eq!(buffer.name, "cuda:1");
    let matrix = &desc.rdma.as_ref().unwrap().priority_matrix;
    assert!(
        matrix.get("cuda:0").is_some() && matrix.get("cuda:1").is_some(),
        "{matrix}"
    );

    let st = run(
        &initiator,
        &[req(
            Op::Write,
            local.as_ptr() as u64,
            id,
            on_gpu.as_ptr() as u64,
            len as u64,
        )],
    );
    assert_eq!(st, vec![TaskStatus::Completed]);
    assert_eq!(on_gpu, local);
}
