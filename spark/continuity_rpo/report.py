"""A self-contained HTML report: one verdict per objective, and the plots and tables it was reached from.

Plots are steps over real time: a window's value holds from its start to its end (a 40 s stall inside a window
is one 60 s step at its worst RPO, not a line between window ends). A panel or table with nothing to show says so.
"""

from __future__ import annotations

import base64
import datetime
import html
import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402  (the backend must be chosen first)
import matplotlib.pyplot as plt  # noqa: E402

from continuity_rpo.incremental import QUEUE_HORIZON_SECONDS  # noqa: E402
from continuity_rpo.results import Results  # noqa: E402

NO_DATA = "No data"
# Per-queue plots draw at most this many series: thousands of lines are one blur under a legend longer than the page
# (and take minutes to draw). Every queue stays in the tables.
DRAWN_QUEUES = 10
# The job gives the per-queue plots the windows of its queue horizon.
QUEUE_PERIOD = f"the last {QUEUE_HORIZON_SECONDS // 60:g} minutes"


def human_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return _date(seconds).strftime("%Y-%m-%d %H:%M:%S UTC")


def _number(value, unit=""):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = f"{value:,.2f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:,.0f}"
    else:
        text = f"{value:,}" if isinstance(value, int) else str(value)
    return f"{text}{unit}"


def _link(row) -> str:
    return f"{row['source_datacentre']} → {row['target_datacentre']}"


def _verdict(passed) -> str:
    if passed is None:
        return '<b class="unknown">UNKNOWN</b>'
    return '<b class="met">MET</b>' if passed else '<b class="missed">MISSED</b>'


def rpo_verdicts(results: Results, config: dict) -> list[tuple[str, bool, str]]:
    """Per link: (link, met, why), from the same per-window worst RPO the RPO plot draws."""
    target = config["objectives"]["target_ratio"]
    verdicts = []
    for row in sorted(results.link_sla, key=_link):
        bad = round(row["windows"] * (1 - row["good_ratio"]))
        verdicts.append((_link(row), bool(row["passed"]),
                         f"{bad} of {row['windows']} window(s) over {_number(row['objective_seconds'], ' s')} "
                         f"(at most {_number((1 - target) * 100)} % allowed), worst "
                         f"{_number(row['worst_rpo_seconds'], ' s')}, error budget burn rate "
                         f"{_number(row['burn_rate'])}"))
    return verdicts


def rto_verdicts(results: Results) -> list[tuple[str, bool | None, str]]:
    """Per datacentre and queue: the RTO estimate against the queue's objective (unknown without a speed)."""
    verdicts = []
    for row in sorted(results.queue_sla, key=lambda row: (row["datacentre"], row["queue"])):
        estimate = row["estimate_seconds"]
        why = (f"estimated {_number(estimate, ' s')} against {_number(row['objective_seconds'], ' s')}"
               if estimate is not None else "no consumption measured at the active site: no honest estimate")
        verdicts.append((f"{row['datacentre']}, queue {row['queue']}", row["passed"] if estimate is not None
                         else None, why))
    return verdicts


def drill_verdicts(results: Results) -> list[tuple[str, bool | None, str]]:
    verdicts = []
    for row in results.drill_sla:
        value = row["value_seconds"]
        verdicts.append((f"drill {row['drill']}, {row['objective'].upper()}", row["passed"] if value is not None
                         else None, f"{_number(value, ' s')} against {_number(row['objective_seconds'], ' s')}"
                         if value is not None else "not measured"))
    return verdicts


def step_series(windows, value, window_seconds):
    """x, y of a step plot: each window's value from its start to its end."""
    ends = [row["window_end"] for row in windows]
    values = [row.get(value) for row in windows]
    xs = [_date(end - window_seconds) for end in ends] + [_date(ends[-1])]
    ys = [math.nan if v is None else v for v in values] + [math.nan if values[-1] is None else values[-1]]
    return xs, ys


def _date(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


def _series(rows, keys):
    grouped = {}
    for row in rows:
        grouped.setdefault(tuple(row[key] for key in keys), []).append(row)
    return {key: sorted(members, key=lambda row: row["window_end"]) for key, members in sorted(grouped.items())}


def _panel(title, ylabel, lines, window_seconds, objective=None):
    """One plot as a data: URI, or None when no line has a value. lines: (label, windows, column, style)."""
    drawn = [(label, windows, column, style) for label, windows, column, style in lines
             if any(row.get(column) is not None for row in windows)]
    if not drawn:
        return None
    figure, axis = plt.subplots(figsize=(10, 3))
    for label, windows, column, style in drawn:
        xs, ys = step_series(windows, column, window_seconds)
        axis.plot(xs, ys, drawstyle="steps-post", label=label, linestyle=style)
    if objective is not None:
        axis.axhline(objective, color="red", linestyle="--", label=f"objective {_number(objective, ' s')}")
    axis.set_title(title)
    axis.set_ylabel(ylabel)
    axis.set_xlabel("time (UTC)")
    axis.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=datetime.timezone.utc))
    top = axis.get_ylim()[1]
    axis.set_ylim(0, top * 1.2 if top > 0 else 1)  # room above the highest step for the legend
    axis.legend(loc="upper left", fontsize="small")
    figure.autofmt_xdate()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def _figure(title, image, verdict_html=""):
    if image is None:
        return f'<figure><figcaption>{html.escape(title)}</figcaption><p class="no-data">{NO_DATA}</p></figure>'
    return (f'<figure><img alt="{html.escape(title)}" src="data:image/png;base64,{image}">'
            f"<figcaption>{html.escape(title)}{verdict_html}</figcaption></figure>")


def _plots(results: Results, config: dict) -> str:
    window = config["window_seconds"]
    links = _series(results.link_windows, ["source_datacentre", "target_datacentre"])
    link_names = {key: f"{key[0]} → {key[1]}" for key in links}
    verdicts = {link: (met, why) for link, met, why in rpo_verdicts(results, config)}
    figures = [] if links else [_figure("RPO in time", None)]
    for key, windows in links.items():
        met, why = verdicts.get(link_names[key], (None, "no probe in any window"))
        title = f"RPO in time, {link_names[key]}: worst per {window} s window"
        figures.append(_figure(title, _panel(title, "seconds", [("worst RPO", windows, "rpo_seconds", "-")],
                                             window, config["objectives"]["rpo_seconds"]),
                               f" — {_verdict(met)}: {html.escape(why)}"))
    figures.append(_figure("Replication lag of the probes (p50, p99, max per window)", _panel(
        "Replication lag", "seconds",
        [(f"{link_names[key]} {label}", windows, column, style) for key, windows in links.items()
         for label, column, style in (("p50", "lag_p50_seconds", "-"), ("p99", "lag_p99_seconds", "--"),
                                      ("max", "lag_max_seconds", ":"))], window)))
    figures.append(_figure("Mirror store-and-forward backlog (most events per window)", _panel(
        "Mirror backlog", "events",
        [(link_names[key], windows, "backlog_events_max", "-") for key, windows in links.items()], window)))
    queues = _series(results.queue_windows, ["datacentre", "queue"])
    totals = series_totals(queues)
    count = results.queue_series if results.queue_series is not None else len(queues)
    busiest = largest(totals, "messages_in_per_second")
    figures.append(_figure(f"Throughput per queue (messages per second, complete windows, {QUEUE_PERIOD})"
                           f"{_drawn(busiest, count)}",
                           _panel("Throughput", "messages/s",
                                  [(f"{dc} {queue} {label}", queues[(dc, queue)], column, style)
                                   for dc, queue in busiest
                                   for label, column, style in (("in", "messages_in_per_second", "-"),
                                                                ("acknowledged", "acknowledged_per_second", "--"))],
                                  window)))
    deepest = largest(totals, "message_count_max")
    figures.append(_figure(f"Messages in each queue (most per window, {QUEUE_PERIOD})"
                           f"{_drawn(deepest, count, 'deepest')}", _panel(
        "Queue depth", "messages",
        [(f"{dc} {queue}", queues[(dc, queue)], "message_count_max", "-") for dc, queue in deepest], window)))
    return "\n".join(figures)


RANKED_COLUMNS = ("messages_in_per_second", "message_count_max")


def series_totals(series: dict) -> dict:
    """{series key: {column: its windows' sum}} for the columns the per-queue plots rank by (a missing value: 0)."""
    return {key: {column: sum(row.get(column) or 0 for row in windows) for column in RANKED_COLUMNS}
            for key, windows in series.items()}


def largest(totals: dict, column: str, limit: int = DRAWN_QUEUES) -> list:
    """The keys of the ``limit`` series with the most ``column`` (``totals``: series_totals), ties by key, in key
    order."""
    return sorted(sorted(totals, key=lambda key: (-totals[key][column], key))[:limit])


def drawn_series(totals: dict) -> set:
    """The series the per-queue plots draw: the busiest and the deepest."""
    return {key for column in RANKED_COLUMNS for key in largest(totals, column)}


def _drawn(drawn: list, count: int, which: str = "busiest") -> str:
    if len(drawn) == count:
        return ""
    return f": the {len(drawn)} {which} of {count:,} queue series drawn, every queue in the tables below"


def _table(rows, columns):
    """columns: (heading, key, unit); a time key (ending in _time, _at, _up_to, as_of) is shown in UTC."""
    if not rows:
        return f'<p class="no-data">{NO_DATA}</p>'
    head = "".join(f"<th>{html.escape(heading)}</th>" for heading, _key, _unit in columns)

    def cell(key, unit, value):
        if key.endswith(("_time", "_at", "_up_to")) or key == "as_of":
            return human_time(value)
        return html.escape(_number(value, unit))
    body = "".join("<tr>" + "".join(f"<td>{cell(key, unit, row.get(key))}</td>" for _h, key, unit in columns)
                   + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _verdict_list(verdicts):
    if not verdicts:
        return f'<p class="no-data">{NO_DATA}</p>'
    return "<ul>" + "".join(f"<li>{html.escape(subject)}: {_verdict(met)} — {html.escape(why)}</li>"
                            for subject, met, why in verdicts) + "</ul>"


def render(results: Results, config: dict) -> str:
    objectives = config["objectives"]
    rto_rows = [dict(row) for row in results.rto]
    rto_objectives = {(row["datacentre"], row["queue"]): row for row in results.queue_sla}
    for row in rto_rows:
        sla_row = rto_objectives.get((row["datacentre"], row["queue"]), {})
        row.update(objective_seconds=sla_row.get("objective_seconds"),
                   passed=sla_row.get("passed") if row["rto_seconds"] is not None else None)
    # RPO in time is the age of the oldest probe at risk, so its send time is evaluated_at - rpo (none at RPO 0).
    current = [dict(row, link=_link(row), oldest_at_risk_sent_at=row["evaluated_at"] - row["rpo_seconds"]
                    if row.get("rpo_seconds") else None) for row in results.current_rpo]
    probes = [dict(row, link=_link(row)) for row in results.probe_sources]
    rejected = [{"kind": kind, "reason": reason, "rows": count} for kind, reason, count in results.rejected]
    sections = [
        (f"RPO objective: {_number(objectives['rpo_seconds'], ' s')} in "
         f"{_number(objectives['target_ratio'] * 100)} % of the {config['window_seconds']} s windows",
         _verdict_list(rpo_verdicts(results, config))),
        (f"RTO objective (default {_number(objectives['rto_seconds'], ' s')}): if each datacentre took over now",
         _verdict_list(rto_verdicts(results))),
        ("Drills against the objectives", _verdict_list(drill_verdicts(results))),
        ("Over time", _plots(results, config)),
        ("RPO now", _table(current, [
            ("Link", "link", ""), ("RPO", "rpo_seconds", " s"), ("Evaluated at", "evaluated_at", ""),
            ("Replicated up to", "replicated_up_to", ""), ("Oldest message at risk sent at", "oldest_at_risk_sent_at", "")])),
        ("RTO estimate, part by part", _table(rto_rows, [
            ("Datacentre", "datacentre", ""), ("Queue", "queue", ""), ("Messages waiting", "message_count", ""),
            ("Consumption speed", "consumption_per_second", " msg/s"), ("Detection", "detection_seconds", " s"),
            ("Activation", "activation_seconds", " s"), ("Draining", "drain_seconds", " s"),
            ("RTO estimate", "rto_seconds", " s"), ("Objective", "objective_seconds", " s"),
            ("Met", "passed", "")])),
        ("Drills: the estimate before the fault beside what the ledger measured", _table(results.drills, [
            ("Drill", "drill", ""), ("Fault at", "fault_time", ""), ("Messages at risk (estimate)",
                                                                     "messages_at_risk", ""),
            ("In flight (estimate)", "messages_in_flight", ""),
            ("Lost", "lost", ""), ("Deliveries at risk (estimate)", "deliveries_at_risk", ""),
            ("Duplicates", "duplicates", ""), ("Accepted", "accepted", ""), ("Actual RPO", "rpo_seconds", " s"),
            ("Actual RTO", "rto_seconds", " s")])),
    ]
    if results.ack_notices:
        def in_ms(row):
            return {key[:-len("_seconds")] + "_ms": row[key] * 1000 if row[key] is not None else None
                    for key in ("mean_seconds", "p99_seconds", "max_seconds", "durable_mean_seconds", "delay_seconds")}
        notices = [dict(row, **in_ms(row), within=row["p99_seconds"] < row["delay_seconds"]
                        if row["p99_seconds"] is not None else None) for row in results.ack_notices]
        sections.append((f"Groups active at every datacentre: acknowledgements against the staging delay (the last "
                         f"{config['window_seconds']} s)", _table(notices, [
                             ("Group", "group", ""), ("Notices", "notices", ""), ("Late (duplicates)", "late", ""),
                             ("Mean", "mean_ms", " ms"), ("p99", "p99_ms", " ms"), ("Max", "max_ms", " ms"),
                             ("Mean to its journal commit", "durable_mean_ms", " ms"),
                             ("Staging delay", "delay_ms", " ms"), ("p99 below the delay", "within", "")])))
    sections += [
        ("Telemetry freshness: probers", _table(probes, [
            ("Route", "link", ""), ("Reported up to", "as_of", ""), ("Age when the job ran", "age_seconds", " s")])),
        ("Telemetry freshness: collectors", _table(results.collector_sources, [
            ("Datacentre", "datacentre", ""), ("Broker", "broker", ""), ("Reported up to", "reported_up_to", ""),
            ("Age when the job ran", "age_seconds", " s")])),
        ("Telemetry rejected", _table(rejected, [
            ("Kind", "kind", ""), ("Reason", "reason", ""), ("Rows", "rows", "")])),
    ]
    body = "\n".join(f"<h2>{html.escape(title)}</h2>\n{content}" for title, content in sections)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>continuity.artemis RPO and RTO</title>
<style>body{{font-family:sans-serif}} table{{border-collapse:collapse}} td,th{{border:1px solid #999;padding:2px 6px}}
.met{{color:#060}} .missed{{color:#b00}} .unknown{{color:#a60}} .no-data{{color:#666;font-style:italic}}</style>
</head><body>
<h1>RPO and RTO as of {human_time(results.as_of)}</h1>
{body}
</body></html>
"""


def write(path: str, results: Results, config: dict) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(render(results, config))
