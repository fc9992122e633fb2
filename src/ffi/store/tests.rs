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

/// The calling thread's last error message.
fn last_error() -> String {
    // SAFETY: the pointer is a live NUL-terminated string of this thread.
    unsafe { std::ffi::CStr::from_ptr(crate::ffi::last_error::last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_failed_setup_leaves_its_cause_as_the_last_error() {
    let h = mooncake_store_create();
    // SAFETY: NUL-terminated literals; the other strings are NULL (defaults).
    let r = unsafe {
        mooncake_store_setup(
            h,
            c"127.0.0.1:17001".as_ptr(),
            c"P2PHANDSHAKE".as_ptr(),
            0,
            1 << 20,
            c"carrier-pigeon".as_ptr(),
            std::ptr::null(),
            c"127.0.0.1:1".as_ptr(),
        )
    };
    assert_eq!(r, -600);
    let e = last_error();
    assert!(e.starts_with("mooncake_store_setup: "), "{e}");
    assert!(e.contains("master '127.0.0.1:1'"), "{e}");
    assert!(e.contains("protocol 'carrier-pigeon'"), "{e}");
    assert!(e.ends_with("INVALID_PARAMS (-600)"), "{e}");
    mooncake_store_destroy(h);
}

#[test]
fn a_failed_data_op_leaves_its_cause_as_the_last_error() {
    let h = mooncake_store_create();
    let cfg = SetupConfig {
        local_hostname: "127.0.0.1".into(),
        metadata_server: "P2PHANDSHAKE".into(),
        ..SetupConfig::default()
    };
    let master = crate::master::MasterService::new(crate::master::MasterConfig::default());
    let c = crate::store::Client::setup_with_master(&cfg, master).expect("setup");
    *STORES.get(h).unwrap().client.write() = Some(std::sync::Arc::new(c));
    let mut buf = [0u8; 64];
    let p = buf.as_mut_ptr().cast::<c_void>();
    assert_eq!(mooncake_store_unregister_buffer(h, p), -600);
    let e = last_error();
    assert!(e.starts_with("mooncake_store_unregister_buffer: "), "{e}");
    assert!(e.contains("not registered by register_buffer"), "{e}");
    assert!(e.ends_with("INVALID_PARAMS (-600)"), "{e}");
    // SAFETY: `buf` outlives its registration.
    let r = unsafe { mooncake_store_register_buffer(h, p, buf.len()) };
    assert_eq!(r, 0);
    assert_eq!(last_error(), "");
    mooncake_store_destroy(h);
}

#[test]
fn a_failed_transfer_leaves_the_segment_it_could_not_reach_as_the_last_error() {
    let master = crate::master::MasterService::new(crate::master::MasterConfig::default());
    let gone = crate::store::test_support::mount_unreachable_segment(&master);
    let h = mooncake_store_create();
    let cfg = SetupConfig {
        local_hostname: "127.0.0.1".into(),
        metadata_server: "P2PHANDSHAKE".into(),
        global_segment_size: 0,
        local_buffer_size: 1 << 20,
        ..SetupConfig::default()
    };
    let c = crate::store::Client::setup_with_master(&cfg, master).expect("setup");
    *STORES.get(h).unwrap().client.write() = Some(std::sync::Arc::new(c));
    let value = [7u8; 64];
    // SAFETY: a NUL-terminated key, `value.len()` readable bytes, no config.
    let r = unsafe {
        mooncake_store_put(
            h,
            c"lost".as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, -800);
    let e = last_error();
    assert!(e.starts_with("mooncake_store_put: "), "{e}");
    assert!(e.contains(&format!("segment '{gone}'")), "{e}");
    mooncake_store_destroy(h);
}
