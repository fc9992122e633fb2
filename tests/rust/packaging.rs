//! Release artifacts: installs this build into temporary prefixes twice, with
//! `scripts/install.sh` and with CMake (`cmake -B`, `cmake --build`, `cmake --install
//! --prefix`), checks that both produce the same tree, then builds and runs every
//! example in `ffi-examples/` against the install (`ffi-examples/run-all.sh`: C, C++,
//! static, pkg-config, `find_package(Mooncake)`, relinking by upstream's name,
//! `LD_PRELOAD` and symlink swaps).
//!
//! Installs the profile this test was built with (debug under `cargo test`), reusing
//! the target directory, so nothing is rebuilt after `cargo build --lib --bins`.
//! Needs cc, c++, make, pkg-config, readelf and cmake (`.ci/run` installs them);
//! `MOONCAKE_SKIP_PACKAGING=1` skips the test.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>`, found from this test executable (`target/<profile>/deps/packaging-*`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("profile dir")
        .to_path_buf()
}

fn profile() -> String {
    profile_dir()
        .file_name()
        .expect("profile name")
        .to_string_lossy()
        .into_owned()
}

fn target_dir() -> PathBuf {
    profile_dir().parent().expect("target dir").to_path_buf()
}

fn skip() -> bool {
    if std::env::var_os("MOONCAKE_SKIP_PACKAGING").is_some() {
        eprintln!("MOONCAKE_SKIP_PACKAGING is set: skipping");
        return true;
    }
    false
}

/// Runs `cmd`, echoing its output, and fails the test with it unless it succeeds.
fn run(what: &str, cmd: &mut Command) -> String {
    let start = Instant::now();
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("== {what} ({:.1} s)\n{text}", start.elapsed().as_secs_f64());
    assert!(
        out.status.success(),
        "{what} failed ({}): {cmd:?}\n{text}",
        out.status
    );
    text
}

fn fresh_dir(test: &str, name: &str) -> PathBuf {
    let dir = test_dir(test).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// The folder of one test's temporary directories (tests run concurrently in this
/// process, so each removes only its own).
fn test_dir(test: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("packaging-{}-{test}", std::process::id()))
}

/// Every path under `prefix`: a link's target, or a file's bytes with the prefix itself
/// replaced (the pkg-config file holds it), or a directory marker.
fn tree(prefix: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("dir entry").path();
            let rel = path
                .strip_prefix(base)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = std::fs::symlink_metadata(&path).expect("metadata");
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).expect("read_link");
                out.insert(rel, format!("-> {}", target.display()));
            } else if meta.is_dir() {
                out.insert(rel, "dir".into());
                walk(base, &path, out);
            } else {
                let bytes = std::fs::read(&path).expect("read");
                let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111;
                let text = String::from_utf8_lossy(&bytes)
                    .replace(&base.to_string_lossy()[..], "<prefix>");
                out.insert(
                    rel,
                    format!(
                        "exec={} len={} hash={:x}",
                        mode != 0,
                        text.len(),
                        fnv(text.as_bytes())
                    ),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(prefix, prefix, &mut out);
    out
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn script_install(prefix: &Path) {
    run(
        "scripts/install.sh",
        Command::new("bash")
            .current_dir(root())
            .arg("scripts/install.sh")
            .arg("--prefix")
            .arg(prefix)
            .args(["--profile", &profile()])
            .arg("--target-dir")
            .arg(target_dir())
            .env("CARGO", cargo()),
    );
}

fn cmake_install(build: &Path, prefix: &Path) {
    let cmake_profile = format!("-DMOONCAKE_CARGO_PROFILE={}", profile());
    let cargo_path = which_cargo();
    run(
        "cmake configure",
        Command::new("cmake")
            .current_dir(root())
            .arg("-S")
            .arg(root())
            .arg("-B")
            .arg(build)
            .arg(cmake_profile)
            .arg(format!(
                "-DMOONCAKE_CARGO_TARGET_DIR={}",
                target_dir().display()
            ))
            .arg(format!("-DMOONCAKE_CARGO={cargo_path}")),
    );
    run(
        "cmake --build",
        Command::new("cmake").arg("--build").arg(build),
    );
    run(
        "cmake --install",
        Command::new("cmake")
            .arg("--install")
            .arg(build)
            .arg("--prefix")
            .arg(prefix),
    );
}

/// The cargo running this test as an absolute path (CMake's find_program wants one).
fn which_cargo() -> String {
    let cargo = cargo();
    if cargo.contains('/') {
        return cargo;
    }
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {cargo}")])
        .output()
        .expect("sh");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn install_layouts_match_and_examples_run() {
    if skip() {
        return;
    }
    let have_cmake = Command::new("cmake").arg("--version").output().is_ok();
    assert!(
        have_cmake,
        "cmake is not installed (apt-get install cmake, or MOONCAKE_SKIP_PACKAGING=1)"
    );

    let script_prefix = fresh_dir("install", "prefix-script");
    script_install(&script_prefix);
    let cmake_prefix = fresh_dir("install", "prefix-cmake");
    cmake_install(&fresh_dir("install", "cmake-build"), &cmake_prefix);

    let a = tree(&script_prefix);
    let b = tree(&cmake_prefix);
    assert_eq!(
        a, b,
        "scripts/install.sh and cmake --install installed different trees"
    );
    for must in [
        "lib/libmooncake.so.0",
        "lib/libmooncake.so",
        "lib/libtransfer_engine.so",
        "lib/libmooncake_store.so",
        "lib/libmooncake.a",
        "lib/pkgconfig/mooncake.pc",
        "lib/cmake/Mooncake/MooncakeConfig.cmake",
        "lib/cmake/Mooncake/MooncakeConfigVersion.cmake",
        "include/mooncake/transfer_engine_c.h",
        "include/mooncake/store_c.h",
        "include/mooncake/mooncake_ext.h",
        "include/mooncake/transfer_engine.h",
        "include/mooncake/transfer_metadata.h",
        "include/mooncake/memory_location.h",
        "include/mooncake/transport/transport.h",
        "include/mooncake/common/base/status.h",
        "include/mooncake/tent/transfer_engine.h",
        "include/transfer_engine_c.h",
        "include/store_c.h",
        "bin/mooncake_master",
        "bin/transfer_engine_bench",
        "bin/mooncake_http_metadata_server",
        "bin/mooncake_client",
        "bin/mooncake_p2p",
    ] {
        assert!(a.contains_key(must), "{must} is not installed: {a:#?}");
    }
    // Upstream's header names only at the top level.
    let top: Vec<_> = a
        .keys()
        .filter(|k| k.starts_with("include/") && k.matches('/').count() == 1)
        .cloned()
        .collect();
    assert_eq!(
        top,
        [
            "include/mooncake",
            "include/store_c.h",
            "include/transfer_engine_c.h"
        ]
    );
    // One real library file, every other name a link to it.
    let real: Vec<_> = a
        .iter()
        .filter(|(k, v)| k.starts_with("lib/libmooncake.so.") && !v.starts_with("->"))
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(real.len(), 1, "{real:?}");
    assert_eq!(a["lib/libmooncake.so.0"], format!("-> {}", &real[0][4..]));
    for link in [
        "libmooncake.so",
        "libtransfer_engine.so",
        "libmooncake_store.so",
    ] {
        assert_eq!(a[&format!("lib/{link}")], "-> libmooncake.so.0", "{link}");
    }

    let work = fresh_dir("install", "examples");
    let text = run(
        "ffi-examples/run-all.sh",
        Command::new("bash")
            .current_dir(root())
            .arg("ffi-examples/run-all.sh")
            .arg(&script_prefix)
            .env("MOONCAKE_EXAMPLES_WORK", &work)
            .env("MOONCAKE_EXAMPLES_STRICT", "1")
            .env_remove("MOONCAKE_MASTER")
            .env_remove("LD_PRELOAD")
            .env_remove("LD_LIBRARY_PATH"),
    );
    assert!(text.contains(", 0 failed, 0 skipped"), "{text}");
    for step in [
        "preload",
        "relink",
        "cmake-store_roundtrip",
        "pkgconfig-te_loopback_static",
        "pkgconfig-te_cpp_api-same_host",
        "pkgconfig-te_cpp_api-tcp",
        "cmake-te_cpp_api",
        "pkgconfig-tent_loopback",
        "cmake-tent_loopback",
    ] {
        assert!(
            text.contains(&format!("PASS  {step} ")),
            "{step} did not pass\n{text}"
        );
    }
    let _ = std::fs::remove_dir_all(test_dir("install"));
}

/// A program linked against the build tree, as upstream's Rust crate and Go bindings
/// link (`-L target/<profile> -ltransfer_engine`, or `-lmooncake`), runs with only
/// `LD_LIBRARY_PATH=target/<profile>`: the SONAME link `libmooncake.so.0` and
/// upstream's names sit beside `libmooncake.so` after a plain `cargo build` (build.rs).
#[test]
fn build_tree_is_linkable() {
    if skip() {
        return;
    }
    let dir = profile_dir();
    let mut build = Command::new(cargo());
    build.current_dir(root()).args(["build", "--lib"]);
    if profile() == "release" {
        build.arg("--release");
    }
    run("cargo build --lib", &mut build);
    for name in [
        "libmooncake.so.0",
        "libtransfer_engine.so",
        "libmooncake_store.so",
    ] {
        let link = dir.join(name);
        assert_eq!(
            std::fs::read_link(&link).ok(),
            Some(PathBuf::from("libmooncake.so")),
            "{} is not a link to libmooncake.so",
            link.display()
        );
        assert!(link.is_file(), "{} dangles", link.display());
    }
    let work = fresh_dir("build-tree", "programs");
    for (lib, exe) in [
        ("transfer_engine", "te_upstream_name"),
        ("mooncake", "te_own_name"),
    ] {
        let bin = work.join(exe);
        run(
            &format!("cc -L {} -l{lib}", dir.display()),
            Command::new("cc")
                .arg("-I")
                .arg(root().join("include/mooncake"))
                .arg(root().join("ffi-examples/c/te_loopback.c"))
                .arg("-L")
                .arg(&dir)
                .arg(format!("-l{lib}"))
                .arg("-ldl")
                .arg("-o")
                .arg(&bin),
        );
        let needed = run("readelf -d", Command::new("readelf").arg("-d").arg(&bin));
        assert!(
            needed.contains("[libmooncake.so.0]"),
            "{exe} does not record NEEDED libmooncake.so.0\n{needed}"
        );
        run(
            &format!("{exe} with LD_LIBRARY_PATH={}", dir.display()),
            Command::new(&bin)
                .env("LD_LIBRARY_PATH", &dir)
                .env_remove("LD_PRELOAD"),
        );
    }
    let _ = std::fs::remove_dir_all(test_dir("build-tree"));
}
