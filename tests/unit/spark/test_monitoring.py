"""The Prometheus alert rules and the Grafana dashboard shipped with the rpo_job role: valid, alerting when they
should (promtool's own rule tests), and built only on metrics the job and the prober really publish."""

import glob
import json
import os
import re
import subprocess

import pytest

from continuity_rpo import prometheus
from continuity_rpo.prober import LiveRpo
from continuity_rpo.results import Results

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
RULES = os.path.join(REPO, "roles", "rpo_job", "files", "prometheus", "continuity_artemis.rules.yml")
# The brokers' own metrics (their names are checked against what the brokers serve in test_broker_metrics).
BROKER_RULES = os.path.join(REPO, "roles", "rpo_job", "files", "prometheus", "continuity_artemis_brokers.rules.yml")
PROMTOOL_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "promtool")
DASHBOARD = os.path.join(REPO, "roles", "rpo_job", "files", "grafana", "continuity_artemis.json")


def _every_kind_of_result():
    link = {"source_datacentre": "dc1", "target_datacentre": "dc2"}
    queue = {"datacentre": "dc2", "queue": "orders"}
    results = Results(
        as_of=2.0, clock=32.0,
        latest_lag=[dict(link, lag_p50_seconds=0.1, lag_p99_seconds=0.2, lag_max_seconds=0.3)],
        current_rpo=[dict(link, rpo_seconds=1.0, evaluated_at=2.0, replicated_up_to=1.0)],
        latest_link=[dict(link, backlog_events_last=0, connected_ratio=1.0)],
        latest_queue=[dict(queue, backlog_messages=0, backlog_acknowledgements=0, message_count=3,
                           message_count_max=9, messages_in_per_second=1.0, acknowledged_per_second=1.0,
                           delivering_max=0)],
        rto=[dict(queue, detection_seconds=30.0, activation_seconds=2.0, drain_seconds=1.0, rto_seconds=33.0)],
        link_sla=[dict(link, objective_seconds=5.0, passed=True, burn_rate=0.0)],
        queue_sla=[dict(queue, objective_seconds=120.0, passed=True)],
        drills=[{"drill": "f1", "fault_time": 1.0, "lost": 0, "duplicates": 0, "rpo_seconds": 0.0,
                 "rto_seconds": 1.0, "messages_at_risk": 0}],
        drill_sla=[{"drill": "f1", "objective": "rpo", "objective_seconds": 5.0, "passed": True}],
        rejected=[("probes", "probe seen but never sent", 1)],
        probe_sources=[dict(link, as_of=2.0, age_seconds=30.0)],
        collector_sources=[{"datacentre": "dc1", "broker": "dc1-node1", "reported_up_to": 2.0,
                            "age_seconds": 30.0}],
        kept=[{"datacentre": "dc2", "kept_messages": 3}],
        kept_by_address=[{"datacentre": "dc2", "address": "orders", "kept_messages": 3}],
        ack_notices=[{"group": "shared", "notices": 40, "applied": 40, "late": 0, "mean_seconds": 0.05,
                      "p99_seconds": 0.2, "max_seconds": 0.3, "durable_mean_seconds": 0.4, "delay_seconds": 20.0,
                      "last_sample_time": 2.0}],
        reconciliations=[{"operation": "swapover", "target_datacentre": "dc2", "time": 1.0, "kept": 5,
                          "reconciled": 4, "discarded": 1, "pending": 0}],
    )
    return prometheus.registry_for(results, 1.0)


def _published():
    """Every metric name the job's exporter writes when every kind of result is present, and the prober's live
    endpoint serves."""
    live = LiveRpo([], objective_seconds=5.0, target_ratio=0.999)
    live.last_round = 1.0
    return {family.name for family in _every_kind_of_result().collect()} | {family.name for family in live.collect()}


def _used(text):
    return set(re.findall(r"continuity_artemis_\w+", text))


def _promtool(*args):
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120, check=False)


def test_promtool_accepts_the_exposition(tmp_path):
    textfile = tmp_path / "rpo.prom"
    prometheus.publish(_every_kind_of_result(), str(textfile))
    checked = subprocess.run(["promtool", "check", "metrics"], input=textfile.read_text(), capture_output=True,
                             text=True, timeout=120, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("rules", [RULES, BROKER_RULES], ids=os.path.basename)
def test_the_rules_are_valid_and_alert_when_they_should(rules):
    checked = _promtool("check", "rules", rules)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # name.test.yml, and name.<what>.test.yml where a test needs an evaluation interval of its own.
    name = os.path.basename(rules).removesuffix(".rules.yml")
    tests = sorted(glob.glob(os.path.join(PROMTOOL_TESTS, name + ".rules.test.yml"))
                   + glob.glob(os.path.join(PROMTOOL_TESTS, name + ".rules.*.test.yml")))
    assert tests
    tested = _promtool("test", "rules", *tests)
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.mark.parametrize("path", [RULES, DASHBOARD])
def test_only_metrics_the_job_publishes_are_used(path):
    with open(path) as handle:
        used = _used(handle.read())
    assert used and used <= _published(), sorted(used - _published())


def test_every_dashboard_panel_queries_prometheus():
    with open(DASHBOARD) as handle:
        dashboard = json.load(handle)
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] == "row":  # a heading, no query
            continue
        assert panel["targets"] and all(target["expr"] for target in panel["targets"]), panel["title"]
