//! [`Agent`]: a thread per group that lets an idle rank take part in membership
//! changes (upstream's Agent): every [`TICK`] it takes the group if no operation
//! holds it and calls [`Group::tick`].

use super::group::Group;
use parking_lot::{Condvar, Mutex};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often an idle rank looks at the store.
pub const TICK: Duration = Duration::from_millis(50);

/// The agent thread of one group; dropping it stops and joins the thread.
pub struct Agent {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Agent {
    /// Starts the agent of `group` (it holds the group only while ticking, and ends
    /// by itself once the group is gone).
    pub fn start(group: &Arc<Mutex<Group>>) -> std::io::Result<Agent> {
        let weak: Weak<Mutex<Group>> = Arc::downgrade(group);
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("mc-pg-agent".into())
            .spawn(move || loop {
                {
                    let mut stopped = flag.0.lock();
                    if !*stopped {
                        flag.1.wait_for(&mut stopped, TICK);
                    }
                    if *stopped {
                        return;
                    }
                }
                let Some(group) = weak.upgrade() else { return };
                // An operation in progress watches for changes itself.
                let ticked = group.try_lock().map(|mut g| g.tick());
                if let Some(Err(e)) = ticked {
                    log::debug!("pg agent: {e}");
                }
            })?;
        Ok(Agent {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
