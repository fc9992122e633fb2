//! The C ABI from C and C++: compiles each program in `tests/c/` against `include/` and
//! the freshly built `libmooncake.so` with AddressSanitizer (+ UBSan for C, leak checks
//! on), runs it, and fails with its output unless it exits as expected.
//!
//! Needs `gcc` and `g++`. The C programs only use 127.0.0.1 (`MC_TCP_BIND_ADDRESS`).

use mooncake::metadata::http_server::HttpMetadataServer;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Only reached when a program hangs; nothing asserts on timing.
const RUN_DEADLINE: Duration = Duration::from_secs(300);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>`, found from this test executable (`target/<profile>/deps/c_abi-*`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    deps.parent().expect("profile dir").to_path_buf()
}

fn newest_library(profile: &Path) -> Option<PathBuf> {
    [
        profile.join("deps/libmooncake.so"),
        profile.join("libmooncake.so"),
    ]
    .into_iter()
    .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
    .max()
    .map(|(_, p)| p)
}

/// The cdylib. `cargo test` builds it next to the rlib (`deps/libmooncake.so`); if it
/// is missing, build it with the cargo that runs this test.
fn library() -> PathBuf {
    let profile = profile_dir();
    if let Some(lib) = newest_library(&profile) {
        return lib;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root()).args(["build", "--lib"]);
    if profile.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("running cargo build --lib");
    assert!(status.success(), "cargo build --lib failed");
    newest_library(&profile).expect("libmooncake.so after cargo build --lib")
}

struct Setup {
    /// Holds `libmooncake.so` and `libmooncake.so.0` links to the built library.
    lib_dir: PathBuf,
    /// Where test binaries go.
    bin_dir: PathBuf,
}

/// Replaces `link` atomically with a symlink to `target`.
fn symlink(target: &Path, link: &Path) {
    let tmp = link.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).expect("symlink");
    std::fs::rename(&tmp, link).expect("rename symlink");
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let lib = library();
        let base = profile_dir().join("c-abi");
        let lib_dir = base.join("lib");
        let bin_dir = base.join("bin");
        std::fs::create_dir_all(&lib_dir).expect("create lib dir");
        std::fs::create_dir_all(&bin_dir).expect("create bin dir");
        // Whatever SONAME the library carries, the loader finds it here.
        symlink(&lib, &lib_dir.join("libmooncake.so"));
        symlink(&lib, &lib_dir.join("libmooncake.so.0"));
        Setup { lib_dir, bin_dir }
    })
}

fn output_text(out: &std::process::Output) -> String {
    format!(
        "--- stdout ---\n{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Compiles `tests/c/<source>` into an executable and returns its path.
fn compile(source: &str) -> PathBuf {
    let s = setup();
    let src = root().join("tests/c").join(source);
    let stem = Path::new(source)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let exe = s.bin_dir.join(format!("{stem}-{}", std::process::id()));
    let cxx = source.ends_with(".cpp");
    let mut cmd = Command::new(if cxx { "g++" } else { "gcc" });
    if cxx {
        cmd.args([
            "-std=c++17",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsanitize=address",
        ]);
    } else {
        cmd.args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=undefined",
        ]);
    }
    cmd.args(["-fno-omit-frame-pointer", "-g", "-O1", "-pthread"])
        .arg("-I")
        .arg(root().join("include"))
        .arg("-I")
        .arg(root().join("tests/c"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&s.lib_dir)
        .arg(format!("-Wl,-rpath,{}", s.lib_dir.display()))
        .arg("-lmooncake");
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running the compiler for {source}: {e}"));
    assert!(
        out.status.success(),
        "compiling {source} failed: {cmd:?}\n{}",
        output_text(&out)
    );
    exe
}

/// Runs a compiled test program with the sanitizer and engine environment, waiting
/// (with a generous deadline) for it to exit.
fn run(exe: &Path, extra_env: &[(&str, String)]) -> (Option<i32>, String) {
    let s = setup();
    let supp = root().join("tests/c/lsan.supp");
    let mut cmd = Command::new(exe);
    cmd.env("LD_LIBRARY_PATH", &s.lib_dir)
        .env(
            "ASAN_OPTIONS",
            "detect_leaks=1:abort_on_error=0:halt_on_error=1",
        )
        .env(
            "LSAN_OPTIONS",
            format!("suppressions={}:print_suppressions=0", supp.display()),
        )
        .env("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        .env("MC_TCP_BIND_ADDRESS", "127.0.0.1")
        .env_remove("MC_FORCE_TCP")
        .env_remove("MC_LEGACY_RPC_PORT_BINDING")
        .env_remove("MC_METADATA_CLUSTER_ID")
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", exe.display()));
    // Drain both pipes on threads so a chatty program never blocks on a full pipe.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stderr, &mut v);
        v
    });
    let deadline = Instant::now() + RUN_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the test program") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = format!(
        "--- stdout ---\n{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out_reader.join().unwrap()),
        String::from_utf8_lossy(&err_reader.join().unwrap())
    );
    match status {
        Some(s) => (s.code(), text),
        None => (None, format!("killed after {RUN_DEADLINE:?}\n{text}")),
    }
}

fn compile_and_run(source: &str) {
    let exe = compile(source);
    let (code, text) = run(&exe, &[]);
    let _ = std::fs::remove_file(&exe);
    assert_eq!(code, Some(0), "{source} failed (exit {code:?})\n{text}");
    println!("{source}:\n{text}");
}

#[test]
fn layout_and_signatures() {
    compile_and_run("layout.c");
}

#[test]
fn every_function_and_error_path() {
    compile_and_run("api_errors.c");
}

#[test]
fn loopback_transfers_and_notifies() {
    compile_and_run("loopback.c");
}

#[test]
fn threads_share_one_engine() {
    compile_and_run("threads.c");
}

#[test]
fn cxx_translation_unit() {
    compile_and_run("cxx_compile.cpp");
}

#[path = "store_support/tcp_master.rs"]
mod tcp_master;

/// `store_c.h`: first without a master (every NULL/invalid path, setup failures that
/// must return promptly), then end to end, with two stores in the C program putting
/// and getting through an in-process master served over coro_rpc on loopback
/// (`MOONCAKE_TEST_MASTER`, unless already set to an external master).
#[test]
fn store_api_error_paths_and_master() {
    let exe = compile("store_api.c");
    let fast_fail = [
        ("MC_RPC_TIMEOUT_MS", "3000".to_string()),
        ("MC_RPC_CONNECT_TIMEOUT_MS", "3000".to_string()),
        ("MC_STORE_CLIENT_SETUP_RETRIES", "3".to_string()),
    ];
    let (code, text) = run(&exe, &fast_fail);
    assert_eq!(
        code,
        Some(0),
        "store_api.c without a master failed (exit {code:?})\n{text}"
    );
    println!("store_api.c (no master):\n{text}");
    let master = std::env::var("MOONCAKE_TEST_MASTER").unwrap_or_else(|_| {
        tcp_master::serve(mooncake::master::MasterService::new(
            mooncake::master::MasterConfig::default(),
        ))
    });
    let (code, text) = run(&exe, &[("MOONCAKE_TEST_MASTER", master)]);
    let _ = std::fs::remove_file(&exe);
    assert_eq!(
        code,
        Some(0),
        "store_api.c with a master failed (exit {code:?})\n{text}"
    );
    assert!(!text.contains("skipping"), "{text}");
    println!("store_api.c (master):\n{text}");
}

#[test]
fn graceful_shutdown_destroys_engines_and_exits() {
    let server = HttpMetadataServer::start("127.0.0.1:0".parse().unwrap()).expect("server");
    let url = format!("http://{}/metadata", server.local_addr());
    let exe = compile("graceful_shutdown.c");
    let (code, text) = run(&exe, &[("MOONCAKE_TEST_METADATA_URL", url)]);
    let _ = std::fs::remove_file(&exe);
    assert_eq!(
        code,
        Some(128 + libc::SIGTERM),
        "expected exit 143 after SIGTERM\n{text}"
    );
    assert!(text.contains("0 failed before the signal"), "{text}");
    let left = server.table().keys();
    assert!(
        left.is_empty(),
        "metadata keys left after graceful shutdown: {left:?}\n{text}"
    );
    server.stop();
}

/// Upstream's 27 functions are exported under their exact names, extensions only as
/// `mooncake_*`, and no Rust-mangled symbol leaks into the dynamic symbol table.
#[test]
fn exports_upstream_symbols() {
    const UPSTREAM: [&str; 27] = [
        "createTransferEngine",
        "discoverTopology",
        "getLocalIpAndPort",
        "installTransport",
        "uninstallTransport",
        "openSegment",
        "openSegmentNoCache",
        "closeSegment",
        "warmupEfaSegment",
        "removeLocalSegment",
        "destroyTransferEngine",
        "registerLocalMemory",
        "unregisterLocalMemory",
        "registerLocalMemoryBatch",
        "unregisterLocalMemoryBatch",
        "allocateBatchID",
        "submitTransfer",
        "submitTransferWithNotify",
        "getNotifsFromEngine",
        "freeNotifsMsgBuf",
        "genNotifyInEngine",
        "getTransferStatus",
        "freeBatchID",
        "syncSegmentCache",
        "getNicLoadStats",
        "enableGracefulShutdown",
        "showLinks",
    ];
    let lib = library();
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("running nm");
    assert!(out.status.success(), "nm failed\n{}", output_text(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let symbols: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let kind = f.nth(1)?;
            let name = f.next()?;
            (kind == "T" || kind == "t").then_some(name)
        })
        .collect();
    for f in UPSTREAM {
        assert!(
            symbols.contains(&f),
            "{f} is not exported by {}",
            lib.display()
        );
    }
    for s in &symbols {
        assert!(
            !s.starts_with("_ZN") && !s.starts_with("_R"),
            "Rust symbol exported: {s}"
        );
    }
    const STORE: [&str; 19] = [
        "mooncake_store_create",
        "mooncake_store_destroy",
        "mooncake_store_setup",
        "mooncake_store_init_all",
        "mooncake_store_health_check",
        "mooncake_store_put",
        "mooncake_store_put_from",
        "mooncake_store_batch_put_from",
        "mooncake_store_get_into",
        "mooncake_store_batch_get_into",
        "mooncake_store_is_exist",
        "mooncake_store_batch_is_exist",
        "mooncake_store_get_size",
        "mooncake_store_get_hostname",
        "mooncake_store_remove",
        "mooncake_store_remove_by_regex",
        "mooncake_store_remove_all",
        "mooncake_store_register_buffer",
        "mooncake_store_unregister_buffer",
    ];
    for f in STORE {
        assert!(
            symbols.contains(&f),
            "{f} is not exported by {}",
            lib.display()
        );
    }
    for ext in ["mooncake_last_error_message", "mooncake_version"] {
        assert!(symbols.contains(&ext), "{ext} is not exported");
    }
}
