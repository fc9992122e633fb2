#!/usr/bin/env bash
# Upstream's Grafana dashboard (monitoring/grafana/dashboards/mooncake.json, a copy of
# upstream's) over live data from our master, drawn to a PNG:
#
# 1. our mooncake_master (release build) on 127.0.0.1 with its metrics port;
# 2. a real Prometheus (Debian's `prometheus`, installed with apt-get when missing and
#    root) scraping it every second;
# 3. a workload for DURATION seconds: `store_bench --mode=pressure` (puts, gets and
#    removes over an oversubscribed pool, so evictions run) beside
#    `store_bench --mode=client` rounds (single and batch puts and gets);
# 4. scripts/dashboard_render.py evaluates every panel's queries against that
#    Prometheus and draws the panels where Grafana places them (matplotlib, from PyPI
#    into $MOONCAKE_PLOT_VENV, else ~/.cache/mooncake-plot/venv, the venv of
#    bench/scaling.sh).
#
# Grafana itself is on no registry this machine reaches, so the drawing is ours: same
# panels, layout, queries and units, against the same Prometheus a Grafana would ask.
# With Grafana, upstream's own monitoring/ setup (Prometheus scraping port 9003) shows
# our master unchanged (README "Grafana").
#
# usage: DURATION=90 OUT=docs/grafana/dashboard.png scripts/dashboard-shot.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-90}"
OUT="${OUT:-docs/grafana/dashboard.png}"

if ! command -v prometheus >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  fi
  command -v prometheus >/dev/null || { echo "dashboard-shot: needs prometheus (apt-get install prometheus)" >&2; exit 1; }
fi
venv="${MOONCAKE_PLOT_VENV:-$HOME/.cache/mooncake-plot/venv}"
if ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q matplotlib
fi
cargo build --release --bin mooncake_master --bin store_bench

work="$(mktemp -d)"
PIDS=()
cleanup() {
  [ ${#PIDS[@]} = 0 ] || kill "${PIDS[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rpc="$(free_port)" metrics="$(free_port)" prom="$(free_port)"

target/release/mooncake_master --rpc_address=127.0.0.1 --rpc_port="$rpc" \
  --metrics_host=127.0.0.1 --metrics_port="$metrics" >"$work/master.log" 2>&1 &
PIDS+=("$!")
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: mooncake-master
    static_configs:
      - targets: ['127.0.0.1:$metrics']
EOF
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom" >"$work/prometheus.log" 2>&1 &
PIDS+=("$!")

# Both answer within a minute or the run stops.
ready() { curl -fsS -o /dev/null "$1" 2>/dev/null; }
for url in "http://127.0.0.1:$metrics/metrics" "http://127.0.0.1:$prom/-/ready"; do
  deadline=$((SECONDS + 60))
  until ready "$url"; do
    [ $SECONDS -lt $deadline ] || { echo "dashboard-shot: $url did not answer" >&2; tail -20 "$work"/*.log >&2; exit 1; }
    sleep 0.2
  done
done

start="$(date +%s)"
echo "== workload for $DURATION s against the master at 127.0.0.1:$rpc"
target/release/store_bench --mode=pressure --master_server_addr="127.0.0.1:$rpc" \
  --duration="$DURATION" --threads=2 --mix=60,35,5 >"$work/pressure.log" 2>&1 &
pressure=$!
PIDS+=("$pressure")
until ! kill -0 "$pressure" 2>/dev/null; do
  target/release/store_bench --mode=client --master_server_addr="127.0.0.1:$rpc" \
    --global_segment_size=64MiB --rounds=1 --ops=200 >>"$work/client.log" 2>&1 || true
  # The picture ends while the workload still runs (its clients then leave).
  [ -n "${end:-}" ] || [ "$(date +%s)" -lt $((start + DURATION - 10)) ] || end="$(date +%s)"
done
wait "$pressure" || { echo "dashboard-shot: the pressure workload failed" >&2; tail -20 "$work/pressure.log" >&2; exit 1; }
end="${end:-$(date +%s)}"

mkdir -p "$(dirname "$OUT")"
"$venv/bin/python" scripts/dashboard_render.py monitoring/grafana/dashboards/mooncake.json \
  "http://127.0.0.1:$prom" "$start" "$end" "$OUT"
