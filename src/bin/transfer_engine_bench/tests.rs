//! Flag parsing, validation and the report line, against upstream's behaviour.

use crate::run::{completion_line, format_rate};
use crate::settings::*;
use mooncake::te::Op;

fn parse(v: &[&str]) -> Result<Parsed, String> {
    parse_flags(v.iter().map(|s| s.to_string()))
}

fn raw(v: &[&str]) -> (RawFlags, Vec<String>) {
    match parse(v).expect("parses") {
        Parsed::Run((r, w)) => (*r, w),
        Parsed::Help => panic!("unexpected help"),
    }
}

fn settings(v: &[&str]) -> Result<Settings, Fatal> {
    let (r, mut w) = raw(v);
    r.validate(&mut w)
}

#[test]
fn upstream_defaults() {
    let s = settings(&[]).unwrap();
    assert_eq!(s.mode, Mode::Initiator);
    assert_eq!(s.metadata_server, "192.168.3.77:2379");
    assert_eq!(s.segment_id, "192.168.3.76");
    assert_eq!(s.protocol, "rdma");
    assert_eq!(s.op, Op::Read);
    assert_eq!(s.buffer_size, 1 << 30);
    assert_eq!(
        (s.batch_size, s.block_size, s.threads, s.duration),
        (128, 65536, 12, 10)
    );
    assert_eq!((s.report_unit, s.report_precision), ("GB", 2));
    assert!(!s.auto_discovery);
    assert_eq!(s.local_server_name, hostname());
    assert!(check_protocol(&s).is_ok());
    let matrix: serde_json::Value = serde_json::from_str(&s.topology().unwrap().unwrap()).unwrap();
    assert_eq!(matrix["cpu:0"], serde_json::json!([["mlx5_2"], []]));
    assert_eq!(matrix["cuda:0"], matrix["cpu:1"]);
}

#[test]
fn value_syntaxes() {
    let s = settings(&[
        "--mode=target",
        "--operation",
        "write",
        "-block_size=1048576",
        "-batch_size",
        "8",
        "--threads=0x4",
        "--protocol=tcp",
        "--metadata_server=P2PHANDSHAKE",
    ])
    .unwrap();
    assert_eq!(s.mode, Mode::Target);
    assert_eq!(s.op, Op::Write);
    assert_eq!((s.block_size, s.batch_size, s.threads), (1 << 20, 8, 4));
    assert_eq!(s.metadata_server, "P2PHANDSHAKE");
    assert!(check_protocol(&s).is_ok());
}

#[test]
fn booleans() {
    assert!(raw(&["--auto_discovery"]).0.auto_discovery);
    assert!(
        !raw(&["--auto_discovery", "--noauto_discovery"])
            .0
            .auto_discovery
    );
    assert!(raw(&["--auto_discovery=true"]).0.auto_discovery);
    assert!(!raw(&["--auto_discovery=false"]).0.auto_discovery);
    assert!(raw(&["-auto_discovery=1"]).0.auto_discovery);
    // A bare boolean does not swallow the next argument.
    let (r, _) = raw(&["--auto_discovery", "--threads=3"]);
    assert!(r.auto_discovery && r.threads == 3);
    assert!(parse(&["--auto_discovery=maybe"]).is_err());
    assert!(parse(&["--noauto_discovery=true"]).is_err());
    // auto_discovery skips the protocol check, as upstream skips installTransport.
    let s = settings(&["--auto_discovery"]).unwrap();
    assert!(check_protocol(&s).is_ok());
}

#[test]
fn unknown_flags_warn_and_continue() {
    let (r, w) = raw(&["--use_vram=false", "--threads=3", "--nobogus", "stray"]);
    assert_eq!(r.threads, 3);
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w[0].contains("--use_vram=false"));
}

#[test]
fn help() {
    for h in ["--help", "-help", "-h", "--helpshort"] {
        assert!(
            matches!(parse(&["--threads=2", h]), Ok(Parsed::Help)),
            "{h}"
        );
    }
}

#[test]
fn bad_values_are_errors_not_panics() {
    assert!(parse(&["--threads=abc"]).is_err());
    assert!(parse(&["--threads"]).is_err());
    assert!(parse(&["--buffer_size=-1"]).is_err());
    assert!(parse(&["--duration=99999999999"]).is_err());
    assert!(parse(&["--block_size=0x"]).is_err());
    for bad in [
        &["--threads=0"][..],
        &["--batch_size=-3"],
        &["--block_size=0"],
        &["--duration=-1"],
        &["--mode=server"],
        &["--operation=copy"],
        &["--backend=other"],
        &["--report_precision=99"],
        &["--block_size=0xffffffffffffffff", "--batch_size=2"],
    ] {
        let e = settings(bad).expect_err(&format!("{bad:?}"));
        assert_eq!(e.1, 2, "{bad:?}: {}", e.0);
    }
    assert_eq!(settings(&["--backend=tent"]).unwrap_err().1, 1);
}

#[test]
fn buffer_size_is_raised() {
    let (r, mut w) = raw(&[
        "--buffer_size=1",
        "--block_size=4096",
        "--batch_size=4",
        "--threads=3",
    ]);
    let s = r.validate(&mut w).unwrap();
    assert_eq!(s.buffer_size, 4096 * 4 * 3);
    assert_eq!(w.len(), 1);
    assert_eq!(
        settings(&["--buffer_size=0x10000000"]).unwrap().buffer_size,
        1 << 28
    );
}

#[test]
fn loopback_defaults_only_fill_absent_flags() {
    let s = settings(&["--mode=loopback"]).unwrap();
    assert_eq!(s.metadata_server, "P2PHANDSHAKE");
    assert_eq!(s.protocol, "tcp");
    assert_eq!(s.local_server_name, "127.0.0.1");
    assert_eq!((s.threads, s.duration), (2, 5));
    let s = settings(&["--mode=loopback", "--threads=4", "--duration", "1"]).unwrap();
    assert_eq!((s.threads, s.duration), (4, 1));
    // Non-loopback modes keep upstream's defaults.
    assert_eq!(settings(&["--mode=target"]).unwrap().protocol, "rdma");
}

#[test]
fn report_units_and_format() {
    assert_eq!(format_rate(2_000_000_000, 2.0, "GB", 2), "1.00 GB/s");
    assert_eq!(format_rate(1 << 30, 1.0, "GiB", 3), "1.000 GiB/s");
    assert_eq!(format_rate(1_000_000_000, 1.0, "Gb", 1), "8.0 Gb/s");
    assert_eq!(format_rate(1_000, 1.0, "Kb", 0), "8 Kb/s");
    assert_eq!(format_rate(3 << 20, 1.0, "MiB", 2), "3.00 MiB/s");
    assert_eq!(format_rate(5, 0.0, "GB", 2), "");
    let (r, mut w) = raw(&["--report_unit=TB"]);
    assert_eq!(r.validate(&mut w).unwrap().report_unit, "GB");
    assert_eq!(w.len(), 1);
    let s = settings(&["--batch_size=32", "--block_size=65536"]).unwrap();
    assert_eq!(
        completion_line(5.012, 1631, &s),
        "Test completed: duration 5.01, batch count 1631, throughput 0.68 GB/s"
    );
}
