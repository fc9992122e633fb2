//! `enableGracefulShutdown`: SIGINT/SIGTERM destroy every live engine, then exit.
//!
//! The signal handler only does async-signal-safe work: it writes the signal number
//! into a pipe (a second signal `_exit`s at once). A watcher thread reads the pipe,
//! closes every P2P Store node (withdrawing its copies from the metadata), drops every
//! engine in the handle table (which deletes their metadata keys), and calls
//! `_exit(128 + signo)`.

use super::engines::ENGINES;
use super::fail::FfiError;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;

static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
static SIGNALLED: AtomicBool = AtomicBool::new(false);
static INSTALLED: Mutex<bool> = Mutex::new(false);

extern "C" fn on_signal(signo: c_int) {
    // SAFETY: only async-signal-safe calls below; errno is saved and restored.
    unsafe {
        if SIGNALLED.swap(true, Ordering::SeqCst) {
            libc::_exit(128 + signo);
        }
        let errno = *libc::__errno_location();
        let fd = PIPE_WRITE.load(Ordering::SeqCst);
        let byte = signo as u8;
        if fd < 0 || libc::write(fd, (&byte as *const u8).cast::<c_void>(), 1) != 1 {
            libc::_exit(128 + signo);
        }
        *libc::__errno_location() = errno;
    }
}

fn watch(read_fd: c_int) {
    let mut byte = 0u8;
    loop {
        // SAFETY: reading one byte into a local.
        let n = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast::<c_void>(), 1) };
        if n == 1 {
            break;
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        // The write end never closes; anything else is unexpected. Stop watching.
        return;
    }
    let signo = c_int::from(byte);
    log::warn!("signal {signo} received: destroying every transfer engine, then exiting");
    super::p2p::handle::close_all_nodes();
    for engine in ENGINES.drain() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(engine)));
    }
    // SAFETY: ends the process without running atexit handlers, as upstream does.
    unsafe { libc::_exit(128 + signo) };
}

fn os_error(what: &str) -> FfiError {
    let err = std::io::Error::last_os_error();
    FfiError::Failed {
        what: format!("{what}: {err}"),
        errno: err.raw_os_error().unwrap_or(0),
    }
}

/// Installs the handlers and the watcher thread, once per process.
pub(crate) fn install() -> Result<(), FfiError> {
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if *installed {
        return Ok(());
    }
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(os_error("creating the shutdown pipe"));
    }
    let [read_fd, write_fd] = fds;
    let close_both = || {
        // SAFETY: both descriptors were just created and are not used elsewhere.
        unsafe {
            libc::close(read_fd);
            libc::close(write_fd);
        }
    };
    // SAFETY: plain fcntl on our own descriptor.
    let flags = unsafe { libc::fcntl(write_fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(write_fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        let e = os_error("making the shutdown pipe non-blocking");
        close_both();
        return Err(e);
    }
    if let Err(e) = std::thread::Builder::new()
        .name("mc-graceful-shutdown".into())
        .spawn(move || watch(read_fd))
    {
        close_both();
        return Err(FfiError::Failed {
            what: format!("starting the shutdown watcher: {e}"),
            errno: e.raw_os_error().unwrap_or(0),
        });
    }
    PIPE_WRITE.store(write_fd, Ordering::SeqCst);
    for signo in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is valid; the handler is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signo, &action, std::ptr::null_mut()) != 0 {
                return Err(os_error("installing the signal handler"));
            }
        }
    }
    *installed = true;
    Ok(())
}
