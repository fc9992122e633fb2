//! The conductor's scheduler on small hand-made situations with known answers: each
//! policy's choice, pulling a prefix when that beats recomputing (and not when it does
//! not), the index as if pulled blocks were copied, early rejection on TTFT, TBT and
//! decode room, virtual time draining queues, an instance that disappears, duplicate
//! ids, expiry of assignments never completed, and predictions learned from
//! completions.

use mooncake::conductor::{
    Completion, ConductorConfig, CostModel, InstanceSpec, Placement, Policy, Refusal, Role,
    ScheduleRequest, Scheduler,
};

/// A model with round figures: prefill 100 ms + 1 ms per token (no attention term),
/// transfer 1 ms + 10 ms per block, TBT 10 ms + 1 ms per running request.
fn model() -> CostModel {
    let mut m = CostModel::default();
    m.prefill.base_ms = 100.0;
    m.prefill.ms_per_1k_tokens = 1000.0;
    m.prefill.ms_per_1m_token_pairs = 0.0;
    m.transfer.base_ms = 1.0;
    m.transfer.block_bytes = 10.0 * 100.0 * 1e6 / 8.0;
    m.transfer.bandwidth_gbps = 100.0;
    m.decode.base_ms = 10.0;
    m.decode.ms_per_request = 1.0;
    m.decode.ms_per_1k_context = 0.0;
    m
}

fn scheduler(policy: Policy, prefill: usize, decode: usize) -> Scheduler {
    scheduler_with(
        ConductorConfig {
            policy,
            block_tokens: 100,
            cost_model: model(),
            ..ConductorConfig::default()
        },
        prefill,
        decode,
    )
}

fn scheduler_with(config: ConductorConfig, prefill: usize, decode: usize) -> Scheduler {
    let mut s = Scheduler::new(config);
    for i in 0..prefill {
        s.register(spec(&format!("p{i}"), Role::Prefill, 0, 0), 0.0)
            .unwrap();
    }
    for i in 0..decode {
        s.register(spec(&format!("d{i}"), Role::Decode, 1000, 4), 0.0)
            .unwrap();
    }
    s
}

fn spec(id: &str, role: Role, kv: u64, batch: u64) -> InstanceSpec {
    InstanceSpec {
        id: id.into(),
        role,
        kv_capacity_blocks: kv,
        max_batch: batch,
    }
}

fn request(id: &str, blocks: &[u64], now: f64) -> ScheduleRequest {
    ScheduleRequest {
        request_id: id.into(),
        hash_ids: blocks.to_vec(),
        input_length: blocks.len() as u64 * 100,
        output_length_hint: Some(10),
        ttft_slo_ms: None,
        tbt_slo_ms: None,
        now_ms: Some(now),
    }
}

fn place(s: &mut Scheduler, id: &str, blocks: &[u64], now: f64) -> Placement {
    s.schedule(&request(id, blocks, now), now)
        .unwrap_or_else(|e| panic!("{id}: {e:?}"))
}

fn cache(s: &mut Scheduler, instance: &str, blocks: &[u64]) {
    s.apply_events(instance, (blocks, 1), (&[], 0)).unwrap();
}

#[test]
fn round_robin_takes_instances_in_turn() {
    let mut s = scheduler(Policy::RoundRobin, 3, 2);
    let picks: Vec<String> = (0..6)
        .map(|i| place(&mut s, &format!("r{i}"), &[i], 0.0).prefill)
        .collect();
    assert_eq!(picks[..3], picks[3..]);
    let mut first: Vec<&String> = picks[..3].iter().collect();
    first.sort();
    first.dedup();
    assert_eq!(first.len(), 3);
}

#[test]
fn random_spreads_over_every_instance() {
    let mut s = scheduler(Policy::Random, 4, 1);
    let mut seen = std::collections::HashSet::new();
    for i in 0..200 {
        seen.insert(place(&mut s, &format!("r{i}"), &[1000 + i], i as f64 * 1e6).prefill);
    }
    assert_eq!(seen.len(), 4);
}

#[test]
fn least_loaded_avoids_the_busy_instance() {
    let mut s = scheduler(Policy::LeastLoaded, 2, 1);
    let a = place(&mut s, "big", &[1; 50], 0.0);
    // p-a is busy for 5.1 s: the next requests go to the other one.
    let b = place(&mut s, "small", &[2], 0.0);
    assert_ne!(a.prefill, b.prefill);
    // The least loaded instance is chosen even though the busy one holds the prefix.
    let c = place(&mut s, "again", &[1; 50], 10.0);
    assert_eq!(c.prefill, b.prefill);
    assert_eq!(c.prefix_blocks, 0);
}

#[test]
fn local_cache_aware_goes_where_the_prefix_is_unless_the_queue_costs_more() {
    let mut s = scheduler(Policy::LocalCacheAware, 2, 1);
    cache(&mut s, "p1", &[1, 2, 3, 4]);
    let a = place(&mut s, "a", &[1, 2, 3, 4, 5], 0.0);
    assert_eq!((a.prefill.as_str(), a.prefix_blocks), ("p1", 4));
    // 100 + 100 ms there instead of 100 + 500: est TTFT says so.
    assert_eq!(a.est_ttft_ms, 200.0);
    assert_eq!(a.transfer_from, None);
    // p1 is now busy until 200 ms; a request sharing 1 block prefers idle p0 (600 ms)
    // over waiting (200 + 500).
    let b = place(&mut s, "b", &[1, 9, 9, 9, 9, 9], 0.0);
    assert_eq!(b.prefill, "p0");
}

#[test]
fn global_cache_aware_pulls_the_prefix_to_an_idle_instance() {
    // p1 alone first, holding a 20-block prefix and busy for 10 s; then p0 arrives.
    let mut s = scheduler(Policy::GlobalCacheAware, 0, 1);
    s.register(spec("p1", Role::Prefill, 0, 0), 0.0).unwrap();
    cache(&mut s, "p1", &(1..=20).collect::<Vec<_>>());
    assert_eq!(
        place(&mut s, "busy", &(100..200).collect::<Vec<_>>(), 0.0).prefill,
        "p1"
    );
    s.register(spec("p0", Role::Prefill, 0, 0), 0.0).unwrap();
    // Pulling 20 blocks to p0 (1 + 200 ms) and computing 100 tokens (200 ms) beats
    // recomputing 2100 tokens there (2.2 s) and waiting 10 s for p1.
    let blocks: Vec<u64> = (1..=21).collect();
    let r = place(&mut s, "r", &blocks, 0.0);
    assert_eq!(r.prefill, "p0");
    assert_eq!(r.transfer_from.as_deref(), Some("p1"));
    assert_eq!((r.transfer_blocks, r.prefix_blocks), (20, 20));
    assert_eq!(r.est_ttft_ms, 201.0 + 200.0);
    assert_eq!(s.counters.transfer_blocks, 20);
    // The index has the pulled blocks (and the computed one) on p0 now.
    let again = place(&mut s, "again", &blocks, 1e6);
    assert_eq!((again.prefill.as_str(), again.prefix_blocks), ("p0", 21));
    assert_eq!(again.transfer_blocks, 0);
    // With p1 idle, its own prefix wins and nothing moves.
    let mut t = blocks.clone();
    t[20] = 99;
    let local = place(&mut s, "local", &t, 2e6);
    assert_eq!(local.transfer_from, None);
}

#[test]
fn global_cache_aware_recomputes_when_moving_costs_more() {
    let mut m = model();
    m.transfer.bandwidth_gbps = 0.01;
    let mut s = scheduler_with(
        ConductorConfig {
            policy: Policy::GlobalCacheAware,
            block_tokens: 100,
            cost_model: m,
            ..ConductorConfig::default()
        },
        2,
        1,
    );
    cache(&mut s, "p1", &[1, 2, 3]);
    place(&mut s, "busy", &(100..200).collect::<Vec<_>>(), 0.0);
    let r = place(&mut s, "r", &[1, 2, 3, 4], 0.0);
    assert_eq!(r.transfer_from, None);
    assert_eq!(r.transfer_blocks, 0);
}

#[test]
fn balancing_threshold_keeps_a_close_local_prefix() {
    let mut s = scheduler_with(
        ConductorConfig {
            policy: Policy::GlobalCacheAware,
            block_tokens: 100,
            cost_model: model(),
            balancing_threshold: 2.0,
            ..ConductorConfig::default()
        },
        2,
        1,
    );
    cache(&mut s, "p0", &[1, 2, 3]);
    cache(&mut s, "p1", &[1, 2, 3, 4]);
    // p1's prefix is 4/3 of p0's: below the threshold, so p0 never pulls; p1 is chosen
    // for its own prefix (100 + 100 ms against p0's 100 + 200).
    let r = place(&mut s, "r", &[1, 2, 3, 4, 5], 0.0);
    assert_eq!((r.prefill.as_str(), r.transfer_from), ("p1", None));
}

#[test]
fn early_rejection_protects_the_slos() {
    let mut s = scheduler(Policy::LeastLoaded, 1, 1);
    place(&mut s, "long", &[1; 100], 0.0);
    let mut r = request("late", &[2; 10], 0.0);
    r.ttft_slo_ms = Some(5_000.0);
    match s.schedule(&r, 0.0) {
        Err(Refusal::Rejected {
            reason,
            est_ttft_ms,
            ..
        }) => {
            assert!(reason.contains("TTFT"), "{reason}");
            assert_eq!(est_ttft_ms, 10_100.0 + 1_100.0);
        }
        other => panic!("{other:?}"),
    }
    // Nothing changed: without the SLO it is placed with the same estimate.
    r.ttft_slo_ms = None;
    assert_eq!(s.schedule(&r, 0.0).unwrap().est_ttft_ms, 11_200.0);
    // TBT: 10 ms + 1 ms per running request; two run, so a third makes 13 ms.
    let mut t = request("tbt", &[3], 0.0);
    t.tbt_slo_ms = Some(12.5);
    assert!(matches!(s.schedule(&t, 0.0), Err(Refusal::Rejected { .. })));
    t.tbt_slo_ms = Some(13.5);
    assert_eq!(s.schedule(&t, 0.0).unwrap().est_tbt_ms, 13.0);
    assert_eq!(s.counters.rejected_ttft, 1);
    assert_eq!(s.counters.rejected_tbt, 1);
}

#[test]
fn without_early_rejection_slos_do_not_refuse() {
    let mut s = scheduler_with(
        ConductorConfig {
            policy: Policy::LeastLoaded,
            block_tokens: 100,
            cost_model: model(),
            early_rejection: false,
            ttft_slo_ms: 1.0,
            ..ConductorConfig::default()
        },
        1,
        1,
    );
    let r = place(&mut s, "r", &[1; 10], 0.0);
    assert!(r.est_ttft_ms > 1.0);
}

#[test]
fn a_full_decode_instance_takes_no_more() {
    let mut s = scheduler(Policy::RoundRobin, 1, 1);
    for i in 0..4 {
        place(&mut s, &format!("r{i}"), &[i], 0.0);
    }
    match s.schedule(&request("fifth", &[9], 0.0), 0.0) {
        Err(Refusal::Rejected { reason, .. }) => assert!(reason.contains("room"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert!(s.complete(&completion("r0", 0.0), 1.0));
    place(&mut s, "fifth", &[9], 1.0);
}

fn completion(id: &str, now: f64) -> Completion {
    Completion {
        request_id: id.into(),
        prefill_ms: 200.0,
        queue_ms: 0.0,
        transfer_ms: 0.0,
        ttft_ms: 200.0,
        tbt_ms: 11.0,
        output_length: 10,
        now_ms: Some(now),
    }
}

#[test]
fn virtual_time_drains_the_queues() {
    let mut s = scheduler(Policy::LeastLoaded, 1, 1);
    let a = place(&mut s, "a", &[1; 10], 0.0);
    assert_eq!(a.est_ttft_ms, 1_100.0);
    let b = place(&mut s, "b", &[2; 10], 500.0);
    assert_eq!(b.est_ttft_ms, 600.0 + 1_100.0);
    // An hour later the queue is long gone.
    let c = place(&mut s, "c", &[3; 10], 3.6e6);
    assert_eq!(c.est_ttft_ms, 1_100.0);
}

#[test]
fn a_removed_instance_takes_its_blocks_and_queue_along() {
    let mut s = scheduler(Policy::LocalCacheAware, 2, 1);
    cache(&mut s, "p1", &[1, 2, 3]);
    let a = place(&mut s, "a", &[1, 2, 3, 4], 0.0);
    assert_eq!(a.prefill, "p1");
    assert_eq!(s.unregister("p1"), Some((4, 1)));
    assert_eq!(s.unregister("p1"), None);
    // Nobody holds the prefix any more, and the dropped request is not waited for.
    let b = place(&mut s, "b", &[1, 2, 3, 4], 0.0);
    assert_eq!((b.prefill.as_str(), b.prefix_blocks), ("p0", 0));
    assert!(!s.complete(&completion("a", 0.0), 1.0));
    assert_eq!(s.index.distinct_blocks(), 4);
    // The decode load of the dropped request was released.
    let d = s.instances.slot_of("d0").unwrap();
    assert_eq!(s.instances.get(d).unwrap().decode.requests, 1);
    // No prefill instance left: 503-type refusal.
    s.unregister("p0");
    assert!(matches!(
        s.schedule(&request("c", &[1], 0.0), 0.0),
        Err(Refusal::NoInstance(_))
    ));
}

#[test]
fn duplicate_and_malformed_requests_change_nothing() {
    let mut s = scheduler(Policy::LeastLoaded, 1, 1);
    place(&mut s, "a", &[1], 0.0);
    let before = s.counters.clone();
    assert!(matches!(
        s.schedule(&request("a", &[1], 0.0), 0.0),
        Err(Refusal::Duplicate(_))
    ));
    let mut empty = request("", &[1], 0.0);
    assert!(matches!(s.schedule(&empty, 0.0), Err(Refusal::Invalid(_))));
    empty.request_id = "z".into();
    empty.input_length = 0;
    assert!(matches!(s.schedule(&empty, 0.0), Err(Refusal::Invalid(_))));
    assert_eq!(s.counters, before);
    assert_eq!(s.pending(), 1);
}

#[test]
fn assignments_never_completed_expire() {
    let mut s = scheduler_with(
        ConductorConfig {
            policy: Policy::LeastLoaded,
            block_tokens: 100,
            cost_model: model(),
            assignment_timeout_ms: 1_000.0,
            ..ConductorConfig::default()
        },
        1,
        1,
    );
    place(&mut s, "a", &[1], 0.0);
    place(&mut s, "b", &[2], 0.0);
    assert_eq!(s.pending(), 2);
    place(&mut s, "c", &[3], 1e6);
    assert_eq!(s.pending(), 1);
    assert_eq!(s.counters.expired, 2);
    let d = s.instances.slot_of("d0").unwrap();
    assert_eq!(s.instances.get(d).unwrap().decode.requests, 1);
}

#[test]
fn predictions_are_learned_from_completions() {
    let mut s = scheduler(Policy::LeastLoaded, 1, 1);
    // Really: prefill takes twice the prior's estimate.
    let mut last_error = f64::MAX;
    for i in 0..300u64 {
        let now = i as f64 * 1e5;
        let blocks: Vec<u64> = (i * 1000..i * 1000 + 1 + (i * 7) % 160).collect();
        let r = place(&mut s, &format!("r{i}"), &blocks, now);
        let truth = 2.0 * (100.0 + blocks.len() as f64 * 100.0);
        last_error = (r.est_ttft_ms - truth).abs() / truth;
        let mut done = completion(&format!("r{i}"), now + 10.0);
        done.prefill_ms = truth;
        done.ttft_ms = truth;
        assert!(s.complete(&done, now + 10.0));
    }
    assert!(
        last_error < 0.05,
        "still {last_error} off: {:?}",
        s.predictors.prefill.weights()
    );
    assert_eq!(s.ttft_errors.count(), 300);
    assert!(s.counters.completed == 300 && s.pending() == 0);
}

#[test]
fn reregistering_updates_and_role_conflicts_are_refused() {
    let mut s = scheduler(Policy::LeastLoaded, 1, 1);
    assert_eq!(s.register(spec("p0", Role::Prefill, 2, 0), 0.0), Ok(false));
    cache(&mut s, "p0", &[1, 2, 3]);
    assert_eq!(s.index.distinct_blocks(), 2);
    assert!(s.register(spec("p0", Role::Decode, 0, 0), 0.0).is_err());
    assert!(s.apply_events("nobody", (&[1], 1), (&[], 0)).is_none());
}
