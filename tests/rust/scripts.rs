//! The test command's own scripts: no pipeline that fails at random under `pipefail`,
//! and the skip rules of `scripts/test-tools.sh` (a skip is a `SKIP` line, except under
//! `CI`, where only a `MOONCAKE_SKIP_*` the user set may skip a check).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every shell script of the repository's own (scripts/, bench/, .ci/, ffi-examples/).
fn shell_scripts() -> Vec<PathBuf> {
    let mut found = vec![root().join(".ci/run")];
    for dir in ["scripts", "bench", "ffi-examples"] {
        collect_sh(&root().join(dir), &mut found);
    }
    found
}

fn collect_sh(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_sh(&path, found);
        } else if path.extension().is_some_and(|e| e == "sh") {
            found.push(path);
        }
    }
}

/// Whether `segment` (what follows a `|`) is a reader that can exit before its input
/// ends: `grep -q`, `grep -m N`, `head`. Under `pipefail` the writer then dies of
/// SIGPIPE now and then and the whole pipeline counts as failed.
fn exits_early(segment: &str) -> bool {
    let words: Vec<&str> = segment.split_whitespace().collect();
    match words.first() {
        Some(&"head") => true,
        Some(&"grep") => words[1..]
            .iter()
            .take_while(|w| w.starts_with('-') && !w.starts_with("--"))
            .any(|w| w.contains('q') || w.contains('m')),
        _ => false,
    }
}

#[test]
fn no_script_pipes_into_a_reader_that_exits_early() {
    let mut offenders = Vec::new();
    for script in shell_scripts() {
        let text = std::fs::read_to_string(&script).expect("read script");
        for (n, line) in text.lines().enumerate() {
            let code = line.split(" #").next().unwrap_or("");
            if code.trim_start().starts_with('#') {
                continue;
            }
            if code
                .split('|')
                .skip(1)
                .any(|seg| !seg.is_empty() && exits_early(seg))
            {
                offenders.push(format!("{}:{}: {}", script.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "pipelines whose reader can exit early (SIGPIPE under pipefail):\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_early_exit_check_tells_readers_apart() {
    assert!(exits_early(" grep -q 'x'"));
    assert!(exits_early(" grep -Eq x"));
    assert!(exits_early(" grep -m1 x"));
    assert!(exits_early(" head -5"));
    assert!(!exits_early(" grep -E '^x'"));
    assert!(!exits_early(" sed -n 1p"));
    assert!(!exits_early(" grep --color=never x"));
    assert!(!exits_early("| tee log"));
}

/// Runs `body` in bash with scripts/test-tools.sh sourced, with `env` added (and `CI`
/// and every MOONCAKE_SKIP_* of this process removed); returns its standard output.
fn with_tools(env: &[(&str, &str)], body: &str) -> String {
    let mut cmd = Command::new("bash");
    cmd.current_dir(root())
        .arg("-c")
        .arg(format!(
            "set -euo pipefail; source scripts/test-tools.sh; {body}"
        ))
        .env_remove("CI");
    for (key, _) in std::env::vars() {
        if key.starts_with("MOONCAKE_SKIP_") {
            cmd.env_remove(key);
        }
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("run bash");
    assert!(out.status.success(), "bash failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const REPORT: &str = r#"printf 'skipped=%s\n' "${TOOLS_SKIPPED[@]}"; printf 'refused=%s\n' "${SKIPS_REFUSED[@]}"; echo "var=${MOONCAKE_SKIP_FUZZ:-}""#;

#[test]
fn outside_ci_a_check_that_cannot_run_is_skipped_with_a_line() {
    let out = with_tools(
        &[],
        &format!("_skip MOONCAKE_SKIP_FUZZ fuzz 'no nightly'; {REPORT}"),
    );
    assert!(out.contains("SKIP fuzz: no nightly\n"), "{out}");
    assert!(out.contains("skipped=SKIP fuzz: no nightly\n"), "{out}");
    assert!(out.contains("refused=\n"), "{out}");
    assert!(out.contains("var=1\n"), "{out}");
}

#[test]
fn under_ci_a_check_that_cannot_run_fails_with_its_reason() {
    let out = with_tools(
        &[("CI", "true")],
        &format!("_skip MOONCAKE_SKIP_FUZZ fuzz 'no nightly'; {REPORT}"),
    );
    assert!(!out.contains("SKIP fuzz"), "{out}");
    assert!(out.contains("refused=FAILED fuzz: "), "{out}");
    assert!(out.contains("no nightly"), "{out}");
    assert!(out.contains("skipped=\n"), "{out}");
}

#[test]
fn under_ci_a_skip_the_user_set_is_allowed_and_so_is_what_follows_from_it() {
    let out = with_tools(
        &[("CI", "true"), ("MOONCAKE_SKIP_INTEROP", "1")],
        &format!(
            "_skip MOONCAKE_SKIP_INTEROP interop 'no peer'; \
             _skip MOONCAKE_SKIP_FUZZ fuzz 'needs the peer' --follows MOONCAKE_SKIP_INTEROP; \
             {REPORT}"
        ),
    );
    assert!(
        !out.contains("interop"),
        "a user's own skip says nothing: {out}"
    );
    assert!(out.contains("skipped=SKIP fuzz: needs the peer\n"), "{out}");
    assert!(out.contains("refused=\n"), "{out}");
}

#[test]
fn under_ci_a_skip_line_inside_a_stage_is_refused_once() {
    let out = with_tools(
        &[("CI", "1")],
        &format!("skip_check asan 'no nightly'; skip_check asan 'no nightly'; {REPORT}"),
    );
    assert_eq!(out.matches("refused=FAILED asan").count(), 1, "{out}");
}
