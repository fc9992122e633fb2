//! Placing a request: the prefill instance by the configured policy (where its prefix
//! is cached, the queues, the TTFT SLO), the decode instance with room and the lowest
//! predicted TBT, and the bookkeeping of the placement.

use std::cmp::Reverse;

use super::{Pending, Placement, Refusal, ScheduleRequest, Scheduler, MAX_PENDING};
use crate::conductor::config::Policy;
use crate::conductor::index::{medium, Slot};

/// A prefill option for a request: where, with how much of its prefix, and when it
/// would start and end.
#[derive(Debug, Clone, Copy)]
struct Choice {
    slot: Slot,
    prefix_blocks: usize,
    transfer_blocks: usize,
    prefill_ms: f64,
    start_ms: f64,
    ttft_ms: f64,
}

impl Scheduler {
    /// Places a request, or says why not.
    pub fn schedule(&mut self, req: &ScheduleRequest, now: f64) -> Result<Placement, Refusal> {
        if req.request_id.is_empty() {
            return Err(Refusal::Invalid("request_id must not be empty".into()));
        }
        if req.input_length == 0 {
            return Err(Refusal::Invalid("input_length must be > 0".into()));
        }
        self.tick(now);
        if self.pending.contains_key(&req.request_id) {
            return Err(Refusal::Duplicate(format!(
                "request {:?} is already placed and not completed",
                req.request_id
            )));
        }
        if self.instances.prefill.is_empty() {
            return Err(Refusal::NoInstance(
                "no prefill instance is registered".into(),
            ));
        }
        if self.instances.decode.is_empty() {
            return Err(Refusal::NoInstance(
                "no decode instance is registered".into(),
            ));
        }
        self.rotation = self.rotation.wrapping_add(1);
        let best = self.choose_prefill(req, now);
        let output = req
            .output_length_hint
            .map_or(self.output_tokens_mean, |o| o as f64);
        let context = req.input_length as f64 + output;
        let decode = self.choose_decode(context);
        let est_tbt = decode.map_or(f64::INFINITY, |(_, tbt, _, _)| tbt);
        let ttft_slo = req.ttft_slo_ms.unwrap_or(self.config.ttft_slo_ms);
        let tbt_slo = req.tbt_slo_ms.unwrap_or(self.config.tbt_slo_ms);
        let reject = |reason: String| Refusal::Rejected {
            reason,
            est_ttft_ms: best.ttft_ms,
            est_tbt_ms: if est_tbt.is_finite() { est_tbt } else { -1.0 },
        };
        let Some((d_slot, est_tbt, batch, held)) = decode else {
            self.counters.rejected_no_room += 1;
            return Err(reject("no decode instance has room".into()));
        };
        if self.config.early_rejection && ttft_slo > 0.0 && best.ttft_ms > ttft_slo {
            self.counters.rejected_ttft += 1;
            return Err(reject(format!(
                "predicted TTFT {:.0} ms exceeds the SLO of {ttft_slo} ms",
                best.ttft_ms
            )));
        }
        if self.config.early_rejection && tbt_slo > 0.0 && est_tbt > tbt_slo {
            self.counters.rejected_tbt += 1;
            return Err(reject(format!(
                "predicted TBT {est_tbt:.1} ms exceeds the SLO of {tbt_slo} ms"
            )));
        }
        Ok(self.commit(req, now, best, (d_slot, est_tbt, batch, held), context))
    }

    /// Records a placement: the queues, the decode load, the index and the pending
    /// assignment.
    fn commit(
        &mut self,
        req: &ScheduleRequest,
        now: f64,
        best: Choice,
        (d_slot, est_tbt, batch, held): (Slot, f64, f64, f64),
        context: f64,
    ) -> Placement {
        let bt = self.config.block_tokens;
        let decode_blocks = (context as u64).div_ceil(bt);
        let transfer_from = (best.transfer_blocks > 0)
            .then(|| self.best_holder(&req.hash_ids, best.prefix_blocks))
            .flatten();
        let p = self
            .instances
            .get_mut(best.slot)
            .expect("live prefill slot");
        p.busy_until_ms = best.start_ms + best.prefill_ms;
        p.prefills += 1;
        let p_gen = p.generation;
        let shift_at_schedule = p.shift_ms;
        let d = self.instances.get_mut(d_slot).expect("live decode slot");
        d.decode.add(decode_blocks, context as u64);
        let d_gen = d.generation;
        for b in &req.hash_ids {
            self.counters.evicted += self.index.store(best.slot, *b, medium::GPU) as u64;
        }
        let c = &mut self.counters;
        c.scheduled += 1;
        c.request_blocks += req.hash_ids.len() as u64;
        c.prefix_blocks += best.prefix_blocks as u64;
        c.transfer_blocks += best.transfer_blocks as u64;
        let prefix_tokens = self.prefix_tokens(best.prefix_blocks, req.input_length);
        let predicted_end_ms = now + best.ttft_ms;
        let decode_end = predicted_end_ms + est_tbt * (context - req.input_length as f64);
        let expires = decode_end + self.config.assignment_timeout_ms;
        self.pending.insert(
            req.request_id.clone(),
            Pending {
                prefill: (best.slot, p_gen),
                decode: (d_slot, d_gen),
                scheduled_ms: now,
                predicted_end_ms,
                shift_at_schedule,
                est_ttft_ms: best.ttft_ms,
                est_prefill_ms: best.prefill_ms,
                est_tbt_ms: est_tbt,
                computed_tokens: req.input_length as f64 - prefix_tokens,
                prefix_tokens,
                transfer_blocks: best.transfer_blocks as u64,
                decode_batch: batch,
                decode_context: held,
                decode_blocks,
                request_context: context as u64,
            },
        );
        self.expiry
            .push((Reverse(expires.max(0.0) as u64), req.request_id.clone()));
        if self.pending.len() > MAX_PENDING {
            self.expire_oldest();
        }
        Placement {
            prefill: self.instances.name(best.slot).to_string(),
            decode: self.instances.name(d_slot).to_string(),
            prefix_blocks: best.prefix_blocks as u64,
            transfer_blocks: best.transfer_blocks as u64,
            transfer_from,
            est_ttft_ms: best.ttft_ms,
            est_tbt_ms: est_tbt,
        }
    }

    /// Cached prompt tokens that `blocks` whole blocks stand for (at least one token is
    /// always computed).
    fn prefix_tokens(&self, blocks: usize, input_length: u64) -> f64 {
        (blocks as u64 * self.config.block_tokens).min(input_length.saturating_sub(1)) as f64
    }

    /// The prefill option of `slot` using `prefix` blocks, `transfer` of them pulled
    /// first.
    fn option(
        &self,
        slot: Slot,
        req: &ScheduleRequest,
        prefix: usize,
        transfer: usize,
        now: f64,
    ) -> Choice {
        let instance = self.instances.get(slot).expect("live prefill slot");
        let prefix_tokens = self.prefix_tokens(prefix, req.input_length);
        let computed = req.input_length as f64 - prefix_tokens;
        let prefill_ms = self.predictors.prefill_ms(computed, prefix_tokens);
        let transfer_ms = self.predictors.transfer_ms(transfer as f64);
        let start_ms = instance.busy_until_ms.max(now).max(now + transfer_ms);
        Choice {
            slot,
            prefix_blocks: prefix,
            transfer_blocks: transfer,
            prefill_ms,
            start_ms,
            ttft_ms: start_ms + prefill_ms - now,
        }
    }

    /// Picks the prefill instance by the configured policy.
    fn choose_prefill(&mut self, req: &ScheduleRequest, now: f64) -> Choice {
        let mut prefix = std::mem::take(&mut self.prefix_scratch);
        self.index
            .prefix_lengths(&req.hash_ids, medium::ALL, &mut prefix);
        let local = |slot: Slot| prefix.get(slot as usize).copied().unwrap_or(0) as usize;
        let n = self.instances.prefill.len();
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let rotation = self.rotation;
        let candidates = (0..n).map(|k| self.instances.prefill[(k + rotation) % n]);
        let best = match self.config.policy {
            Policy::Random => {
                let slot = self.instances.prefill[(self.rng % n as u64) as usize];
                self.option(slot, req, local(slot), 0, now)
            }
            Policy::RoundRobin => {
                let slot = self.instances.prefill[rotation % n];
                self.option(slot, req, local(slot), 0, now)
            }
            Policy::LeastLoaded => {
                let slot = candidates
                    .min_by(|a, b| self.queue(*a, now).total_cmp(&self.queue(*b, now)))
                    .expect("a prefill instance");
                self.option(slot, req, local(slot), 0, now)
            }
            Policy::LocalCacheAware => candidates
                .map(|slot| self.option(slot, req, local(slot), 0, now))
                .min_by(|a, b| a.ttft_ms.total_cmp(&b.ttft_ms))
                .expect("a prefill instance"),
            Policy::GlobalCacheAware => {
                let best_len = prefix.iter().copied().max().unwrap_or(0) as usize;
                let threshold = self.config.balancing_threshold;
                candidates
                    .map(|slot| {
                        let own = local(slot);
                        let here = self.option(slot, req, own, 0, now);
                        if best_len > own && best_len as f64 >= threshold * own as f64 {
                            let pulled = self.option(slot, req, best_len, best_len - own, now);
                            if pulled.ttft_ms < here.ttft_ms {
                                return pulled;
                            }
                        }
                        here
                    })
                    .min_by(|a, b| a.ttft_ms.total_cmp(&b.ttft_ms))
                    .expect("a prefill instance")
            }
        };
        self.prefix_scratch = prefix;
        best
    }

    /// Predicted prefill queue of `slot` at `now`.
    fn queue(&self, slot: Slot, now: f64) -> f64 {
        self.instances
            .get(slot)
            .map_or(f64::INFINITY, |i| i.queue_ms(now))
    }

    /// The instance holding the longest prefix of `blocks` (at least `len` blocks).
    fn best_holder(&self, blocks: &[u64], len: usize) -> Option<String> {
        let last = *blocks.get(len.checked_sub(1)?)?;
        self.index
            .holders(last)
            .iter()
            .map(|&(slot, _)| slot)
            .find(|&slot| self.index.prefix_of(slot, &blocks[..len], medium::ALL) == len)
            .map(|slot| self.instances.name(slot).to_string())
    }

    /// The decode instance with room and the lowest predicted TBT for a request of
    /// `context` tokens: `(slot, TBT, batch, context held)` as predicted with it.
    fn choose_decode(&self, context: f64) -> Option<(Slot, f64, f64, f64)> {
        let blocks = (context as u64).div_ceil(self.config.block_tokens);
        let n = self.instances.decode.len();
        (0..n)
            .map(|k| self.instances.decode[(k + self.rotation) % n])
            .filter_map(|slot| {
                let i = self.instances.get(slot)?;
                if !i.decode_has_room(blocks) {
                    return None;
                }
                let batch = (i.decode.requests + 1) as f64;
                let held = i.decode.context as f64 + context;
                Some((slot, self.predictors.tbt_ms(batch, held), batch, held))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }
}
