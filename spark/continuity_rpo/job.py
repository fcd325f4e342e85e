"""The RPO/RTO job: read telemetry, compute, write Parquet history, Prometheus exposition and an HTML report.

    python -m continuity_rpo.job --telemetry DIR_OR_URI --output DIR [--incremental] [--sla sla.yml]
                                 [--textfile FILE] [--pushgateway HOST:PORT] [--report FILE] [--as-of UNIX_TIME]
                                 [--master URL] [--events FILE_OR_DIR] [--ledgers FILE_OR_DIR]

Batch mode reads every telemetry file on each run; --incremental first ingests the files written since the last run
into Parquet under OUTPUT/telemetry (Structured Streaming, exactly once) and computes from there.

Exit status 2 when the input cannot give an honest number (no telemetry, bad SLA file); rows it cannot use are
counted per reason, printed and published (continuity_artemis_telemetry_rejected_rows), never guessed at.
"""

from __future__ import annotations

import argparse
import sys
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from continuity_rpo import metrics, prometheus, report, sla, telemetry
from continuity_rpo.errors import ConfigError
from continuity_rpo.session import spark_session


def _rows(frame: DataFrame) -> list[dict]:
    return [row.asDict() for row in frame.collect()]


def _latest_window(frame: DataFrame, keys: list[str]) -> DataFrame:
    newest = frame.groupBy(*keys).agg(F.max("window_end").alias("window_end"))
    return frame.join(newest, keys + ["window_end"])


def _current(frame: DataFrame, keys: list[str], as_of: float, window: int) -> DataFrame:
    """The latest window of each series, if it was sampled within the last window before ``as_of``: a datacentre
    that went silent drops out (its collector freshness says why) instead of publishing its last values as now."""
    return _latest_window(frame, keys).where(F.col("last_sample_time") > as_of - window)


def as_of_time(data: telemetry.Telemetry) -> float | None:
    """The newest time in the telemetry: the job's "now", so that a rerun on the same input gives the same answer."""
    newest = [data[kind].agg(F.max("time")).first()[0] for kind in ("probes", "queue_samples", "link_samples")]
    newest = [value for value in newest if value is not None]
    return max(newest) if newest else None


def compute(spark: SparkSession, data: telemetry.Telemetry, config: dict, as_of: float | None = None,
            clock: float | None = None) -> dict:
    """Every table of the job as DataFrames, plus plain rows for publishing. ``as_of``: evaluate at this time
    (default: the newest valid row); ``clock``: the time the sources' ages are measured against (default: ``as_of``
    when given, else this machine's clock)."""
    window = config["window_seconds"]
    clock = clock if clock is not None else as_of if as_of is not None else time.time()
    as_of = as_of if as_of is not None else as_of_time(data)
    if as_of is None:
        raise telemetry.TelemetryError("no valid probe, queue or link sample in the telemetry: nothing to measure"
                                       + (f" (rejected: {data.rejected})" if data.rejected else ""))
    data = data.until(as_of)
    latencies, skewed = metrics.probe_latencies(data["probes"])
    latencies = latencies.cache()
    rejected = sorted(data.rejected + [("probes", row["reason"], row["count"]) for row in skewed.collect()])
    # Each route as of what its prober has reported: a collector further ahead says nothing about the target.
    route_as_of = metrics.probe_reported_up_to(data["probes"]).cache()

    lag = metrics.replication_lag(latencies, window, route_as_of)
    rpo = metrics.rpo_over_time(latencies, window, route_as_of)
    links = metrics.link_backlog(data["link_samples"], window)
    link_windows = (rpo.join(lag, metrics.LINK_KEYS + ["window_end"], "left")
                    .join(links, metrics.LINK_KEYS + ["window_end"], "full")).cache()
    queue_windows = metrics.queue_backlog(metrics.queue_flow(data["queue_samples"], window)).cache()

    durations = metrics.operation_durations(data["events"]).cache()
    activation = metrics.activation_seconds(durations, config["activation_seconds"])
    rto = metrics.rto_estimate(queue_windows, config["detection_seconds"], activation)
    drills = metrics.drill_outcomes(data["ledgers"])
    drills = drills.join(metrics.at_risk_before(data["queue_samples"], drills), "drill", "left").cache()

    tables = {"link_windows": link_windows, "queue_windows": queue_windows, "rto_estimates": rto,
              "drills": drills, "operations": durations}
    link_sla = sla.link_compliance(rpo, config["objectives"])
    probe_sources = [dict(row, age_seconds=clock - row["as_of"]) for row in _rows(route_as_of)]
    collector_sources = [dict(row, age_seconds=clock - row["reported_up_to"]) for row in
                         _rows(metrics.collector_reported_up_to(data["queue_samples"], data["link_samples"]))]
    rows = {
        "as_of": as_of,
        "clock": clock,
        "latest_lag": _rows(_latest_window(lag.where(F.col("window_end") <= as_of), metrics.LINK_KEYS)),
        "current_rpo": _rows(metrics.current_rpo(latencies, route_as_of)),
        "latest_link": _rows(_current(links, metrics.LINK_KEYS, as_of, window)),
        "latest_queue": _rows(_current(queue_windows, ["datacentre", "queue"], as_of, window)),
        "rto": _rows(rto),
        "drills": _rows(drills),
        "link_sla": _rows(link_sla),
        "rejected": rejected,
        "probe_sources": probe_sources,
        "collector_sources": collector_sources,
        "link_windows": _rows(link_windows.orderBy("window_end")),
        "queue_windows": _rows(queue_windows.select(
            "datacentre", "queue", "window_end", "messages_in_per_second", "acknowledged_per_second",
            "message_count_max").orderBy("window_end")),
    }
    rows["queue_sla"] = sla.queue_compliance(config, rows["rto"])
    rows["drill_sla"] = sla.drill_compliance(config, rows["drills"])
    return {"tables": tables, "rows": rows}


def write_history(tables: dict, output: str) -> None:
    """One Parquet table per result; each run replaces them with what the whole telemetry gives."""
    for name, frame in tables.items():
        frame.write.mode("overwrite").parquet(f"{output.rstrip('/')}/{name}")


def run(spark: SparkSession, arguments, config: dict) -> dict:
    history = None
    if arguments.incremental:
        history = arguments.output
        for kind, count in telemetry.ingest(spark, arguments.telemetry, history).items():
            print(f"continuity_rpo: ingested {count} {kind} row(s)", file=sys.stderr)
    clock = time.time()
    data = telemetry.read(spark, arguments.telemetry, {"events": arguments.events, "ledgers": arguments.ledgers},
                          history, now=clock)
    results = compute(spark, data, config, arguments.as_of, clock if arguments.as_of is None else arguments.as_of)
    write_history(results["tables"], arguments.output)
    finished = time.time()
    prometheus.publish(prometheus.registry_for(results["rows"], finished), arguments.textfile, arguments.pushgateway)
    if arguments.report:
        report.write(arguments.report, results["rows"], config)
    return results["rows"]


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(prog="continuity_rpo.job", description=__doc__.split("\n", maxsplit=1)[0])
    parse.add_argument("--telemetry", required=True, help="root of the telemetry store (path or URI)")
    parse.add_argument("--output", required=True, help="where the Parquet history goes (path or URI)")
    parse.add_argument("--incremental", action="store_true",
                       help="ingest only the files new since the last run into OUTPUT/telemetry, compute from there")
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
    try:
        config = sla.load(arguments.sla)
    except (ConfigError, OSError) as exc:
        print(f"continuity_rpo: SLA file {arguments.sla}: {exc}", file=sys.stderr)
        return 2
    spark = spark_session(arguments.master)
    try:
        rows = run(spark, arguments, config)
    except telemetry.TelemetryError as exc:
        print(f"continuity_rpo: telemetry under {arguments.telemetry}: {exc}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    for kind, reason, count in rows["rejected"]:
        print(f"continuity_rpo: rejected {count} {kind} row(s): {reason}", file=sys.stderr)
    for row in rows["current_rpo"]:
        print(f"{row['source_datacentre']}->{row['target_datacentre']}: RPO {row['rpo_seconds']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
