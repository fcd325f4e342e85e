"""The RPO/RTO job: read telemetry, compute, write Parquet history, Prometheus exposition and an HTML report.

    python -m continuity_rpo.job --telemetry DIR_OR_URI --output DIR [--incremental | --follow SECONDS]
                                 [--sla sla.yml] [--textfile FILE] [--pushgateway HOST:PORT] [--report FILE] [--as-of UNIX_TIME]
                                 [--master URL] [--events FILE_OR_DIR] [--ledgers FILE_OR_DIR]

Batch mode reads every telemetry file on each run; --incremental first ingests the files written since the last run
into Parquet under OUTPUT/telemetry (Structured Streaming, exactly once) and computes from there. --follow keeps
one Spark application running: its streaming queries take new files every SECONDS (processing-time trigger) and a
run after each interval recomputes what they took and publishes; stopped by SIGTERM, it starts again where its
checkpoints and the batch notes say (telemetry.pending).

Exit status 2 when the input cannot give an honest number (no telemetry, bad SLA file); rows it cannot use are
counted per reason, printed and published (continuity_artemis_telemetry_rejected_rows), never guessed at.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import signal
import sys
import threading
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from continuity_rpo import incremental, metrics, prometheus, report, sla, telemetry
from continuity_rpo.errors import ConfigError
from continuity_rpo.results import Results
from continuity_rpo.session import spark_session


def _rows(frame: DataFrame) -> list[dict]:
    return [row.asDict() for row in frame.collect()]


def _current(frame: DataFrame, keys: list[str], as_of: float, window: int) -> DataFrame:
    """The latest window of each series, if it was sampled within the last window before ``as_of``: a datacentre
    that went silent drops out (its collector freshness says why) instead of publishing its last values as now."""
    newest = frame.groupBy(*keys).agg(F.max("window_end").alias("window_end"))
    return frame.join(newest, keys + ["window_end"]).where(F.col("last_sample_time") > as_of - window)


def _latest_link_windows(link_windows: list[dict], present: str, columns: list[str], until: float | None = None,
                         sampled_after: float | None = None) -> list[dict]:
    """Per link, among its windows (collected) that have ``present`` and end by ``until``: the latest, with
    ``columns``; left out when its last sample is not after ``sampled_after`` (see ``_current``)."""
    latest = {}
    for row in link_windows:
        if row[present] is None or (until is not None and row["window_end"] > until):
            continue
        key = tuple(row[name] for name in metrics.LINK_KEYS)
        if key not in latest or row["window_end"] > latest[key]["window_end"]:
            latest[key] = row
    return [{name: row[name] for name in metrics.LINK_KEYS + ["window_end"] + columns}
            for key, row in sorted(latest.items())
            if sampled_after is None or row["last_sample_time"] > sampled_after]


def _drawn_queue_windows(spark: SparkSession, queue_windows: DataFrame) -> dict:
    """Results' ``queue_windows`` (only the series the report draws: with thousands of queues, every window of every
    queue would come to the driver) and ``queue_series``."""
    keys = ["datacentre", "queue"]
    sums = queue_windows.groupBy(*keys).agg(*(F.sum(column).alias(column) for column in report.RANKED_COLUMNS))
    totals = {(row["datacentre"], row["queue"]): {column: row[column] or 0 for column in report.RANKED_COLUMNS}
              for row in sums.collect()}
    drawn = spark.createDataFrame(sorted(report.drawn_series(totals)), "datacentre string, queue string")
    windows = (queue_windows.join(F.broadcast(drawn), keys)
               .select(*keys, "window_end", "messages_in_per_second", "acknowledged_per_second", "message_count_max")
               .orderBy("window_end", *keys))
    return {"queue_windows": _rows(windows),
            "queue_series": len(totals)}


def as_of_time(data: telemetry.Telemetry) -> float | None:
    """The newest time in the telemetry: the job's "now", so that a rerun on the same input gives the same answer."""
    times = [data[kind].select("time") for kind in ("probes", "queue_samples", "link_samples")]
    return functools.reduce(DataFrame.unionByName, times).agg(F.max("time")).first()[0]


def compute(spark: SparkSession, data: telemetry.Telemetry, config: dict, as_of: float | None = None,
            clock: float | None = None, run: incremental.Run | None = None) -> Results:
    """What the telemetry says: plain rows for publishing, and ``tables``, DataFrames for the history. ``as_of``:
    evaluate at this time (default: the newest valid row); ``clock``: the time the sources' ages are measured against (default: ``as_of``
    when given, else this machine's clock); ``run``: an incremental run (``data`` then holds the rows from its
    ``read_from`` on, and what it does not recompute comes from ``run.previous``)."""
    window = config["window_seconds"]
    previous = run.previous if run else None
    clock = clock if clock is not None else as_of if as_of is not None else time.time()
    as_of = as_of if as_of is not None else max(
        [t for t in (as_of_time(data), previous.as_of if previous else None) if t is not None], default=None)
    if as_of is None:
        raise telemetry.TelemetryError("no valid probe, queue or link sample in the telemetry: nothing to measure"
                                       + (f" (rejected: {data.rejected})" if data.rejected else ""))
    data = data.until(as_of)
    latencies, skewed = metrics.probe_latencies(data["probes"], run.probes_counted_from if previous else None)
    latencies = latencies.cache()
    skewed = [("probes", row["reason"], row["count"]) for row in skewed.collect()]
    probe_sources = _rows(metrics.probe_reported_up_to(data["probes"]))
    collector_sources = _rows(metrics.collector_reported_up_to(data["queue_samples"], data["link_samples"]))
    if run:
        # Sampled kinds counted once, when ingested; ledgers and events are read whole on every run.
        rejected = ([row for row in data.rejected if row[0] not in telemetry.SAMPLED] +
                    (incremental.add_rejected(run.ingested.rejected + skewed, previous) if previous
                     else run.ingested.rejected + skewed))
    else:
        rejected = data.rejected + skewed
    if previous:
        probe_sources = incremental.newest(probe_sources, previous.state["probe_sources"], metrics.LINK_KEYS, "as_of")
        collector_sources = incremental.newest(collector_sources, previous.state["collector_sources"],
                                               ["datacentre", "broker"], "reported_up_to")
    # Each route as of what its prober has reported: a collector further ahead says nothing about the target.
    route_as_of = spark.createDataFrame([tuple(row[key] for key in metrics.LINK_KEYS + ["as_of"])
                                         for row in probe_sources],
                                        "source_datacentre string, target_datacentre string, as_of double")

    lag = metrics.replication_lag(latencies, window, route_as_of)
    rpo = metrics.rpo_over_time(latencies, window, route_as_of)
    links = metrics.link_backlog(data["link_samples"], window)
    link_windows = (rpo.join(lag, metrics.LINK_KEYS + ["window_end"], "left")
                    .join(links, metrics.LINK_KEYS + ["window_end"], "full"))
    sampled_until = spark.createDataFrame([(row["broker"], row["reported_up_to"]) for row in collector_sources],
                                          "broker string, reported_up_to double")
    flow = metrics.queue_flow(metrics.queue_samples_until(data["queue_samples"], sampled_until, window), window)
    if previous:
        link_windows = incremental.merge_windows(previous.link_windows, link_windows, run.touched)
        flow = incremental.carry_counter_resets(flow, previous, run.touched)
    link_windows = link_windows.cache()
    queue_windows = metrics.queue_backlog(flow)
    if previous:
        queue_windows = incremental.merge_windows(previous.queue_windows, queue_windows, run.touched)
    queue_windows = queue_windows.cache()

    durations = metrics.operation_durations(data["events"]).cache()
    activation = metrics.activation_seconds(durations, config["activation_seconds"])
    # Per queue, only the last QUEUE_HORIZON_SECONDS: what an incremental run reads back (a queue gone longer has no
    # estimate in either mode).
    recent_queue_windows = queue_windows.where(F.col("window_end") > as_of - incremental.QUEUE_HORIZON_SECONDS)
    rto = metrics.rto_estimate(recent_queue_windows, config["detection_seconds"], activation)
    drills = metrics.drill_outcomes(data["ledgers"])
    at_risk = metrics.at_risk_before(data["queue_samples"], data["link_samples"], drills, window)
    if previous and previous.drills is not None:
        at_risk = incremental.merge_estimates(at_risk, previous.drills, drills, run.read_from + window)
    drills = drills.join(at_risk, "drill", "left").cache()

    tables = {"link_windows": link_windows, "queue_windows": queue_windows, "rto_estimates": rto,
              "drills": drills, "operations": durations}
    link_rows = _rows(link_windows.orderBy("window_end"))
    # The brokers' current figures as of what the collector has published: its files lag its samples by up to a
    # segment, so a prober that published later would otherwise leave them out of the latest window.
    collected_as_of = min(as_of, max((row["reported_up_to"] for row in collector_sources), default=as_of))
    kept, kept_by_address = metrics.kept_messages(data["kept_samples"], collected_as_of, window)
    current_rpo = _rows(metrics.current_rpo(latencies, route_as_of))
    if previous:
        current_rpo = incremental.current_rpo(current_rpo, previous, probe_sources, run.touched)
    results = Results(
        as_of=as_of,
        clock=clock,
        recomputed_from=run.touched if run else None,
        read_from=run.read_from if run else None,
        latest_lag=_latest_link_windows(link_rows, "probes_sent", ["probes_sent", "probes_seen", "lag_p50_seconds",
                                                                   "lag_p99_seconds", "lag_max_seconds"], until=as_of),
        current_rpo=current_rpo,
        latest_link=_latest_link_windows(link_rows, "last_sample_time", [
            "backlog_events_last", "backlog_events_max", "connected_ratio", "last_sample_time"],
            sampled_after=collected_as_of - window),
        latest_queue=_rows(_current(queue_windows, ["datacentre", "queue"], collected_as_of, window)),
        rto=_rows(rto),
        drills=_rows(drills),
        link_sla=sla.link_compliance(link_rows, config["objectives"], current_rpo),
        rejected=sorted(rejected),
        probe_sources=[dict(row, age_seconds=clock - row["as_of"]) for row in probe_sources],
        collector_sources=[dict(row, age_seconds=clock - row["reported_up_to"]) for row in collector_sources],
        link_windows=link_rows,
        **_drawn_queue_windows(spark, recent_queue_windows),
        kept=_rows(kept.orderBy("datacentre")),
        kept_by_address=_rows(kept_by_address.orderBy("datacentre", "address")),
        ack_notices=_rows(metrics.ack_notice_deltas(data["notice_samples"], collected_as_of, window).orderBy("group")),
        reconciliations=_rows(metrics.last_reconciliations(data["events"]).orderBy("operation", "target_datacentre")),
        tables=tables,
    )
    results.queue_sla = sla.queue_compliance(config, results.rto)
    results.drill_sla = sla.drill_compliance(config, results.drills)
    return results


def write_history(tables: dict, output: str, touched: float | None = None) -> None:
    """One Parquet table per result. The per-window tables keep a partition per day: an incremental run rewrites
    the days from ``touched`` on; otherwise every table is replaced with what the whole telemetry gives."""
    for name, frame in tables.items():
        path = f"{output.rstrip('/')}/{name}"
        if name in incremental.WINDOW_TABLES:
            incremental.write_windows(frame, path, touched)
        else:
            frame.write.mode("overwrite").parquet(path)


def run(spark: SparkSession, arguments, config: dict, follower: telemetry.Follower | None = None,
        with_report: bool = True) -> Results:
    """One run: with --incremental, take the new files (or, ``follower`` given, what its queries have taken) and
    recompute what they touch; otherwise compute from every file. The report (--report) only ``with_report``."""
    plan = None
    if arguments.incremental and follower is None:
        telemetry.ingest(spark, arguments.telemetry, arguments.output)
    with follower.lock if follower else contextlib.nullcontext():
        if arguments.incremental:
            previous = incremental.load(spark, arguments.output)
            ingested = telemetry.pending(spark, arguments.output, incremental.computed_batches(previous))
            plan = incremental.plan(ingested, previous, config["window_seconds"])
            incremental.read_queue_windows(spark, arguments.output, plan)
            for kind, count in ingested.rows.items():
                print(f"continuity_rpo: ingested {count} {kind} row(s)", file=sys.stderr)
            if plan.previous:
                print(f"continuity_rpo: recomputing the windows from {plan.touched:.0f}, reading from "
                      f"{plan.read_from:.0f}", file=sys.stderr)
        data = telemetry.read(spark, arguments.telemetry, {"events": arguments.events, "ledgers": arguments.ledgers},
                              arguments.output if plan else None, since=plan.read_from if plan else None)
        # Taken once every file is listed: no row read was written after it, and a slow read does not make the
        # telemetry published meanwhile look as if it came from the future.
        clock = time.time()
        results = compute(spark, data, config, arguments.as_of, clock if arguments.as_of is None else arguments.as_of,
                          plan)
        write_history(results.tables, arguments.output, plan.touched if plan else None)
        if plan:
            incremental.write_state(spark, arguments.output, results, plan)
            telemetry.forget_batches(spark, arguments.output, plan.ingested.last_batch)
    finished = time.time()
    prometheus.publish(prometheus.registry_for(results, finished), arguments.textfile, arguments.pushgateway)
    if arguments.report and with_report:
        report.write(arguments.report, results, config)
    return results


# Following, the HTML report (seconds of drawing, for people) is written at most this often; Prometheus gets every run.
REPORT_EVERY_SECONDS = 300


def follow(spark: SparkSession, arguments, config: dict, stopping: threading.Event) -> None:
    """The long-running job: the ingest queries take new files every --follow seconds, and a run after each
    interval recomputes what they took and publishes, until ``stopping`` is set (the run in progress ends first)."""
    follower = telemetry.Follower(spark, arguments.telemetry, arguments.output, arguments.follow)
    reported = None
    try:
        while not stopping.is_set():
            started = time.monotonic()
            follower.poll()
            report_due = reported is None or started - reported >= REPORT_EVERY_SECONDS
            try:
                _print_results(run(spark, arguments, config, follower, with_report=report_due))
                reported = started if report_due else reported
            except telemetry.TelemetryError as exc:  # nothing to measure yet: the next interval may bring it
                print(f"continuity_rpo: telemetry under {arguments.telemetry}: {exc}", file=sys.stderr)
            # What a run cached is not read again: the next run reads the history it wrote.
            spark.catalog.clearCache()
            took = time.monotonic() - started
            # A run longer than the interval delays the batches waiting for it (Spark says so for each query, every
            # trigger): said here once per run instead.
            behind = f", longer than --follow {arguments.follow:g}" if took > arguments.follow else ""
            print(f"continuity_rpo: run took {took:.1f} s{behind}", file=sys.stderr)
            stopping.wait(max(0.0, arguments.follow - took))
    finally:
        follower.stop()


def _print_results(results: Results) -> None:
    for kind, reason, count in results.rejected:
        print(f"continuity_rpo: rejected {count} {kind} row(s): {reason}", file=sys.stderr)
    for row in results.current_rpo:
        print(f"{row['source_datacentre']}->{row['target_datacentre']}: RPO {row['rpo_seconds']:.2f} s", flush=True)


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(prog="continuity_rpo.job", description=__doc__.split("\n", maxsplit=1)[0])
    parse.add_argument("--telemetry", required=True, help="root of the telemetry store (path or URI)")
    parse.add_argument("--output", required=True, help="where the Parquet history goes (path or URI)")
    parse.add_argument("--incremental", action="store_true",
                       help="ingest only the files new since the last run into OUTPUT/telemetry, compute from there")
    parse.add_argument("--follow", type=float, metavar="SECONDS",
                       help="keep running (implies --incremental): take new files and publish every SECONDS")
    parse.add_argument("--events", help="the operation playbooks' event log (default: TELEMETRY/events)")
    parse.add_argument("--ledgers", help="drill ledgers (default: TELEMETRY/ledgers)")
    parse.add_argument("--sla", help="the objectives (YAML); defaults apply without it")
    parse.add_argument("--textfile", help="Prometheus textfile to write (node_exporter's textfile collector)")
    parse.add_argument("--pushgateway", help="Pushgateway address to push the same metrics to")
    parse.add_argument("--report", help="HTML report to write")
    parse.add_argument("--as-of", type=float, help="evaluate at this Unix time (default: newest telemetry)")
    parse.add_argument("--master", help="Spark master (default: local, or what spark-submit gives)")
    return parse


def main(argv=None) -> int:
    arguments = parser().parse_args(argv)
    if arguments.follow is not None:
        if not 1 <= arguments.follow <= 3600:
            print(f"continuity_rpo: --follow {arguments.follow:g}: the interval must be 1 to 3600 seconds",
                  file=sys.stderr)
            return 2
        arguments.incremental = True
    if arguments.incremental and arguments.as_of is not None:
        print("continuity_rpo: --as-of evaluates the whole telemetry at a past time; it cannot be combined with "
              f"{'--follow' if arguments.follow is not None else '--incremental'}", file=sys.stderr)
        return 2
    try:
        config = sla.load(arguments.sla)
    except (ConfigError, OSError) as exc:
        print(f"continuity_rpo: SLA file {arguments.sla}: {exc}", file=sys.stderr)
        return 2
    spark = spark_session(arguments.master)
    try:
        if arguments.follow is not None:
            stopping = threading.Event()
            for number in (signal.SIGTERM, signal.SIGINT):
                signal.signal(number, lambda *_: stopping.set())
            follow(spark, arguments, config, stopping)
            return 0
        results = run(spark, arguments, config)
    except telemetry.TelemetryError as exc:
        print(f"continuity_rpo: telemetry under {arguments.telemetry}: {exc}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    _print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
