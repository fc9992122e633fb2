//! Running the bench: an engine with one registered buffer per node, the worker
//! threads that submit batches against a segment, and the final report line.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mooncake::config::Config;
use mooncake::te::{TaskStatus, TransferEngine, TransferRequest};

use crate::settings::{Settings, UNITS};

/// `Test completed: ...`'s throughput part, e.g. `0.68 GB/s` (upstream's math).
pub(crate) fn format_rate(bytes: u128, seconds: f64, unit: &str, precision: usize) -> String {
    if seconds.abs() < 1e-10 {
        log::error!("invalid args: duration shouldn't be 0");
        return String::new();
    }
    let size = UNITS
        .iter()
        .find(|(u, _)| *u == unit)
        .map_or(1e9, |(_, s)| *s);
    format!("{:.*} {unit}/s", precision, bytes as f64 / seconds / size)
}

/// The final report line.
pub(crate) fn completion_line(seconds: f64, batches: u64, s: &Settings) -> String {
    let bytes = u128::from(batches) * s.batch_size as u128 * u128::from(s.block_size);
    format!(
        "Test completed: duration {seconds:.2}, batch count {batches}, throughput {}",
        format_rate(bytes, seconds, s.report_unit, s.report_precision)
    )
}

/// A zeroed, page-aligned heap buffer; freed on drop.
pub(crate) struct Buffer {
    pub(crate) ptr: NonNull<u8>,
    pub(crate) layout: Layout,
}

impl Buffer {
    pub(crate) fn new(len: u64) -> Result<Buffer, String> {
        let size = usize::try_from(len).map_err(|_| format!("buffer size {len} is too large"))?;
        let layout = Layout::from_size_align(size.max(1), 4096)
            .map_err(|e| format!("buffer size {len}: {e}"))?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| format!("cannot allocate {len} bytes"))?;
        Ok(Buffer { ptr, layout })
    }

    pub(crate) fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout and freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Prints `msg` and exits 1 (upstream's `exit(EXIT_FAILURE)` in workers).
pub(crate) fn die(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1)
}

/// An engine with its transport installed and one registered buffer.
/// Field order matters: the engine drops (and stops serving) before the buffer is freed.
pub(crate) struct Node {
    pub(crate) engine: TransferEngine,
    pub(crate) buffer: Buffer,
}

impl Node {
    pub(crate) fn start(s: &Settings, name: &str) -> Result<Node, String> {
        let config = Config {
            disable_same_host: Config::global().disable_same_host
                || (s.protocol_explicit && s.protocol == "tcp"),
            ..Config::global().clone()
        };
        let engine =
            TransferEngine::with_config(config, &s.metadata_server, name, s.auto_discovery)
                .map_err(|e| format!("cannot start transfer engine '{name}': {e}"))?;
        if !s.auto_discovery {
            let topology = s.topology()?;
            let installed = engine.install(&s.protocol, topology.as_deref());
            match installed {
                // Upstream's default protocol on a host without RDMA: TCP (and the
                // same-host path) instead of giving up.
                Err(e) if s.protocol == "rdma" && !s.protocol_explicit => {
                    log::warn!("no RDMA here ({e}); using tcp (pass --protocol to insist)");
                    engine
                        .install("tcp", None)
                        .map_err(|e| format!("installing transport 'tcp': {e}"))?;
                }
                other => {
                    other.map_err(|e| format!("installing transport '{}': {e}", s.protocol))?
                }
            }
        }
        let buffer = Buffer::new(s.buffer_size)?;
        engine
            .register_memory(buffer.addr(), s.buffer_size, "cpu:0", true)
            .map_err(|e| format!("registering {} bytes: {e}", s.buffer_size))?;
        Ok(Node { engine, buffer })
    }

    pub(crate) fn announce(&self, s: &Settings) {
        let name = self.engine.segment_name();
        if s.metadata_server.trim() == "P2PHANDSHAKE" {
            eprintln!("Transfer Engine RPC using P2P handshake, listening on {name}");
        } else {
            eprintln!("Transfer Engine segment name: {name}");
        }
    }

    pub(crate) fn stop(self) {
        if let Err(e) = self.engine.unregister_memory(self.buffer.addr()) {
            log::warn!("unregistering the buffer: {e}");
        }
    }
}

/// One initiator thread: batches until `running` clears; returns the batch count.
pub(crate) fn worker(
    engine: &TransferEngine,
    s: &Settings,
    segment: i32,
    thread: usize,
    local_base: u64,
    remote_base: u64,
    running: &AtomicBool,
) -> u64 {
    let mut batches = 0u64;
    let mut requests = Vec::with_capacity(s.batch_size);
    while running.load(Ordering::Relaxed) {
        let batch = engine.allocate_batch(s.batch_size);
        requests.clear();
        for i in 0..s.batch_size {
            let offset = s.block_size * (i * s.threads + thread) as u64;
            requests.push(TransferRequest {
                op: s.op,
                source: local_base + offset,
                target_id: segment,
                target_offset: remote_base + offset,
                length: s.block_size,
            });
        }
        if let Err(e) = engine.submit(batch, &requests) {
            die(&format!("thread {thread}: submitting a batch failed: {e}"));
        }
        // Sleep until the batch is done instead of spinning: on a small machine a
        // spinning poller steals the cores the transfer threads need.
        while !engine
            .wait_batch(batch, Duration::from_secs(1))
            .unwrap_or_else(|e| die(&format!("thread {thread}: waiting for a batch failed: {e}")))
        {
        }
        for task in 0..s.batch_size {
            loop {
                match engine.transfer_status(batch, task) {
                    Ok((TaskStatus::Completed, _)) => break,
                    Ok((TaskStatus::Failed, _)) => die(&format!(
                        "thread {thread}: transfer FAILED (batch task {task})"
                    )),
                    Ok(_) => std::thread::yield_now(),
                    Err(e) => die(&format!("thread {thread}: reading task status failed: {e}")),
                }
            }
        }
        if let Err(e) = engine.free_batch(batch) {
            die(&format!("thread {thread}: freeing a batch failed: {e}"));
        }
        batches += 1;
    }
    log::debug!("worker {thread} stopped after {batches} batches");
    batches
}

/// Opens `segment_name` and runs the timed loop; returns the report line.
pub(crate) fn drive(node: &Node, s: &Settings, segment_name: &str) -> Result<String, String> {
    let engine = &node.engine;
    let segment = engine
        .open_segment(segment_name)
        .map_err(|e| format!("cannot open segment '{segment_name}': {e}"))?;
    let desc = engine
        .segment_descriptor(segment)
        .ok_or_else(|| format!("unable to get the descriptor of segment '{segment_name}'"))?;
    if desc.buffers.is_empty() {
        return Err(format!(
            "segment '{segment_name}' has no registered buffers"
        ));
    }
    let span = s.block_size * (s.batch_size * s.threads) as u64;
    for (t, b) in desc.buffers.iter().enumerate().take(s.threads) {
        if b.length < span {
            log::warn!(
                "remote buffer {t} of '{segment_name}' holds {} bytes, the test touches {span}",
                b.length
            );
        }
    }
    let bases: Vec<u64> = (0..s.threads)
        .map(|t| desc.buffers[t % desc.buffers.len()].addr)
        .collect();
    let running = AtomicBool::new(true);
    let local = node.buffer.addr();
    let start = Instant::now();
    let batches: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = bases
            .iter()
            .enumerate()
            .map(|(t, &remote)| {
                let running = &running;
                scope.spawn(move || worker(engine, s, segment, t, local, remote, running))
            })
            .collect();
        std::thread::sleep(Duration::from_secs(s.duration));
        running.store(false, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| die("a worker thread panicked")))
            .sum()
    });
    Ok(completion_line(start.elapsed().as_secs_f64(), batches, s))
}
