"""Abrupt failover under load (playbooks/failover.yml), then failback (playbooks/failback.yml): after a short WAN
outage, dc1's host is powered off while producers send 500 msg/s; the failover weighs the RPO the measurement
published, refuses it above the objective and goes ahead when forced, recording both; dc2 is activated; the loss and
duplicates at that point are counted. When dc1 returns with its journal, failback brings its stranded backlog over: nothing is lost
overall. The RPO/RTO measurement runs throughout: its estimate from before the fault stands beside the loss its
own ledger computation finds, which must be the loss the test counted."""

import datetime
import json
import os
import re
import shutil
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from support import ledger
from support import amqp_clients as amqp
from support.estate import TESTBED_INVENTORY, run_playbook
from support.measurement import Measurement

# Minutes of load, a fault, two Spark runs and a failback: make drills (make test's operation playbooks run in
# test_swapover.py, test_staging.py and the installed collection's drill).
pytestmark = pytest.mark.drill

RATE = 500
# Below what the WAN outage before the loss makes the RPO: the failover refuses unless forced.
OBJECTIVE_S = 1
LINK = (("source_datacentre", "dc1"), ("target_datacentre", "dc2"))


def _run(playbook, inventory=TESTBED_INVENTORY, **extra_vars):
    return run_playbook(playbook, inventory, extra_args=["-e", json.dumps(extra_vars)] if extra_vars else [])


def _inventory_with_measurement_host(tmp_path, textfile):
    """The test bed's inventory with the controller as its rpo_job host, whose job's textfile is ``textfile``."""
    target = tmp_path / "inventory"
    shutil.copytree(TESTBED_INVENTORY, target)
    (target / "rpo.yml").write_text(yaml.safe_dump({"rpo_job": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "rpo_job_textfile": str(textfile)}}}}))
    return str(target)


def _decision_since(started_at):
    """The details of the newest failover decision in the event log recorded since ``started_at``."""
    with open(os.path.expanduser("~/.local/state/continuity-artemis/events.jsonl")) as handle:
        decisions = [event for event in map(json.loads, handle) if event["name"] == "failover"
                     and event["phase"] == "decided" and event["at"] >= started_at]
    assert decisions, "no failover decision in the event log"
    return decisions[-1]["details"]


def test_failover_under_load_then_failback_loses_nothing_overall(dc1_active_at_the_end, tmp_path):
    estate = dc1_active_at_the_end
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = f"failover.{uuid.uuid4().hex[:8]}"
    failover_list = [dc1.amqp_url, dc2.amqp_url]
    producer = amqp.Producer(failover_list, dc1.user, dc1.password, queue, rate=RATE, ca_path=dc1.ca_cert)
    # The consumers run at dc2 once it is active: what dc1 held unconsumed is what a failover can lose.
    consumer = amqp.Consumer([dc2.amqp_url], dc1.user, dc1.password, queue, ca_path=dc2.ca_cert)
    measurement = Measurement(estate, str(tmp_path / "telemetry"),
                              routes=[{"address": "continuity.probe", "source": "dc1", "targets": ["dc2"]}],
                              window_seconds=5)
    background = ThreadPoolExecutor(max_workers=1)
    try:
        with producer, measurement:
            producer.wait_connected()
            time.sleep(12)
            # A WAN outage just before the loss leaves dc1 with a backlog that only failback can bring over.
            estate.testbed("partition", "dc1", "dc2")
            time.sleep(3)
            lost_at = time.monotonic()
            fault_time = time.time()
            estate.testbed("stop-node", dc1.name)
            estate.testbed("heal")

            # No lag from the operator: the failover weighs the RPO the measurement published (the job over what
            # collector and prober saw until the loss), read from the textfile on the inventory's rpo_job host.
            published = measurement.job(str(tmp_path / "published"))
            measured_rpo = published[("continuity_artemis_rpo_seconds", LINK)]
            estate.record_timing("failover.published_rpo_s", measured_rpo)
            estate.record_timing("failover.rpo_job_before_failover_s", time.monotonic() - lost_at)
            inventory = _inventory_with_measurement_host(tmp_path, tmp_path / "published" / "continuity_artemis.prom")
            gate = {"failover_target": "dc2", "failover_confirm": True, "failover_rpo_objective_s": OBJECTIVE_S}
            assert measured_rpo > OBJECTIVE_S, "the partition did not take the RPO past the objective"
            refused = _run("playbooks/failover.yml", inventory, **gate)
            assert refused.rc != 0 and re.search(
                rf"Refused: measured RPO {measured_rpo:.1f} s \(evaluated \d+ s ago\) is above the RPO objective of "
                rf"{OBJECTIVE_S}", refused.output), refused.output[-3000:]
            forced_at = datetime.datetime.now(datetime.timezone.utc).isoformat()
            result = _run("playbooks/failover.yml", inventory, failover_force=True, **gate)
            assert result.rc == 0, result.output[-6000:]
            estate.record_timing("failover.loss_to_activated_s", time.monotonic() - lost_at)
            decided = _decision_since(forced_at)
            assert decided["forced"] and not decided["within_objective"], decided
            assert float(decided["rpo_seconds"]) == pytest.approx(measured_rpo) and float(decided["rpo_age_s"]) > 0
            consumer.start()
            time.sleep(5)
            producer.stop()
            accepted = set(producer.accepted_ids())
            # Everything dc2 received is consumed; what dc1 had not replicated is stranded there for now.
            amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 0, timeout=60)
            time.sleep(2)
            stranded = accepted - set(consumer.accepted_ids())
            estate.record_timing("failover.accepted_msgs", len(accepted))
            estate.record_timing("failover.lost_before_failback_msgs", len(stranded))
            estate.record_timing("failover.duplicates_before_failback_msgs", len(consumer.duplicates()))
            assert stranded, "the drill left nothing stranded on dc1, so it proves nothing about failback"
            # The job over the drill's ledger so far runs while dc1 comes back: its answer is checked after failback.
            ledger.write(measurement.root, ledger.drill_rows("failover", producer, [dc1.dc, dc2.dc],
                                                             [(consumer, dc2.dc)], fault_time, dc1.dc))
            consumed_at_the_fault = consumer.accepted_ids()
            drill_job = background.submit(_measure_the_drill, measurement, tmp_path)

            estate.testbed("start-node", dc1.name)
            started = run_playbook("site.yml", extra_args=["--limit", dc1.name])  # starts the broker, changes nothing
            assert started.rc == 0, started.output[-4000:]
            result = _run("playbooks/failback.yml", failback_site="dc1", failback_active="dc2")
            assert result.rc == 0, result.output[-6000:]
            amqp.wait_for(lambda: accepted - set(consumer.accepted_ids()), lambda missing: not missing, timeout=120,
                          description="every accepted message consumed after failback")
            time.sleep(2)
            _check_the_drill(estate, drill_job.result(), tmp_path, stranded, consumed_at_the_fault)
    finally:
        if consumer.ident is not None:
            consumer.stop()
        background.shutdown(wait=True)

    consumed = consumer.accepted_ids()
    estate.record_timing("failover.duplicates_overall_msgs", len(consumed) - len(set(consumed)))
    assert accepted <= set(consumed), "lost overall"
    assert set(consumed) <= accepted | set(producer.uncertain_ids())


def _measure_the_drill(measurement, tmp_path):
    with open(tmp_path / "sla.yml", "w") as handle:
        handle.write("window_seconds: 5\n")
    return measurement.job(str(tmp_path), "--sla", str(tmp_path / "sla.yml"))


def _check_the_drill(estate, metrics, tmp_path, stranded, consumed):
    """The job over the drill's telemetry and ledger found the loss the test counted at the fault; its estimate from
    the last window before the fault stands beside it (recorded, not asserted: an estimate)."""
    drill = (("drill", "failover"),)
    assert metrics[("continuity_artemis_drill_lost_messages", drill)] == len(stranded)
    assert metrics[("continuity_artemis_drill_duplicate_messages", drill)] == len(consumed) - len(set(consumed))
    estate.record_timing("failover.job_messages_at_risk_estimate",
                         metrics.get(("continuity_artemis_drill_messages_at_risk_estimate", drill), -1))
    estate.record_timing("failover.job_lost_msgs", metrics[("continuity_artemis_drill_lost_messages", drill)])
    estate.record_timing("failover.job_rpo_s", metrics[("continuity_artemis_drill_rpo_seconds", drill)])
    estate.record_timing("failover.job_rto_s", metrics.get(("continuity_artemis_drill_rto_seconds", drill), -1))
    report = (tmp_path / "report.html").read_text()
    assert "<td>failover</td>" in report
