"""Incremental runs recompute only the windows new telemetry touches, reading back no further than the oldest probe
still outstanding, and publish what a run over the whole telemetry publishes: here across a 240 s stall that spans
three runs, a broker restart, a rejected row in every segment and a drill."""

import json
import math

import pytest
from pyspark.sql import functions as F

from continuity_rpo import incremental, job

from test_job import _arguments
from test_metrics import T0

STALL_FROM, RELEASED_AT = 450, 690  # probes sent in [450, 690) are seen at 690.5
RESTART_AT = 300  # dc1's broker restarts: its counters start again
FAULT_AT = 1000
SEGMENTS = [(0, 400), (400, 650), (650, 1200)]  # seconds after T0 each run brings


def _telemetry():
    """Rows by kind, each with the time it is published by (the writers publish in time order)."""
    rows = {"probes": [], "queue_samples": [], "link_samples": []}
    for second in range(1200):
        probe = {"probe_id": f"p{second}", "source_datacentre": "dc1", "target_datacentre": "dc2"}
        rows["probes"].append(dict(probe, event="sent", time=T0 + second))
        stalled = STALL_FROM <= second < RELEASED_AT
        rows["probes"].append(dict(probe, event="seen", time=T0 + (RELEASED_AT + 0.5 if stalled else second + 0.3)))
    for second in range(0, 1200, 5):
        for dc, behind in (("dc1", 0), ("dc2", 50)):
            restarted = dc == "dc1" and second >= RESTART_AT
            added = 10 * second - behind - (10 * RESTART_AT if restarted else 0)
            rows["queue_samples"].append({
                "time": T0 + second, "broker": f"{dc}-node1", "datacentre": dc, "queue": "orders",
                "messages_added": max(added, 0), "messages_acknowledged": max(added - 40, 0),
                "message_count": 40 + (3900 if 600 <= second < 700 else 0), "delivering_count": 2,
                "consumer_count": 1})
        rows["link_samples"].append({"time": T0 + second, "broker": "dc1-node1", "datacentre": "dc1", "link": "m",
                                     "target_datacentre": "dc2", "connected": True, "backlog": second % 7})
    return rows


def _ledger():
    rows = [{"drill": "d1", "id": None, "datacentre": "dc1", "event": "fault", "time": T0 + FAULT_AT}]
    for i in range(10):
        rows.append({"drill": "d1", "id": f"m{i}", "datacentre": "dc1", "event": "accepted", "time": T0 + 990 + i})
        if i < 8:
            rows.append({"drill": "d1", "id": f"m{i}", "datacentre": "dc2", "event": "consumed",
                         "time": T0 + 1010 + i})
    return rows


def _publish(root, segment, start, end, rows):
    for kind, kind_rows in rows.items():
        (root / kind).mkdir(parents=True, exist_ok=True)
        with open(root / kind / f"part-{segment}.jsonl", "w") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in kind_rows if T0 + start <= row["time"] < T0 + end)
            if kind == "queue_samples":  # one bad row per segment: counted once, by the run that takes it
                handle.write(json.dumps({"time": T0 + start, "broker": "dc1-node1"}) + "\n")
    if segment == len(SEGMENTS) - 1:
        (root / "ledgers").mkdir(exist_ok=True)
        with open(root / "ledgers" / "d1.jsonl", "w") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in _ledger())


def _comparable(results):
    """What both modes must agree on (ages depend on when each run ran; the plan only exists incrementally)."""
    def close(value):
        return round(value, 6) if isinstance(value, float) and not math.isnan(value) else value

    def table(name, keys):
        return sorted(({k: close(v) for k, v in row.items() if k != "age_seconds"} for row in getattr(results, name)),
                      key=lambda row: tuple(str(row.get(key)) for key in keys))
    link, queue = ["source_datacentre", "target_datacentre", "window_end"], ["datacentre", "queue", "window_end"]
    return {"as_of": results.as_of, "rejected": results.rejected,
            **{name: table(name, link) for name in ("link_windows", "latest_lag", "latest_link", "current_rpo",
                                                    "link_sla", "probe_sources")},
            **{name: table(name, queue) for name in ("queue_windows", "latest_queue", "rto", "queue_sla")},
            "collector_sources": table("collector_sources", ["broker"]), "drills": table("drills", ["drill"])}


def test_incremental_runs_recompute_only_what_new_rows_touch_and_agree_with_a_batch_run(spark, tmp_path):
    root, rows = tmp_path / "telemetry", _telemetry()
    incremental = _arguments(tmp_path, incremental=True, report=None, textfile=None)
    plans = []
    for segment, (start, end) in enumerate(SEGMENTS):
        _publish(root, segment, start, end, rows)
        # A segment a writer still has open (store.py): no run may take it.
        with open(root / "probes" / ".open-segment.jsonl", "w") as handle:
            handle.write(json.dumps(dict(rows["probes"][0], probe_id="unfinished")) + "\n")
        published = job.run(spark, incremental, job.sla.load(None))
        plans.append((published.recomputed_from, published.read_from))
    unchanged = job.run(spark, incremental, job.sla.load(None))  # nothing new: the same answer
    batch = job.run(spark, _arguments(tmp_path, output=str(tmp_path / "batch"), report=None, textfile=None),
                    job.sla.load(None))

    # The first run computes everything; the second recomputes from the window its first row falls in, reading one
    # window before; the third comes in the middle of the stall: it recomputes from the window the stall began in
    # (the lag of its probes changes when they are seen), reading one window before that, no further.
    assert plans == [(None, None), (T0 + 360, T0 + 300), (T0 + 420, T0 + 360)]
    ingested = spark.read.parquet(str(tmp_path / "history" / "telemetry" / "probes"))
    assert ingested.count() == len(rows["probes"])  # every file taken once
    assert ingested.where("probe_id = 'unfinished'").count() == 0
    expected = _comparable(batch)
    for name, value in _comparable(published).items():
        assert value == expected[name], name
    for name, value in _comparable(unchanged).items():
        assert value == expected[name], name
    worst = max(row["rpo_seconds"] for row in batch.link_windows if row["rpo_seconds"] is not None)
    # The stall ends when the first probe sent after it is seen (the mirror delivers in order).
    assert worst == pytest.approx(RELEASED_AT + 0.3 - STALL_FROM)
    assert ("queue_samples", "missing datacentre", 3) in batch.rejected
    assert batch.drills[0]["messages_at_risk"] is not None


def test_a_history_written_before_the_in_flight_estimate_keeps_its_drills_with_that_estimate_unknown(spark):
    at_risk = spark.createDataFrame([("new", T0 + 1.0, 4, 0, 0.5)], "drill string, estimated_at double, "
                                    "messages_at_risk long, deliveries_at_risk long, messages_in_flight double")
    old = spark.createDataFrame([("old", T0 - 100.0, 7, 1)], "drill string, estimated_at double, "
                                "messages_at_risk long, deliveries_at_risk long")
    drills = spark.createDataFrame([("new", T0 + 2.0), ("old", T0 - 99.0)], "drill string, fault_time double")
    merged = {row["drill"]: row.asDict() for row in incremental.merge_estimates(at_risk, old, drills, T0).collect()}
    assert merged["old"]["messages_at_risk"] == 7 and merged["old"]["messages_in_flight"] is None
    assert merged["new"]["messages_in_flight"] == 0.5


def test_as_of_is_refused_with_incremental_naming_both(tmp_path, capsys):
    code = job.main(["--telemetry", str(tmp_path), "--output", str(tmp_path / "out"), "--incremental",
                     "--as-of", str(T0)])
    error = capsys.readouterr().err
    assert code == 2 and "--as-of" in error and "cannot be combined with --incremental" in error


def test_a_file_published_while_the_job_reads_is_not_from_the_future(spark, tmp_path, monkeypatch):
    """The prober publishes a segment while the job is still reading the kinds before it (a slow, loaded host):
    its rows are newer than the job's start, not ahead of its clock."""
    root, rows = tmp_path / "telemetry", _telemetry()
    _publish(root, 0, 0, 400, {"queue_samples": rows["queue_samples"]})
    clock = {"now": T0 + 400.0}
    monkeypatch.setattr(job.time, "time", lambda: clock["now"])
    listing = job.telemetry.path_exists

    def path_exists(session, path):
        if path.endswith("/probes") and not (root / "probes").exists():
            _publish(root, 0, 400, 450, {"probes": [dict(row, time=row["time"] + 40) for row in rows["probes"]]})
            clock["now"] += 90  # the reads before took a minute and a half: the probes are 50 s newer than the start
        return listing(session, path)

    monkeypatch.setattr(job.telemetry, "path_exists", path_exists)
    results = job.run(spark, _arguments(tmp_path, incremental=True, report=None, textfile=None),
                      job.sla.load(None))
    assert [reason for kind, reason, count in results.rejected if kind == "probes" and count] == []
    assert results.as_of > T0 + 400 + 30


def _queue_windows(spark, ends):
    return spark.createDataFrame([("dc1", "orders", float(end), False) for end in ends],
                                 "datacentre string, queue string, window_end double, counters_reset boolean")


def test_a_run_reads_back_the_queue_windows_of_an_hour_before_what_it_recomputes_and_no_older(spark, tmp_path):
    history = str(tmp_path / "history")
    hours = 6
    incremental.write_windows(_queue_windows(spark, [T0 + 60 * n for n in range(1, 60 * hours + 1)]),
                              f"{history}/queue_windows", None)
    touched = T0 + 3600 * (hours - 1) + 600
    run = incremental.Run(incremental.Ingested(), incremental.Previous(None, None, None, {}), touched, touched - 60)
    incremental.read_queue_windows(spark, history, run)

    read_back = [row["window_end"] for row in run.previous.queue_windows.collect()]
    first_hour = (touched - incremental.QUEUE_HORIZON_SECONDS) // 3600 * 3600
    assert min(read_back) == first_hour  # the hour the horizon begins in, whole; nothing of the hours before
    assert max(read_back) == T0 + 60 * 60 * hours


def test_a_history_kept_per_day_is_moved_per_hour_once_and_loses_no_window(spark, tmp_path):
    history = str(tmp_path / "history")
    ends = [T0 + 60 * n for n in range(1, 200)]
    (_queue_windows(spark, ends).withColumn("day", (F.col("window_end") / 86400).cast("long"))
     .write.partitionBy("day").parquet(f"{history}/queue_windows"))

    incremental._hourly(spark, f"{history}/queue_windows")  # pylint: disable=protected-access
    incremental._hourly(spark, f"{history}/queue_windows")  # pylint: disable=protected-access

    names = {path.name.split("=")[0] for path in (tmp_path / "history" / "queue_windows").iterdir()
             if path.is_dir()}
    assert names == {"hour"}
    assert not (tmp_path / "history" / "queue_windows.hourly").exists()
    moved = spark.read.parquet(f"{history}/queue_windows")
    assert sorted(row["window_end"] for row in moved.collect()) == ends
