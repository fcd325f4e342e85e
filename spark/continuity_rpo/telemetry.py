"""The telemetry store: what each kind of record holds, how to read it, and what counts as bad telemetry.

Every kind lives in its own directory of JSON-lines files under one root (a local path or any URI Spark reads):

    <root>/queue_samples/   the collector: one row per queue per broker per sample
    <root>/link_samples/    the collector: one row per mirror (broker connection) per broker per sample
    <root>/kept_samples/    the collector: one row per live broker per sample, the mirrored messages it keeps
                            because they found no queue (in all, and per original address)
    <root>/notice_samples/  the collector: one row per group active at every datacentre (staging_delay_ms), sending
                            datacentre and broker per sample, the acknowledgement notices that broker received (count,
                            delta histogram: sum, max, cumulative buckets; applied, late), the group's delay, and
                            whether the series is new since the broker's previous sample (appeared)
    <root>/probes/          the canary prober: a "sent" row when a probe leaves its source datacentre, a "seen" row
                            when it is visible at a target datacentre (both times from the prober's own clock)
    <root>/ledgers/         drills: ids accepted and consumed per datacentre, and the time of the fault
    <root>/events/          the orchestration event log of the operation playbooks (continuity_event_log)

Times are Unix seconds (float), except the event log's ISO-8601 "at". A row whose time is not a finite number of
seconds (NaN, infinite, milliseconds), lies further in the future than the clock tolerance, or whose line cannot be
read (truncated, not JSON, a value of the wrong type) is rejected and counted with that reason; the rest is used.

Incremental mode: ``ingest`` appends the files written since its last run to Parquet tables under
``<history>/telemetry/<kind>/hour=<hour>/batch=<batch>`` (a Structured Streaming query per sampled kind, trigger
availableNow, checkpointed in ``<history>/_checkpoints/<kind>``, so that every file is taken exactly once), and
``read(..., history=..., since=...)`` reads the sampled kinds from there, only the hours from ``since`` on. Writers
publish only complete files (store.py), which the streaming source needs: it reads a file once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (BooleanType, DoubleType, LongType, MapType, StringType, StructField, StructType)


def _schema(*fields):
    return StructType([StructField(name, kind, True) for name, kind in fields])


SCHEMAS = {
    "queue_samples": _schema(("time", DoubleType()), ("broker", StringType()), ("datacentre", StringType()),
                             ("queue", StringType()), ("address", StringType()), ("messages_added", LongType()),
                             ("messages_acknowledged", LongType()), ("message_count", LongType()),
                             ("delivering_count", LongType()), ("consumer_count", LongType())),
    "link_samples": _schema(("time", DoubleType()), ("broker", StringType()), ("datacentre", StringType()),
                            ("link", StringType()), ("target_datacentre", StringType()),
                            ("connected", BooleanType()), ("backlog", LongType()), ("undispatched", LongType())),
    "kept_samples": _schema(("time", DoubleType()), ("broker", StringType()), ("datacentre", StringType()),
                            ("kept", LongType()), ("kept_by_address", MapType(StringType(), LongType()))),
    "notice_samples": _schema(("time", DoubleType()), ("broker", StringType()), ("datacentre", StringType()),
                              ("group", StringType()), ("source", StringType()), ("count", LongType()),
                              ("sum_seconds", DoubleType()), ("max_seconds", DoubleType()),
                              ("applied", LongType()), ("late", LongType()),
                              ("buckets", MapType(StringType(), LongType())),
                              ("staging_delay_seconds", DoubleType()), ("appeared", BooleanType()),
                              ("durable_count", LongType()), ("durable_sum_seconds", DoubleType())),
    "probes": _schema(("probe_id", StringType()), ("source_datacentre", StringType()),
                      ("target_datacentre", StringType()), ("event", StringType()), ("time", DoubleType())),
    "ledgers": _schema(("drill", StringType()), ("id", StringType()), ("datacentre", StringType()),
                       ("event", StringType()), ("time", DoubleType())),
    "events": _schema(("name", StringType()), ("id", StringType()), ("phase", StringType()), ("at", StringType()),
                      ("source", StringType()), ("target", StringType()),
                      ("details", MapType(StringType(), StringType()))),
}

# The column a JSON reader fills, instead of the fields, with a line it cannot parse.
UNREADABLE = "_unreadable_line"
# Unix seconds beyond this are the year 5138: a time in milliseconds or microseconds, not seconds.
LATEST_PLAUSIBLE_SECONDS = 1e11
# How far ahead of the job's clock a row's time may be (the writers' clocks are NTP-synchronised, not identical).
CLOCK_TOLERANCE_SECONDS = 30.0

# A row without one of these cannot be placed in time or attributed: it is rejected, and counted.
REQUIRED = {
    "queue_samples": ("time", "broker", "datacentre", "queue", "messages_added", "messages_acknowledged",
                      "message_count", "delivering_count"),
    "link_samples": ("time", "broker", "datacentre", "link", "target_datacentre", "backlog"),
    "kept_samples": ("time", "broker", "datacentre", "kept"),
    "notice_samples": ("time", "broker", "datacentre", "group", "source", "count", "sum_seconds", "applied", "late",
                       "buckets", "staging_delay_seconds"),
    "probes": ("probe_id", "source_datacentre", "target_datacentre", "event", "time"),
    "ledgers": ("drill", "datacentre", "event", "time"),
    "events": ("name", "id", "phase", "at"),
}

# The kinds that grow all the time: what incremental mode ingests. Ledgers and the event log stay small and are read
# whole on every run (the event log is one file the playbooks append to).
SAMPLED = ("queue_samples", "link_samples", "kept_samples", "notice_samples", "probes")

ALLOWED_EVENTS = {"probes": ("sent", "seen"), "ledgers": ("accepted", "consumed", "present", "fault")}


class TelemetryError(Exception):
    """Telemetry the job cannot turn into an honest number (nothing to read, nothing valid left)."""


@dataclasses.dataclass
class Telemetry:
    """The valid rows of every kind, and the rejected ones counted per kind and reason."""
    frames: dict[str, DataFrame]
    rejected: list[tuple[str, str, int]]

    def __getitem__(self, kind):
        return self.frames[kind]

    def until(self, as_of: float) -> "Telemetry":
        """The samples and probe events up to ``as_of``: what the job would have known then."""
        frames = dict(self.frames)
        for kind in SAMPLED:
            frames[kind] = frames[kind].where(F.col("time") <= as_of)
        return Telemetry(frames, self.rejected)


def event_time(column):
    """The event log's ISO-8601 time in Unix seconds (null when it does not parse)."""
    return F.unix_micros(F.try_to_timestamp(column)) / 1e6


def _time_rejections(kind, now):
    if kind == "events":
        return [("unparseable time (at)", F.col("at").isNotNull() & event_time(F.col("at")).isNull())]
    seconds = F.col("time")
    return [("time is not a number (NaN)", F.isnan(seconds)),
            ("time is infinite", F.abs(seconds) == float("inf")),
            ("time in milliseconds or finer, not seconds", seconds >= LATEST_PLAUSIBLE_SECONDS),
            (f"time more than {CLOCK_TOLERANCE_SECONDS:g} s ahead of the job's clock",
             seconds > now + CLOCK_TOLERANCE_SECONDS)]


def _rejections(kind, frame, now):
    """(reason column, condition) pairs: the first that holds rejects a row."""
    reasons = [("unreadable line (truncated, not JSON, or a value of the wrong type)",
                F.col(UNREADABLE).isNotNull())]
    reasons += [(f"missing {name}", F.col(name).isNull()) for name in REQUIRED[kind]]
    reasons += _time_rejections(kind, now)
    if kind in ALLOWED_EVENTS:
        reasons.append(("unknown event", ~F.col("event").isin(*ALLOWED_EVENTS[kind])))
    if kind == "ledgers":
        reasons.append(("missing id", (F.col("event") != "fault") & F.col("id").isNull()))
    if kind == "queue_samples":
        reasons.append(("negative counter", F.least(*[F.col(c) for c in (
            "messages_added", "messages_acknowledged", "message_count", "delivering_count")]) < 0))
    if kind == "link_samples":
        reasons.append(("negative counter", F.least("backlog", "undispatched") < 0))
    if kind == "kept_samples":
        reasons.append(("negative counter", F.col("kept") < 0))
    if kind == "notice_samples":
        reasons.append(("negative counter", F.least(*[F.col(c) for c in ("count", "applied", "late")]) < 0))
    return reasons


def _tagged(kind, frame, now):
    """``frame`` with ``_rejected``: why a row cannot be used (null when it can)."""
    if UNREADABLE not in frame.columns:
        frame = frame.withColumn(UNREADABLE, F.lit(None).cast(StringType()))
    reason = F.lit(None).cast(StringType())
    for text, condition in reversed(_rejections(kind, frame, now)):
        reason = F.when(F.coalesce(condition, F.lit(False)), F.lit(text)).otherwise(reason)
    return frame.withColumn("_rejected", reason)


def _rejected_counts(tagged: dict[str, DataFrame]) -> list[tuple[str, str, int]]:
    """[(kind, reason, count)] of the rows ``_tagged`` rejected, every kind's in one Spark action."""
    counts = [frame.where(F.col("_rejected").isNotNull()).groupBy("_rejected").count()
              .select(F.lit(kind).alias("kind"), F.col("_rejected").alias("reason"), "count")
              for kind, frame in tagged.items()]
    return sorted((row["kind"], row["reason"], row["count"])
                  for row in functools.reduce(DataFrame.unionByName, counts).collect())


def _validated(tagged: dict[str, DataFrame]) -> "Telemetry":
    """The valid rows of each kind's ``_tagged`` frame (cached: the rejected are counted in the same pass) and the
    rejected counted."""
    tagged = {kind: frame.cache() for kind, frame in tagged.items()}
    return Telemetry({kind: frame.where(F.col("_rejected").isNull()).drop("_rejected", UNREADABLE)
                      for kind, frame in tagged.items()}, _rejected_counts(tagged))


def _readable(schema: StructType) -> StructType:
    """``schema`` with the column where the JSON reader keeps a line it could not parse."""
    return StructType(schema.fields + [StructField(UNREADABLE, StringType(), True)])


def _json(reader):
    return reader.option("columnNameOfCorruptRecord", UNREADABLE).option("mode", "PERMISSIVE")


def _hadoop_path(spark: SparkSession, path: str):
    """(file system, path) as Spark sees them (local, HDFS, S3, ...)."""
    context = spark.sparkContext
    hadoop_path = context._jvm.org.apache.hadoop.fs.Path(path)  # pylint: disable=protected-access
    return hadoop_path.getFileSystem(context._jsc.hadoopConfiguration()), hadoop_path  # pylint: disable=protected-access


def path_exists(spark: SparkSession, path: str) -> bool:
    """Whether a path exists, asked of the file system Spark uses for it."""
    file_system, hadoop_path = _hadoop_path(spark, path)
    return file_system.exists(hadoop_path)


def _ingested(history: str, kind: str) -> str:
    return f"{history.rstrip('/')}/telemetry/{kind}"


# Ingested rows are kept per hour of their time (a row without a usable time in hour=-1), so that a run reads only
# the hours it recomputes; inside an hour, per streaming batch, so that a batch run again after a crash replaces
# what it wrote before instead of adding it twice.
HOUR_SECONDS = 3600
UNTIMED_HOUR = -1


def _plausible(seconds):
    return ~F.isnan(seconds) & (F.abs(seconds) < LATEST_PLAUSIBLE_SECONDS)


def _hour(seconds):
    return F.when(_plausible(seconds), F.floor(seconds / HOUR_SECONDS)).otherwise(F.lit(UNTIMED_HOUR))


@dataclasses.dataclass
class Ingested:
    """What the ingested batches not computed yet hold: rows per kind, the earliest usable time among them (where the
    next run's recomputation starts), the rows rejected among them per (kind, reason), and per kind the last such
    batch (what the run that computes them records as done)."""
    rows: dict[str, int] = dataclasses.field(default_factory=dict)
    earliest: dict[str, float] = dataclasses.field(default_factory=dict)
    rejected: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)
    last_batch: dict[str, int] = dataclasses.field(default_factory=dict)


# Each ingested batch leaves a note of what it held (rows, earliest time, rejected rows per reason) beside the data,
# written before the batch is committed: a job stopped between ingesting and computing finds the batches it has not
# computed in these notes when it starts again, instead of in memory it lost.
BATCH_NOTE_SCHEMA = "kind string, batch long, rows long, earliest double, reason string, rejected long"


def _batch_notes(history: str) -> str:
    return f"{history.rstrip('/')}/_ingest_log"


def _batch_note_path(history: str, kind: str, batch_id: int) -> str:
    return f"{_batch_notes(history)}/{kind}/b{batch_id}"


def _ingest_batch(spark: SparkSession, history: str, kind: str, batch: DataFrame, batch_id: int, now: float | None,
                  lock) -> None:
    with lock:
        batch = batch.withColumn("hour", _hour(F.col("time"))).withColumn("batch", F.lit(batch_id)).persist()
        count, earliest = batch.agg(F.count("*"), F.min(F.when(_plausible(F.col("time")), F.col("time")))).first()
        (batch.write.mode("overwrite").option("partitionOverwriteMode", "dynamic").partitionBy("hour", "batch")
         .parquet(_ingested(history, kind)))
        counts = _rejected_counts({kind: _tagged(kind, batch, time.time() if now is None else now)})
        batch.unpersist()
        notes = [(kind, batch_id, count, earliest, None, None)]
        notes += [(kind, batch_id, count, earliest, reason, rejected) for _kind, reason, rejected in counts]
        spark.createDataFrame(notes, BATCH_NOTE_SCHEMA).coalesce(1).write.mode("overwrite").json(
            _batch_note_path(history, kind, batch_id))


def _ingest_query(spark: SparkSession, root: str, history: str, kind: str, now: float | None, lock,
                  every_seconds: float | None):
    """The streaming query taking ``kind``'s new files into its Parquet table: once over what is there
    (``every_seconds`` None) or every ``every_seconds`` until stopped."""
    schema = _readable(SCHEMAS[kind])
    writer = (_json(spark.readStream.schema(schema)).json(f"{root.rstrip('/')}/{kind}").select(*schema.fieldNames())
              .writeStream.queryName(f"ingest_{kind}")
              .foreachBatch(lambda batch, batch_id: _ingest_batch(spark, history, kind, batch, batch_id, now, lock))
              .option("checkpointLocation", f"{history.rstrip('/')}/_checkpoints/{kind}"))
    return writer.trigger(**({"availableNow": True} if every_seconds is None
                             else {"processingTime": f"{every_seconds:g} seconds"})).start()


def ingest(spark: SparkSession, root: str, history: str, now: float | None = None) -> None:
    """Append the sampled kinds' files not ingested yet to their Parquet tables. ``now``: the clock rows are
    validated against (default: this machine's when the batch is written, after its files were listed: a writer
    publishes a file only once it is closed, so no row in it was written later)."""
    for kind in SAMPLED:
        if path_exists(spark, f"{root.rstrip('/')}/{kind}"):
            _ingest_query(spark, root, history, kind, now, contextlib.nullcontext(), None).awaitTermination()


class Follower:
    """The ingest queries of a long-running job, every ``every_seconds``; ``lock`` is held while a batch is written
    (take it to read a consistent history). A kind whose directory appears later is taken from then on."""

    def __init__(self, spark: SparkSession, root: str, history: str, every_seconds: float):
        self.spark, self.root, self.history, self.every_seconds = spark, root, history, every_seconds
        self.lock = threading.Lock()
        self.queries = {}
        # A batch waiting for the lock while a run computes is "falling behind" at every trigger: the job reports
        # its runs' length itself.
        jvm = spark.sparkContext._jvm  # pylint: disable=protected-access
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor", jvm.org.apache.logging.log4j.Level.ERROR)

    def poll(self) -> None:
        """Start the queries of the kinds that have appeared; raise what a query failed with."""
        for kind in SAMPLED:
            if kind not in self.queries and path_exists(self.spark, f"{self.root.rstrip('/')}/{kind}"):
                self.queries[kind] = _ingest_query(self.spark, self.root, self.history, kind, None, self.lock,
                                                   self.every_seconds)
        for kind, query in self.queries.items():
            if query.exception() is not None:
                raise TelemetryError(f"ingesting {kind} failed: {query.exception()}")

    def stop(self) -> None:
        for query in self.queries.values():
            query.stop()


def pending(spark: SparkSession, history: str, computed: dict[str, int]) -> Ingested:
    """The ingested batches after ``computed`` (per kind, the last batch a run computed; all without)."""
    taken = Ingested()
    file_system, notes_path = _hadoop_path(spark, _batch_notes(history))
    files = []
    if file_system.exists(notes_path):
        listing = file_system.listFiles(notes_path, True)
        while listing.hasNext():
            path = listing.next().getPath()
            if path.getName().startswith("part-"):
                files.append(path.toString())
    if not files:
        return taken
    notes = spark.read.schema(BATCH_NOTE_SCHEMA).json(files)
    after = F.lit(False)
    for kind in SAMPLED:
        after = after | ((F.col("kind") == kind) & (F.col("batch") > computed.get(kind, -1)))
    for row in notes.where(after).collect():
        kind = row["kind"]
        taken.last_batch[kind] = max(row["batch"], taken.last_batch.get(kind, row["batch"]))
        if row["reason"] is not None:
            taken.rejected.append((kind, row["reason"], row["rejected"]))
            continue
        taken.rows[kind] = taken.rows.get(kind, 0) + row["rows"]
        if row["earliest"] is not None:
            taken.earliest[kind] = min(row["earliest"], taken.earliest.get(kind, row["earliest"]))
    taken.rejected.sort()
    return taken


def forget_batches(spark: SparkSession, history: str, computed: dict[str, int]) -> None:
    """Remove the notes of the batches up to ``computed`` (recorded in the state as done)."""
    for kind, last in computed.items():
        file_system, path = _hadoop_path(spark, f"{_batch_notes(history)}/{kind}")
        if not file_system.exists(path):
            continue
        for status in file_system.listStatus(path):
            name = status.getPath().getName()
            if name.startswith("b") and name[1:].isdigit() and int(name[1:]) <= last:
                file_system.delete(status.getPath(), True)


def _hours_since(spark: SparkSession, table: str, since: float | None) -> list[str]:
    """The hour partitions of an ingested table that may hold rows at or after ``since`` (all timed ones without)."""
    file_system, path = _hadoop_path(spark, table)
    statuses = file_system.listStatus(path)
    first = UNTIMED_HOUR + 1 if since is None else int(since // HOUR_SECONDS)
    hours = []
    for status in statuses:
        name = status.getPath().getName()
        if status.isDirectory() and name.startswith("hour=") and int(name[len("hour="):]) >= first:
            hours.append(f"{table}/{name}")
    return hours


def read(spark: SparkSession, root: str, paths: dict[str, str] | None = None,
         history: str | None = None, now: float | None = None, since: float | None = None) -> Telemetry:
    """Read and validate the telemetry under ``root`` (``paths`` puts a kind elsewhere, e.g. the event log; with
    ``history``, the sampled kinds come from what ``ingest`` put there, only from ``since`` on when given); a kind
    with no file at all is an empty frame. ``now``: the clock rows are validated against (default: this machine's
    once the kind's files are listed, so that a file published while the job reads the others is not from the
    future)."""
    tagged = {}
    for kind, schema in SCHEMAS.items():
        schema = _readable(schema)
        raw = None
        if history and kind in SAMPLED:
            table = _ingested(history, kind)
            hours = _hours_since(spark, table, since) if path_exists(spark, table) else []
            if hours:
                raw = spark.read.schema(schema).option("basePath", table).parquet(*hours).select(*schema.fieldNames())
                if since is not None:
                    raw = raw.where(F.col("time") >= since)
        else:
            path = (paths or {}).get(kind) or f"{root.rstrip('/')}/{kind}"
            if path_exists(spark, path):
                raw = _json(spark.read.schema(schema)).json(path).select(*schema.fieldNames())
        if raw is None:
            raw = spark.createDataFrame([], schema)
        tagged[kind] = _tagged(kind, raw, time.time() if now is None else now)
    return _validated(tagged)


def from_rows(spark: SparkSession, rows: dict[str, list[dict]], now: float | None = None) -> Telemetry:
    """The same as ``read`` for rows held in memory (the tests' generated telemetry)."""
    def value(row, field):
        # As a JSON reader would: an integral time is still a double.
        found = row.get(field.name)
        return float(found) if found is not None and isinstance(field.dataType, DoubleType) else found

    tagged = {}
    for kind, schema in SCHEMAS.items():
        raw = spark.createDataFrame([tuple(value(row, f) for f in schema.fields) for row in rows.get(kind, [])],
                                    schema)
        tagged[kind] = _tagged(kind, raw, time.time() if now is None else now)
    return _validated(tagged)
