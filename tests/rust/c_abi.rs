//! The C ABI from C and C++: compiles each program in `tests/c/` against `include/` and
//! the freshly built `libmooncake.so` with AddressSanitizer (+ UBSan for C, leak checks
//! on), runs it, and fails with its output unless it exits as expected.
//!
//! Needs `gcc`, `g++` and binutils (`scripts/test-all.sh` installs them, or sets
//! `MOONCAKE_SKIP_C_TESTS=1`, which skips every test here, when it cannot). The C
//! programs only use 127.0.0.1 (`MC_TCP_BIND_ADDRESS`).
//!
//! Two switches for the sanitizer runs (`scripts/check-sanitizers.sh`):
//! * `MOONCAKE_C_ABI_LIBRARY=<path>` tests that library instead of this build's (e.g. one
//!   built with `-Zsanitizer=address`, so the Rust code is instrumented too);
//! * `MOONCAKE_C_ABI_VALGRIND=1` builds the programs without sanitizers and runs each
//!   under `valgrind` (memcheck, leak check on), failing on any error it reports
//!   (suppressions: `tests/c/valgrind.supp`).

use mooncake::metadata::http_server::HttpMetadataServer;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Whether `MOONCAKE_SKIP_C_TESTS` is set (no C compiler here); says so when it is.
fn skip(test: &str) -> bool {
    let set = std::env::var_os("MOONCAKE_SKIP_C_TESTS").is_some_and(|v| !v.is_empty() && v != "0");
    if set {
        eprintln!("SKIPPED {test}: MOONCAKE_SKIP_C_TESTS is set");
    }
    set
}

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
    if let Some(lib) = std::env::var_os("MOONCAKE_C_ABI_LIBRARY") {
        let lib = PathBuf::from(lib);
        assert!(
            lib.is_file(),
            "MOONCAKE_C_ABI_LIBRARY={} is not a file",
            lib.display()
        );
        return lib;
    }
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

/// `MOONCAKE_C_ABI_VALGRIND=1`: no sanitizers in the programs, each run under valgrind.
fn valgrind() -> bool {
    std::env::var_os("MOONCAKE_C_ABI_VALGRIND").is_some_and(|v| v != "0" && !v.is_empty())
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
        // Separate directories, so runs against other libraries never share links.
        let mut name = String::from("c-abi");
        if std::env::var_os("MOONCAKE_C_ABI_LIBRARY").is_some() {
            name.push_str("-custom");
        }
        if valgrind() {
            name.push_str("-valgrind");
        }
        let base = profile_dir().join(name);
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
        cmd.args(["-std=c++17", "-Wall", "-Wextra", "-Werror"]);
        if !valgrind() {
            cmd.arg("-fsanitize=address");
        }
    } else {
        cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"]);
        if !valgrind() {
            cmd.args([
                "-fsanitize=address,undefined",
                "-fno-sanitize-recover=undefined",
            ]);
        }
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
    let mut cmd = if valgrind() {
        let mut c = Command::new("valgrind");
        c.args([
            "--error-exitcode=99",
            "--leak-check=full",
            "--show-leak-kinds=definite,indirect",
            "--errors-for-leak-kinds=definite,indirect",
            "--fair-sched=yes",
            "--num-callers=30",
        ])
        .arg(format!(
            "--suppressions={}",
            root().join("tests/c/valgrind.supp").display()
        ))
        .arg(exe);
        c
    } else {
        Command::new(exe)
    };
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
    if skip("layout_and_signatures") {
        return;
    }
    compile_and_run("layout.c");
}

#[test]
fn every_function_and_error_path() {
    if skip("every_function_and_error_path") {
        return;
    }
    compile_and_run("api_errors.c");
}

#[test]
fn loopback_transfers_and_notifies() {
    if skip("loopback_transfers_and_notifies") {
        return;
    }
    compile_and_run("loopback.c");
}

#[test]
fn tent_api_every_function() {
    if skip("tent_api_every_function") {
        return;
    }
    let exe = compile("tent_api.c");
    for env in [vec![], vec![("MC_DISABLE_SAME_HOST", "1".to_string())]] {
        let (code, text) = run(&exe, &env);
        assert_eq!(
            code,
            Some(0),
            "tent_api.c {env:?} failed (exit {code:?})\n{text}"
        );
        println!("tent_api.c {env:?}:\n{text}");
    }
    let _ = std::fs::remove_file(&exe);
}

#[test]
fn threads_share_one_engine() {
    if skip("threads_share_one_engine") {
        return;
    }
    compile_and_run("threads.c");
}

#[test]
fn cxx_translation_unit() {
    if skip("cxx_translation_unit") {
        return;
    }
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
    if skip("store_api_error_paths_and_master") {
        return;
    }
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
    if skip("graceful_shutdown_destroys_engines_and_exits") {
        return;
    }
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

/// `mooncake_p2p_*`: every NULL/bad-handle/bad-argument path, then two P2P nodes in
/// the C program sharing an in-process HTTP metadata server (`MOONCAKE_TEST_METADATA_URL`);
/// destroying them must leave no payload or agent key behind.
#[test]
fn p2p_store_api() {
    if skip("p2p_store_api") {
        return;
    }
    let server = HttpMetadataServer::start("127.0.0.1:0".parse().unwrap()).expect("server");
    let url = format!("http://{}/metadata", server.local_addr());
    let exe = compile("p2p_api.c");
    let env = [
        ("MOONCAKE_TEST_METADATA_URL", url),
        ("MC_P2P_NO_SOURCE_RETRIES", "0".to_string()),
    ];
    let (code, text) = run(&exe, &env);
    let _ = std::fs::remove_file(&exe);
    assert_eq!(code, Some(0), "p2p_api.c failed (exit {code:?})\n{text}");
    assert!(!text.contains("skipping"), "{text}");
    let left: Vec<String> = server
        .table()
        .keys()
        .into_iter()
        .filter(|k| k.starts_with("mooncake/checkpoint/") || k.starts_with("mooncake/p2p/"))
        .collect();
    assert!(left.is_empty(), "P2P keys left: {left:?}\n{text}");
    server.stop();
    println!("p2p_api.c:\n{text}");
}

/// Functions declared in a cbindgen-generated header: declarations start at column 0
/// with the return type, and the name is the identifier before the first `(`.
fn declared_functions(header: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join("include/mooncake").join(header))
        .unwrap_or_else(|e| panic!("reading {header}: {e}"));
    text.lines()
        .filter(|l| {
            l.starts_with(|c: char| c.is_ascii_alphabetic())
                && !l.starts_with("typedef")
                && !l.starts_with("struct")
                && !l.starts_with("extern")
                && l.contains('(')
        })
        .map(|l| {
            let before = &l[..l.find('(').unwrap()];
            before
                .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// The dynamic symbol table is exactly the C API: upstream's 27 Transfer Engine
/// functions, 19 Store functions and 33 TENT functions under their exact names, plus
/// the `mooncake_*`
/// extensions declared in `mooncake_ext.h`; nothing else (no data symbols, no
/// Rust-mangled or dependency symbols). Also checks the headers declare exactly that.
#[test]
fn exports_upstream_symbols() {
    if skip("exports_upstream_symbols") {
        return;
    }
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
    const TENT: [&str; 33] = [
        "tent_load_config_from_file",
        "tent_set_config",
        "tent_create_engine",
        "tent_destroy_engine",
        "tent_segment_name",
        "tent_rpc_server_addr_port",
        "tent_open_segment",
        "tent_close_segment",
        "tent_get_segment_info",
        "tent_free_segment_info",
        "tent_allocate_memory",
        "tent_free_memory",
        "tent_register_memory",
        "tent_unregister_memory",
        "tent_allocate_batch",
        "tent_free_batch",
        "tent_submit",
        "tent_submit_notif",
        "tent_send_notifs",
        "tent_recv_notifs",
        "tent_free_notifs",
        "tent_task_status",
        "tent_cancel_task",
        "tent_overall_status",
        "tent_available",
        "tent_register_memory_with_perm",
        "tent_register_memory_batch",
        "tent_unregister_memory_batch",
        "tent_allocate_memory_ex",
        "tent_register_memory_ex",
        "tent_register_memory_batch_ex",
        "tent_task_status_list",
        "tent_get_nic_load_stats",
    ];
    let te = declared_functions("transfer_engine_c.h");
    let st = declared_functions("store_c.h");
    let tent = declared_functions("tent/transfer_engine.h");
    let mut tent_sorted = tent.clone();
    tent_sorted.sort();
    let mut want_tent: Vec<String> = TENT.iter().map(|s| s.to_string()).collect();
    want_tent.sort();
    assert_eq!(
        tent_sorted, want_tent,
        "tent/transfer_engine.h declares other functions"
    );
    let ext = declared_functions("mooncake_ext.h");
    let mut te_sorted = te.clone();
    te_sorted.sort();
    let mut want_te: Vec<String> = UPSTREAM.iter().map(|s| s.to_string()).collect();
    want_te.sort();
    assert_eq!(
        te_sorted, want_te,
        "transfer_engine_c.h declares other functions"
    );
    let mut st_sorted = st.clone();
    st_sorted.sort();
    let mut want_st: Vec<String> = STORE.iter().map(|s| s.to_string()).collect();
    want_st.sort();
    assert_eq!(st_sorted, want_st, "store_c.h declares other functions");
    for f in &ext {
        assert!(
            f.starts_with("mooncake_"),
            "extension {f} lacks the mooncake_ prefix"
        );
    }
    for f in ["mooncake_last_error_message", "mooncake_version"] {
        assert!(
            ext.iter().any(|e| e == f),
            "{f} is not declared in mooncake_ext.h"
        );
    }
    let mut expected: Vec<String> = te.into_iter().chain(st).chain(tent).chain(ext).collect();
    expected.sort();
    let before = expected.len();
    expected.dedup();
    assert_eq!(before, expected.len(), "a function is declared twice");

    let lib = library();
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("running nm");
    assert!(out.status.success(), "nm failed\n{}", output_text(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut exported: Vec<String> = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (kind, name) = match fields.as_slice() {
            [_addr, kind, name] => (*kind, *name),
            [kind, name] => (*kind, *name),
            _ => continue,
        };
        assert_eq!(kind, "T", "non-function symbol exported: {line}");
        assert!(
            !name.starts_with("_ZN") && !name.starts_with("_R"),
            "Rust symbol exported: {name}"
        );
        // Symbol versions, if any, are not part of the name.
        exported.push(name.split('@').next().unwrap().to_string());
    }
    exported.sort();
    let missing: Vec<_> = expected.iter().filter(|f| !exported.contains(f)).collect();
    let extra: Vec<_> = exported.iter().filter(|f| !expected.contains(f)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{}: exported symbols differ from the headers\nmissing: {missing:?}\nextra: {extra:?}",
        lib.display()
    );
    println!(
        "{} exports exactly {} functions ({} Transfer Engine, {} Store, {} TENT, {} \
         extensions)",
        lib.display(),
        exported.len(),
        UPSTREAM.len(),
        STORE.len(),
        TENT.len(),
        exported.len() - UPSTREAM.len() - STORE.len() - TENT.len()
    );
}

/// `readelf -d`: the SONAME is `libmooncake.so.0` (build.rs) and the library needs
/// nothing beyond the C runtime (libc, libgcc_s, libm, libdl, libpthread, the loader):
/// RDMA and CUDA are loaded at run time, never linked.
#[test]
fn soname_and_needed_libraries() {
    if skip("soname_and_needed_libraries") {
        return;
    }
    const ALLOWED: [&str; 7] = [
        "libc.so.6",
        "libgcc_s.so.1",
        "libm.so.6",
        "libdl.so.2",
        "libpthread.so.0",
        "ld-linux-x86-64.so.2",
        "ld-linux-aarch64.so.1",
    ];
    let lib = library();
    let out = Command::new("readelf")
        .arg("-d")
        .arg(&lib)
        .output()
        .expect("running readelf");
    assert!(
        out.status.success(),
        "readelf failed\n{}",
        output_text(&out)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let value = |line: &str| -> String {
        let start = line.find('[').expect("[") + 1;
        let end = line.rfind(']').expect("]");
        line[start..end].to_string()
    };
    let needed: Vec<String> = text
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .map(value)
        .collect();
    let soname: Vec<String> = text
        .lines()
        .filter(|l| l.contains("(SONAME)"))
        .map(value)
        .collect();
    assert!(!needed.is_empty(), "no NEEDED entries?\n{text}");
    for n in &needed {
        assert!(
            ALLOWED.contains(&n.as_str()),
            "{} needs {n}, beyond the C runtime\n{text}",
            lib.display()
        );
    }
    assert_eq!(soname, ["libmooncake.so.0"], "SONAME\n{text}");
    println!("{}: SONAME {soname:?}, NEEDED {needed:?}", lib.display());
}
