//! `soak`: a verified workload with chaos, for `scripts/soak.sh`.
//!
//! Runs, on 127.0.0.1, a `mooncake_master` (two HA masters over etcd with `--ha`),
//! `--owners` store processes (`store_bench --mode=pressure`: put/get/remove of values
//! derived from key and generation, every read checked, about 3x more data than the
//! pool holds), `--te_targets` Transfer Engine targets (`transfer_engine_bench
//! --mode=target`) and an initiator (this executable as `soak te-initiator`) writing
//! and reading back verified blocks. Meanwhile a chaos loop SIGKILLs and SIGSTOPs segment owners and
//! targets, restarts the master (kills the HA leader), and an abuser holds idle,
//! half-sent and garbage connections on every listening port.
//!
//! At the end it prints a table and checks: 0 corrupt reads, 0 calls past their
//! deadline, 0 crashes (exits the chaos did not cause), resident memory of every
//! process that lived through the run grown < 5 % after warm-up, failed puts < 1 %.
//! Chaos starts shortly after the processes (see [`chaos_settle`]), so the warm-up is
//! spent under chaos and memory is compared with its working size under it.
//! The exit status is 0 only when every check holds.
//!
//! Usage: `soak --minutes=N [--owners=3] [--te_targets=2] [--segment_mib=64]
//! [--warmup_secs=S] [--chaos_every_secs=10] [--master_every_secs=S] [--ha=auto|on|off]
//! [--out=DIR] [--bin_dir=DIR]` (the binaries default to this example's profile dir).

mod abuse;
mod procs;
mod te_loop;

use mooncake::config::flags::{FlagKind, Flags};
use procs::{free_ports, listening_ports, rss_kib, Input, Proc, Sample};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A call (store operation or transfer) slower than this breaks the soak.
const CALL_DEADLINE: Duration = Duration::from_secs(60);
/// Longest SIGSTOP the chaos applies.
const MAX_FREEZE: Duration = Duration::from_secs(4);
/// Resident memory may grow this much (percent) after warm-up.
const MAX_RSS_GROWTH_PCT: f64 = 5.0;
/// Memory growth is checked only over at least this long after a warm-up.
const MIN_RSS_WINDOW: Duration = Duration::from_secs(300);
/// Failed puts allowed (percent of puts).
const MAX_PUT_FAIL_PCT: f64 = 1.0;

/// The command line.
struct Args {
    run: Duration,
    owners: usize,
    te_targets: usize,
    segment_mib: u64,
    warmup: Duration,
    chaos_every: Duration,
    master_every: Duration,
    ha: bool,
    out: PathBuf,
    bin_dir: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let kinds = |name: &str| match name {
        "minutes" | "owners" | "te_targets" | "segment_mib" | "warmup_secs"
        | "chaos_every_secs" | "master_every_secs" | "ha" | "out" | "bin_dir" => {
            Some(FlagKind::Value)
        }
        _ => None,
    };
    let flags = Flags::parse(std::env::args().skip(1), kinds)?;
    if let Some(unknown) = flags.unknown.first() {
        return Err(format!("unknown flag --{unknown}"));
    }
    let num = |name: &str, default: f64| -> Result<f64, String> {
        flags.get(name).map_or(Ok(default), |v| {
            v.parse::<f64>()
                .ok()
                .filter(|n| *n > 0.0)
                .ok_or_else(|| format!("--{name}: '{v}' is not a positive number"))
        })
    };
    let minutes = num("minutes", 2.0)?;
    let run = Duration::from_secs_f64(minutes * 60.0);
    let secs = |name: &str, default: Duration| -> Result<Duration, String> {
        Ok(Duration::from_secs_f64(num(name, default.as_secs_f64())?))
    };
    let ha = match flags.get("ha").unwrap_or("auto") {
        "on" => true,
        "off" => false,
        "auto" => which("etcd"),
        other => return Err(format!("--ha: '{other}' is not auto|on|off")),
    };
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let default_bins = exe
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Ok(Args {
        run,
        owners: num("owners", 3.0)? as usize,
        te_targets: num("te_targets", 2.0)? as usize,
        segment_mib: num("segment_mib", 64.0)? as u64,
        warmup: secs("warmup_secs", (run / 5).min(Duration::from_secs(120)))?,
        chaos_every: secs("chaos_every_secs", Duration::from_secs(10))?,
        master_every: secs("master_every_secs", (run / 2).min(Duration::from_secs(300)))?,
        ha,
        out: PathBuf::from(flags.get("out").unwrap_or("target/soak")),
        bin_dir: flags.get("bin_dir").map_or(default_bins, PathBuf::from),
    })
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// The processes of one role, by slot, with how often each slot was started.
struct Slots {
    procs: Vec<Option<Proc>>,
    starts: Vec<u64>,
}

impl Slots {
    fn new(n: usize) -> Slots {
        Slots {
            procs: (0..n).map(|_| None).collect(),
            starts: vec![0; n],
        }
    }
}

/// Totals of the store processes' `INTERVAL` lines.
#[derive(Default, Debug)]
struct StoreTally {
    counts: HashMap<String, u64>,
    max_call_ms: u64,
}

impl StoreTally {
    fn add(&mut self, line: &str) {
        for (k, v) in line
            .split_whitespace()
            .skip(1)
            .filter_map(|w| w.split_once('='))
        {
            let Ok(n) = v.parse::<u64>() else { continue };
            if k == "max_call_ms" {
                self.max_call_ms = self.max_call_ms.max(n);
            } else {
                *self.counts.entry(k.to_string()).or_default() += n;
            }
        }
    }

    fn get(&self, k: &str) -> u64 {
        self.counts.get(k).copied().unwrap_or(0)
    }
}

/// Everything the run keeps.
struct Soak {
    args: Args,
    lines_tx: std::sync::mpsc::Sender<String>,
    lines: Receiver<String>,
    masters: Slots,
    owners: Slots,
    targets: Slots,
    initiators: Slots,
    etcd: Option<(Proc, u16)>,
    master_ports: Vec<[u16; 3]>,
    /// Where each TE target is now: `(segment name, incarnation)`, `None` while down.
    te: Vec<Option<(String, u64)>>,
    /// What the running initiator was last told about each target.
    te_told: Vec<Option<(String, u64)>>,
    te_figures: te_loop::TeFigures,
    ports: Arc<abuse::Ports>,
    store: StoreTally,
    crashes: Vec<String>,
    events: HashMap<&'static str, u64>,
    /// Memory of processes gone or done: `(label, KiB after warm-up, KiB last, time
    /// between)`.
    rss: Vec<(String, u64, u64, Duration)>,
    /// This process (the harness), as a [`Proc`]-like sample pair.
    own_rss: (Option<Sample>, Option<Sample>),
    frozen: Vec<(Instant, i32)>,
    started: Instant,
}

impl Soak {
    fn bin(&self, name: &str) -> PathBuf {
        self.args.bin_dir.join(name)
    }

    fn master_addr(&self) -> String {
        match &self.etcd {
            Some((_, port)) => format!("etcd://127.0.0.1:{port}"),
            None => format!("127.0.0.1:{}", self.master_ports[0][0]),
        }
    }

    fn start_etcd(&mut self) {
        let [port, peer] = free_ports(2)[..] else {
            unreachable!()
        };
        let dir = self.args.out.join("etcd");
        let _ = std::fs::remove_dir_all(&dir);
        let (client, peer) = (
            format!("http://127.0.0.1:{port}"),
            format!("http://127.0.0.1:{peer}"),
        );
        let mut cmd = Command::new("etcd");
        cmd.args([
            "--name=soak".to_string(),
            format!("--data-dir={}", dir.display()),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster=soak={peer}"),
            "--log-level=error".to_string(),
        ]);
        let p = Proc::spawn(
            cmd,
            "etcd#1",
            &self.args.out,
            &self.lines_tx,
            Duration::ZERO,
            Input::Nothing,
        );
        self.etcd = Some((p, port));
        wait_for_port(port);
    }

    fn start_master(&mut self, slot: usize) {
        let [rpc, http, metrics] = self.master_ports[slot];
        let mut cmd = Command::new(self.bin("mooncake_master"));
        cmd.args([
            format!("--rpc_port={rpc}"),
            "--rpc_address=127.0.0.1".into(),
            format!("--metrics_port={metrics}"),
            "--metrics_host=127.0.0.1".into(),
            "--enable_http_metadata_server=true".into(),
            format!("--http_metadata_server_port={http}"),
            "--http_metadata_server_host=127.0.0.1".into(),
            "--client_ttl=5".into(),
        ]);
        if let Some((_, port)) = &self.etcd {
            cmd.args([
                "--enable_ha=true".to_string(),
                format!("--etcd_endpoints=127.0.0.1:{port}"),
                "--ha_lease_ttl_sec=2".to_string(),
            ]);
        }
        self.start(Role::Master, slot, cmd);
    }

    fn start_owner(&mut self, slot: usize) {
        let incarnation = self.owners.starts[slot] + 1;
        let segment = self.args.segment_mib << 20;
        // About 3x the pool: keys x mean value (288 KiB) = 3 x segment per process.
        let keys = 3 * segment / (288 << 10);
        let mut cmd = Command::new(self.bin("store_bench"));
        cmd.args([
            "--mode=pressure".to_string(),
            format!("--master_server_addr={}", self.master_addr()),
            "--metadata_server=P2PHANDSHAKE".into(),
            format!("--global_segment_size={segment}"),
            "--local_buffer_size=16MiB".into(),
            format!("--keys={keys}"),
            "--value_min=64KiB".into(),
            "--value_max=512KiB".into(),
            "--threads=2".into(),
            format!("--duration={}", self.args.run.as_secs() + 600),
            "--report_every=1".into(),
            format!("--call_deadline_ms={}", CALL_DEADLINE.as_millis()),
            format!("--key_prefix=soak-o{slot}-i{incarnation}"),
        ]);
        // One owner moves its data over TCP only, the others take the same-host path.
        if slot == 1 {
            cmd.env("MC_DISABLE_SAME_HOST", "1");
        }
        self.start(Role::Owner, slot, cmd);
    }

    fn start_target(&mut self, slot: usize) {
        let mut cmd = Command::new(self.bin("transfer_engine_bench"));
        cmd.args([
            "--mode=target",
            "--metadata_server=P2PHANDSHAKE",
            "--protocol=tcp",
            "--local_server_name=127.0.0.1",
            "--buffer_size=67108864",
        ]);
        if slot == 1 {
            cmd.env("MC_DISABLE_SAME_HOST", "1");
        }
        self.start(Role::Target, slot, cmd);
    }

    fn start_initiator(&mut self) {
        let exe = std::env::current_exe().expect("the soak's own path");
        let mut cmd = Command::new(exe);
        cmd.arg(te_loop::INITIATOR_MODE);
        self.start(Role::Initiator, 0, cmd);
        self.te_told = vec![None; self.te.len()];
        self.tell_initiator();
    }

    fn start(&mut self, role: Role, slot: usize, mut cmd: Command) {
        cmd.env("MC_LOG_LEVEL", "warn");
        let slots = self.slots(role);
        slots.starts[slot] += 1;
        let label = format!("{}{slot}#{}", role.name(), slots.starts[slot]);
        let input = if role == Role::Initiator {
            Input::Fed
        } else {
            Input::Nothing
        };
        let p = Proc::spawn(
            cmd,
            &label,
            &self.args.out,
            &self.lines_tx,
            self.args.warmup,
            input,
        );
        self.slots(role).procs[slot] = Some(p);
    }

    /// Sends the initiator every target that changed since it was last told.
    fn tell_initiator(&mut self) {
        let Some(initiator) = self.initiators.procs[0].as_mut() else {
            return;
        };
        for (slot, now) in self.te.iter().enumerate() {
            if self.te_told[slot] != *now
                && initiator.send_line(&te_loop::target_line(slot, now.as_ref()))
            {
                self.te_told[slot] = now.clone();
            }
        }
    }

    fn slots(&mut self, role: Role) -> &mut Slots {
        match role {
            Role::Master => &mut self.masters,
            Role::Owner => &mut self.owners,
            Role::Target => &mut self.targets,
            Role::Initiator => &mut self.initiators,
        }
    }

    /// Kills (on purpose) the process in `slot`, keeping its memory figures.
    fn retire(&mut self, role: Role, slot: usize) {
        if role == Role::Target {
            // The initiator hears of it before the target dies.
            self.te[slot] = None;
            self.tell_initiator();
        }
        if let Some(mut p) = self.slots(role).procs[slot].take() {
            p.kill();
            self.keep_rss(&p);
        }
    }

    /// Learns the targets' segment names (from their logs) and tells the initiator.
    fn refresh_targets(&mut self) {
        for (slot, p) in self.targets.procs.iter().enumerate() {
            let Some(p) = p else { continue };
            if self.te[slot].is_none() {
                if let Some(name) = segment_name_in(&self.args.out, &p.label) {
                    self.te[slot] = Some((name, self.targets.starts[slot]));
                }
            }
        }
        self.tell_initiator();
    }

    /// Every TCP port our processes listen on (master RPC, HTTP metadata and metrics,
    /// HA replication, Transfer Engine RPC and data ports of owners, targets and the
    /// initiator), for the abuser.
    fn refresh_abused_ports(&mut self) {
        let mut ports = Vec::new();
        for slots in [&self.masters, &self.owners, &self.targets, &self.initiators] {
            for p in slots.procs.iter().flatten() {
                for port in listening_ports(p.pid()) {
                    ports.push((format!("{}:{port}", p.label), port));
                }
            }
        }
        *self.ports.list.lock() = ports;
    }

    /// Reaps exits: one the chaos did not cause is a crash (and the slot restarts).
    fn check_exits(&mut self) {
        for role in Role::ALL {
            for slot in 0..self.slots(role).procs.len() {
                let exited = self.slots(role).procs[slot]
                    .as_mut()
                    .and_then(|p| p.exited().map(|st| (st, p.label.clone(), p.log_tail())));
                if let Some((status, label, tail)) = exited {
                    self.crashes
                        .push(format!("{label} exited ({status}):\n{tail}"));
                    self.retire(role, slot);
                    self.restart(role, slot);
                }
            }
        }
    }

    fn restart(&mut self, role: Role, slot: usize) {
        match role {
            Role::Master => self.start_master(slot),
            Role::Owner => self.start_owner(slot),
            Role::Target => self.start_target(slot),
            Role::Initiator => self.start_initiator(),
        }
    }

    fn sample_rss(&mut self) {
        if let Some(kib) = rss_kib(std::process::id() as i32) {
            let now = Instant::now();
            if self.started.elapsed() >= self.args.warmup && self.own_rss.0.is_none() {
                self.own_rss.0 = Some((now, kib));
            }
            self.own_rss.1 = Some((now, kib));
        }
        for slots in [
            &mut self.masters,
            &mut self.owners,
            &mut self.targets,
            &mut self.initiators,
        ] {
            for p in slots.procs.iter_mut().flatten() {
                p.sample_rss();
            }
        }
    }

    fn keep_rss(&mut self, p: &Proc) {
        if let Some((base, last, window)) = p.rss_window() {
            self.rss.push((p.label.clone(), base, last, window));
        }
    }

    /// One chaos action, chosen in turn.
    fn chaos(&mut self, round: u64, rng: &mut u64) {
        let mut pick = |n: usize| {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            (*rng % n.max(1) as u64) as usize
        };
        let freeze = Duration::from_millis(1000 + pick(3000) as u64);
        match round % 4 {
            // Owner 0 is never killed: its memory is measured over the whole run.
            0 if self.owners.procs.len() > 1 => {
                let slot = 1 + pick(self.owners.procs.len() - 1);
                self.retire(Role::Owner, slot);
                self.start_owner(slot);
                *self.events.entry("owner SIGKILL + restart").or_default() += 1;
            }
            1 => {
                let slot = pick(self.owners.procs.len());
                self.freeze(Role::Owner, slot, freeze);
                *self.events.entry("owner SIGSTOP 1-4 s").or_default() += 1;
            }
            2 if !self.targets.procs.is_empty() => {
                let slot = pick(self.targets.procs.len());
                if round % 8 == 2 {
                    self.retire(Role::Target, slot);
                    self.start_target(slot);
                    *self
                        .events
                        .entry("TE target SIGKILL + restart")
                        .or_default() += 1;
                } else {
                    self.freeze(Role::Target, slot, freeze);
                    *self.events.entry("TE target SIGSTOP 1-4 s").or_default() += 1;
                }
            }
            _ => {
                let slot = pick(self.owners.procs.len());
                self.freeze(Role::Owner, slot, freeze);
                *self.events.entry("owner SIGSTOP 1-4 s").or_default() += 1;
            }
        }
    }

    fn freeze(&mut self, role: Role, slot: usize, how_long: Duration) {
        if let Some(p) = &self.slots(role).procs[slot] {
            p.signal(libc::SIGSTOP);
            let pid = p.pid();
            self.frozen
                .push((Instant::now() + how_long.min(MAX_FREEZE), pid));
        }
    }

    fn thaw_due(&mut self) {
        let now = Instant::now();
        self.frozen.retain(|(at, pid)| {
            if *at <= now {
                // SAFETY: kill(2) on a child pid; SIGCONT to a reaped pid is harmless
                // here since pids are not reused within seconds on this host.
                unsafe {
                    libc::kill(*pid, libc::SIGCONT);
                }
                false
            } else {
                true
            }
        });
    }

    /// Restarts the master (SIGKILL, same ports); with HA, kills the leader instead.
    fn master_chaos(&mut self) {
        let leader = (0..self.masters.procs.len()).find(|&slot| {
            let port = self.master_ports[slot][0];
            std::net::TcpStream::connect_timeout(
                &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
                Duration::from_millis(500),
            )
            .is_ok()
        });
        let slot = leader.unwrap_or(0);
        self.retire(Role::Master, slot);
        self.start_master(slot);
        // A standby becomes the leader: its memory is measured afresh.
        let warmup = self.args.warmup;
        for p in self.masters.procs.iter_mut().flatten() {
            p.rewarm(warmup);
        }
        let what = if self.etcd.is_some() {
            "HA leader SIGKILL + restart"
        } else {
            "master SIGKILL + restart"
        };
        *self.events.entry(what).or_default() += 1;
    }

    fn drain_lines(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            if line.starts_with("INTERVAL ") {
                self.store.add(&line);
            } else if line.starts_with("TE ") {
                self.te_figures.update(&line);
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Master,
    Owner,
    Target,
    Initiator,
}

impl Role {
    const ALL: [Role; 4] = [Role::Master, Role::Owner, Role::Target, Role::Initiator];

    fn name(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Owner => "owner",
            Role::Target => "target",
            Role::Initiator => "initiator",
        }
    }
}

/// The segment name a `transfer_engine_bench --mode=target` logged, if it did yet.
fn segment_name_in(dir: &Path, label: &str) -> Option<String> {
    let log = std::fs::read_to_string(dir.join(format!("{}.log", label.replace('#', "-")))).ok()?;
    log.lines()
        .find_map(|l| l.split("listening on ").nth(1))
        .map(|s| s.trim().to_string())
}

fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn main() -> ExitCode {
    mooncake::host::logger::install();
    if std::env::args().nth(1).as_deref() == Some(te_loop::INITIATOR_MODE) {
        return te_loop::initiator_main(CALL_DEADLINE);
    }
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("soak: {e}");
            return ExitCode::from(2);
        }
    };
    std::fs::create_dir_all(&args.out).expect("creating the output directory");
    let (lines_tx, lines) = channel();
    let masters = if args.ha { 2 } else { 1 };
    let master_ports = (0..masters)
        .map(|_| {
            let p = free_ports(3);
            [p[0], p[1], p[2]]
        })
        .collect();
    let mut soak = Soak {
        lines_tx,
        lines,
        masters: Slots::new(masters),
        owners: Slots::new(args.owners),
        targets: Slots::new(args.te_targets),
        initiators: Slots::new(1),
        etcd: None,
        master_ports,
        te: vec![None; args.te_targets],
        te_told: vec![None; args.te_targets],
        te_figures: te_loop::TeFigures::default(),
        ports: Arc::new(abuse::Ports::default()),
        store: StoreTally::default(),
        crashes: Vec::new(),
        events: HashMap::new(),
        rss: Vec::new(),
        own_rss: (None, None),
        frozen: Vec::new(),
        started: Instant::now(),
        args,
    };
    println!(
        "soak: {:.1} min, {} owners x {} MiB (3x oversubscribed), {} TE targets, {}; \
         logs in {}",
        soak.args.run.as_secs_f64() / 60.0,
        soak.args.owners,
        soak.args.segment_mib,
        soak.args.te_targets,
        if soak.args.ha {
            "2 HA masters over etcd"
        } else {
            "1 master"
        },
        soak.args.out.display()
    );
    if soak.args.ha {
        soak.start_etcd();
    }
    for slot in 0..soak.masters.procs.len() {
        soak.start_master(slot);
    }
    wait_for_port(soak.master_ports[0][0]);
    for slot in 0..soak.args.owners {
        soak.start_owner(slot);
    }
    for slot in 0..soak.args.te_targets {
        soak.start_target(slot);
    }
    soak.start_initiator();

    let stop = Arc::new(AtomicBool::new(false));
    let abuse_tally = Arc::new(abuse::AbuseTally::default());
    std::thread::scope(|scope| {
        let (ports, at, st) = (soak.ports.clone(), abuse_tally.clone(), stop.clone());
        scope.spawn(move || abuse::run(&ports, &at, Duration::from_secs(2), &st));
        drive(&mut soak);
        stop.store(true, Ordering::Relaxed);
    });
    report(&mut soak, &abuse_tally)
}

/// The main loop: chaos on schedule, exits checked, memory sampled, until the end.
fn drive(soak: &mut Soak) {
    let mut rng = 0x1234_5678_9abc_def1u64;
    let mut round = 0u64;
    let mut next_chaos = Instant::now() + chaos_settle(soak.args.warmup) + soak.args.chaos_every;
    let mut next_master = Instant::now() + soak.args.master_every;
    let mut next_sample = Instant::now();
    let end = soak.started + soak.args.run;
    while Instant::now() < end {
        soak.drain_lines();
        soak.check_exits();
        soak.thaw_due();
        soak.refresh_targets();
        if Instant::now() >= next_sample {
            soak.sample_rss();
            soak.refresh_abused_ports();
            next_sample += Duration::from_secs(5);
        }
        // Chaos starts once the processes are up, so the warm-up sees every kind of it
        // (a process's memory reaches its working size under chaos, not before: the
        // first restarts of peers grow pools and arenas once); none in the last tenth
        // (the final memory sample is taken there).
        let calm = soak.started.elapsed() < chaos_settle(soak.args.warmup)
            || Instant::now() + soak.args.run / 10 > end;
        if !calm && Instant::now() >= next_master {
            soak.master_chaos();
            next_master += soak.args.master_every;
        } else if !calm && Instant::now() >= next_chaos {
            soak.chaos(round, &mut rng);
            round += 1;
            next_chaos += soak.args.chaos_every;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    soak.sample_rss();
    for (_, pid) in std::mem::take(&mut soak.frozen) {
        // SAFETY: kill(2) on a child pid.
        unsafe {
            libc::kill(pid, libc::SIGCONT);
        }
    }
    // The initiator ends its last cycle and prints its final tally.
    if let Some(initiator) = soak.initiators.procs[0].as_mut() {
        initiator.close_stdin();
        if initiator
            .wait_exit(CALL_DEADLINE + Duration::from_secs(10))
            .is_none()
        {
            soak.crashes.push(format!(
                "{} did not end within {} s of being told to",
                initiator.label,
                CALL_DEADLINE.as_secs() + 10
            ));
        }
    }
    std::thread::sleep(Duration::from_millis(1500));
    soak.drain_lines();
}

/// How long after the start chaos begins: a quarter of the warm-up, at most 30 s.
fn chaos_settle(warmup: Duration) -> Duration {
    (warmup / 4).min(Duration::from_secs(30))
}

/// Prints the table and returns the verdict.
fn report(soak: &mut Soak, abuse_tally: &abuse::AbuseTally) -> ExitCode {
    // Every process measured for long enough after its warm-up, gone or alive.
    let alive: Vec<Proc> = [
        &mut soak.masters,
        &mut soak.owners,
        &mut soak.targets,
        &mut soak.initiators,
    ]
    .into_iter()
    .flat_map(|slots| slots.procs.iter_mut().filter_map(Option::take))
    .collect();
    for p in &alive {
        soak.keep_rss(p);
    }
    // Growth is checked over at least MIN_RSS_WINDOW after warm-up: a shorter window
    // mostly shows allocators and caches still filling (reported, not checked).
    let min_window = (soak.args.run / 6).max(MIN_RSS_WINDOW);
    let rss: Vec<(String, u64, u64, bool)> = soak
        .rss
        .iter()
        .map(|(label, base, last, window)| (label.clone(), *base, *last, *window >= min_window))
        .collect();
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let s = &soak.store;
    let te = &soak.te_figures;
    let puts = s.get("puts");
    let put_fail_pct = 100.0 * s.get("put_failed") as f64 / puts.max(1) as f64;
    let corrupt = s.get("corrupt") + te.get("corrupt");
    let late = s.get("late") + te.get("late");
    let growth = |base: u64, last: u64| 100.0 * (last as f64 - base as f64) / base.max(1) as f64;
    let worst_rss = rss
        .iter()
        .filter(|(_, _, _, checked)| *checked)
        .map(|(_, b, l, _)| growth(*b, *l))
        .fold(f64::MIN, f64::max);
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| duration | {:.1} min |",
        soak.started.elapsed().as_secs_f64() / 60.0
    );
    println!(
        "| store puts (failed) | {} ({} = {put_fail_pct:.3} %) |",
        puts,
        s.get("put_failed")
    );
    println!(
        "| store gets: hits / misses / errors | {} / {} / {} |",
        s.get("hits"),
        s.get("misses"),
        s.get("get_errors")
    );
    println!(
        "| store removes (errors) | {} ({}) |",
        s.get("removes"),
        s.get("remove_errors")
    );
    println!(
        "| TE cycles verified / failed / interrupted by a restart | {} / {} / {} |",
        te.get("verified"),
        te.get("failed"),
        te.get("interrupted")
    );
    println!("| corrupt reads (store + TE) | {corrupt} |");
    println!(
        "| calls past the {} s deadline | {late} (slowest store call {} ms, transfer {} ms) |",
        CALL_DEADLINE.as_secs(),
        s.max_call_ms,
        te.get("max_ms")
    );
    println!("| crashes | {} |", soak.crashes.len());
    let mut events: Vec<_> = soak.events.iter().collect();
    events.sort();
    for (what, n) in events {
        println!("| chaos: {what} | {n} |");
    }
    println!(
        "| abuse: idle or half-sent / garbage connections | {} / {} |",
        load(&abuse_tally.idle),
        load(&abuse_tally.garbage)
    );
    for (label, base, last, checked) in &rss {
        println!(
            "| private RSS after warm-up -> end: {label} | {} -> {} MiB ({:+.2} %){} |",
            base / 1024,
            last / 1024,
            growth(*base, *last),
            if *checked {
                ""
            } else {
                "; measured too briefly to check"
            }
        );
    }
    // Not checked: the harness (a reader thread per child started, the chaos, the
    // abuser), whose thread stacks glibc caches; it runs no engine or store code.
    if let (Some((_, base)), Some((_, last))) = soak.own_rss {
        println!(
            "| private RSS of the harness (not checked) | {} -> {} MiB ({:+.2} %) |",
            base / 1024,
            last / 1024,
            growth(base, last)
        );
    }
    for c in &soak.crashes {
        println!("\nCRASH {c}");
    }
    let mut failed = Vec::new();
    if corrupt > 0 {
        failed.push(format!("{corrupt} corrupt reads"));
    }
    if late > 0 {
        failed.push(format!("{late} calls past their deadline"));
    }
    if !soak.crashes.is_empty() {
        failed.push(format!("{} crashes", soak.crashes.len()));
    }
    if worst_rss >= MAX_RSS_GROWTH_PCT {
        failed.push(format!("RSS grew {worst_rss:.2} % after warm-up"));
    }
    if put_fail_pct >= MAX_PUT_FAIL_PCT {
        failed.push(format!("{put_fail_pct:.3} % of puts failed"));
    }
    if puts == 0 || te.get("verified") == 0 {
        failed.push("no verified traffic".into());
    }
    drop(alive);
    if let Some((p, _)) = soak.etcd.as_mut() {
        p.kill();
    }
    if failed.is_empty() {
        println!("\nsoak: passed");
        ExitCode::SUCCESS
    } else {
        println!("\nsoak: FAILED: {}", failed.join("; "));
        ExitCode::FAILURE
    }
}
