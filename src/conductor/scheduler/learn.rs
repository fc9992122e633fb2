//! Learning from completions and forgetting expired assignments: the cost model's
//! updates, the prediction errors, and the instances' load released.

use std::cmp::Reverse;

use super::{Completion, Pending, Scheduler};
use crate::conductor::predict::{decode_features, prefill_features, transfer_features};

impl Scheduler {
    /// Learns from what happened to a placed request; `false` when it is unknown.
    pub fn complete(&mut self, done: &Completion, now: f64) -> bool {
        self.tick(now);
        let Some(p) = self.pending.remove(&done.request_id) else {
            self.counters.unknown_completions += 1;
            return false;
        };
        self.release(&p);
        self.counters.completed += 1;
        let preds = &mut self.predictors;
        if done.prefill_ms > 0.0 {
            let x = prefill_features(p.computed_tokens, p.prefix_tokens);
            preds.prefill.observe(&x, done.prefill_ms);
            self.prefill_errors
                .record(p.est_prefill_ms, done.prefill_ms);
        }
        if p.transfer_blocks > 0 && done.transfer_ms > 0.0 {
            let x = transfer_features(p.transfer_blocks as f64);
            preds.transfer.observe(&x, done.transfer_ms);
        }
        if done.tbt_ms > 0.0 {
            let x = decode_features(p.decode_batch, p.decode_context);
            preds.decode.observe(&x, done.tbt_ms);
            self.tbt_errors.record(p.est_tbt_ms, done.tbt_ms);
        }
        self.ttft_errors.record(p.est_ttft_ms, done.ttft_ms);
        if done.output_length > 0 {
            self.output_tokens_mean += (done.output_length as f64 - self.output_tokens_mean) / 64.0;
        }
        // Work placed behind this request on its prefill instance moves with its error
        // (less what earlier completions already moved it by).
        let actual_end = p.scheduled_ms + done.ttft_ms;
        if let Some(i) = self.instances.live_mut(p.prefill.0, p.prefill.1) {
            let expected_end = p.predicted_end_ms + (i.shift_ms - p.shift_at_schedule);
            if done.ttft_ms > 0.0 && i.busy_until_ms > now && i.busy_until_ms >= expected_end {
                let delta = actual_end - expected_end;
                i.busy_until_ms = (i.busy_until_ms + delta).max(now);
                i.shift_ms += delta;
            }
        }
        true
    }

    /// Moves the clock to `now` (never backwards) and forgets expired assignments.
    pub(super) fn tick(&mut self, now: f64) {
        if now > self.last_now_ms {
            self.last_now_ms = now;
        }
        let now = self.last_now_ms;
        while let Some((Reverse(at), _)) = self.expiry.peek() {
            if *at as f64 > now {
                break;
            }
            let (_, rid) = self.expiry.pop().expect("peeked");
            if let Some(p) = self.pending.remove(&rid) {
                self.counters.expired += 1;
                self.release(&p);
            }
        }
    }

    /// Forgets the assignment that expires first (the table is full).
    pub(super) fn expire_oldest(&mut self) {
        while let Some((_, rid)) = self.expiry.pop() {
            if let Some(p) = self.pending.remove(&rid) {
                self.counters.expired += 1;
                self.release(&p);
                return;
            }
        }
    }

    /// Takes an assignment off its instances' load.
    pub(super) fn release(&mut self, p: &Pending) {
        if let Some(i) = self.instances.live_mut(p.prefill.0, p.prefill.1) {
            i.prefills = i.prefills.saturating_sub(1);
        }
        if let Some(i) = self.instances.live_mut(p.decode.0, p.decode.1) {
            i.decode.release(p.decode_blocks, p.request_context);
        }
    }
}
