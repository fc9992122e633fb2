//! The servers' main loop: waiting for SIGINT or SIGTERM. Each binary installs the stop
//! handlers itself, before it starts what a signal should stop.

use mooncake::runtime::signals;
use std::time::Duration;

/// Blocks until a stop signal has arrived, looking every 100 ms.
pub fn wait_for_stop() {
    while !signals::stop_requested() {
        std::thread::sleep(Duration::from_millis(100));
    }
}
