"""A self-contained HTML report: lag and RPO over time against the objective, backlog, drills, SLA."""

from __future__ import annotations

import base64
import datetime
import html
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)


def _when(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


def _figure(link_rows, config):
    """Three panels per link: lag p99/max, RPO with its objective, store-and-forward backlog."""
    links = sorted({(row["source_datacentre"], row["target_datacentre"]) for row in link_rows})
    figure, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    for source, target in links:
        rows = [row for row in link_rows if (row["source_datacentre"], row["target_datacentre"]) == (source, target)]
        times = [_when(row["window_end"]) for row in rows]
        label = f"{source}->{target}"
        axes[0].plot(times, [row.get("lag_p99_seconds") for row in rows], label=f"{label} p99")
        axes[0].plot(times, [row.get("lag_max_seconds") for row in rows], linestyle=":", label=f"{label} max")
        axes[1].plot(times, [row.get("rpo_seconds") for row in rows], label=label)
        axes[2].plot(times, [row.get("backlog_events_max") for row in rows], label=label)
    axes[1].axhline(config["objectives"]["rpo_seconds"], color="red", linestyle="--", label="RPO objective")
    for axis, title in zip(axes, ("Replication lag (s)", "RPO in time (s)", "Mirror backlog (events)")):
        axis.set_title(title)
        if links:
            axis.legend(loc="upper left", fontsize="small")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def _table(rows, columns):
    if not rows:
        return "<p>None.</p>"
    head = "".join(f"<th>{html.escape(column)}</th>" for column in columns)

    def cell(value):
        return f"{value:.3f}" if isinstance(value, float) else html.escape(str(value))
    body = "".join("<tr>" + "".join(f"<td>{cell(row.get(column))}</td>" for column in columns) + "</tr>"
                   for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render(rows: dict, config: dict) -> str:
    image = _figure(rows["link_windows"], config)
    rejected = [{"kind": kind, "reason": reason, "rows": count} for kind, reason, count in rows["rejected"]]
    sections = [
        ("RPO objective per link", _table(rows["link_sla"], [
            "source_datacentre", "target_datacentre", "objective_seconds", "worst_rpo_seconds", "good_ratio",
            "passed", "burn_rate"])),
        ("Now", _table(rows["current_rpo"], ["source_datacentre", "target_datacentre", "rpo_seconds",
                                             "replicated_up_to"])),
        ("RTO estimate if a datacentre took over now", _table(rows["queue_sla"], [
            "datacentre", "queue", "estimate_seconds", "objective_seconds", "passed"])),
        ("Drills: the estimate before the fault beside what the ledger measured", _table(rows["drills"], [
            "drill", "messages_at_risk", "lost", "deliveries_at_risk", "duplicates", "accepted", "rpo_seconds",
            "rto_seconds"])),
        ("Drills against the objectives", _table(rows["drill_sla"], [
            "drill", "objective", "value_seconds", "objective_seconds", "passed"])),
        ("Telemetry rejected", _table(rejected, ["kind", "reason", "rows"])),
    ]
    body = "\n".join(f"<h2>{html.escape(title)}</h2>\n{table}" for title, table in sections)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>continuity.artemis RPO/RTO</title>
<style>body{{font-family:sans-serif}} table{{border-collapse:collapse}} td,th{{border:1px solid #999;padding:2px 6px}}</style>
</head><body>
<h1>RPO and RTO, as of {_when(rows['as_of']).isoformat()}</h1>
<img alt="lag, RPO and backlog over time" src="data:image/png;base64,{image}">
{body}
</body></html>
"""


def write(path: str, rows: dict, config: dict) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(render(rows, config))
