//! Threads that run active handshakes, started on demand (at most
//! [`MAX_CONNECTORS`] at once) and gone when there is nothing to connect: a peer
//! that never answers holds up only the handshakes waiting on it, not those to
//! everyone else.

use super::endpoint::Endpoint;
use super::nic::Nic;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most handshakes in progress at once.
pub const MAX_CONNECTORS: usize = 16;
/// How long shutdown waits for handshakes in progress before leaving them to finish
/// on their own (each ends within the handshake timeout; the devices stay open until
/// the last one does).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// A handshake to run.
pub struct ConnectJob {
    /// Our NIC.
    pub nic: Arc<Nic>,
    /// The endpoint to connect.
    pub ep: Arc<Endpoint>,
}

/// What connector threads serve: the pool they take jobs from and how a job runs.
pub trait ConnectService: Send + Sync + 'static {
    /// The pool.
    fn connectors(&self) -> &Connectors;
    /// Runs one handshake and reports how it went.
    fn run(&self, job: ConnectJob);
}

#[derive(Default)]
struct State {
    jobs: VecDeque<ConnectJob>,
    running: usize,
    threads: Vec<JoinHandle<()>>,
    closed: bool,
}

/// The pool.
#[derive(Default)]
pub struct Connectors {
    state: Mutex<State>,
}

impl Connectors {
    /// Queues `job`, starting a thread for it when fewer than [`MAX_CONNECTORS`] run.
    /// Gives the job back once the pool is closed.
    pub fn submit<S: ConnectService>(
        &self,
        service: &Arc<S>,
        job: ConnectJob,
    ) -> Result<(), ConnectJob> {
        let mut st = self.state.lock();
        if st.closed {
            return Err(job);
        }
        st.jobs.push_back(job);
        if st.running >= MAX_CONNECTORS {
            return Ok(());
        }
        st.threads.retain(|t| !t.is_finished());
        let weak = Arc::downgrade(service);
        let spawned = std::thread::Builder::new()
            .name("mc-rdma-connect".into())
            .spawn(move || serve(weak));
        match spawned {
            Ok(t) => {
                st.running += 1;
                st.threads.push(t);
            }
            Err(e) if st.running == 0 => {
                log::error!("rdma: starting a connector thread: {e}");
                let job = st.jobs.pop_back().expect("just queued");
                return Err(job);
            }
            Err(e) => log::warn!("rdma: starting a connector thread: {e}; queued"),
        }
        Ok(())
    }

    /// Takes the next job, or retires the calling thread when there is none.
    fn next(&self) -> Option<ConnectJob> {
        let mut st = self.state.lock();
        let job = if st.closed { None } else { st.jobs.pop_front() };
        if job.is_none() {
            st.running -= 1;
        }
        job
    }

    /// Refuses new jobs, hands back the queued ones, and waits (briefly) for the
    /// handshakes in progress.
    pub fn close(&self) -> Vec<ConnectJob> {
        let (jobs, threads) = {
            let mut st = self.state.lock();
            st.closed = true;
            (st.jobs.drain(..).collect(), std::mem::take(&mut st.threads))
        };
        let deadline = Instant::now() + SHUTDOWN_GRACE;
        for t in threads {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        jobs
    }
}

/// A connector thread: runs jobs until none is left.
fn serve<S: ConnectService>(service: Weak<S>) {
    loop {
        let Some(s) = service.upgrade() else { return };
        let Some(job) = s.connectors().next() else {
            return;
        };
        s.run(job);
    }
}
