"""Queues created at runtime by AMQP producers, then a swapover: with journal replication the mirror can deliver a
message before its queue's creation (docs/upstream/mirror-create-queue-race.md). The passive site keeps such
messages; the swapover settles them (artemis_reconcile). Without the reconciliation the swapover aborts and names
what is kept: nothing is lost silently. With it, the target holds exactly what the source had not consumed.

Figures go to tests/drills/results/runtime_queues_<layout>.json.
"""

import json
import os
import time
import uuid

import pytest

from support import amqp_clients as amqp
from support.estate import REPO_ROOT, Estate, layout_inventory, run_module, run_playbook
from support.measurement import Measurement

from reproduce_mirror_race import BURST, BURST_QUEUES, QUEUES, send_to_new_queues, wait_until_delivered

CONSUMED_EVERY = 10  # every tenth queue is consumed at the source before the swapover
RESULTS = os.path.join(REPO_ROOT, "tests", "drills", "results")
EVENT_LOG = os.path.expanduser("~/.local/state/continuity-artemis/events.jsonl")


@pytest.fixture(params=[("shared_nothing", 2), ("shared_store", 2), ("standalone", 1)],
                ids=["shared_nothing", "shared_store", "standalone"])
def estate_with_layout(request, tmp_path):
    layout, nodes = request.param
    Estate.testbed("down")
    Estate.testbed("up", "--dcs", "2", "--nodes-per-dc", str(nodes))
    inventory = layout_inventory(tmp_path, layout)
    converged = run_playbook("site.yml", inventory=inventory, timeout=3000)
    assert converged.rc == 0, converged.output[-6000:]
    yield layout, Estate.from_testbed(), inventory
    if os.environ.get("KEEP_TESTBED") != "1":
        Estate.testbed("down")


def _events(operation_ids):
    with open(EVENT_LOG) as handle:
        events = [json.loads(line) for line in handle if line.strip()]
    return [event for event in events if event["id"] in operation_ids]


def _kept(estate, datacentre):
    result, output = run_module("artemis_replication_info", estate.management_args())
    assert not result.get("failed"), output[-3000:]
    return sum(sum(report["kept"].values()) for report in result["brokers"] if report["datacentre"] == datacentre)


def _ids_at(node, queue):
    return [message.id for message in amqp.browse(node.amqp_url, node.user, node.password, queue, ca_path=node.ca_cert)]


def _swapover(inventory, reconcile, drain_timeout=300):
    before = set()
    if os.path.exists(EVENT_LOG):
        with open(EVENT_LOG) as handle:
            before = {json.loads(line)["id"] for line in handle if line.strip()}
    result = run_playbook("playbooks/swapover.yml", inventory=inventory, timeout=1800, extra_args=[
        "-e", "swapover_target=dc2",
        "-e", json.dumps({"swapover_reconcile": reconcile, "swapover_drain_timeout": drain_timeout})])
    with open(EVENT_LOG) as handle:
        ids = {json.loads(line)["id"] for line in handle if line.strip()} - before
    return result, _events(ids)


def _kept_metric(published, datacentre="dc2"):
    return published.get(("continuity_artemis_kept_messages", (("datacentre", datacentre),)))


def _reconciliation_metric(published, outcome):
    return published.get(("continuity_artemis_reconciliation_messages", (
        ("operation", "swapover"), ("outcome", outcome), ("target_datacentre", "dc2"))))


def test_runtime_queues_survive_a_swapover(estate_with_layout, tmp_path):
    layout, estate, inventory = estate_with_layout
    # The measurement (collector) runs throughout: the kept count and the reconciliation reach the metrics.
    measurement = Measurement(estate, str(tmp_path / "telemetry"), routes=[], interval=2.0)
    with measurement:
        figures = _drill(layout, estate, inventory, measurement, tmp_path)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f"runtime_queues_{layout}.json"), "w") as handle:
        json.dump(figures, handle, indent=2, sort_keys=True)
    assert figures["missing_at_target"] == 0, f"missing at dc2: {figures['missing']}"
    assert figures["duplicates_at_target"] == 0 and figures["consumed_present_at_target"] == 0, figures
    assert figures["kept_after"] == 0 and figures["metrics_after"]["kept"] == 0, figures
    assert figures["metrics_after"]["reconciled"] == figures["reconciliation"]["reconciled"], figures


def _drill(layout, estate, inventory, measurement, tmp_path):
    run = uuid.uuid4().hex[:6]
    source = next(node for node in estate.nodes if node.dc == "dc1")
    target = next(node for node in estate.nodes if node.dc == "dc2")
    figures = {"layout": layout, "queues": QUEUES, "burst_queues": BURST_QUEUES, "burst": BURST}

    started = time.monotonic()
    sent = send_to_new_queues(source, f"rq.{run}")
    figures["send_s"] = round(time.monotonic() - started, 1)
    consumed = {}
    for index, queue in enumerate(sorted(sent)):
        if index % CONSUMED_EVERY == 0:
            consumed[queue] = [m.id for m in amqp.receive(source.amqp_url, source.user, source.password, queue,
                                                          len(sent[queue]), ca_path=source.ca_cert)]
    expected = dict((queue, set(ids) - set(consumed.get(queue, []))) for queue, ids in sent.items())
    figures["sent"] = sum(len(ids) for ids in sent.values())
    figures["consumed_at_source"] = sum(len(ids) for ids in consumed.values())
    wait_until_delivered(estate)
    figures["kept_before_swapover"] = kept = _kept(estate, "dc2")

    if layout == "shared_nothing" and kept:
        # Reconciliation off: the swapover cannot complete, dc1 is active again, and the loss is visible.
        aborted, events = _swapover(inventory, reconcile=False, drain_timeout=60)
        assert aborted.rc != 0, aborted.output[-4000:]
        phases = {event["phase"]: event for event in events}
        assert "aborted" in phases and int(phases["aborted"]["details"]["kept"]) == kept, events
        time.sleep(5)  # a collector sample after the abort
        published = measurement.job(str(tmp_path / "job-aborted"), "--events", EVENT_LOG)
        figures["without_reconciliation"] = {"aborted": True, "kept_in_abort_event": kept,
                                             "kept_metric": _kept_metric(published)}
        assert _kept_metric(published) == kept, published

    done, events = _swapover(inventory, reconcile=True)
    assert done.rc == 0, done.output[-6000:]
    phases = {event["phase"]: event for event in events}
    assert "verified" in phases, events
    reconciliation = phases["reconciled"]["details"]
    figures["reconciliation"] = reconciliation
    assert int(reconciliation["kept"]) == kept and int(reconciliation["pending"]) == 0, reconciliation
    assert int(reconciliation["reconciled"]) + int(reconciliation["discarded"]) == kept, reconciliation
    if layout != "shared_nothing":
        assert kept == 0, f"{layout}: {kept} message(s) kept, expected none"

    # The ledger: at the target every message the source had not consumed, exactly once; none that it had.
    short, duplicated, consumed_present = {}, {}, {}
    for queue in sorted(sent):
        ids = _ids_at(target, queue)
        if set(ids) != expected[queue]:
            short[queue] = sorted(expected[queue] - set(ids))
        if len(ids) != len(set(ids)):
            duplicated[queue] = len(ids) - len(set(ids))
        if set(ids) & set(consumed.get(queue, [])):
            consumed_present[queue] = sorted(set(ids) & set(consumed[queue]))
    figures.update(missing_at_target=sum(len(ids) for ids in short.values()),
                   missing=dict(list(short.items())[:10]),
                   duplicates_at_target=sum(duplicated.values()),
                   consumed_present_at_target=sum(len(ids) for ids in consumed_present.values()),
                   kept_after=_kept(estate, "dc2"))
    time.sleep(5)
    published = measurement.job(str(tmp_path / "job-after"), "--events", EVENT_LOG)
    figures["metrics_after"] = {"kept": _kept_metric(published),
                                "reconciled": _reconciliation_metric(published, "reconciled"),
                                "discarded": _reconciliation_metric(published, "discarded")}
    return figures
