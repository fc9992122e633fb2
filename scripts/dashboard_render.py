"""Draws a Grafana dashboard's panels from a Prometheus server's data (used by
scripts/dashboard-shot.sh).

    python dashboard_render.py DASHBOARD.json PROMETHEUS_URL START END OUT.png

Every panel of the dashboard JSON (rows, `timeseries` and `stat` panels, their
`gridPos`, titles, units and targets) is drawn where Grafana puts it: each target's
`expr` is evaluated with Prometheus' `query_range` API over [START, END] (Unix
seconds), a time series panel plots every series (legend from `legendFormat`), a stat
panel shows the last value. A panel whose queries return nothing says "No data", as
Grafana does. Needs matplotlib.
"""

from __future__ import annotations

import json
import math
import re
import sys
import urllib.parse
import urllib.request
from typing import Dict, List, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

BACKGROUND = "#111217"
PANEL = "#181b1f"
BORDER = "#2c3235"
TEXT = "#ccccdc"
MUTED = "#8e8e9e"
PALETTE = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#705da0"]
ROW_UNIT_PX = 30
COLUMNS = 24
WIDTH_PX = 1800


def query_range(url: str, expr: str, start: float, end: float, step: float) -> List[dict]:
    """Prometheus' query_range result for `expr` (an empty list on any error)."""
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query_range?{params}", timeout=30) as r:
            body = json.load(r)
    except (OSError, ValueError):
        return []
    if body.get("status") != "success":
        return []
    return body["data"]["result"]


def legend(fmt: str, labels: Dict[str, str], expr: str) -> str:
    if fmt:
        return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt)
    shown = {k: v for k, v in labels.items() if k not in ("instance", "job")}
    return (labels.get("__name__") or expr[:48]) + (str(shown) if shown else "")


def human(value: float, unit: str) -> str:
    """A value as Grafana writes it for `unit`."""
    if value is None or math.isnan(value):
        return "NaN"
    if unit == "percent":
        return f"{value:.1f}%"
    if unit == "percentunit":
        return f"{100 * value:.1f}%"
    if unit in ("bytes", "decbytes", "Bps", "binBps"):
        suffix = "/s" if unit.endswith("ps") else ""
        for name, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if abs(value) >= size:
                return f"{value / size:.1f} {name}{suffix}"
        return f"{value:.0f} B{suffix}"
    suffix = {"ops": " ops/s", "reqps": " req/s", "ms": " ms", "s": " s"}.get(unit, "")
    for name, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.2f}{name}{suffix}"
    return (f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}") + suffix


def panels(dashboard: dict) -> List[dict]:
    out = []
    for p in dashboard["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def draw(dashboard: dict, url: str, start: float, end: float, out: str) -> Tuple[int, int]:
    """Draws the dashboard; returns (panels with data, panels with queries)."""
    items = panels(dashboard)
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in items)
    unit_w = WIDTH_PX / COLUMNS
    height_px = rows * ROW_UNIT_PX + 60
    dpi = 100
    fig = plt.figure(figsize=(WIDTH_PX / dpi, height_px / dpi), dpi=dpi, facecolor=BACKGROUND)
    fig.text(0.005, 1 - 20 / height_px, dashboard.get("title", "dashboard"), color=TEXT, fontsize=16,
             va="center")
    step = max(1.0, (end - start) / 300)
    with_data = with_queries = 0
    for p in items:
        g = p["gridPos"]
        left = g["x"] * unit_w / WIDTH_PX
        width = g["w"] * unit_w / WIDTH_PX
        top = (g["y"] * ROW_UNIT_PX + 40) / height_px
        h = g["h"] * ROW_UNIT_PX / height_px
        if p["type"] == "row":
            fig.text(left + 0.005, 1 - top - h / 2, p.get("title", ""), color=TEXT, fontsize=13,
                     weight="bold", va="center")
            continue
        pad = 4 / WIDTH_PX
        box = fig.add_axes((left + pad, 1 - top - h + pad, width - 2 * pad, h - 2 * pad))
        box.set_axis_off()
        box.add_patch(FancyBboxPatch((0, 0), 1, 1, boxstyle="round,pad=0,rounding_size=0.01",
                                     transform=box.transAxes, facecolor=PANEL, edgecolor=BORDER))
        title_h = 26 / (g["h"] * ROW_UNIT_PX)
        box.text(0.02, 1 - title_h / 2, p.get("title", ""), color=TEXT, fontsize=9, weight="bold",
                 va="center", transform=box.transAxes)
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
        series = []
        for t in p.get("targets", []):
            for s in query_range(url, t["expr"], start, end, step):
                points = [(float(ts), float(v)) for ts, v in s["values"]]
                points = [(ts, v) for ts, v in points if not math.isnan(v)]
                if points:
                    series.append((legend(t.get("legendFormat", ""), s["metric"], t["expr"]), points))
        with_queries += 1
        if not series:
            box.text(0.5, 0.45, "No data", color=MUTED, fontsize=11, ha="center", va="center",
                     transform=box.transAxes)
            continue
        with_data += 1
        inner = (left + pad + 0.004, 1 - top - h + pad + 0.002, width - 2 * pad - 0.008,
                 h - 2 * pad - title_h * h - 0.004)
        if p["type"] == "stat":
            last = series[0][1][-1][1]
            color = PALETTE[0]
            box.text(0.5, 0.42, human(last, unit), color=color, fontsize=20, weight="bold",
                     ha="center", va="center", transform=box.transAxes)
            continue
        margin = 70 / WIDTH_PX
        ax = fig.add_axes((inner[0] + margin, inner[1] + 0.12 * inner[3], inner[2] - margin,
                           inner[3] * 0.62))
        ax.set_facecolor(PANEL)
        for i, (name, points) in enumerate(series[:8]):
            ax.plot([ts - start for ts, _ in points], [v for _, v in points], color=PALETTE[i % len(PALETTE)],
                    linewidth=1.2, label=name[:40])
        ax.tick_params(colors=MUTED, labelsize=7)
        for spine in ax.spines.values():
            spine.set_color(BORDER)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _, u=unit: human(v, u)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:.0f}s"))
        ax.grid(color=BORDER, linewidth=0.5)
        ax.legend(loc="upper left", bbox_to_anchor=(0, -0.18), ncol=min(4, len(series)), fontsize=6,
                  frameon=False, labelcolor=TEXT)
    fig.savefig(out, facecolor=BACKGROUND)
    return with_data, with_queries


def main(argv: List[str]) -> int:
    if len(argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    dashboard = json.load(open(argv[1], encoding="utf-8"))
    with_data, with_queries = draw(dashboard, argv[2], float(argv[3]), float(argv[4]), argv[5])
    print(f"dashboard_render: {with_data} of {with_queries} panels have data -> {argv[5]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
