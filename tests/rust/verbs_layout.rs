//! The hand-written libibverbs ABI (`src/sys/verbs/abi.rs`) against the system's
//! `<infiniband/verbs.h>`: every size and offset the code relies on is compiled into
//! a C program with the real header and compared. Skipped, with a line saying so,
//! where the header (Debian: libibverbs-dev) or a C compiler is missing.

use mooncake::sys::verbs::abi::layout_table;
use std::path::Path;
use std::process::Command;

const HEADER: &str = "/usr/include/infiniband/verbs.h";

#[test]
fn abi_matches_the_system_header() {
    if !Path::new(HEADER).is_file() {
        eprintln!(
            "SKIPPED abi_matches_the_system_header: {HEADER} is not installed (libibverbs-dev)"
        );
        return;
    }
    let table = layout_table();
    let mut c = String::from(
        "#include <infiniband/verbs.h>\n#include <stddef.h>\n#include <stdio.h>\nint main(void) {\n",
    );
    for (key, _) in &table {
        let expr = match key.split_once(' ') {
            Some(("ibv_gid", "size")) => "sizeof(union ibv_gid)".to_string(),
            Some((ty, "size")) => format!("sizeof(struct {ty})"),
            _ => {
                let (ty, field) = key.split_once('.').expect("struct.field");
                format!("offsetof(struct {ty}, {field})")
            }
        };
        c.push_str(&format!(
            "  printf(\"%s %zu\\n\", \"{key}\", (size_t)({expr}));\n"
        ));
    }
    c.push_str("  return 0;\n}\n");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("verbs-layout");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, c).unwrap();
    let cc = match Command::new("cc").arg(&src).arg("-o").arg(&exe).output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("SKIPPED abi_matches_the_system_header: no C compiler ({e})");
            return;
        }
    };
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&exe).output().expect("run layout");
    let text = String::from_utf8_lossy(&out.stdout);
    let c_values: Vec<(String, usize)> = text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect();
    assert_eq!(c_values.len(), table.len(), "{text}");
    let mismatches: Vec<String> = table
        .iter()
        .zip(&c_values)
        .filter(|((_, ours), (_, theirs))| ours != theirs)
        .map(|((k, ours), (_, theirs))| format!("{k}: ours {ours}, header {theirs}"))
        .collect();
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}
