//! Build script: gives the cdylib its SONAME.
//!
//! `libmooncake.so` carries SONAME `libmooncake.so.0`, so programs linked against it
//! record `NEEDED libmooncake.so.0` and the installed symlinks (`libmooncake.so`,
//! `libtransfer_engine.so`, `libmooncake_store.so` -> `libmooncake.so.0` ->
//! `libmooncake.so.0.<minor>.<patch>`) all resolve to one mapped library, so a process
//! has one engine whichever name it loaded. Only the cdylib is affected; the rlib,
//! staticlib, binaries and tests link as before.

/// The ABI major version: bump only together with an incompatible ABI change.
const SONAME: &str = "libmooncake.so.0";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" || os.ends_with("bsd") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{SONAME}");
    }
}
