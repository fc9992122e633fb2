//! SIGINT/SIGTERM as a flag the binaries poll to shut down cleanly.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs handlers that only set a flag (async-signal-safe).
pub fn install_stop_handlers() {
    let handler = on_signal as extern "C" fn(libc::c_int);
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
        libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
    }
}

/// Whether SIGINT or SIGTERM arrived.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}
