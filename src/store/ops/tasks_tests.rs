//! Copy and move tasks end to end: an in-process master hands a task to the owner of
//! the source replica, whose task thread copies the bytes over TCP into the target
//! client's segment; the bytes are read back from the new replica alone.

use super::tests::{client, on};
use crate::master::MasterService;
use crate::store::{Client, ErrorCode, StoreError};
use crate::wire::master_api::{
    QueryTaskResponse, ReplicaLocation, ReplicaStatus, TaskStatus, Uuid,
};
use std::time::{Duration, Instant};

/// Polls `id` until it ends (30 s at most).
fn wait_task(c: &Client, id: Uuid) -> QueryTaskResponse {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = c.query_task(id).expect("query_task");
        if TaskStatus::from_i32(r.status).is_some_and(TaskStatus::is_final) {
            return r;
        }
        assert!(Instant::now() < deadline, "task {id} still {r:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The segments holding replicas of `key`, in the master's order.
fn holders(c: &Client, key: &str) -> Vec<String> {
    c.get_replica_desc(key)
        .expect("replicas")
        .into_iter()
        .map(|r| {
            assert_eq!(r.status, ReplicaStatus::Complete);
            match r.location {
                ReplicaLocation::Memory(b) => b.transport_endpoint,
                other => panic!("not in memory: {other:?}"),
            }
        })
        .collect()
}

fn code(r: Result<impl std::fmt::Debug, StoreError>) -> i32 {
    r.expect_err("should fail").code.0
}

#[test]
fn copies_and_moves_run_on_the_source_owner_and_carry_the_bytes() {
    let master = MasterService::new(Default::default());
    let (a, b, c) = (client(&master), client(&master), client(&master));
    let value: Vec<u8> = (0..(3 << 20))
        .map(|i: u32| (i * 7 + i / 4096) as u8)
        .collect();
    a.put("obj", &value, &on(a.hostname())).unwrap();
    let endpoint = |x: &Client| x.te_segment_name().unwrap();

    let id = a
        .create_copy_task("obj", &[b.hostname().to_string()])
        .unwrap();
    let done = wait_task(&c, id);
    assert_eq!(TaskStatus::from_i32(done.status), Some(TaskStatus::Success));
    assert_eq!(done.message, "Task completed successfully");
    assert_eq!(Some(done.assigned_client), a.client_id());
    assert_eq!(holders(&c, "obj"), [endpoint(&a), endpoint(&b)]);

    // Move a's replica to c: then only b's and c's are left, and each carries the
    // bytes (b's is read alone once c's is moved back onto b, which drops it).
    let id = c
        .create_move_task("obj", a.hostname(), c.hostname())
        .unwrap();
    assert_eq!(wait_task(&b, id).status, TaskStatus::Success as i32);
    assert_eq!(holders(&c, "obj"), [endpoint(&b), endpoint(&c)]);
    let id = c
        .create_move_task("obj", b.hostname(), c.hostname())
        .unwrap();
    assert_eq!(wait_task(&b, id).status, TaskStatus::Success as i32);
    assert_eq!(holders(&a, "obj"), [endpoint(&c)]);
    assert_eq!(a.get("obj").unwrap(), value);
    let id = a
        .create_move_task("obj", c.hostname(), b.hostname())
        .unwrap();
    assert_eq!(wait_task(&a, id).status, TaskStatus::Success as i32);
    assert_eq!(holders(&a, "obj"), [endpoint(&b)]);
    assert_eq!(c.get("obj").unwrap(), value);
}

#[test]
fn bad_task_requests_get_upstreams_codes() {
    let master = MasterService::new(Default::default());
    let (a, b) = (client(&master), client(&master));
    a.put("k", b"value", &on(a.hostname())).unwrap();
    let (ah, bh) = (a.hostname().to_string(), b.hostname().to_string());
    let nobody = "127.0.0.1:1".to_string();
    assert_eq!(code(a.create_copy_task("k", &[])), -600);
    assert_eq!(
        code(a.create_copy_task("missing", std::slice::from_ref(&bh))),
        -704
    );
    assert_eq!(
        code(a.create_copy_task("k", std::slice::from_ref(&nobody))),
        -600
    );
    assert_eq!(code(a.create_move_task("missing", &ah, &bh)), -704);
    assert_eq!(code(a.create_move_task("k", &ah, &ah)), -600);
    assert_eq!(code(a.create_move_task("k", &ah, &nobody)), -600);
    assert_eq!(code(a.create_move_task("k", &bh, &ah)), -600);
    let unknown = Uuid {
        first: 1,
        second: 2,
    };
    assert_eq!(code(a.query_task(unknown)), ErrorCode::TASK_NOT_FOUND.0);
    // A copy whose target cannot hold the object fails after its retries, and the
    // object is left as it was.
    let big = vec![7u8; 6 << 20];
    a.put("big", &big, &on(&ah)).unwrap();
    for i in 0..5 {
        b.put(&format!("filler{i}"), &big, &on(&bh)).unwrap();
    }
    let id = a
        .create_copy_task("big", std::slice::from_ref(&bh))
        .unwrap();
    let r = wait_task(&a, id);
    assert_eq!(r.status, TaskStatus::Failed as i32);
    assert_eq!(r.message, "NO_AVAILABLE_HANDLE (max retries reached: 10)");
    assert_eq!(holders(&b, "big"), [a.te_segment_name().unwrap()]);
    assert_eq!(b.get("big").unwrap(), big);
}

#[test]
fn a_hot_object_is_copied_by_its_owner_when_the_master_asks() {
    use crate::master::config::DynamicMode;
    use crate::master::MasterConfig;
    let master = MasterService::new(MasterConfig {
        dynamic_replication_mode: DynamicMode::Enforce,
        dynamic_replication_heat_window: Duration::from_secs(60),
        dynamic_replication_admission_qps_threshold: 0.05,
        ..MasterConfig::default()
    });
    let (a, b) = (client(&master), client(&master));
    let value: Vec<u8> = (0..(2 << 20))
        .map(|i: u32| (i * 13 + i / 777) as u8)
        .collect();
    a.put("hot", &value, &on(a.hostname())).unwrap();
    for _ in 0..3 {
        assert_eq!(b.get("hot").unwrap(), value);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while holders(&b, "hot").len() < 2 {
        assert!(Instant::now() < deadline, "no second replica");
        std::thread::sleep(Duration::from_millis(20));
    }
    let endpoint = |x: &Client| x.te_segment_name().unwrap();
    assert_eq!(holders(&b, "hot"), [endpoint(&a), endpoint(&b)]);
    // The new replica carries the bytes: it is b's own, which b reads first.
    assert_eq!(b.get("hot").unwrap(), value);
    a.remove("hot", true).unwrap();
}
