"""PNG charts of the summary rows (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from benchmarks.clients import REFERENCE


def _grouped(
    ax: Any,
    rows: list[dict[str, Any]],
    metric: str,
    title: str,
    ylabel: str,
    *,
    log: bool = False,
) -> None:
    """Bars per scenario (groups) and client (colours); whiskers span min..max."""
    scenarios = list(dict.fromkeys(r["scenario_id"] for r in rows))
    clients = list(dict.fromkeys(r["client"] for r in rows))
    clients.sort(key=lambda c: c != REFERENCE)
    width = 0.8 / max(1, len(clients))
    index = {(r["scenario_id"], r["client"]): r for r in rows}
    for k, client in enumerate(clients):
        xs, med, lo, hi, failed_x = [], [], [], [], []
        for i, sid in enumerate(scenarios):
            row = index.get((sid, client))
            x = i + (k - (len(clients) - 1) / 2) * width
            if row is None:
                continue
            if row["status"] != "ok" or metric not in row:
                failed_x.append(x)
                continue
            s = row[metric]
            xs.append(x)
            med.append(s["median"])
            lo.append(s["median"] - s["low"])
            hi.append(s["high"] - s["median"])
        ax.bar(xs, med, width, yerr=[lo, hi], capsize=2, label=client)
        for x in failed_x:  # a failed client is shown, not silently missing
            ax.text(x, 0.02, "FAILED", rotation=90, ha="center", va="bottom", fontsize=7,
                    color="red", transform=ax.get_xaxis_transform())
    ax.set_xticks(range(len(scenarios)))
    ax.set_xticklabels(scenarios, rotation=20, ha="right", fontsize=8)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)


def write_charts(rows: list[dict[str, Any]], out_dir: Path) -> dict[str, Path]:
    paths: dict[str, Path] = {}
    groups = {
        "produce": [r for r in rows if r["kind"] == "produce"],
        "consume": [r for r in rows if r["kind"] == "consume"],
        "latency": [r for r in rows if r["kind"] == "latency"],
    }
    for kind in ("produce", "consume"):
        sel = groups[kind]
        if not sel:
            continue
        n = len({r["scenario_id"] for r in sel})
        fig, axes = plt.subplots(3, 1, figsize=(max(8, 2.2 * n), 13))
        _grouped(axes[0], sel, "msgs_per_s", f"{kind}: records/s (median, min..max)",
                 "records/s", log=True)
        _grouped(axes[1], sel, "cpu_s_per_million", f"{kind}: CPU seconds per million records",
                 "CPU s / M")
        _grouped(axes[2], sel, "peak_rss_mb", f"{kind}: peak RSS of the client process", "MB")
        fig.tight_layout()
        paths[kind] = out_dir / f"latest-{kind}.png"
        fig.savefig(paths[kind], dpi=90)
        plt.close(fig)
    if groups["latency"]:
        sel = groups["latency"]
        n = len({r["scenario_id"] for r in sel})
        fig, axes = plt.subplots(1, 3, figsize=(max(12, 4 * n), 5))
        for ax, key, label in zip(axes, ("p50_ms", "p99_ms", "p999_ms"),
                                  ("p50", "p99", "p99.9"), strict=True):
            _grouped(ax, sel, key, f"end-to-end latency {label}", "ms", log=True)
        fig.tight_layout()
        paths["latency"] = out_dir / "latest-latency.png"
        fig.savefig(paths["latency"], dpi=90)
        plt.close(fig)
    return paths
