//! The soak's child processes: started with their output captured, signalled by PID,
//! their resident memory sampled, and every exit accounted for (an exit the chaos
//! did not cause is a crash).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::Sender;
use std::time::Instant;

/// One running incarnation of a soak process.
pub struct Proc {
    /// `name#incarnation`.
    pub label: String,
    child: Child,
    /// When it started.
    pub started: Instant,
    /// Its resident set size after warm-up (KiB), once sampled.
    pub rss_after_warmup: Option<u64>,
    /// Its last resident set size sample (KiB).
    pub rss_last: Option<u64>,
    /// Set when the chaos (or the end of the run) killed it on purpose.
    pub killed_on_purpose: bool,
    log: PathBuf,
}

impl Proc {
    /// Starts `cmd` as `label`, stderr to `<dir>/<label>.log`, stdout lines to `lines`.
    pub fn spawn(mut cmd: Command, label: &str, dir: &Path, lines: &Sender<String>) -> Proc {
        let log = dir.join(format!("{}.log", label.replace('#', "-")));
        let file = std::fs::File::create(&log).expect("log file");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(file));
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {label}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let tx = lines.clone();
        std::thread::spawn(move || {
            for text in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(text).is_err() {
                    break;
                }
            }
        });
        Proc {
            label: label.to_string(),
            child,
            started: Instant::now(),
            rss_after_warmup: None,
            rss_last: None,
            killed_on_purpose: false,
            log,
        }
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `signal`.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid; it has not been reaped while we hold
        // the Child (reaping happens only in `exited`/`kill`).
        unsafe {
            libc::kill(self.pid(), signal);
        }
    }

    /// SIGKILLs it (on purpose) and reaps it.
    pub fn kill(&mut self) {
        self.killed_on_purpose = true;
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Samples its resident set size (KiB); `after_warmup` records it as the baseline
    /// when none was taken yet.
    pub fn sample_rss(&mut self, after_warmup: bool) {
        let Some(kib) = rss_kib(self.pid()) else {
            return;
        };
        if after_warmup && self.rss_after_warmup.is_none() {
            self.rss_after_warmup = Some(kib);
        }
        self.rss_last = Some(kib);
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited().is_none() {
            self.kill();
        }
    }
}

/// `VmRSS` of `pid` in KiB.
pub fn rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `n` distinct free TCP ports on 127.0.0.1.
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("addr").port())
        .collect()
}
