//! Transfers over TCP whose local memory is on a GPU: the bytes go through host
//! buffers (device to host before a write is sent, host to device after a read
//! arrived), in chunks, on staging threads, so a submit never blocks. The target side
//! stages in `tcp::target`.

use super::request::{Op, PeerRequest};
use super::tcp::{Endpoint, TcpTransport};
use crate::sys::cuda::{Gpu, GpuError};
use crate::te::batch::{CompletionSignal, Task, TaskStatus};
use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Largest piece staged at once (one host buffer per piece in flight).
const CHUNK: u64 = 64 << 20;
/// Staging threads.
const THREADS: usize = 2;

struct Job {
    tcp: Arc<TcpTransport>,
    endpoint: Endpoint,
    req: PeerRequest,
    task: Arc<Task>,
    gpu: Arc<dyn Gpu>,
}

/// Running staging threads and the queue that feeds them.
struct Workers {
    queue: Sender<Job>,
    threads: Vec<JoinHandle<()>>,
}

/// The staging threads of one engine, started on first use.
#[derive(Default)]
pub struct Stager {
    workers: Mutex<Option<Workers>>,
}

impl Stager {
    /// Starts `req` (local memory on `gpu`) to `endpoint` through host memory; the
    /// returned task completes like a direct one.
    pub fn submit(
        &self,
        tcp: Arc<TcpTransport>,
        endpoint: &Endpoint,
        req: &PeerRequest,
        signal: Option<Arc<CompletionSignal>>,
        gpu: Arc<dyn Gpu>,
    ) -> Arc<Task> {
        let task = Task::new(req.len, 1, signal);
        let job = Job {
            tcp,
            endpoint: endpoint.clone(),
            req: *req,
            task: task.clone(),
            gpu,
        };
        let mut workers = self.workers.lock();
        if workers.is_none() {
            let (tx, rx) = crossbeam_channel::unbounded::<Job>();
            let threads = (0..THREADS)
                .filter_map(|i| {
                    let rx: Receiver<Job> = rx.clone();
                    std::thread::Builder::new()
                        .name(format!("mc-gpu-stage-{i}"))
                        .spawn(move || rx.iter().for_each(run))
                        .ok()
                })
                .collect();
            *workers = Some(Workers { queue: tx, threads });
        }
        let sent = workers
            .as_ref()
            .is_some_and(|w| !w.threads.is_empty() && w.queue.send(job).is_ok());
        if !sent {
            log::error!("tcp: no staging thread for a GPU transfer");
            task.finish_slice(false);
        }
        task
    }

    /// Stops the threads after the jobs queued so far.
    pub fn shutdown(&self) {
        if let Some(w) = self.workers.lock().take() {
            drop(w.queue);
            for t in w.threads {
                let _ = t.join();
            }
        }
    }
}

/// Moves one job chunk by chunk; the task completes once, at the end.
fn run(job: Job) {
    let ok = stage(&job).map_err(|e| {
        log::warn!(
            "tcp: staged {} of {} bytes with GPU memory failed: {e}",
            if job.req.op == Op::Write {
                "write"
            } else {
                "read"
            },
            job.req.len
        )
    });
    job.task.finish_slice(ok.is_ok());
}

/// Why a staged transfer failed.
#[derive(Debug, thiserror::Error)]
enum StageError {
    /// A copy between GPU memory and the host buffer failed.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// The TCP transfer of the chunk `start..end` did not complete.
    #[error("the TCP transfer of bytes {start}..{end}")]
    Tcp { start: u64, end: u64 },
}

fn stage(job: &Job) -> Result<(), StageError> {
    let req = &job.req;
    let mut host = vec![0u8; req.len.min(CHUNK) as usize];
    let signal = Arc::new(CompletionSignal::default());
    let mut done = 0;
    while done < req.len {
        let n = (req.len - done).min(CHUNK);
        let buf = host.as_mut_ptr() as u64;
        if req.op == Op::Write {
            job.gpu.copy(buf, req.local + done, n)?;
        }
        let piece = PeerRequest {
            op: req.op,
            local: buf,
            remote: req.remote + done,
            len: n,
        };
        let task = job
            .tcp
            .submit(&job.endpoint, &piece, Some(signal.clone()), false);
        if signal.wait_task(&task) != TaskStatus::Completed {
            return Err(StageError::Tcp {
                start: done,
                end: done + n,
            });
        }
        if req.op == Op::Read {
            job.gpu.copy(req.local + done, buf, n)?;
        }
        done += n;
    }
    drop(host);
    Ok(())
}
