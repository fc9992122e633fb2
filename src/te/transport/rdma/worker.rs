//! Worker threads (`MC_WORKERS_PER_CTX` per NIC). Each owns a completion queue and the
//! endpoints hashed to it: it takes slices from its inbox, posts them on the
//! endpoints' QPs as linked lists (a completion requested for every
//! [`SIGNAL_EVERY`]-th request and the last of a list; RC completes a QP's requests in
//! order, so one completion settles every request before it), polls its CQ, and
//! sleeps in `poll(2)` on the CQ's event fd and its wake-up eventfd when idle. A
//! failed request fails its endpoint: every slice on it is retried (on the next NIC
//! and peer NIC in topology order) and the endpoint is rebuilt with fresh QPs.

use super::endpoint::State;
use super::error::{RdmaError, RdmaResult};
use super::nic::Nic;
use super::shared::Shared;
use super::slice::Slice;
use super::worker_handle::{Msg, WorkerHandle};
use super::worker_runs::{EpRun, QpRun};
use crate::sys::verbs::{wc, Completion, Cq, RdmaOp, WorkRequest};
use crate::te::batch::cancel_epoch;
use crossbeam_channel::{Receiver, TryRecvError};
use std::collections::{HashMap, VecDeque};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A completion is requested for at least every this many requests on a QP.
pub const SIGNAL_EVERY: u32 = 16;
/// Most requests posted in one list.
const MAX_LIST: usize = 32;
/// Completions taken per poll.
const POLL_BATCH: usize = 64;
/// How long an idle worker sleeps before looking at timeouts again.
const IDLE_WAIT: Duration = Duration::from_millis(200);
/// How long a passively connected endpoint waits for the peer's ready ACK.
pub const READY_ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts worker `index` of `nic` with its own CQ.
pub fn spawn(shared: &Arc<Shared>, nic: &Arc<Nic>, index: usize) -> RdmaResult<WorkerHandle> {
    let cq = shared
        .verbs
        .create_cq(nic.ctx, shared.cfg.max_cqe.min(nic.attr.max_cqe.max(1)))?;
    // SAFETY: plain eventfd creation.
    let wake_fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if wake_fd < 0 {
        shared.verbs.destroy_cq(cq);
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return Err(RdmaError::EventFd { errno });
    }
    let (tx, rx) = crossbeam_channel::unbounded();
    let sleeping = Arc::new(AtomicBool::new(false));
    let mut w = Worker {
        shared: shared.clone(),
        nic: nic.clone(),
        index,
        cq,
        rx,
        wake_fd,
        sleeping: sleeping.clone(),
        eps: HashMap::new(),
        by_qpn: HashMap::new(),
        signaled: 0,
        next_run: 1,
        last_sweep: Instant::now(),
    };
    let thread = std::thread::Builder::new()
        .name(format!("mc-rdma-{}-{index}", nic.name))
        .spawn(move || w.run())
        .map_err(|e| {
            shared.verbs.destroy_cq(cq);
            // SAFETY: closing the fd created above; the thread never started.
            unsafe { libc::close(wake_fd) };
            RdmaError::WorkerThread(e.to_string())
        })?;
    Ok(WorkerHandle {
        cq,
        tx,
        wake_fd,
        sleeping,
        thread: parking_lot::Mutex::new(Some(thread)),
    })
}

/// A worker thread: its CQ, the endpoints it drives, and its inbox.
struct Worker {
    shared: Arc<Shared>,
    nic: Arc<Nic>,
    index: usize,
    cq: Cq,
    rx: Receiver<Msg>,
    wake_fd: RawFd,
    sleeping: Arc<AtomicBool>,
    eps: HashMap<String, EpRun>,
    /// QP number -> (peer path, QP index).
    by_qpn: HashMap<u32, (String, usize)>,
    /// Signalled requests outstanding (completions the CQ must have room for).
    signaled: usize,
    next_run: u32,
    last_sweep: Instant,
}

impl Worker {
    fn run(&mut self) {
        let mut completions = vec![Completion::default(); POLL_BATCH];
        loop {
            let mut busy = false;
            loop {
                match self.rx.try_recv() {
                    Ok(Msg::Stop) | Err(TryRecvError::Disconnected) => {
                        self.fail_everything("the transport is shutting down");
                        return;
                    }
                    Ok(msg) => {
                        busy = true;
                        self.handle(msg);
                    }
                    Err(TryRecvError::Empty) => break,
                }
            }
            busy |= self.post_all();
            match self.shared.verbs.poll_cq(self.cq, &mut completions) {
                Ok(n) if n > 0 => {
                    busy = true;
                    for c in &completions[..n] {
                        self.complete(*c);
                    }
                }
                Ok(_) => {}
                Err(e) => log::error!("rdma {}: polling the CQ: {e}", self.nic.name),
            }
            if self.last_sweep.elapsed() >= IDLE_WAIT {
                self.sweep();
            }
            if !busy {
                self.sleep();
            }
        }
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Slices(slices) => {
                for s in slices {
                    let path = s.target.paths[s.peer_dev].to_string();
                    self.queue(path, s);
                }
            }
            Msg::Connected(path, failure) => {
                let Some(run) = self.eps.get_mut(&path) else {
                    return;
                };
                run.connecting = false;
                if let Some(why) = failure {
                    log::warn!("rdma {}: connecting to {path}: {why}", self.nic.name);
                    let failed: Vec<Slice> = run.pending.drain(..).collect();
                    self.retry_all(failed, &why.to_string());
                    self.eps.remove(&path);
                    self.shared.forget_endpoint(&self.nic, &path);
                }
            }
            Msg::Stop => {}
        }
    }

    /// Adds a slice for `path`, creating the endpoint's run (and the endpoint) on
    /// first use.
    fn queue(&mut self, path: String, slice: Slice) {
        if !self.eps.contains_key(&path) {
            match self.shared.endpoint(&self.nic, &path) {
                Ok(ep) => {
                    let generation = ep.conn.lock().generation;
                    self.eps.insert(
                        path.clone(),
                        EpRun {
                            ep,
                            generation,
                            qps: Vec::new(),
                            pending: VecDeque::new(),
                            connecting: false,
                            cancel_seen: 0,
                        },
                    );
                }
                Err(e) => {
                    self.retry_all(vec![slice], &e.to_string());
                    return;
                }
            }
        }
        if let Some(run) = self.eps.get_mut(&path) {
            run.pending.push_back(slice);
        }
    }

    /// Posts what can be posted on every endpoint; true if anything was.
    fn post_all(&mut self) -> bool {
        let paths: Vec<String> = self
            .eps
            .iter()
            .filter(|(_, r)| !r.pending.is_empty())
            .map(|(p, _)| p.clone())
            .collect();
        let mut any = false;
        for path in paths {
            any |= self.post(&path);
        }
        any
    }

    fn post(&mut self, path: &str) -> bool {
        let cq_room = (self.shared.cfg.max_cqe as usize).saturating_sub(self.signaled);
        let max_wr = self.shared.cfg.max_wr.min(self.nic.attr.max_qp_wr.max(1)) as usize;
        let Some(run) = self.eps.get_mut(path) else {
            return false;
        };
        let ep = run.ep.clone();
        let conn = ep.conn.lock();
        match conn.state {
            State::Connected => {}
            State::Retired => {
                drop(conn);
                if let Some(run) = self.eps.remove(path) {
                    self.requeue_run(run, "the endpoint was evicted");
                }
                return true;
            }
            State::WaitAck(since) => {
                if since.elapsed() < READY_ACK_TIMEOUT {
                    return false;
                }
                drop(conn);
                self.fail_endpoint(path, "the peer never sent its ready ACK");
                return true;
            }
            State::Unconnected | State::Connecting => {
                if !run.connecting {
                    run.connecting = true;
                    drop(conn);
                    self.shared.request_connect(&self.nic, &ep);
                }
                return false;
            }
        }
        if conn.generation != run.generation || run.qps.is_empty() {
            // New QPs: whatever was posted on the old ones is retried.
            let old: Vec<Slice> = run
                .qps
                .drain(..)
                .flat_map(|q| q.outstanding.into_iter().map(|(_, s, _)| s))
                .collect();
            for qp in &conn.qps {
                let r = self.next_run;
                self.next_run = self.next_run.wrapping_add(1).max(1);
                self.by_qpn
                    .insert(qp.qp_num, (path.to_string(), run.qps.len()));
                run.qps.push(QpRun {
                    qp: *qp,
                    run: r,
                    next_seq: 0,
                    since_signal: 0,
                    outstanding: VecDeque::new(),
                });
            }
            run.generation = conn.generation;
            for s in old.into_iter().rev() {
                run.pending.push_front(s);
            }
        }
        let mut posted_any = false;
        let epoch = cancel_epoch();
        if epoch != run.cancel_seen {
            run.cancel_seen = epoch;
            // Slices of cancelled tasks that were never posted are dropped.
            let pending = std::mem::take(&mut run.pending);
            for s in pending {
                if s.task.cancel_requested() {
                    s.task.skip_slice();
                    posted_any = true;
                } else {
                    run.pending.push_back(s);
                }
            }
        }
        let mut signaled_added = 0usize;
        let nqps = run.qps.len();
        let mut errors = Vec::new();
        let share = run.pending.len().div_ceil(nqps).max(1);
        for qi in 0..nqps {
            if run.pending.is_empty() {
                break;
            }
            let q = &mut run.qps[qi];
            let room = max_wr.saturating_sub(q.outstanding.len());
            let take = share.min(room).min(MAX_LIST).min(run.pending.len());
            if take == 0 || signaled_added >= cq_room {
                continue;
            }
            let mut wrs = Vec::with_capacity(take);
            let mut slices = Vec::with_capacity(take);
            for i in 0..take {
                let s = run.pending.pop_front().expect("counted");
                q.since_signal += 1;
                let signal = i + 1 == take || q.since_signal >= SIGNAL_EVERY;
                if signal {
                    q.since_signal = 0;
                }
                let seq = q.next_seq;
                q.next_seq = q.next_seq.wrapping_add(1);
                wrs.push(WorkRequest {
                    wr_id: (u64::from(q.run) << 32) | u64::from(seq),
                    op: s.op,
                    local_addr: s.local,
                    len: s.len,
                    lkey: s.lkey,
                    remote_addr: s.remote,
                    rkey: s.rkey,
                    signaled: signal,
                });
                slices.push((seq, s, signal));
            }
            let posted = match self.shared.verbs.post_send(q.qp.qp, &wrs) {
                Ok(()) => slices.len(),
                Err((at, e)) => {
                    errors.push(e.to_string());
                    at
                }
            };
            let now = Instant::now();
            let mut rest = slices.split_off(posted);
            for (seq, mut s, signal) in slices {
                s.posted_at = Some(now);
                self.nic
                    .stats
                    .bytes_in_flight
                    .fetch_add(u64::from(s.len), Ordering::Relaxed);
                ep.outstanding.fetch_add(1, Ordering::Relaxed);
                if signal {
                    signaled_added += 1;
                }
                q.outstanding.push_back((seq, s, signal));
                posted_any = true;
            }
            // After a failed post the endpoint is failed below, which also retries
            // what was posted (its last request may be unsignalled).
            for (_, s, _) in rest.drain(..).rev() {
                run.pending.push_front(s);
            }
        }
        drop(conn);
        self.signaled += signaled_added;
        if !errors.is_empty() {
            let why = format!("posting failed: {}", errors.join("; "));
            self.fail_endpoint(path, &why);
        }
        posted_any
    }

    /// Settles one completion.
    fn complete(&mut self, c: Completion) {
        let Some((path, qi)) = self.by_qpn.get(&c.qp_num).cloned() else {
            return;
        };
        let Some(run) = self.eps.get_mut(&path) else {
            return;
        };
        let Some(q) = run.qps.get_mut(qi) else {
            return;
        };
        if (c.wr_id >> 32) as u32 != q.run {
            return; // a completion of a QP since replaced
        }
        let seq = c.wr_id as u32;
        if !q.outstanding.iter().any(|(s, _, _)| *s == seq) {
            return;
        }
        let mut done: Vec<Slice> = Vec::new();
        let mut freed_signals = 0;
        let mut failed: Option<Slice> = None;
        while let Some((s, slice, signaled)) = q.outstanding.pop_front() {
            if signaled {
                freed_signals += 1;
            }
            if s == seq {
                if c.status == wc::SUCCESS {
                    done.push(slice);
                } else {
                    failed = Some(slice);
                }
                break;
            }
            done.push(slice);
        }
        self.signaled = self.signaled.saturating_sub(freed_signals);
        let ep = run.ep.clone();
        for s in done {
            ep.outstanding.fetch_sub(1, Ordering::Relaxed);
            self.finish(s, true);
        }
        if let Some(s) = failed {
            ep.outstanding.fetch_sub(1, Ordering::Relaxed);
            self.nic.stats.slice_errors.fetch_add(1, Ordering::Relaxed);
            self.nic
                .stats
                .bytes_in_flight
                .fetch_sub(u64::from(s.len), Ordering::Relaxed);
            let why = format!(
                "work completion status {} (vendor {:#x})",
                c.status, c.vendor_err
            );
            if c.status != wc::WR_FLUSH_ERR {
                log::warn!("rdma {}: request to {path} failed: {why}", self.nic.name);
            }
            self.retry_all(vec![s], &why);
            self.fail_endpoint(&path, &why);
        }
    }

    /// A slice completed.
    fn finish(&self, s: Slice, ok: bool) {
        self.nic
            .stats
            .bytes_in_flight
            .fetch_sub(u64::from(s.len), Ordering::Relaxed);
        if ok {
            self.nic
                .stats
                .completed(u64::from(s.len), s.op == RdmaOp::Write);
        }
        s.task.finish_slice(ok);
    }

    /// Gives up an endpoint: every slice on it is retried, and it is rebuilt.
    fn fail_endpoint(&mut self, path: &str, why: &str) {
        let Some(run) = self.eps.remove(path) else {
            return;
        };
        {
            let mut conn = run.ep.conn.lock();
            if conn.generation == run.generation {
                conn.retire(self.shared.verbs.as_ref());
            }
        }
        self.shared.forget_endpoint(&self.nic, path);
        self.requeue_run(run, why);
    }

    /// Retries the slices of a run that is gone.
    fn requeue_run(&mut self, run: EpRun, why: &str) {
        let mut slices: Vec<Slice> = Vec::new();
        for q in run.qps {
            self.by_qpn.remove(&q.qp.qp_num);
            for (_, s, signaled) in q.outstanding {
                if signaled {
                    self.signaled = self.signaled.saturating_sub(1);
                }
                run.ep.outstanding.fetch_sub(1, Ordering::Relaxed);
                self.nic
                    .stats
                    .bytes_in_flight
                    .fetch_sub(u64::from(s.len), Ordering::Relaxed);
                slices.push(s);
            }
        }
        slices.extend(run.pending);
        self.retry_all(slices, why);
    }

    /// Sends slices back through routing for another attempt, or fails them when
    /// their attempts are used up.
    fn retry_all(&mut self, slices: Vec<Slice>, why: &str) {
        for mut s in slices {
            s.attempt += 1;
            s.posted_at = None;
            if s.attempt >= self.shared.cfg.retry_count {
                log::warn!(
                    "rdma: a {}-byte slice to {} failed after {} attempts: {why}",
                    s.len,
                    s.target.segment,
                    s.attempt
                );
                s.task.finish_slice(false);
                continue;
            }
            if let Err((s, e)) = self.shared.route(s) {
                log::warn!("rdma: retrying a slice to {}: {e}", s.target.segment);
                s.task.finish_slice(false);
            }
        }
    }

    /// Periodic checks: slice timeouts, queue pairs whose completions were lost,
    /// endpoints whose ready ACK never came.
    fn sweep(&mut self) {
        self.last_sweep = Instant::now();
        let lost_after = self.shared.cfg.completion_timeout;
        let stuck: Vec<String> = self
            .eps
            .iter()
            .filter(|(_, r)| {
                r.qps.iter().any(|q| {
                    q.outstanding
                        .front()
                        .and_then(|(_, s, _)| s.posted_at)
                        .is_some_and(|t| t.elapsed() > lost_after)
                })
            })
            .map(|(p, _)| p.clone())
            .collect();
        for path in stuck {
            let why = format!("no completion for {} s", lost_after.as_secs());
            log::warn!("rdma {}: requests to {path}: {why}", self.nic.name);
            self.fail_endpoint(&path, &why);
        }
        if let Some(secs) = self.shared.cfg.slice_timeout_secs {
            let limit = Duration::from_secs(secs);
            for run in self.eps.values() {
                for q in &run.qps {
                    for (_, s, _) in q.outstanding.iter().take(1) {
                        if s.posted_at.is_some_and(|t| t.elapsed() > limit) {
                            s.task.mark_timed_out();
                        }
                    }
                }
            }
        }
        let stale: Vec<String> = self
            .eps
            .iter()
            .filter(|(_, r)| {
                !r.pending.is_empty()
                    && matches!(r.ep.conn.lock().state,
                        State::WaitAck(since) if since.elapsed() >= READY_ACK_TIMEOUT)
            })
            .map(|(p, _)| p.clone())
            .collect();
        for path in stale {
            self.fail_endpoint(&path, "the peer never sent its ready ACK");
        }
    }

    /// Waits for the CQ or the inbox (or a timeout).
    fn sleep(&mut self) {
        self.sleeping.store(true, Ordering::SeqCst);
        if !self.rx.is_empty() {
            self.sleeping.store(false, Ordering::SeqCst);
            return;
        }
        let verbs = self.shared.verbs.as_ref();
        let cq_fd = verbs.cq_event_fd(self.cq);
        if verbs.arm_cq(self.cq).is_err() {
            std::thread::sleep(Duration::from_micros(100));
        }
        // A completion that arrived before arming would not raise an event.
        let mut probe = [Completion::default(); 1];
        if let Ok(1) = verbs.poll_cq(self.cq, &mut probe) {
            self.sleeping.store(false, Ordering::SeqCst);
            self.complete(probe[0]);
            return;
        }
        let mut fds = vec![libc::pollfd {
            fd: self.wake_fd,
            events: libc::POLLIN,
            revents: 0,
        }];
        if let Some(fd) = cq_fd {
            fds.push(libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let wait = if self
            .eps
            .values()
            .any(|r| !r.pending.is_empty() || r.qps.iter().any(|q| !q.outstanding.is_empty()))
        {
            10
        } else {
            IDLE_WAIT.as_millis() as i32
        };
        // SAFETY: `fds` is a valid array of pollfd for the call.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait) };
        self.sleeping.store(false, Ordering::SeqCst);
        let mut v: u64 = 0;
        // SAFETY: draining our own non-blocking eventfd.
        unsafe { libc::read(self.wake_fd, (&mut v as *mut u64).cast(), 8) };
        verbs.take_cq_events(self.cq);
    }

    /// Shutdown: every slice still here fails.
    fn fail_everything(&mut self, why: &str) {
        let runs: Vec<EpRun> = self.eps.drain().map(|(_, r)| r).collect();
        for run in runs {
            for q in run.qps {
                for (_, s, _) in q.outstanding {
                    s.task.finish_slice(false);
                }
            }
            for s in run.pending {
                s.task.finish_slice(false);
            }
        }
        while let Ok(msg) = self.rx.try_recv() {
            if let Msg::Slices(slices) = msg {
                for s in slices {
                    s.task.finish_slice(false);
                }
            }
        }
        log::debug!(
            "rdma {} worker {}: stopped ({why})",
            self.nic.name,
            self.index
        );
    }
}
