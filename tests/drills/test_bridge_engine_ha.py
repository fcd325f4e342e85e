"""The bridge engine (issue 17) in HA pairs: on a 2 x 2 shared_nothing estate, SIGKILL of a primary under load, first
at the source datacentre (its backup takes over the outbound queues from the replicated journal and bridges them),
then at the target (the source's bridges reach the target's backup through the static list of both brokers).
Producers send 200 msg/s to a runtime address of the test bed's group `relay` (messages_only, engine bridge) with
the failover URLs of their pair; by ledger the other datacentre must hold every accepted message, once. Figures go
to tests/drills/results/bridge_engine_ha_2x2.json.

    make drills            (or: pytest tests/drills -k bridge)
"""

import json
import os
import time
import uuid

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import amqp_ledger as amqp
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report
from support.estate import REPO_ROOT, Estate, layout_inventory, run_playbook

pytestmark = pytest.mark.timeout(2400)

RATE = 200
RESULTS = os.path.join(REPO_ROOT, "tests", "drills", "results")


@pytest.fixture
def bridged_2x2(tmp_path):
    Estate.testbed("down")
    Estate.testbed("up", "--dcs", "2", "--nodes-per-dc", "2")
    inventory = layout_inventory(tmp_path, "shared_nothing")
    converged = run_playbook("site.yml", inventory=inventory)
    assert converged.rc == 0, converged.output[-6000:]
    yield Estate.from_testbed()
    if os.environ.get("KEEP_TESTBED") != "1":
        Estate.testbed("down")


def _node(estate, name):
    return next(node for node in estate.nodes if node.name == name)


def _bridges(node):
    return {link["name"]: link for link in broker_report(node.management())["links"]
            if link["engine"] == "bridge" and not link.get("external")}


def _kill_under_load(estate, producing, killed, target, label):
    """Produce at ``producing`` (a pair, primary first) while ``killed`` is SIGKILLed; ``target`` is the other
    datacentre's pair, whose live broker at the end must hold every accepted message. Returns the figures."""
    receiving = target[1] if killed in target else target[0]
    address = f"relay.ha.{uuid.uuid4().hex[:8]}"
    live = producing[0] if producing[0].name != killed.name else producing[1]
    producer = amqp.Producer([node.amqp_url for node in producing], live.user, live.password, address, rate=RATE,
                             id_prefix=address, reconnect_delay=0.2)
    producer.start()
    producer.wait_connected()
    amqp.wait_for(target[0].queue_names, lambda names: address in names, timeout=60,
                  description=f"{address} created at {target[0].name} by the bridge")
    time.sleep(5)
    killed_at = time.time()
    estate.testbed("kill", killed.name)

    def reconnected():
        return [when for when, kind, _detail in list(producer.events) if kind == "connected" and when > killed_at]

    if killed in producing:
        amqp.wait_for(reconnected, bool, timeout=90, description=f"the producer reconnected after {killed.name}")
    time.sleep(10)
    producer.stop()
    accepted, uncertain = set(producer.accepted_ids()), set(producer.uncertain_ids())
    assert accepted, producer.stats()

    started = time.monotonic()
    try:
        held = amqp.wait_for(lambda: amqp.browse(receiving.amqp_url, receiving.user, receiving.password, address),
                             lambda messages: accepted <= {m.id for m in messages}, timeout=180)
    except AssertionError:
        held = amqp.browse(receiving.amqp_url, receiving.user, receiving.password, address)
        missing = sorted(accepted - {m.id for m in held})
        bridges = {source.name: _bridges(source) for source in producing if source.name != killed.name}
        raise AssertionError(f"{label}: {len(missing)} accepted message(s) missing at {receiving.name}, e.g. "
                             f"{missing[:10]}; bridges {bridges}; producer {producer.stats()}") from None
    ids = [m.id for m in held]
    figures = {"address": address, "rate": RATE, "accepted": len(accepted), "uncertain": len(uncertain),
               "received": len(ids), "lost": len(accepted - set(ids)), "duplicates": len(ids) - len(set(ids)),
               "uncertain_present": len(uncertain & set(ids)),
               "producer_reconnected_after_s": round(reconnected()[0] - killed_at, 1) if reconnected() else None,
               "complete_after_stop_s": round(time.monotonic() - started, 1)}
    assert figures["lost"] == 0 and figures["duplicates"] == 0, (label, figures)
    assert set(ids) <= accepted | uncertain, f"{label}: {receiving.name} holds messages the producer never sent"
    return figures


def test_the_bridge_engine_loses_nothing_when_a_primary_of_either_datacentre_is_killed(bridged_2x2):
    estate = bridged_2x2
    dc1 = [_node(estate, "dc1-node1"), _node(estate, "dc1-node2")]
    dc2 = [_node(estate, "dc2-node1"), _node(estate, "dc2-node2")]
    before = {node.name: sorted(_bridges(node)) for node in (dc1[0], dc2[0])}
    assert all(before.values()), f"the test bed's group relay must run on bridges here: {before}"

    figures = {"source_primary_killed": _kill_under_load(estate, dc1, dc1[0], dc2, "dc1's primary killed")}
    # The source's backup runs the same bridges, connected.
    amqp.wait_for(lambda: _bridges(dc1[1]), lambda bridges: bridges and all(b["connected"] for b in bridges.values()),
                  timeout=60, description="dc1-node2's bridges connected")
    figures["target_primary_killed"] = _kill_under_load(estate, [dc1[1]], dc2[0], dc2, "dc2's primary killed")
    figures["bridges_after"] = {node.name: {name: {"connected": link["connected"], "backlog": link["backlog"]}
                                            for name, link in _bridges(node).items()} for node in (dc1[1], dc2[1])}
    with open(os.path.join(RESULTS, "bridge_engine_ha_2x2.json"), "w") as handle:
        json.dump(figures, handle, indent=2, sort_keys=True)
        handle.write("\n")
