"""The whole job on a telemetry store written as the collector and prober write it: Parquet history, Prometheus
textfile and report agree with the known truth; bad input stops the job with a message, never a number."""

import json
import os
import subprocess
import sys
import types

import pytest
from continuity_rpo import job, telemetry
from support.measurement import published

from test_metrics import AS_OF, T0, _ledger_rows, _notice_sample, _probe_rows, _queue_rows

SPARK_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "spark")


def _store(root, rows_by_kind):
    for kind, rows in rows_by_kind.items():
        os.makedirs(root / kind, exist_ok=True)
        with open(root / kind / "part-0.jsonl", "w") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in rows)


def _arguments(tmp_path, **overrides):
    values = dict(telemetry=str(tmp_path / "telemetry"), output=str(tmp_path / "history"), sla=None,
                  textfile=str(tmp_path / "rpo.prom"), pushgateway=None, report=str(tmp_path / "report.html"),
                  as_of=None, master=None, events=None, ledgers=None, incremental=False, follow=None)
    values.update(overrides)
    return types.SimpleNamespace(**values)


def test_the_job_publishes_what_the_telemetry_says(spark, tmp_path):
    ledger = [dict(row, time=row["time"] + T0) for row in _ledger_rows()]
    # The samples before dc1's restart, moved to the last 30 s before the newest probe (current, so published).
    queue_samples = [dict(row, time=row["time"] + AS_OF - 31) for row in _queue_rows() if row["time"] < T0 + 30]
    _store(tmp_path / "telemetry", {"probes": _probe_rows(), "queue_samples": queue_samples, "ledgers": ledger})
    with open(tmp_path / "sla.yml", "w") as handle:
        handle.write("objectives: {rpo_seconds: 30, target_ratio: 0.5}\nqueues: {'ord*': {rto_seconds: 60}}\n")
    results = job.run(spark, _arguments(tmp_path), job.sla.load(str(tmp_path / "sla.yml")))

    samples = published(tmp_path / "rpo.prom")
    link = (("source_datacentre", "dc1"), ("target_datacentre", "dc2"))
    assert results.as_of == T0 + AS_OF - 1  # the newest probe sent: the job's "now"
    assert samples[("continuity_artemis_rpo_seconds", link)] == pytest.approx(9.0)
    assert samples[("continuity_artemis_replicated_timestamp_seconds", link)] == T0 + 289
    # Worst RPO per window 0.25, 0.25, 60, 80 (the window ending at 300 is after as_of): 2 of 4 within 30 s,
    # target 0.5: met, with the whole error budget burnt.
    assert samples[("continuity_artemis_rpo_objective_met", link)] == 1
    assert samples[("continuity_artemis_error_budget_burn_rate", link)] == pytest.approx(0.5 / 0.5)
    # The drill lost messages 2.5 s old (RPO objective 30 s: met) and recovered in 5 s (RTO objective 120 s: met).
    assert samples[("continuity_artemis_drill_objective_met", (("drill", "f1"), ("objective", "rpo")))] == 1
    assert samples[("continuity_artemis_drill_objective_met", (("drill", "f1"), ("objective", "rto")))] == 1
    assert samples[("continuity_artemis_drill_lost_messages", (("drill", "f1"),))] == 5
    assert samples[("continuity_artemis_drill_duplicate_messages", (("drill", "f1"),))] == 5
    assert samples[("continuity_artemis_rto_objective_seconds", (("datacentre", "dc2"), ("queue", "orders")))] == 60
    assert samples[("continuity_artemis_queue_backlog_messages", (("datacentre", "dc2"), ("queue", "orders")))] == 50
    assert ("continuity_artemis_rpo_job_last_success_timestamp_seconds", ()) in samples

    history = spark.read.parquet(str(tmp_path / "history" / "drills")).first()
    assert (history.lost, history.duplicates, history.rpo_seconds, history.rto_seconds) == (5, 5, 2.5, 5.0)
    report = (tmp_path / "report.html").read_text()
    assert "data:image/png;base64," in report and "<td>f1</td>" in report
    # The verdict counts the windows the RPO plot draws over the objective.
    drawn = [row for row in results.link_windows if row["rpo_seconds"] is not None]
    assert len([row for row in drawn if row["rpo_seconds"] > 30]) == 2 and len(drawn) == 4
    assert "dc1 → dc2: <b class=\"met\">MET</b> — 2 of 4 window(s) over 30 s" in report


def test_the_brokers_figures_are_current_as_of_the_collectors_newest_sample_not_the_probers(spark, tmp_path):
    """The collector's files are published up to a segment after its samples: when the job runs, the prober's can
    reach further than a window past the collector's newest sample. The brokers' figures are those of the
    collector's latest window all the same (CI found the active/active group's figures missing from a first run)."""
    newest_probe = T0 + AS_OF - 1
    collected_up_to = newest_probe - 65
    # dc1 and dc2's queue samples of their first 25 s, and dc2's notices every 5 s for 55 s, both up to that time.
    queue_samples = [dict(row, time=row["time"] - T0 + collected_up_to - 25) for row in _queue_rows()
                     if row["time"] < T0 + 30]
    notices = [dict(_notice_sample(second, "dc2-node1", "dc2", "dc1", 10 * second, second / 100, 0.3,
                                   [10 * second] * 5, applied=10 * second, delay=20.0),
                    time=collected_up_to - 55 + second) for second in range(0, 60, 5)]
    _store(tmp_path / "telemetry", {"probes": _probe_rows(), "queue_samples": queue_samples,
                                    "notice_samples": notices})
    results = job.run(spark, _arguments(tmp_path, report=None), job.sla.load(None))

    assert results.as_of == newest_probe
    samples = published(tmp_path / "rpo.prom")
    shared = (("group", "shared"),)
    assert samples[("continuity_artemis_staging_delay_seconds", shared)] == 20.0
    # The collector's latest window (60 s) holds all twelve notice samples: eleven steps of 50 notices.
    assert samples[("continuity_artemis_ack_notices", shared)] == 550
    assert samples[("continuity_artemis_queue_backlog_messages", (("datacentre", "dc2"), ("queue", "orders")))] == 50


def test_rejected_rows_are_published_beside_the_numbers(spark, tmp_path):
    probes = _probe_rows()[:20] + [{"probe_id": "skewed", "source_datacentre": "dc1", "target_datacentre": "dc2",
                                    "event": "sent", "time": T0 + 5.0},
                                   {"probe_id": "skewed", "source_datacentre": "dc1", "target_datacentre": "dc2",
                                    "event": "seen", "time": T0 + 4.0},
                                   {"probe_id": "x", "event": "sent", "time": T0 + 6.0}]
    _store(tmp_path / "telemetry", {"probes": probes})
    job.run(spark, _arguments(tmp_path, report=None), job.sla.load(None))
    samples = published(tmp_path / "rpo.prom")
    assert samples[("continuity_artemis_telemetry_rejected_rows",
                    (("kind", "probes"), ("reason", "probe seen before it was sent (clock skew)")))] == 1
    assert samples[("continuity_artemis_telemetry_rejected_rows",
                    (("kind", "probes"), ("reason", "missing source_datacentre")))] == 1


def test_an_empty_store_stops_the_job_without_publishing(tmp_path):
    os.makedirs(tmp_path / "telemetry" / "probes")
    # The command line, as the role's timer runs it (its own Spark, so not the tests' session).
    result = subprocess.run([sys.executable, "-m", "continuity_rpo.job", "--telemetry", str(tmp_path / "telemetry"),
                             "--output", str(tmp_path / "history"), "--textfile", str(tmp_path / "rpo.prom"),
                             "--master", "local[1]"], cwd=SPARK_DIR, capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 2, result.stderr[-3000:]
    assert f"telemetry under {tmp_path / 'telemetry'}: no valid probe, queue or link sample" in result.stderr
    assert not (tmp_path / "rpo.prom").exists()


@pytest.mark.parametrize("content, message", [
    ("objectives: {rpo_seconds: -1}\n", "objectives.rpo_seconds must be a positive number"),
    ("objectives: {target_ratio: 1}\n", "objectives.target_ratio must be below 1"),
    ("queues: {'a*': {rto: 5}}\n", "queues.a*: unknown key(s) rto"),
    ("window: 60\n", "unknown key(s) window"),
    ("window_seconds: 0.5\n", "window_seconds must be a whole number of seconds, at least sample_interval_seconds"),
    ("window_seconds: 10\nsample_interval_seconds: 30\n", "at least sample_interval_seconds (30), got 10"),
])
def test_a_bad_sla_file_is_refused_naming_the_key(tmp_path, capsys, content, message):
    with open(tmp_path / "sla.yml", "w") as handle:
        handle.write(content)
    code = job.main(["--telemetry", str(tmp_path), "--output", str(tmp_path / "out"), "--sla",
                     str(tmp_path / "sla.yml")])
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_stall_still_going_on_is_not_met_and_burns_budget_before_its_window_ends(spark):
    """Probes every second, seen within a quarter second, until the one sent at 272 s: nothing since (the newest
    sent at 299 s, now). Every complete window (ends 60 ... 240 s) is within 5 s; the window in progress already
    holds an RPO of 27 s, so it is known to be bad before it ends: 1 bad of 5, target 0.9, not met."""
    rows = []
    for second in range(300):
        probe = {"probe_id": f"p{second}", "source_datacentre": "dc1", "target_datacentre": "dc2"}
        rows.append(dict(probe, event="sent", time=T0 + second))
        if second < 272:
            rows.append(dict(probe, event="seen", time=T0 + second + 0.25))
    config = job.sla.load(None)
    config["objectives"] = dict(config["objectives"], rpo_seconds=5.0, target_ratio=0.9)

    results = job.compute(spark, telemetry.from_rows(spark, {"probes": rows}), config)

    assert [row["rpo_seconds"] for row in results.current_rpo] == [pytest.approx(27.0)]
    (link,) = results.link_sla
    assert (link["windows"], link["good_ratio"], link["passed"]) == (5, pytest.approx(0.8), False)
    assert link["burn_rate"] == pytest.approx(2.0) and link["worst_rpo_seconds"] == pytest.approx(27.0)


def test_only_the_queue_series_the_report_draws_come_to_the_driver(spark):
    rows = [(dc, f"q{index:02d}", float(T0 + 60 * window), float(index), float(index), float(100 - index))
            for dc in ("dc1", "dc2") for index in range(30) for window in (1, 2)]
    queue_windows = spark.createDataFrame(rows, "datacentre string, queue string, window_end double, "
                                                "messages_in_per_second double, acknowledged_per_second double, "
                                                "message_count_max double")
    drawn = job._drawn_queue_windows(spark, queue_windows)

    assert drawn["queue_series"] == 60
    # The 10 busiest (q25-q29 at each datacentre) and the 10 deepest (q00-q04), each with its two windows.
    expected = {(dc, f"q{index:02d}") for dc in ("dc1", "dc2") for index in (*range(5), *range(25, 30))}
    assert {(row["datacentre"], row["queue"]) for row in drawn["queue_windows"]} == expected
    assert len(drawn["queue_windows"]) == 2 * len(expected)
