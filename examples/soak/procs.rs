//! The soak's child processes: started with their output captured, signalled by PID,
//! their resident memory sampled, and every exit accounted for (an exit the chaos
//! did not cause is a crash).

use std::io::Write;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// A memory sample: when, and how many KiB.
pub type Sample = (Instant, u64);

/// What a process gets on its stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// `/dev/null`.
    Nothing,
    /// A pipe, for [`Proc::send_line`].
    Fed,
}

/// One running incarnation of a soak process.
pub struct Proc {
    /// `name#incarnation`.
    pub label: String,
    child: Child,
    /// From when its memory counts as warmed up.
    pub warm_at: Instant,
    /// Its first resident set size sample (KiB) after `warm_at`, and when.
    pub rss_base: Option<Sample>,
    /// Its last resident set size sample (KiB), and when.
    pub rss_last: Option<Sample>,
    /// Set when the chaos (or the end of the run) killed it on purpose.
    pub killed_on_purpose: bool,
    log: PathBuf,
    /// Its stdin, for a process started with [`Input::Fed`].
    stdin: Option<ChildStdin>,
}

impl Proc {
    /// Starts `cmd` as `label`, stderr to `<dir>/<label>.log`, stdout lines to `lines`,
    /// stdin as `input` says; its memory counts as warmed up `warmup` after the start.
    pub fn spawn(
        mut cmd: Command,
        label: &str,
        dir: &Path,
        lines: &Sender<String>,
        warmup: Duration,
        input: Input,
    ) -> Proc {
        let log = dir.join(format!("{}.log", label.replace('#', "-")));
        let file = std::fs::File::create(&log).expect("log file");
        cmd.stdin(match input {
            Input::Nothing => Stdio::null(),
            Input::Fed => Stdio::piped(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::from(file));
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        // The child dies with the soak, however the soak ends.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {label}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take();
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
            warm_at: Instant::now() + warmup,
            rss_base: None,
            rss_last: None,
            killed_on_purpose: false,
            log,
            stdin,
        }
    }

    /// Writes one line to its stdin (a process started with [`Input::Fed`]);
    /// whether it went out (false once the process is gone).
    pub fn send_line(&mut self, line: &str) -> bool {
        self.stdin
            .as_mut()
            .is_some_and(|s| writeln!(s, "{line}").and_then(|_| s.flush()).is_ok())
    }

    /// Closes its stdin: a fed process takes that as the end of the run.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits up to `limit` for it to exit by itself; its status if it did.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
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

    /// Samples its resident set size.
    pub fn sample_rss(&mut self) {
        let Some(kib) = rss_kib(self.pid()) else {
            return;
        };
        let now = Instant::now();
        if now >= self.warm_at && self.rss_base.is_none() {
            self.rss_base = Some((now, kib));
        }
        self.rss_last = Some((now, kib));
    }

    /// Starts measuring afresh `warmup` from now (its role changed).
    pub fn rewarm(&mut self, warmup: Duration) {
        self.warm_at = Instant::now() + warmup;
        self.rss_base = None;
    }

    /// `(KiB after warm-up, KiB last, time between)`, when both were sampled.
    pub fn rss_window(&self) -> Option<(u64, u64, Duration)> {
        let ((t0, base), (t1, last)) = (self.rss_base?, self.rss_last?);
        Some((base, last, t1.saturating_duration_since(t0)))
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

/// Private resident memory of `pid` in KiB: `VmRSS` less `RssShmem`. Shared pages
/// (the store's memfd segments, its own and the peers' it maps) are bounded by the
/// segment sizes and become resident as data is touched, so they are not counted.
pub fn rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    Some(field("VmRSS:")?.saturating_sub(field("RssShmem:").unwrap_or(0)))
}

/// The TCP ports `pid` listens on (IPv4 and IPv6): its socket descriptors matched
/// against the listening sockets of its network namespace.
pub fn listening_ports(pid: i32) -> Vec<u16> {
    let mut by_inode = std::collections::HashMap::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let (Some(local), Some(&"0A"), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let port = local
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if let Some(port) = port {
                by_inode.insert(inode.to_string(), port);
            }
        }
    }
    let mut ports: Vec<u16> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            let inode = link.strip_prefix("socket:[")?.strip_suffix(']')?;
            by_inode.get(inode).copied()
        })
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
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
