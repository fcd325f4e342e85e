"""Incremental runs: which windows new telemetry touches, what must be read again to recompute them, and what is kept
from the history the previous runs wrote.

A run recomputes the windows from the first one its new rows fall in, or from the one the oldest probe still
outstanding then was sent in (``plan``), and reads the ingested telemetry from one window earlier (each series'
previous sample), or from that probe (a stall that began before is counted in full). The
windows before ``touched_from`` are kept as written. A small state (each source's "reported up to", the current RPO
of each route, the rejected rows counted so far) carries what a run without news of a source still publishes.

The work of a run is therefore bounded by the new rows, the windows they touch and the longest outstanding stall,
not by the history: the per-window tables are kept per hour, and a run reads back the per-queue windows from an hour
before the windows it recomputes and rewrites only the hours it touched. Assumed, as the writers do it (store.py):
each source publishes its rows in time order.
"""

from __future__ import annotations

import dataclasses
import math

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from continuity_rpo.results import Results
from continuity_rpo.telemetry import HOUR_SECONDS, SAMPLED, Ingested, _hadoop_path, path_exists

# The per-window tables are kept per hour of their window's end, so that a run rewrites only the hours it touched.
# (Histories written before were kept per day: _hourly moves them, once.)
WINDOW_TABLES = ("link_windows", "queue_windows")
STATE_SCHEMAS = {
    "probe_sources": "source_datacentre string, target_datacentre string, as_of double",
    "collector_sources": "datacentre string, broker string, reported_up_to double",
    "current_rpo": "source_datacentre string, target_datacentre string, evaluated_at double, replicated_up_to double, "
                   "rpo_seconds double",
    "rejected": "kind string, reason string, count long",
    # Per sampled kind, the last ingested batch a run has computed (telemetry.pending: what the next run takes).
    "ingested_batches": "kind string, batch long",
}


# Per queue, the windows a run needs from the history reach back this far before the ones it recomputes: each queue's
# window before them (counter resets carried over), the rest of the first hour it rewrites, and the queue horizon.
QUEUE_HORIZON_SECONDS = HOUR_SECONDS


def hour(column):
    return F.floor(column / HOUR_SECONDS).cast("long")


@dataclasses.dataclass
class Previous:
    """What the previous runs left in the history: per-window tables (detached from their files, which this run
    rewrites) and the state rows."""
    link_windows: DataFrame | None
    queue_windows: DataFrame | None
    drills: DataFrame | None
    state: dict[str, list[dict]]

    @property
    def as_of(self) -> float | None:
        times = ([row["as_of"] for row in self.state["probe_sources"]]
                 + [row["reported_up_to"] for row in self.state["collector_sources"]])
        return max(times) if times else None


def _path(history: str, name: str) -> str:
    return f"{history.rstrip('/')}/{name}"


def _detached(spark: SparkSession, path: str, since: float | None = None) -> DataFrame | None:
    """A table of the history held apart from its files (this run rewrites them), only its hours that may hold
    windows ending after ``since`` when given; None when it has no rows."""
    if not path_exists(spark, path):
        return None
    try:
        frame = spark.read.parquet(path)
        if since is not None:
            frame = frame.where(F.col("hour") >= math.floor(since / HOUR_SECONDS))
        return frame.drop("hour").localCheckpoint(eager=True)
    except AnalysisException:  # written empty: no file to take a schema from
        return None


def _hourly(spark: SparkSession, path: str) -> None:
    """A per-window table written per day (before the tables were kept per hour) rewritten per hour, once: written
    beside it, then put in its place (a run stopped in between finds the new one there and finishes the move)."""
    file_system, table = _hadoop_path(spark, path)
    moved = _hadoop_path(spark, f"{path.rstrip('/')}.hourly")[1]
    if file_system.exists(table) and any(status.getPath().getName().startswith("day=")
                                         for status in file_system.listStatus(table)):
        frame = spark.read.parquet(path).drop("day")
        frame.withColumn("hour", hour(F.col("window_end"))).write.mode("overwrite").partitionBy("hour").parquet(
            moved.toString())
        file_system.delete(table, True)
    if file_system.exists(moved) and not file_system.exists(table):
        file_system.rename(moved, table)


def load(spark: SparkSession, history: str) -> Previous | None:
    """The previous runs' results, or None before the first run (everything is computed then)."""
    if not all(path_exists(spark, _path(history, f"state/{name}")) for name in STATE_SCHEMAS):
        return None
    state = {name: [row.asDict() for row in spark.read.schema(schema).parquet(_path(history, f"state/{name}"))
                    .collect()] for name, schema in STATE_SCHEMAS.items()}
    for name in WINDOW_TABLES:
        _hourly(spark, _path(history, name))
    # The per-queue windows come once the run knows what it recomputes (read_queue_windows).
    return Previous(_detached(spark, _path(history, "link_windows")), None,
                    _detached(spark, _path(history, "drills")), state)


def read_queue_windows(spark: SparkSession, history: str, run: Run) -> None:
    """The previous runs' per-queue windows ``run`` needs (QUEUE_HORIZON_SECONDS before the windows it recomputes
    on), into ``run.previous``."""
    if run.previous is not None:
        run.previous.queue_windows = _detached(spark, _path(history, "queue_windows"),
                                               run.touched - QUEUE_HORIZON_SECONDS)


@dataclasses.dataclass
class Run:
    """An incremental run: what it ingested and, after the first run, what it keeps and from when it recomputes."""
    ingested: Ingested
    previous: Previous | None = None
    touched: float | None = None
    read_from: float | None = None

    @property
    def probes_counted_from(self) -> float:
        """Probe pairs are judged (and rejected ones counted) only when a row of theirs arrives."""
        return self.ingested.earliest.get("probes", math.inf)


def plan(ingested: Ingested, previous: Previous | None, window: int) -> Run:
    """From the first window the new rows fall in, or earlier: from the window where the oldest probe then
    outstanding was sent (its send window's lag percentiles change when it is seen). Reading starts a window before
    that (each series' previous sample), or at the oldest probe outstanding then if it is older."""
    if previous is None:
        return Run(ingested)
    earliest = min(ingested.earliest.values()) if ingested.earliest else previous.as_of
    touched = math.floor(earliest / window) * window
    touched = min(touched, math.floor(_oldest_outstanding(previous, touched) / window) * window)
    return Run(ingested, previous, touched, min(touched - window, _oldest_outstanding(previous, touched)))


def _oldest_outstanding(previous: Previous, at: float) -> float:
    """The send time of the oldest probe outstanding at the window boundary ``at`` (``at`` when none was): the RPO at
    the end of the window ending there, or, if that window was not complete yet, the current RPO the previous run
    published (a probe outstanding at ``at`` and sent before is outstanding until then)."""
    oldest = [row["evaluated_at"] - row["rpo_seconds"] for row in previous.state["current_rpo"]
              if row["rpo_seconds"] is not None]
    if previous.link_windows is not None:
        ending = (previous.link_windows.where(F.col("window_end") == at)
                  .agg(F.min(F.col("window_end") - F.col("rpo_at_end_seconds"))).first()[0])
        oldest += [ending] if ending is not None else []
    return min([at] + oldest)


def merge_windows(previous: DataFrame | None, recomputed: DataFrame, touched: float) -> DataFrame:
    """The windows before ``touched`` as written, the others as recomputed."""
    if previous is None:
        return recomputed
    return (previous.where(F.col("window_end") <= touched)
            .unionByName(recomputed.where(F.col("window_end") > touched), allowMissingColumns=True))


def carry_counter_resets(flow: DataFrame, previous: Previous, touched: float) -> DataFrame:
    """``flow`` with ``counters_reset`` also set where a broker restarted before ``touched`` (its counters no longer
    compare with another datacentre's, as in a run over the whole telemetry)."""
    if previous.queue_windows is None:
        return flow
    before = previous.queue_windows.where(F.col("window_end") <= touched)
    latest = before.groupBy("datacentre", "queue").agg(F.max("window_end").alias("window_end"))
    carried = (before.join(latest, ["datacentre", "queue", "window_end"])
               .select("datacentre", "queue", F.col("counters_reset").alias("reset_before")))
    return (flow.join(carried, ["datacentre", "queue"], "left")
            .withColumn("counters_reset", F.col("counters_reset") | F.coalesce("reset_before", F.lit(False)))
            .drop("reset_before"))


def newest(rows: list[dict], previous_rows: list[dict], keys: list[str], time_key: str) -> list[dict]:
    """Per key, the row with the newest ``time_key`` of this run's and the previous ones."""
    merged = {}
    for row in previous_rows + rows:
        key = tuple(row[name] for name in keys)
        if key not in merged or row[time_key] >= merged[key][time_key]:
            merged[key] = row
    return [merged[key] for key in sorted(merged)]


def add_rejected(counts: list[tuple[str, str, int]], previous: Previous) -> list[tuple[str, str, int]]:
    totals = {(row["kind"], row["reason"]): row["count"] for row in previous.state["rejected"]}
    for kind, reason, count in counts:
        totals[(kind, reason)] = totals.get((kind, reason), 0) + count
    return sorted((kind, reason, count) for (kind, reason), count in totals.items())


def write_windows(frame: DataFrame, path: str, touched: float | None) -> None:
    """Rewrite the hours from ``touched`` on (all hours without); the others stay as they are."""
    frame = frame.withColumn("hour", hour(F.col("window_end")))
    if touched is not None:
        frame = frame.where(F.col("hour") >= math.floor(touched / HOUR_SECONDS))
    (frame.write.mode("overwrite").option("partitionOverwriteMode", "dynamic" if touched is not None else "static")
     .partitionBy("hour").parquet(path))


def computed_batches(previous: Previous | None) -> dict[str, int]:
    return {row["kind"]: row["batch"] for row in previous.state["ingested_batches"]} if previous else {}


def write_state(spark: SparkSession, history: str, results: Results, run: Run) -> None:
    # The ledgers and the event log are read whole on every run: only the sampled kinds' counts add up.
    state = {"rejected": [{"kind": kind, "reason": reason, "count": count}
                          for kind, reason, count in results.rejected if kind in SAMPLED],
             "ingested_batches": [{"kind": kind, "batch": batch} for kind, batch in
                                  sorted({**computed_batches(run.previous), **run.ingested.last_batch}.items())]}
    for name, schema in STATE_SCHEMAS.items():
        columns = [field.split()[0] for field in schema.split(", ")]
        rows = state[name] if name in state else getattr(results, name)
        frame = spark.createDataFrame([tuple(row.get(column) for column in columns) for row in rows], schema)
        frame.write.mode("overwrite").parquet(_path(history, f"state/{name}"))


def merge_estimates(at_risk: DataFrame, previous_drills: DataFrame, drills: DataFrame, cutoff: float) -> DataFrame:
    """Per drill, the estimate made from the samples before its fault: this run's for a fault from ``cutoff`` on
    (it read those samples), the previous runs' for an earlier one."""
    recent = drills.where(F.col("fault_time") >= cutoff).select("drill")
    earlier = drills.where(F.col("fault_time") < cutoff).select("drill")
    if "messages_in_flight" not in previous_drills.columns:  # a history written before the job estimated it
        previous_drills = previous_drills.withColumn("messages_in_flight", F.lit(None).cast("double"))
    return (at_risk.join(recent, "drill")
            .unionByName(previous_drills.select("drill", "estimated_at", "messages_at_risk", "deliveries_at_risk",
                                                "messages_in_flight")
                         .join(earlier, "drill")))


def current_rpo(rows: list[dict], previous: Previous, probe_sources: list[dict], touched: float) -> list[dict]:
    """A route whose prober reported since ``touched``: as recomputed; another: as the previous run published it
    (what its prober reported has not changed)."""
    def route(row):
        return row["source_datacentre"], row["target_datacentre"]
    quiet = {route(row) for row in probe_sources if row["as_of"] < touched}
    return sorted([row for row in rows if route(row) not in quiet]
                  + [row for row in previous.state["current_rpo"] if route(row) in quiet], key=route)
