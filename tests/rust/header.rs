//! The committed C headers must equal what cbindgen generates from `src/ffi`.
//!
//! `cargo test --test header` regenerates every header in memory and fails when a
//! committed copy differs; `MOONCAKE_BLESS=1 cargo test --test header` rewrites them.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn base_config() -> cbindgen::Config {
    cbindgen::Config::from_file(root().join("cbindgen.toml")).expect("parse cbindgen.toml")
}

fn generate(config: cbindgen::Config, sources: &[&str]) -> String {
    let mut builder = cbindgen::Builder::new().with_config(config);
    for s in sources {
        builder = builder.with_src(root().join(s));
    }
    let bindings = builder.generate().expect("cbindgen failed");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("header is UTF-8")
}

/// `include/mooncake/transfer_engine_c.h`: upstream's API.
fn transfer_engine_header() -> String {
    generate(
        base_config(),
        &[
            "src/ffi/te_types.rs",
            "src/ffi/te/engine.rs",
            "src/ffi/te/segment.rs",
            "src/ffi/te/memory.rs",
            "src/ffi/te/batch.rs",
            "src/ffi/te/notify.rs",
        ],
    )
}

/// `include/mooncake/mooncake_ext.h`: the `mooncake_*` extensions.
fn ext_header() -> String {
    let mut config = base_config();
    config.header = Some(
        "/* mooncake-rs extensions to the Transfer Engine and Store C APIs (not in upstream).\n \
         * SPDX-License-Identifier: Apache-2.0 */"
            .into(),
    );
    config.include_guard = Some("MOONCAKE_EXT_H".into());
    config.after_includes = None;
    config.trailer = None;
    // Extensions take upstream's handle types, declared by upstream's two headers.
    config.sys_includes = vec!["stdbool.h".into()];
    config.includes = vec!["transfer_engine_c.h".into(), "store_c.h".into()];
    config.export.exclude.clear();
    config.export.include.clear();
    generate(
        config,
        &[
            "src/ffi/ext.rs",
            "src/ffi/ext_te.rs",
            "src/ffi/ext_store/write.rs",
            "src/ffi/ext_store/read.rs",
            "src/ffi/ext_store/query.rs",
            "src/ffi/ext_store/setup.rs",
            "src/ffi/ext_store/ranges.rs",
            "src/ffi/ext_store/clear.rs",
            "src/ffi/ext_store/dummy.rs",
            "src/ffi/ext_store/segments.rs",
            "src/ffi/ext_store/tasks.rs",
            "src/ffi/ext_store/sessions.rs",
            "src/ffi/p2p/mod.rs",
            "src/ffi/rpc_channel.rs",
            "src/ffi/ext_pg.rs",
        ],
    )
}

/// `include/mooncake/store_c.h`: upstream's Mooncake Store C API.
fn store_header() -> String {
    let mut config = base_config();
    config.header = Some(
        "/* Mooncake Store C API (mooncake-rs), compatible with upstream's\n \
         * mooncake-store/include/store_c.h.\n \
         * SPDX-License-Identifier: Apache-2.0\n \
         *\n \
         * All memory pointed to by \"char *\" arguments is copied during the call; the caller\n \
         * may free it as soon as the function returns. Unlike upstream, creating a store\n \
         * never blocks or handles signals in the host process. */"
            .into(),
    );
    config.include_guard = Some("MOONCAKE_STORE_C_H".into());
    config.after_includes = None;
    config.export.exclude.clear();
    config.export.include.clear();
    generate(config, &["src/ffi/store.rs"])
}

/// `include/mooncake/tent/transfer_engine.h`: upstream's TENT C API.
fn tent_header() -> String {
    let mut config = base_config();
    config.header = Some(
        "/* Mooncake TENT C API (mooncake-rs), compatible with upstream's\n \
         * mooncake-transfer-engine/tent/include/tent/transfer_engine.h. A tent_engine_t is\n \
         * an engine of the classic API too (transfer_engine_c.h).\n \
         * SPDX-License-Identifier: Apache-2.0 */"
            .into(),
    );
    config.include_guard = Some("TENT_API_H".into());
    config.after_includes = Some(
        "\n#define tent_batch_id_t uint64_t\n#define tent_segment_id_t uint64_t\n\
         #ifndef LOCAL_SEGMENT_ID\n#define LOCAL_SEGMENT_ID (0ull)\n#endif\n\
         typedef struct tent_notifi_info tent_notifi_info;"
            .into(),
    );
    config.export.include = vec!["tent_notifi_record_t".into()];
    config.export.exclude = vec![
        "tent_batch_id_t".into(),
        "tent_segment_id_t".into(),
        "LOCAL_SEGMENT_ID".into(),
    ];
    generate(
        config,
        &[
            "src/ffi/tent_types.rs",
            "src/ffi/tent/config.rs",
            "src/ffi/tent/engine.rs",
            "src/ffi/tent/segment.rs",
            "src/ffi/tent/memory.rs",
            "src/ffi/tent/batch.rs",
            "src/ffi/tent/notify.rs",
        ],
    )
}

fn check(relative: &str, generated: &str) -> Result<(), String> {
    let path: &Path = &root().join(relative);
    if std::env::var_os("MOONCAKE_BLESS").is_some() {
        std::fs::write(path, generated).unwrap_or_else(|e| panic!("writing {relative}: {e}"));
        eprintln!("rewrote {relative}");
        return Ok(());
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    if committed == generated {
        return Ok(());
    }
    let first = committed
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
    Err(format!(
        "{relative} is stale (first difference at line {}):\n  committed: {:?}\n  generated: {:?}\n\
         Regenerate with: MOONCAKE_BLESS=1 cargo test --test header\n\
         --- generated {relative} ---\n{generated}",
        first + 1,
        committed.lines().nth(first).unwrap_or("<end of file>"),
        generated.lines().nth(first).unwrap_or("<end of file>"),
    ))
}

#[test]
fn transfer_engine_header_is_up_to_date() {
    if let Err(e) = check(
        "include/mooncake/transfer_engine_c.h",
        &transfer_engine_header(),
    ) {
        panic!("{e}");
    }
}

#[test]
fn ext_header_is_up_to_date() {
    if let Err(e) = check("include/mooncake/mooncake_ext.h", &ext_header()) {
        panic!("{e}");
    }
}

#[test]
fn tent_header_is_up_to_date() {
    if let Err(e) = check("include/mooncake/tent/transfer_engine.h", &tent_header()) {
        panic!("{e}");
    }
}

#[test]
fn store_header_is_up_to_date() {
    if let Err(e) = check("include/mooncake/store_c.h", &store_header()) {
        panic!("{e}");
    }
}

/// The header without comments, whitespace runs collapsed to one space.
fn normalized(header: &str) -> String {
    let mut code = String::new();
    let mut rest = header;
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        rest = rest[start..]
            .find("*/")
            .map_or("", |end| &rest[start + end + 2..]);
    }
    code.push_str(rest);
    code.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every one of upstream's 27 functions is declared, with upstream's C spelling.
#[test]
fn declares_upstream_signatures() {
    let h = normalized(&transfer_engine_header());
    let expected = [
        "transfer_engine_t createTransferEngine(const char *metadata_conn_string, const char *local_server_name, const char *ip_or_host_name, uint64_t rpc_port, int auto_discover);",
        "int discoverTopology(transfer_engine_t engine);",
        "int getLocalIpAndPort(transfer_engine_t engine, char *buf_out, size_t buf_len);",
        "transport_t installTransport(transfer_engine_t engine, const char *proto, void **args);",
        "int uninstallTransport(transfer_engine_t engine, const char *proto);",
        "segment_id_t openSegment(transfer_engine_t engine, const char *segment_name);",
        "segment_id_t openSegmentNoCache(transfer_engine_t engine, const char *segment_name);",
        "int closeSegment(transfer_engine_t engine, segment_id_t segment_id);",
        "int warmupEfaSegment(transfer_engine_t engine, const char *segment_name);",
        "int removeLocalSegment(transfer_engine_t engine, const char *segment_name);",
        "void destroyTransferEngine(transfer_engine_t engine);",
        "int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length, const char *location, int remote_accessible);",
        "int unregisterLocalMemory(transfer_engine_t engine, void *addr);",
        "int registerLocalMemoryBatch(transfer_engine_t engine, buffer_entry_t *buffer_list, size_t buffer_len, const char *location);",
        "int unregisterLocalMemoryBatch(transfer_engine_t engine, void **addr_list, size_t addr_len);",
        "batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size);",
        "int submitTransfer(transfer_engine_t engine, batch_id_t batch_id, struct transfer_request *entries, size_t count);",
        "int submitTransferWithNotify(transfer_engine_t engine, batch_id_t batch_id, struct transfer_request *entries, size_t count, notify_msg_t notify_msg);",
        "notify_msg_t *getNotifsFromEngine(transfer_engine_t engine, int *size);",
        "int freeNotifsMsgBuf(notify_msg_t *msg, int size);",
        "int genNotifyInEngine(transfer_engine_t engine, uint64_t target_id, notify_msg_t notify_msg);",
        "int getTransferStatus(transfer_engine_t engine, batch_id_t batch_id, size_t task_id, struct transfer_status *status);",
        "int freeBatchID(transfer_engine_t engine, batch_id_t batch_id);",
        "int syncSegmentCache(transfer_engine_t engine);",
        "int getNicLoadStats(transfer_engine_t engine, nic_load_stat_t *stats, size_t *count);",
        "void enableGracefulShutdown(transfer_engine_t engine);",
        "int showLinks(transfer_engine_t engine, char *buf_out, size_t buf_len, int json);",
        "#define segment_handle_t int32_t",
        "#define segment_id_t int32_t",
        "#define batch_id_t uint64_t",
        "#define LOCAL_SEGMENT 0",
        "#define INVALID_BATCH UINT64_MAX",
        "#define OPCODE_READ 0",
        "#define OPCODE_WRITE 1",
        "#define STATUS_WAITING 0",
        "#define STATUS_COMPLETED 4",
        "#define STATUS_FAILED 6",
        "typedef struct transfer_request transfer_request_t;",
        "typedef struct notify_msg notify_msg_t;",
        "typedef struct transfer_status transfer_status_t;",
        "typedef struct buffer_entry buffer_entry_t;",
        "typedef struct segment_desc segment_desc_t;",
        "typedef struct nic_load_stat nic_load_stat_t;",
        "typedef void *transfer_engine_t;",
        "typedef void *transport_t;",
        "char device_name[64];",
        "#ifndef TRANSFER_ENGINE_C",
        "extern \"C\" {",
    ];
    let missing: Vec<_> = expected.iter().filter(|e| !h.contains(**e)).collect();
    assert!(missing.is_empty(), "header lacks: {missing:#?}");
    let functions = h.matches(");").count();
    assert_eq!(
        functions, 27,
        "exactly upstream's 27 functions are declared"
    );
}

/// Every one of upstream's 19 store functions is declared with upstream's C spelling,
/// and the handle and config types are upstream's.
#[test]
fn declares_upstream_store_signatures() {
    let h = normalized(&store_header());
    let expected = [
        "#ifndef MOONCAKE_STORE_C_H",
        "#define MOONCAKE_STORE_C_H",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "extern \"C\" {",
        "typedef void *mooncake_store_t;",
        "struct mooncake_replicate_config { size_t replica_num; int with_soft_pin; int with_hard_pin; const char **preferred_segments; size_t preferred_segments_count; };",
        "typedef struct mooncake_replicate_config mooncake_replicate_config_t;",
        "mooncake_store_t mooncake_store_create(void);",
        "void mooncake_store_destroy(mooncake_store_t store);",
        "int mooncake_store_setup(mooncake_store_t store, const char *local_hostname, const char *metadata_server, uint64_t global_segment_size, uint64_t local_buffer_size, const char *protocol, const char *device_name, const char *master_server_addr);",
        "int mooncake_store_init_all(mooncake_store_t store, const char *protocol, const char *device_name, uint64_t mount_segment_size);",
        "int mooncake_store_health_check(mooncake_store_t store);",
        "int mooncake_store_put(mooncake_store_t store, const char *key, const void *value, size_t size, const mooncake_replicate_config_t *config);",
        "int mooncake_store_put_from(mooncake_store_t store, const char *key, void *buffer, size_t size, const mooncake_replicate_config_t *config);",
        "int mooncake_store_batch_put_from(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes, size_t count, const mooncake_replicate_config_t *config, int *results_out);",
        "int64_t mooncake_store_get_into(mooncake_store_t store, const char *key, void *buffer, size_t size);",
        "int mooncake_store_batch_get_into(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes, size_t count, int64_t *results_out);",
        "int mooncake_store_is_exist(mooncake_store_t store, const char *key);",
        "int mooncake_store_batch_is_exist(mooncake_store_t store, const char **keys, size_t count, int *results_out);",
        "int64_t mooncake_store_get_size(mooncake_store_t store, const char *key);",
        "int mooncake_store_get_hostname(mooncake_store_t store, char *buf_out, size_t buf_len);",
        "int mooncake_store_remove(mooncake_store_t store, const char *key, int force);",
        "int64_t mooncake_store_remove_by_regex(mooncake_store_t store, const char *pattern, int force);",
        "int64_t mooncake_store_remove_all(mooncake_store_t store, int force);",
        "int mooncake_store_register_buffer(mooncake_store_t store, void *buffer, size_t size);",
        "int mooncake_store_unregister_buffer(mooncake_store_t store, void *buffer);",
    ];
    let missing: Vec<_> = expected.iter().filter(|e| !h.contains(**e)).collect();
    assert!(missing.is_empty(), "store_c.h lacks: {missing:#?}\n{h}");
    assert_eq!(
        h.matches(");").count(),
        19,
        "exactly upstream's 19 functions"
    );
}
