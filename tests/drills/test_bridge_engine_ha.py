"""The bridge engine (issue 17) in HA pairs: on 2 x 2 and 3 x 2 shared_nothing estates, SIGKILL of a primary under
load, first at the source datacentre (its backup takes over the outbound queues from the replicated journal and
bridges them), then at a target (the source's bridges reach the target's backup through the static list of both
brokers). Producers send 200 msg/s to a runtime address of the test bed's group `relay` (messages_only, engine
bridge) with the failover URLs of their pair; by ledger every other datacentre must hold every accepted message,
once. Figures go to tests/drills/results/bridge_engine_ha_{2x2,3x2}.json.

    make drills            (or: pytest tests/drills -k bridge)
"""

import json
import os
import time
import uuid

import pytest

from support import amqp_clients as amqp
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report
from support.estate import REPO_ROOT, Estate, layout_inventory, run_playbook

pytestmark = pytest.mark.timeout(2400)

RATE = 200
RESULTS = os.path.join(REPO_ROOT, "tests", "drills", "results")


@pytest.fixture(params=[2, 3], ids=["2x2", "3x2"])
def bridged_pairs(request, tmp_path):
    datacentres = request.param
    Estate.testbed("down")
    Estate.testbed("up", "--dcs", str(datacentres), "--nodes-per-dc", "2")
    inventory = layout_inventory(tmp_path, {f"dc{n}": "shared_nothing" for n in range(1, datacentres + 1)})
    converged = run_playbook("site.yml", inventory=inventory)
    assert converged.rc == 0, converged.output[-6000:]
    yield Estate.from_testbed(), datacentres
    if os.environ.get("KEEP_TESTBED") != "1":
        Estate.testbed("down")


def _node(estate, name):
    return next(node for node in estate.nodes if node.name == name)


def _bridges(node):
    return {link["name"]: link for link in broker_report(node.management())["links"]
            if link["engine"] == "bridge" and not link.get("external")}


def _relay_bridges(node):
    """The bridges of the drill's group, `relay`."""
    return {name: link for name, link in _bridges(node).items() if ".relay." in name}


def _kill_under_load(estate, producing, killed, targets, label):
    """Produce at ``producing`` (a pair, primary first) while ``killed`` is SIGKILLed; ``targets`` are the other
    datacentres' pairs, whose live broker at the end must each hold every accepted message, once. Returns the
    figures."""
    receiving = [pair[1] if killed in pair else pair[0] for pair in targets]
    address = f"relay.ha.{uuid.uuid4().hex[:8]}"
    live = producing[0] if producing[0].name != killed.name else producing[1]
    producer = amqp.Producer([node.amqp_url for node in producing], live.user, live.password, address, rate=RATE,
                             id_prefix=address, reconnect_delay=0.2, ca_path=live.ca_cert)
    producer.start()
    producer.wait_connected()
    for pair in targets:
        amqp.wait_for(pair[0].queue_names, lambda names: address in names, timeout=60,
                      description=f"{address} created at {pair[0].name} by the bridge")
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

    figures = {"address": address, "rate": RATE, "accepted": len(accepted), "uncertain": len(uncertain),
               "producer_reconnected_after_s": round(reconnected()[0] - killed_at, 1) if reconnected() else None,
               "received": {}}
    started = time.monotonic()
    for node in receiving:
        try:
            held = amqp.wait_for(lambda: amqp.browse(node.amqp_url, node.user, node.password, address,
                                                     ca_path=node.ca_cert),
                                 lambda messages: accepted <= {m.id for m in messages}, timeout=180)
        except AssertionError:
            held = amqp.browse(node.amqp_url, node.user, node.password, address, ca_path=node.ca_cert)
            missing = sorted(accepted - {m.id for m in held})
            bridges = {source.name: _bridges(source) for source in producing if source.name != killed.name}
            raise AssertionError(f"{label}: {len(missing)} accepted message(s) missing at {node.name}, e.g. "
                                 f"{missing[:10]}; bridges {bridges}; producer {producer.stats()}") from None
        ids = [m.id for m in held]
        received = figures["received"][node.name] = {
            "received": len(ids), "lost": len(accepted - set(ids)), "duplicates": len(ids) - len(set(ids)),
            "uncertain_present": len(uncertain & set(ids)),
            "complete_after_stop_s": round(time.monotonic() - started, 1)}
        assert received["lost"] == 0 and received["duplicates"] == 0, (label, node.name, figures)
        assert set(ids) <= accepted | uncertain, f"{label}: {node.name} holds messages the producer never sent"
    return figures


def test_the_bridge_engine_loses_nothing_when_a_primary_of_either_datacentre_is_killed(bridged_pairs):
    estate, datacentres = bridged_pairs
    pairs = [[_node(estate, f"dc{n}-node1"), _node(estate, f"dc{n}-node2")] for n in range(1, datacentres + 1)]
    dc1, dc2 = pairs[0], pairs[1]
    before = {pair[0].name: sorted(_relay_bridges(pair[0])) for pair in pairs}
    assert all(len(relays) == datacentres - 1 for relays in before.values()), \
        f"the test bed's group relay must run on a bridge to every other datacentre here: {before}"

    figures = {"datacentres": datacentres,
               "source_primary_killed": _kill_under_load(estate, dc1, dc1[0], pairs[1:], "dc1's primary killed")}
    # The source's backup runs the same bridges, connected.
    amqp.wait_for(lambda: _bridges(dc1[1]), lambda bridges: bridges and all(b["connected"] for b in bridges.values()),
                  timeout=60, description="dc1-node2's bridges connected")
    figures["target_primary_killed"] = _kill_under_load(estate, [dc1[1]], dc2[0], pairs[1:], "dc2's primary killed")
    figures["bridges_after"] = {node.name: {name: {"connected": link["connected"], "backlog": link["backlog"]}
                                            for name, link in _relay_bridges(node).items()}
                                for node in [dc1[1], dc2[1], *(pair[0] for pair in pairs[2:])]}
    with open(os.path.join(RESULTS, f"bridge_engine_ha_{datacentres}x2.json"), "w") as handle:
        json.dump(figures, handle, indent=2, sort_keys=True)
        handle.write("\n")
