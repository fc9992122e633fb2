//! Build script: gives the cdylib its SONAME and puts the SONAME link (and upstream's
//! library names) beside it in the build directory.
//!
//! `libmooncake.so` carries SONAME `libmooncake.so.0`, so programs linked against it
//! record `NEEDED libmooncake.so.0` and the installed symlinks (`libmooncake.so`,
//! `libtransfer_engine.so`, `libmooncake_store.so` -> `libmooncake.so.0` ->
//! `libmooncake.so.0.<minor>.<patch>`) all resolve to one mapped library, so a process
//! has one engine whichever name it loaded. Only the cdylib is affected; the rlib,
//! staticlib, binaries and tests link as before.
//!
//! A program linked against a build tree (`-L target/release -lmooncake`, or
//! `-ltransfer_engine` as upstream's Rust crate and Go bindings do) then needs only
//! `LD_LIBRARY_PATH=target/release`: the build directory holds `libmooncake.so.0`,
//! `libtransfer_engine.so` and `libmooncake_store.so` as relative links to
//! `libmooncake.so`. They are made before the library is linked (a build script runs
//! first), so they dangle only until that link step finishes.

use std::path::{Path, PathBuf};

/// The ABI major version: bump only together with an incompatible ABI change.
const SONAME: &str = "libmooncake.so.0";

/// The file cargo writes for the cdylib, in the profile directory.
const CDYLIB: &str = "libmooncake.so";

/// Names a program built against upstream (or against the SONAME) looks for.
const LINK_NAMES: [&str; 3] = [SONAME, "libtransfer_engine.so", "libmooncake_store.so"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" || os.ends_with("bsd") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{SONAME}");
        if let Some(dir) = profile_dir() {
            for name in LINK_NAMES {
                if let Err(e) = ensure_link(&dir.join(name)) {
                    println!(
                        "cargo:warning=cannot link {name} -> {CDYLIB} in {}: {e}",
                        dir.display()
                    );
                }
            }
        }
    }
}

/// `target/[<triple>/]<profile>`: `OUT_DIR` is `<profile>/build/<pkg>-<hash>/out`.
fn profile_dir() -> Option<PathBuf> {
    let out = PathBuf::from(std::env::var_os("OUT_DIR")?);
    let dir = out.ancestors().nth(3)?.to_path_buf();
    dir.join("build").is_dir().then_some(dir)
}

/// Makes `link` a relative symlink to the cdylib unless it already is one.
fn ensure_link(link: &Path) -> std::io::Result<()> {
    if std::fs::read_link(link).is_ok_and(|t| t == Path::new(CDYLIB)) {
        return Ok(());
    }
    let tmp = link.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(CDYLIB, &tmp)?;
    std::fs::rename(&tmp, link)
}
