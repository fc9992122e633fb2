//! SIGINT/SIGTERM as a flag the binaries poll to shut down cleanly, and the servers'
//! main loop that waits for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

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

/// Blocks until a stop signal has arrived, looking every 100 ms. Each binary installs
/// the stop handlers itself, before it starts what a signal should stop.
pub fn wait_for_stop() {
    while !stop_requested() {
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_ends_once_a_stop_signal_arrived() {
        on_signal(libc::SIGTERM);
        wait_for_stop();
        assert!(stop_requested());
    }
}
