//! Unit tests of the store C functions: config conversion and handle checks.

use super::*;

#[test]
fn config_conversion_follows_upstream() {
    // SAFETY: NULL and locally built, valid configs.
    unsafe {
        assert_eq!(
            replicate_config(std::ptr::null()).unwrap(),
            ReplicateConfig::default()
        );
        let mut names = [c"a:1".as_ptr(), std::ptr::null(), c"b:2".as_ptr()];
        let c = mooncake_replicate_config {
            replica_num: 0,
            with_soft_pin: 5,
            with_hard_pin: 1,
            preferred_segments: names.as_mut_ptr(),
            preferred_segments_count: names.len(),
        };
        let r = replicate_config(&c).unwrap();
        assert_eq!(r.replica_num, 0);
        assert_eq!(r.soft_pin_action, SoftPinAction::Enable);
        assert!(r.with_hard_pin);
        assert_eq!(r.preferred_segments, vec!["a:1", "b:2"]);
        let c = mooncake_replicate_config {
            replica_num: 2,
            with_soft_pin: 0,
            with_hard_pin: 0,
            preferred_segments: std::ptr::null_mut(),
            preferred_segments_count: 3,
        };
        let r = replicate_config(&c).unwrap();
        assert_eq!(r.soft_pin_action, SoftPinAction::Preserve);
        assert!(r.preferred_segments.is_empty() && !r.with_hard_pin);
    }
    assert_eq!(std::mem::size_of::<mooncake_replicate_config>(), 32);
    assert_eq!(
        std::mem::offset_of!(mooncake_replicate_config, preferred_segments),
        16
    );
}

#[test]
fn foreign_and_destroyed_handles_are_rejected() {
    let h = mooncake_store_create();
    assert_eq!(mooncake_store_health_check(h), 1);
    mooncake_store_destroy(h);
    assert_eq!(mooncake_store_health_check(h), -1);
    assert_eq!(mooncake_store_health_check(std::ptr::null_mut()), -1);
    assert_eq!(mooncake_store_remove_all(0x4000 as mooncake_store_t, 1), -1);
}
