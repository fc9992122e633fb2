#!/usr/bin/env bash
# Fuzzes every decoder reachable from a socket or a file (targets in fuzz/fuzz_targets/,
# checks in fuzz/src/checks.rs) with cargo-fuzz / libFuzzer on the nightly toolchain.
#
#   scripts/fuzz.sh [--minutes N] [--seconds-per-target S] [--jobs J] [target...]
#
# Default: every target for 30 s, 2 at a time (what CI runs). --minutes N runs each for N
# minutes. Seeds come from fuzz/seeds/<target>/ (committed); new inputs grow
# fuzz/corpus/<target>/ (ignored by git). A crash, leak, timeout or an allocation over
# the limits below fails the run; its input is kept under fuzz/artifacts/<target>/ and
# belongs in fuzz/seeds/<target>/ and a test in tests/rust/fuzz_regressions.rs.
# Without a nightly toolchain, or when cargo-fuzz cannot be installed, prints one
# "SKIP fuzz: <why>" line and exits 0.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FUZZ="$ROOT/fuzz"
SECONDS_PER_TARGET=30
JOBS=2
TARGETS=()

usage() {
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit "$1"
}

while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) SECONDS_PER_TARGET=$(( ${2:?--minutes needs a value} * 60 )); shift 2 ;;
        --seconds-per-target) SECONDS_PER_TARGET=${2:?--seconds-per-target needs a value}; shift 2 ;;
        --jobs) JOBS=${2:?--jobs needs a value}; shift 2 ;;
        -h|--help) usage 0 ;;
        -*) echo "fuzz.sh: unknown option $1" >&2; usage 2 ;;
        *) TARGETS+=("$1"); shift ;;
    esac
done
case "$SECONDS_PER_TARGET$JOBS" in
    *[!0-9]*) echo "fuzz.sh: --minutes, --seconds-per-target and --jobs take integers" >&2; exit 2 ;;
esac

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "SKIP fuzz: no nightly toolchain (rustup toolchain install nightly)"
    exit 0
fi
export PATH="$HOME/.cargo/bin:$PATH"
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    if ! cargo install cargo-fuzz --locked >/tmp/cargo-fuzz-install.$$.log 2>&1; then
        echo "SKIP fuzz: cargo install cargo-fuzz failed (log: /tmp/cargo-fuzz-install.$$.log)"
        exit 0
    fi
fi

cd "$FUZZ" || exit 1
if [ ${#TARGETS[@]} -eq 0 ]; then
    mapfile -t TARGETS < <(cargo +nightly fuzz list)
fi
echo "fuzz: building ${#TARGETS[@]} targets (release, debug assertions, AddressSanitizer)"
BUILD_START=$(date +%s)
BUILD_ONE=()
[ ${#TARGETS[@]} -eq 1 ] && BUILD_ONE=("${TARGETS[0]}")
if ! cargo +nightly fuzz build -O --debug-assertions "${BUILD_ONE[@]}"; then
    echo "fuzz: build failed"
    exit 1
fi
echo "fuzz: built in $(( $(date +%s) - BUILD_START )) s"
BIN_DIR="$FUZZ/target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"

LOGS="$FUZZ/target/fuzz-logs"
mkdir -p "$LOGS"

# Runs one target for SECONDS_PER_TARGET; writes "<target> <rc> <cpu-seconds>" to its
# .result file.
run_target() {
    local t=$1 corpus="$FUZZ/corpus/$1" artifacts="$FUZZ/artifacts/$1/" log="$LOGS/$1.log"
    mkdir -p "$corpus" "$artifacts"
    local rc
    (
        "$BIN_DIR/$t" "$corpus" "$FUZZ/seeds/$t" \
            -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
            -rss_limit_mb=2048 -malloc_limit_mb=512 -max_len=65536 \
            -artifact_prefix="$artifacts" -print_final_stats=1 >"$log" 2>&1
        rc=$?
        # The children's user and system CPU time, as the `times` builtin prints it
        # (in this shell: a pipe or a substitution would fork and see none).
        times >"$LOGS/$t.times"
        cpu=$(tail -n 1 "$LOGS/$t.times" | awk '{
            n = split($1 " " $2, a, " "); s = 0
            for (i = 1; i <= n; i++) { split(a[i], p, "m"); s += p[1] * 60 + p[2] }
            printf "%.1f", s }')
        echo "$t $rc $cpu" >"$LOGS/$t.result"
    )
}

START=$(date +%s)
running=0
for t in "${TARGETS[@]}"; do
    if [ ! -x "$BIN_DIR/$t" ]; then
        echo "fuzz: no such target: $t" >&2
        echo "$t 127 0" >"$LOGS/$t.result"
        continue
    fi
    rm -f "$LOGS/$t.result"
    echo "fuzz: $t (${SECONDS_PER_TARGET} s)"
    run_target "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

passed=0
failed=0
printf '\n%-16s %8s %9s %8s %12s %8s %s\n' target seconds cpu_s cpu_min execs corpus result
for t in "${TARGETS[@]}"; do
    read -r _ rc cpu <"$LOGS/$t.result"
    log="$LOGS/$t.log"
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" 2>/dev/null | tail -n 1)
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" 2>/dev/null | tail -n 1)
    corpus=$(find "$FUZZ/corpus/$t" -type f 2>/dev/null | wc -l)
    if [ "$rc" = 0 ]; then
        result=ok
        passed=$((passed + 1))
    else
        artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" 2>/dev/null | tail -n 1)
        result="CRASH rc=$rc ${artifact:-(no artifact)} log=$log"
        failed=$((failed + 1))
    fi
    printf '%-16s %8s %9s %8s %12s %8s %s\n' "$t" "${secs:-?}" "$cpu" \
        "$(awk -v s="$cpu" 'BEGIN { printf "%.2f", s / 60 }')" "${execs:-?}" "$corpus" "$result"
done
echo "fuzz: ran in $(( $(date +%s) - START )) s; logs in $LOGS"
# Counted by scripts/test-all.sh (a line starting with "N passed").
echo "$passed passed, $failed failed: fuzz targets, ${SECONDS_PER_TARGET} s each"
[ "$failed" -eq 0 ]
