//! The heartbeat thread of a client that mounted segments: `Ping` every second,
//! `ReMountSegment` when the master answers NEED_REMOUNT, and the health flag that
//! `health_check` reports.

use super::state::PublishedSegments;
use crate::runtime::stoppable::StoppableThread;
use crate::te::MetadataPublisher;
use crate::wire::master_api::{ClientStatus, MasterApi, Uuid};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Consecutive ping failures after which the master is reported unreachable in the log.
const FAILURES_BEFORE_WARNING: u32 = 3;

/// A running heartbeat; stopped and joined by [`Heartbeat::stop`] or on drop.
pub struct Heartbeat(StoppableThread);

impl Heartbeat {
    /// Starts pinging `master` every `period` as `client`, remounting `segments` (as
    /// they are then) when asked and then re-publishing the Transfer Engine metadata through `publisher`
    /// (a restarted master's embedded metadata server starts empty). `healthy` is true
    /// while the last ping succeeded.
    pub fn start(
        master: Arc<dyn MasterApi>,
        client: Uuid,
        segments: PublishedSegments,
        publisher: MetadataPublisher,
        healthy: Arc<AtomicBool>,
        period: Duration,
    ) -> std::io::Result<Heartbeat> {
        let thread = StoppableThread::spawn("mc-store-heartbeat", move |signal| {
            let mut state = TickState::default();
            while signal.wait(period) {
                tick(
                    &*master, client, &segments, &publisher, &healthy, &mut state,
                );
            }
        })?;
        Ok(Heartbeat(thread))
    }

    /// Stops the thread and waits for it (an in-flight ping finishes first).
    pub fn stop(&mut self) {
        self.0.stop();
    }
}

/// What the heartbeat remembers between ticks.
#[derive(Default)]
struct TickState {
    failures: u32,
    republish_pending: bool,
}

fn tick(
    master: &dyn MasterApi,
    client: Uuid,
    segments: &PublishedSegments,
    publisher: &MetadataPublisher,
    healthy: &AtomicBool,
    state: &mut TickState,
) {
    let failures = &mut state.failures;
    match master.ping(client) {
        Ok(resp) => {
            if *failures >= FAILURES_BEFORE_WARNING {
                log::info!("store: master reachable again after {failures} failed pings");
            }
            *failures = 0;
            healthy.store(true, Ordering::SeqCst);
            if resp.client_status == ClientStatus::NeedRemount {
                let segments = segments.lock().clone();
                match master.remount_segment(&segments, client) {
                    Ok(()) => {
                        log::info!("store: remounted {} segment(s)", segments.len());
                        state.republish_pending = true;
                    }
                    Err(e) => log::warn!("store: remounting segments failed: {e}"),
                }
            }
            if state.republish_pending {
                match publisher.republish() {
                    Ok(()) => state.republish_pending = false,
                    Err(e) => log::warn!("store: re-publishing segment metadata failed: {e}"),
                }
            }
        }
        Err(e) => {
            *failures += 1;
            healthy.store(false, Ordering::SeqCst);
            if *failures == FAILURES_BEFORE_WARNING {
                log::warn!(
                    "store: {failures} consecutive pings to the master failed ({e}); \
                     still retrying every second"
                );
            }
        }
    }
}
