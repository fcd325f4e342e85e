"""When the job may speak: each route as of what its prober has reported, each source's freshness published and
alerted on, and single bad rows rejected with their true reason while the job still publishes the rest."""

import json
import math
import subprocess
import sys

import pytest
import yaml
from continuity_rpo import job, prometheus, sla, telemetry
from support.measurement import published

from test_job import SPARK_DIR, _store
from test_metrics import T0
from test_monitoring import RULES

LINK = (("source_datacentre", "dc1"), ("target_datacentre", "dc2"))
TRUE_LAG = 0.2
STALE_PROBES = ("The prober of this route has stopped writing (or its files are not published): the RPO shown is as of "
                "continuity_artemis_rpo_evaluated_timestamp_seconds, not now.")


def _probes(until, lag=TRUE_LAG):
    """A probe a second from T0 until ``until`` (seconds after T0), each seen ``lag`` later."""
    rows = []
    for second in range(until):
        probe = {"probe_id": f"p{second}", "source_datacentre": "dc1", "target_datacentre": "dc2"}
        rows += [dict(probe, event="sent", time=T0 + second), dict(probe, event="seen", time=T0 + second + lag)]
    return rows


def _samples(until, datacentres=("dc1", "dc2")):
    """A collector sample of each datacentre's broker every 5 s until ``until``: 10 messages/s in, all consumed."""
    return [{"time": T0 + second, "broker": f"{dc}-node1", "datacentre": dc, "queue": "orders",
             "messages_added": 10 * second, "messages_acknowledged": 10 * second, "message_count": 0,
             "delivering_count": 0, "consumer_count": 1}
            for second in range(0, until, 5) for dc in datacentres]


def _compute(spark, rows, clock):
    data = telemetry.from_rows(spark, rows, now=clock)
    return data, job.compute(spark, data, sla.load(None), clock=clock)


def test_a_collector_ahead_of_the_prober_gives_no_false_rpo(spark):
    """The collector's segment is published 30 s before the prober's: the route is evaluated as of its prober."""
    _data, results = _compute(spark, {"probes": _probes(300), "queue_samples": _samples(330)}, T0 + 330)
    assert results.as_of == T0 + 325
    (current,) = results.current_rpo
    assert current["evaluated_at"] == T0 + 299 + TRUE_LAG
    assert current["rpo_seconds"] == pytest.approx(0.0)
    assert max(row["rpo_seconds"] for row in results.link_windows if row["rpo_seconds"] is not None) \
        == pytest.approx(TRUE_LAG)
    (probe_source,) = results.probe_sources
    assert probe_source["age_seconds"] == pytest.approx(330 - 299 - TRUE_LAG)


def test_a_row_dated_a_day_ahead_is_rejected_and_moves_nothing(spark):
    clock = T0 + 300
    ahead = dict(_samples(5)[0], time=T0 + 86_400)
    data, results = _compute(spark, {"probes": _probes(300), "queue_samples": _samples(300) + [ahead]}, clock)
    assert ("queue_samples", "time more than 30 s ahead of the job's clock", 1) in data.rejected
    assert results.as_of == T0 + 299 + TRUE_LAG
    assert results.current_rpo[0]["rpo_seconds"] == pytest.approx(0.0)


def test_a_stopped_prober_is_reported_stale_not_as_rpo_zero_and_the_alert_fires(spark, tmp_path):
    """The prober stopped 10 minutes ago; the collectors go on. The RPO is published as of when the prober stopped
    (with that time), the route's telemetry age is 10 minutes, and the alert rule fires on the job's own output."""
    clock = T0 + 900
    _data, results = _compute(spark, {"probes": _probes(300), "queue_samples": _samples(900)}, clock)
    (current,) = results.current_rpo
    assert current["evaluated_at"] == T0 + 299 + TRUE_LAG
    textfile = tmp_path / "rpo.prom"
    prometheus.publish(prometheus.registry_for(results, clock), str(textfile))
    samples = published(textfile)
    age = samples[("continuity_artemis_probe_telemetry_age_seconds", LINK)]
    assert age == pytest.approx(600 - TRUE_LAG + 1)
    assert samples[("continuity_artemis_rpo_evaluated_timestamp_seconds", LINK)] == T0 + 299 + TRUE_LAG
    assert all(value < 60 for (name, _labels), value in samples.items()
               if name == "continuity_artemis_collector_telemetry_age_seconds")

    # promtool evaluates the shipped rules on the series the job wrote (three runs, 5 minutes apart).
    series = 'continuity_artemis_probe_telemetry_age_seconds{source_datacentre="dc1",target_datacentre="dc2"}'
    rule_test = {
        "rule_files": [RULES], "evaluation_interval": "1m",
        "tests": [{"interval": "5m",
                   "input_series": [{"series": series, "values": f"{age:g} {age + 300:g} {age + 600:g}"}],
                   "alert_rule_test": [{"eval_time": "0m", "alertname": "ContinuityArtemisProbeTelemetryStale",
                                        "exp_alerts": [{"exp_labels": {"severity": "warning",
                                                                       "source_datacentre": "dc1",
                                                                       "target_datacentre": "dc2"},
                                                        "exp_annotations": {
                                                            "summary": "No probe telemetry for dc1 -> dc2 for 10m 0s",
                                                            "description": STALE_PROBES}}]}]}]}
    (tmp_path / "stale.test.yml").write_text(yaml.safe_dump(rule_test))
    tested = subprocess.run(["promtool", "test", "rules", str(tmp_path / "stale.test.yml")], capture_output=True,
                            text=True, timeout=120, check=False)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_a_datacentre_that_went_silent_is_not_published_as_current(spark):
    clock = T0 + 600
    samples = [row for row in _samples(600) if row["datacentre"] == "dc1" or row["time"] < T0 + 300]
    _data, results = _compute(spark, {"probes": _probes(600), "queue_samples": samples}, clock)
    assert {row["datacentre"] for row in results.latest_queue} == {"dc1"}
    ages = {row["datacentre"]: row["age_seconds"] for row in results.collector_sources}
    assert ages == {"dc1": pytest.approx(5.0), "dc2": pytest.approx(305.0)}


# Each a single bad row in an otherwise good store, and the reason it must be rejected with.
BAD_ROWS = [
    ("queue_samples", '{"time": NaN, "broker": "dc1-node1", "datacentre": "dc1", "queue": "orders", '
                      '"messages_added": 1, "messages_acknowledged": 1, "message_count": 0, "delivering_count": 0}',
     "time is not a number (NaN)"),
    ("probes", '{"probe_id": "inf", "source_datacentre": "dc1", "target_datacentre": "dc2", "event": "sent", '
               '"time": Infinity}', "time is infinite"),
    ("probes", json.dumps({"probe_id": "ms", "source_datacentre": "dc1", "target_datacentre": "dc2",
                           "event": "sent", "time": (T0 + 100) * 1000}),
     "time in milliseconds or finer, not seconds"),
    ("probes", '{"probe_id": "cut", "source_datacentre": "dc1", "target_da',
     "unreadable line (truncated, not JSON, or a value of the wrong type)"),
    ("events", json.dumps({"name": "swapover", "id": "s1", "phase": "started", "at": "yesterday at noon"}),
     "unparseable time (at)"),
]


def test_each_bad_row_is_rejected_with_its_reason_and_the_numbers_stay(spark, tmp_path):
    clean = {"probes": _probes(300), "queue_samples": _samples(300)}
    _store(tmp_path / "clean", clean)
    arguments = dict(output=None, sla=None, pushgateway=None, report=None, as_of=None, master=None, events=None,
                     ledgers=None, incremental=False)
    expected = job.run(spark, __import__("types").SimpleNamespace(**dict(
        arguments, telemetry=str(tmp_path / "clean"), output=str(tmp_path / "clean-out"),
        textfile=str(tmp_path / "clean.prom"))), sla.load(None))
    assert expected.rejected == []

    _store(tmp_path / "bad", clean)
    for kind, line, _reason in BAD_ROWS:
        (tmp_path / "bad" / kind).mkdir(exist_ok=True)
        with open(tmp_path / "bad" / kind / "part-bad.jsonl", "a") as handle:
            handle.write(line + "\n")
    # The command line, as the role's timer runs it: exit status 0, the rest published.
    result = subprocess.run([sys.executable, "-m", "continuity_rpo.job", "--telemetry", str(tmp_path / "bad"),
                             "--output", str(tmp_path / "bad-out"), "--textfile", str(tmp_path / "bad.prom"),
                             "--master", "local[1]"], cwd=SPARK_DIR, capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    bad = published(tmp_path / "bad.prom")
    for kind, _line, reason in BAD_ROWS:
        assert bad[("continuity_artemis_telemetry_rejected_rows", (("kind", kind), ("reason", reason)))] == 1
    good = published(tmp_path / "clean.prom")
    ignored = ("continuity_artemis_telemetry_rejected_rows", "continuity_artemis_rpo_job_last_success",
               "continuity_artemis_probe_telemetry_age", "continuity_artemis_collector_telemetry_age")
    compared = {key: value for key, value in good.items() if not key[0].startswith(ignored)}
    assert compared and {key: bad.get(key) for key in compared} == pytest.approx(compared, nan_ok=True)
    assert not any(math.isnan(value) for key, value in bad.items() if not key[0].startswith(ignored))
