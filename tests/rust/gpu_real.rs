//! GPU memory on a real NVIDIA GPU through the CUDA driver (`scripts/device-check.sh`
//! runs these on a GPU machine). Without a driver and a device every test prints a skip
//! line and passes; `gpu_fake` covers the same paths everywhere.

mod te_support;

use mooncake::config::Config;
use mooncake::sys::cuda::{self, Gpu};
use mooncake::te::{Op, TaskStatus, TransferEngine};
use std::sync::Arc;
use te_support::{pattern, req, run};

fn gpu(test: &str) -> Option<Arc<dyn Gpu>> {
    let g = cuda::system();
    if g.is_none() {
        eprintln!("SKIPPED {test}: no CUDA driver with a device (libcuda.so.1)");
    }
    g
}

/// `len` bytes on `device`, freed on drop.
struct DeviceBuffer {
    gpu: Arc<dyn Gpu>,
    addr: u64,
    len: u64,
}

impl DeviceBuffer {
    fn new(gpu: &Arc<dyn Gpu>, device: u32, data: &[u8]) -> DeviceBuffer {
        let addr = gpu.alloc(device, data.len() as u64).expect("cuMemAlloc");
        gpu.copy(addr, data.as_ptr() as u64, data.len() as u64)
            .unwrap();
        DeviceBuffer {
            gpu: gpu.clone(),
            addr,
            len: data.len() as u64,
        }
    }

    fn read(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len as usize];
        self.gpu
            .copy(v.as_mut_ptr() as u64, self.addr, self.len)
            .unwrap();
        v
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        self.gpu.free(self.addr);
    }
}

fn tcp_engine() -> TransferEngine {
    let cfg = Config {
        advertised_ip: Some("127.0.0.1".into()),
        ..Config::default()
    };
    let e = TransferEngine::with_config(cfg, "P2PHANDSHAKE", "127.0.0.1:0", false).unwrap();
    e.install("tcp", None).unwrap();
    e
}

#[test]
fn the_driver_reports_device_memory_and_copies_it() {
    let Some(g) = gpu("the_driver_reports_device_memory_and_copies_it") else {
        return;
    };
    let data = pattern(3 << 20, 1);
    let last = g.device_count() - 1;
    let buf = DeviceBuffer::new(&g, last, &data);
    assert_eq!(g.device_of(buf.addr), Some(last));
    assert_eq!(g.device_of(buf.addr + buf.len - 1), Some(last));
    assert_eq!(g.device_of(data.as_ptr() as u64), None);
    assert_eq!(buf.read(), data);
    let bus = g.pci_bus_id(0).expect("a PCI bus id");
    assert_eq!(bus.matches(':').count(), 2, "{bus}");
}

#[test]
fn tcp_moves_gpu_memory_both_ways_on_both_sides() {
    let Some(g) = gpu("tcp_moves_gpu_memory_both_ways_on_both_sides") else {
        return;
    };
    let len = 80 << 20;
    let target = tcp_engine();
    let initiator = tcp_engine();
    let remote = DeviceBuffer::new(&g, 0, &vec![0u8; len]);
    target
        .register_memory(remote.addr, remote.len, "*", true)
        .unwrap();
    let local = DeviceBuffer::new(&g, 0, &pattern(len, 7));
    let id = initiator.open_segment(target.segment_name()).unwrap();
    let st = run(
        &initiator,
        &[req(Op::Write, local.addr, id, remote.addr, len as u64)],
    );
    assert_eq!(st, vec![TaskStatus::Completed]);
    assert_eq!(remote.read(), pattern(len, 7));

    let fresh = DeviceBuffer::new(&g, 0, &pattern(len, 99));
    let host_target = pattern(len, 99);
    target
        .register_memory(host_target.as_ptr() as u64, len as u64, "cpu:0", true)
        .unwrap();
    let id = initiator
        .open_segment_no_cache(target.segment_name())
        .unwrap();
    let st = run(
        &initiator,
        &[req(
            Op::Read,
            local.addr,
            id,
            host_target.as_ptr() as u64,
            len as u64,
        )],
    );
    assert_eq!(st, vec![TaskStatus::Completed]);
    assert_eq!(local.read(), fresh.read());
    target
        .unregister_memory(host_target.as_ptr() as u64)
        .unwrap();
}

#[test]
fn own_segment_copies_reach_gpu_memory() {
    let Some(g) = gpu("own_segment_copies_reach_gpu_memory") else {
        return;
    };
    let e = tcp_engine();
    let data = pattern(1 << 20, 3);
    let dev = DeviceBuffer::new(&g, 0, &vec![0u8; data.len()]);
    e.register_memory(dev.addr, dev.len, "*", true).unwrap();
    let st = run(
        &e,
        &[req(Op::Write, data.as_ptr() as u64, 0, dev.addr, dev.len)],
    );
    assert_eq!(st, vec![TaskStatus::Completed]);
    assert_eq!(dev.read(), data);
}

#[test]
fn rdma_registers_gpu_memory_when_a_nic_is_present() {
    let Some(g) = gpu("rdma_registers_gpu_memory_when_a_nic_is_present") else {
        return;
    };
    let e = TransferEngine::with_config(Config::default(), "P2PHANDSHAKE", "127.0.0.1:0", false)
        .unwrap();
    if let Err(why) = e.install("rdma", None) {
        eprintln!("SKIPPED rdma_registers_gpu_memory_when_a_nic_is_present: no RDMA NIC ({why})");
        return;
    }
    let dev = DeviceBuffer::new(&g, 0, &vec![0u8; 4 << 20]);
    e.register_memory(dev.addr, dev.len, "*", true)
        .expect("GPUDirect (peermem) or dma-buf registration");
    let desc = e.segment_descriptor(0).expect("own descriptor");
    let buffer = desc.buffers.iter().find(|b| b.addr == dev.addr).unwrap();
    assert_eq!(buffer.name, "cuda:0");
}
