"""From raw runs to figures: per (scenario, client) medians and spreads, the Markdown
table, the README snippet (pure, apart from ``write_outputs``)."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.clients import REFERENCE
from benchmarks.scenarios import Scenario
from benchmarks.stats import spread

RESULTS_DIR = Path(__file__).parent / "results"


def _scenarios(doc: dict[str, Any]) -> list[Scenario]:
    return [
        Scenario(**{k: v for k, v in s.items() if k != "id"}) for s in doc["scenarios"]
    ]


def summarize(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (scenario, client), in scenario order then client order. A client
    with any invalid run is FAILED (with the first reason); its numbers are withheld."""
    rows = []
    clients = _client_order(doc)
    for scenario in _scenarios(doc):
        by_client: dict[str, list[dict[str, Any]]] = {}
        for r in doc["runs"]:
            if r["scenario_id"] == scenario.id:
                by_client.setdefault(r["client"], []).append(r)
        for client in clients:
            runs = by_client.get(client)
            if runs:
                rows.append(summarize_client(scenario, client, runs))
        _add_ratios([r for r in rows if r["scenario_id"] == scenario.id])
    return rows


def _client_order(doc: dict[str, Any]) -> list[str]:
    order: list[str] = []
    for r in doc["runs"]:
        if r["client"] not in order:
            order.append(r["client"])
    # the reference first, the rest as they first ran
    return sorted(order, key=lambda c: (c != REFERENCE, order.index(c)))


def _spread(values: Sequence[float]) -> dict[str, Any]:
    return dataclasses.asdict(spread(values))


def summarize_client(
    scenario: Scenario, client: str, runs: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "scenario_id": scenario.id,
        "kind": scenario.kind,
        "client": client,
        "runs": len(runs),
        "client_version": next((r["client_version"] for r in runs if "client_version" in r),
                               None),
    }
    bad = [r for r in runs if not r.get("valid")]
    if bad:
        reasons = bad[0].get("reasons") or ["invalid run"]
        row.update(status="FAILED", reason=f"{len(bad)}/{len(runs)} runs invalid: {reasons[0]}")
        return row
    row["status"] = "ok"
    # consume runs are timed from their first batch, which they leave out of the count
    counts = [r.get("measured_records", scenario.records) for r in runs]
    row["msgs_per_s"] = _spread([k / r["elapsed_s"] for k, r in zip(counts, runs, strict=True)])
    row["mb_per_s"] = _spread(
        [k * scenario.value_size / r["elapsed_s"] / 1e6 for k, r in zip(counts, runs, strict=True)]
    )
    cpu = [(r["cpu_s"], k) for k, r in zip(counts, runs, strict=True)
           if isinstance(r.get("cpu_s"), int | float)]
    if cpu:
        row["cpu_s_per_million"] = _spread([c / k * 1e6 for c, k in cpu])
        row["cpu_scope"] = runs[0].get("cpu_scope", "phase")
    rss = [r["max_rss_kb"] / 1024 for r in runs if isinstance(r.get("max_rss_kb"), int)]
    if rss:
        row["peak_rss_mb"] = _spread(rss)
    if scenario.kind == "latency":
        for key in ("p50_ms", "p99_ms", "p999_ms", "max_ms"):
            row[key] = _spread([r["latency"][key] for r in runs])
    return row


def _add_ratios(rows: list[dict[str, Any]]) -> None:
    """Each client's median relative to aiokproto's: throughput ratio (2.0 = twice as
    fast as aiokproto) and, for latency, p99 ratio (2.0 = twice aiokproto's p99)."""
    ref = next((r for r in rows if r["client"] == REFERENCE and r["status"] == "ok"), None)
    for r in rows:
        if ref is None or r["status"] != "ok":
            continue
        r["throughput_vs_ref"] = r["msgs_per_s"]["median"] / ref["msgs_per_s"]["median"]
        if r["kind"] == "latency":
            r["p99_vs_ref"] = r["p99_ms"]["median"] / ref["p99_ms"]["median"]


# -- rendering ---------------------------------------------------------------------------


def _num(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _spread_pct(s: dict[str, Any]) -> str:
    med = s["median"]
    return f"±{(s['high'] - s['low']) / 2 / med * 100:.0f}%" if med else "-"


def _ratio(row: dict[str, Any], key: str) -> str:
    if row["client"] == REFERENCE:
        return "1.00"
    value = row.get(key)
    return f"{value:.2f}" if isinstance(value, float) else "-"


def render_markdown(doc: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    meta = doc["meta"]
    out = [f"# Client benchmarks ({'quick' if meta.get('quick') else 'full'} run)", ""]
    out += render_environment(meta)
    out += ["", "## Throughput", ""]
    out += [
        "Median of the runs (spread = half the min-max range, as % of the median). "
        "`x aiokproto` = this client's msgs/s divided by aiokproto's (above 1 = faster). "
        "CPU = CPU seconds of the client process per million records; RSS = the client "
        "process's peak resident memory.",
        "",
        "| scenario | client | msgs/s | spread | MB/s | CPU s / M | peak RSS MB | x aiokproto |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        if row["kind"] == "latency":
            continue
        out.append(_throughput_line(row))
    lat = [r for r in rows if r["kind"] == "latency"]
    if lat:
        out += ["", "## End-to-end latency", ""]
        out += [
            "Fixed-rate produce, consumer in the same process; latency from the intended "
            "send time to receipt (median of the runs' percentiles). `p99 x aiokproto` "
            "below 1 = lower latency than aiokproto.",
            "",
            "| scenario | client | p50 ms | p99 ms | p99.9 ms | CPU s / M | peak RSS MB "
            "| p99 x aiokproto |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        out += [_latency_line(r) for r in lat]
    notes = [f"- **{c}**: {n}" for c, n in meta.get("client_notes", {}).items() if n]
    notes += [f"- **{c}** could not run: {why}" for c, why in meta.get("unavailable", {}).items()]
    if notes:
        out += ["", "## Notes", "", *notes]
    settings = meta.get("settings", {})
    if settings:
        out += ["", "Settings: " + "; ".join(f"{k}: {v}" for k, v in settings.items()) + "."]
    return "\n".join(out) + "\n"


def _failed_line(row: dict[str, Any], columns: int) -> str:
    reason = row["reason"].replace("|", "/").replace("\n", " ")[:300]
    return (f"| {row['scenario_id']} | {row['client']} | **FAILED** | {reason} |"
            + " |" * (columns - 4))


def _rss(row: dict[str, Any]) -> str:
    rss = row.get("peak_rss_mb")
    return _num(rss["median"]) if rss else "-"


def _throughput_line(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return _failed_line(row, 8)
    cpu = row.get("cpu_s_per_million")
    cpu_text = _num(cpu["median"]) + ("*" if row.get("cpu_scope") == "process" else "") \
        if cpu else "-"
    return (
        f"| {row['scenario_id']} | {row['client']} | {_num(row['msgs_per_s']['median'])} "
        f"| {_spread_pct(row['msgs_per_s'])} | {_num(row['mb_per_s']['median'])} "
        f"| {cpu_text} | {_rss(row)} "
        f"| {_ratio(row, 'throughput_vs_ref')} |"
    )


def _latency_line(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return _failed_line(row, 8)
    cpu = row.get("cpu_s_per_million")
    return (
        f"| {row['scenario_id']} | {row['client']} | {_num(row['p50_ms']['median'])} "
        f"| {_num(row['p99_ms']['median'])} | {_num(row['p999_ms']['median'])} "
        f"| {_num(cpu['median']) if cpu else '-'} | {_rss(row)} "
        f"| {_ratio(row, 'p99_vs_ref')} |"
    )


def _loads(values: Sequence[float] | None) -> str:
    return " / ".join(f"{x:.2f}" for x in values) if values else "?"


def render_environment(meta: dict[str, Any]) -> list[str]:
    m = meta.get("machine", {})
    kafka = meta.get("kafka", {})
    clients = ", ".join(f"{k} {v}" for k, v in meta.get("clients", {}).items() if v)
    return [
        f"- date: {meta.get('date')}; {meta.get('runs_per_scenario')} runs per scenario, "
        f"clients interleaved"
        + ("; each scenario opens with one untimed run, dropped" if meta.get("settle_runs")
           else "")
        + f"; took {meta.get('duration_s')} s",
        f"- machine: {m.get('cpu_model')}, {m.get('cores')} cores, {m.get('ram_gib')} GiB "
        f"RAM, {m.get('os')}",
        f"- load average (1/5/15 min) at start: {_loads(m.get('load_avg_at_start'))}, at end: "
        f"{_loads(meta.get('load_avg_at_end'))} (above the core count = other processes "
        "competed for the CPUs: expect wide spreads)",
        f"- Python {meta.get('python')}; {meta.get('java')}",
        f"- Kafka {kafka.get('version', '?')} ({kafka.get('source')}), on the same machine",
        f"- clients: {clients}",
    ]


def render_readme_snippet(doc: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """A short table for README: msgs/s of each client in each throughput scenario, p99 in
    each latency scenario."""
    meta = doc["meta"]
    m = meta.get("machine", {})
    clients = _client_order(doc)
    scen = list(dict.fromkeys(r["scenario_id"] for r in rows))
    index = {(r["scenario_id"], r["client"]): r for r in rows}
    head = "| scenario | " + " | ".join(clients) + " |"
    lines = [
        "### Performance",
        "",
        f"Measured with `make bench` on {m.get('cpu_model')} ({m.get('cores')} cores), "
        f"Kafka {meta.get('kafka', {}).get('version', '?')} on the same machine, "
        f"{meta.get('date', '')[:10]}; median of {meta.get('runs_per_scenario')} runs. "
        "Throughput in records/s (latency rows: p99 in ms). Full table: "
        "`benchmarks/results/latest.md`.",
        "",
        head,
        "|---|" + "---:|" * len(clients),
    ]
    for sid in scen:
        cells = []
        for c in clients:
            r = index.get((sid, c))
            if r is None:
                cells.append("n/a")
            elif r["status"] != "ok":
                cells.append("FAILED")
            elif r["kind"] == "latency":
                cells.append(f"{_num(r['p99_ms']['median'])} ms")
            else:
                cells.append(_num(r["msgs_per_s"]["median"]))
        lines.append(f"| {sid} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_outputs(
    doc: dict[str, Any], out_dir: Path = RESULTS_DIR, extra_markdown: str = ""
) -> dict[str, Path]:
    """Timestamped JSON + latest.json, latest.md, latest-readme.md, latest-*.png."""
    from benchmarks import charts

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = summarize(doc)
    doc = {**doc, "summary": rows}
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    text = json.dumps(doc, indent=1, default=str)
    paths = {"json": out_dir / f"clients-{stamp}.json", "latest_json": out_dir / "latest.json",
             "markdown": out_dir / "latest.md", "readme": out_dir / "latest-readme.md"}
    paths["json"].write_text(text, encoding="utf-8")
    paths["latest_json"].write_text(text, encoding="utf-8")
    paths["markdown"].write_text(render_markdown(doc, rows) + extra_markdown, encoding="utf-8")
    paths["readme"].write_text(render_readme_snippet(doc, rows), encoding="utf-8")
    for name, path in charts.write_charts(rows, out_dir).items():
        paths[f"chart_{name}"] = path
    return paths
