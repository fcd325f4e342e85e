"""The bridge engine on the test bed's group `relay` (messages_only, engine bridge, group_vars/all/estate.yml): what is
produced under `relay.` at a datacentre is bridged to every other one once, stamped with its origin, and never comes
back nor goes further; anycast and multicast alike, runtime addresses and large messages too. Counted with the
Artemis CLI and by ledger. make test runs it on the three datacentres of the systemd bed (two would show less, and the
suite's time is budgeted); the partition drill runs on the main bed's two (make drills). The group `books` (full_state,
engine bridge) is reconciled periodically on the main bed, and its failover is a drill; its swapover is in
test_swapover.py."""

import json
import os
import subprocess
import time
import uuid

import pytest

from support import amqp_clients as amqp
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    ORIGIN_PROPERTY, SOURCE_ID_PROPERTY, bridge_links)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report
from support.estate import REPO_ROOT, artemis_cli, cli_message_count, run_playbook

STABLE_FOR_S = 30
PARTITION_S = 30
RATE = 200  # messages per second under the partition


def _cli_count(node, queue):
    """The count as an operator sees it with `artemis queue stat` (a management message: the administrator)."""
    return cli_message_count(node.core_url, node.admin_user, node.admin_password, queue)


@pytest.mark.systemd  # the systemd pass: three datacentres
def test_messages_produced_at_a_datacentre_arrive_once_at_every_other_and_never_come_back(estate):
    datacentres = sorted({node.dc for node in estate.nodes})
    nodes = [estate.dc(name) for name in datacentres]
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    # `artemis queue stat` shows 25 characters of a name.
    address = f"relay.orders.{uuid.uuid4().hex[:8]}"
    topic, subscription = f"relay.ev.{uuid.uuid4().hex[:6]}", f"audit.{uuid.uuid4().hex[:6]}"
    # A multicast subscription exists where it was created: it is declared at every datacentre (by an operator,
    # `artemis queue create` sends a management message).
    for node in nodes:
        subprocess.run([artemis_cli(), "queue", "create", "--url", node.core_url, "--user", node.admin_user,
                        "--password", node.admin_password, "--name", subscription, "--address", topic, "--multicast", "--durable",
                        "--auto-create-address", "--silent"], check=True, capture_output=True, text=True,
                       timeout=120, cwd=REPO_ROOT)

    produced = {"dc1": amqp.send(dc1.amqp_url, dc1.user, dc1.password, address, 100, id_prefix=f"{address}-dc1",
                                 ca_path=dc1.ca_cert),
                "dc2": amqp.send(dc2.amqp_url, dc2.user, dc2.password, address, 40, id_prefix=f"{address}-dc2",
                                 ca_path=dc2.ca_cert)}
    events = amqp.send(dc1.amqp_url, dc1.user, dc1.password, topic, 10, id_prefix=f"{topic}-dc1", anycast=False,
                       ca_path=dc1.ca_cert)
    # Large messages (above Artemis's 100 KiB threshold) travel in pieces; their first piece is redirected.
    large = f"relay.large.{uuid.uuid4().hex[:6]}"
    big = amqp.send(dc1.amqp_url, dc1.user, dc1.password, large, ["L" * 300_000] * 2, id_prefix=f"{large}-dc1",
                    ca_path=dc1.ca_cert)
    assert (len(produced["dc1"]), len(produced["dc2"]), len(events), len(big)) == (100, 40, 10, 2)

    for node in nodes:
        amqp.wait_for(lambda: _cli_count(node, address), lambda count: count == 140, timeout=60,
                      description=f"140 messages of {address} at {node.name}")
        amqp.wait_for(lambda: _cli_count(node, subscription), lambda count: count == 10, timeout=60,
                      description=f"10 messages of {topic} at {node.name}")
        amqp.wait_for(lambda: _cli_count(node, large), lambda count: count == 2, timeout=60,
                      description=f"2 large messages of {large} at {node.name}")
    settled_at = time.monotonic()

    # Every bridge of the group is connected and its outbound queue empty; the estate model names them all.
    expected = {(link["source"], link["name"]) for link in
                bridge_links(estate.inventory_vars()["replication_address_groups"], datacentres, "dc1")}
    reports = {node.name: broker_report(node.management()) for node in nodes}
    reported = {(node.dc, link["name"]): link for node in nodes
                for link in reports[node.name]["links"] if link["engine"] == "bridge"}
    assert set(reported) == expected
    assert all(link["connected"] and link["backlog"] == 0 for link in reported.values()), reported
    # The replication plugin sent every copy on: none waits on an inbound address.
    assert all(not report["unrestored"] for report in reports.values()), reports

    # No loop, nothing forwarded further: the counts stay where they are.
    time.sleep(max(0.0, STABLE_FOR_S - (time.monotonic() - settled_at)))
    for node in nodes:
        assert (_cli_count(node, address), _cli_count(node, subscription), _cli_count(node, large)) == (140, 10, 2), \
            node.name

    # By ledger: each datacentre holds every message once, its own unstamped and the others' stamped with the
    # datacentre that produced them.
    everything = sorted(produced["dc1"] + produced["dc2"])
    for node in nodes:
        received = amqp.receive(node.amqp_url, node.user, node.password, address, 140, timeout=60, ca_path=node.ca_cert)
        assert sorted(message.id for message in received) == everything, node.name
        origins = {message.id: message.properties.get(ORIGIN_PROPERTY) for message in received}
        for producer, ids in produced.items():
            assert {origins[message_id] for message_id in ids} == {None if producer == node.dc else producer}, \
                (node.name, producer)
        audit = amqp.receive(node.amqp_url, node.user, node.password, f"{topic}::{subscription}", 10, timeout=60,
                             anycast=False, ca_path=node.ca_cert)
        assert sorted(message.id for message in audit) == sorted(events), node.name
        received_large = amqp.receive(node.amqp_url, node.user, node.password, large, 2, timeout=60,
                                      ca_path=node.ca_cert)
        assert sorted(message.id for message in received_large) == sorted(big), node.name
        assert all(len(message.body) == 300_000 for message in received_large), node.name


@pytest.mark.drill  # a minute of partition and catch-up on the shared bed; make drills
def test_a_30_s_partition_under_load_then_heal_loses_nothing_and_duplicates_nothing(estate):
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    address = f"relay.part.{uuid.uuid4().hex[:8]}"
    outbound = f"continuity.out.relay.{dc2.dc}"
    producer = amqp.Producer(dc1.amqp_url, dc1.user, dc1.password, address, rate=RATE, id_prefix=address,
                             ca_path=dc1.ca_cert)
    producer.start()
    time.sleep(2)
    estate.testbed("partition", dc1.dc, dc2.dc)
    partitioned = time.monotonic()
    # The black hole leaves the bridge's connection hanging: it misses its pings and drops it.
    amqp.wait_for(lambda: dc1.link(outbound)["connected"], lambda connected: not connected, timeout=PARTITION_S,
                  description=f"dc1 dropping its hung bridge {outbound}")
    dropped_after = time.monotonic() - partitioned
    time.sleep(max(0.0, PARTITION_S - (time.monotonic() - partitioned)))
    backlog = dc1.link(outbound)["backlog"]
    assert backlog > 0, "while partitioned, dc1 must hold the copies in its outbound queue"
    estate.testbed("heal")
    healed = time.monotonic()
    time.sleep(2)
    producer.stop()
    accepted = producer.accepted_ids()
    assert accepted and not producer.uncertain_ids(), producer.stats()

    amqp.wait_for(lambda: _cli_count(dc2, address), lambda count: count >= len(accepted), timeout=180,
                  description=f"{len(accepted)} messages of {address} at dc2")
    caught_up_after = time.monotonic() - healed
    amqp.wait_for(lambda: dc1.link(outbound)["backlog"], lambda count: count == 0, timeout=60)
    # Every datacentre (a third one was not partitioned) holds each accepted message once.
    for node in [estate.dc(name) for name in sorted({node.dc for node in estate.nodes})]:
        received = amqp.receive(node.amqp_url, node.user, node.password, address, len(accepted), timeout=120,
                                ca_path=node.ca_cert)
        assert sorted(message.id for message in received) == sorted(accepted), node.name
        assert _cli_count(node, address) == 0, f"{node.name} holds more than was accepted"
    estate.record_timing("bridge_partition_hung_link_dropped_s", dropped_after)
    estate.record_timing("bridge_partition_backlog_at_heal", backlog)
    estate.record_timing("bridge_partition_catch_up_s", caught_up_after)
    estate.record_timing("bridge_partition_messages", len(accepted))


def _identities(node, queue):
    """(origin, source id) of every message a datacentre's queue holds, read by management (a staged group cannot be
    browsed by clients)."""
    found = []
    for message in node.management().browse(queue, queue):
        properties = message["properties"]
        found.append((properties.get(ORIGIN_PROPERTY) or node.dc,
                      int(properties.get(SOURCE_ID_PROPERTY, message["messageID"]))))
    return sorted(found)


def test_the_periodic_reconciliation_removes_at_the_passive_datacentre_the_copies_of_what_the_owner_consumed(estate):
    """`books` (full_state, bridge engine, dc1's): acknowledgements do not cross, so dc2 holds a copy of each message
    dc1 accepted until playbooks/reconcile.yml removes the copies of what dc1 consumed, while dc1 stays active."""
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = f"books.periodic.{uuid.uuid4().hex[:8]}"
    sent = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 100, id_prefix=queue, ca_path=dc1.ca_cert)
    amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 100, timeout=60,
                  description=f"100 copies of {queue} at dc2")
    consumed = amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, 60, timeout=60, ca_path=dc1.ca_cert)
    assert len(consumed) == 60 and {message.id for message in consumed} <= set(sent)

    reconciled = run_playbook("playbooks/reconcile.yml")
    assert reconciled.rc == 0, reconciled.output[-6000:]
    held_at_dc1 = _identities(dc1, queue)
    assert len(held_at_dc1) == 40 and all(origin == "dc1" for origin, _source_id in held_at_dc1)
    assert _identities(dc2, queue) == held_at_dc1

    # What dc1 still holds stays, new copies arrive and stay, and a second run removes nothing more.
    amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 10, id_prefix=f"{queue}-more", ca_path=dc1.ca_cert)
    again = run_playbook("playbooks/reconcile.yml")
    assert again.rc == 0, again.output[-6000:]
    amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 50, timeout=60,
                  description=f"50 copies of {queue} at dc2")
    assert _identities(dc2, queue) == _identities(dc1, queue)
    # The ledger at dc1 (still active) delivers exactly the 50 it did not consume.
    rest = amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, 50, timeout=60, ca_path=dc1.ca_cert)
    assert len({message.id for message in rest}) == 50 and not {message.id for message in rest} & {
        message.id for message in consumed}


@pytest.mark.drill  # a failover and failback of the shared bed's `books` under load; make drills
def test_a_failover_of_a_full_state_bridge_group_delivers_again_only_what_was_consumed_since_the_reconciliation(
        dc1_active_at_the_end):
    """Acknowledgements do not cross a bridge: an abrupt failover delivers again what the source consumed since the
    last reconciliation (playbooks/reconcile.yml), and nothing consumed before it. dc1 takes 500 msg/s with a
    consumer; the reconciliation runs; 10 s later dc1 is lost and `books` fails over to dc2, where a consumer takes
    everything; dc1 comes back and fails back: nothing accepted is lost overall. Figures in
    tests/drills/results/bridge_full_state_failover.json."""
    estate = dc1_active_at_the_end
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = f"books.fo.{uuid.uuid4().hex[:8]}"
    producer = amqp.Producer([dc1.amqp_url, dc2.amqp_url], dc1.user, dc1.password, queue, rate=500, id_prefix=queue,
                             ca_path=dc1.ca_cert)
    at_dc1 = amqp.Consumer([dc1.amqp_url], dc1.user, dc1.password, queue, ca_path=dc1.ca_cert)
    at_dc2 = amqp.Consumer([dc2.amqp_url], dc1.user, dc1.password, queue, ca_path=dc2.ca_cert)
    figures = {"rate": 500}
    with producer, at_dc1:
        producer.wait_connected()
        at_dc1.wait_connected()
        time.sleep(15)
        reconciliation_started = time.time()
        reconciled = run_playbook("playbooks/reconcile.yml")
        assert reconciled.rc == 0, reconciled.output[-6000:]
        figures["reconciliation_s"] = round(time.time() - reconciliation_started, 1)
        time.sleep(10)
        lost_at = time.time()
        estate.testbed("stop-node", dc1.name)
        failover = run_playbook("playbooks/failover.yml", extra_args=["-e", json.dumps({
            "failover_target": "dc2", "failover_confirm": True, "failover_force": True,
            "failover_groups": ["books"]})])
        assert failover.rc == 0, failover.output[-6000:]
        figures["loss_to_activated_s"] = round(time.time() - lost_at, 1)
        with at_dc2:
            time.sleep(5)
            producer.stop()
            amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 0, timeout=120,
                          description=f"{queue} consumed at dc2")
            time.sleep(2)
            consumed_at_dc1 = {r.id: r.accepted_at for r in at_dc1.ledger() if r.accepted_at is not None}
            consumed_at_dc2 = set(at_dc2.accepted_ids())
            accepted = set(producer.accepted_ids())
            again = set(consumed_at_dc1) & consumed_at_dc2
            # A margin of a second for acknowledgements on their way when the reconciliation read dc1.
            before = {i for i, when in consumed_at_dc1.items() if when < reconciliation_started - 1}
            figures.update({
                "accepted": len(accepted), "consumed_at_dc1": len(consumed_at_dc1),
                "consumed_at_dc1_since_reconciliation": len(set(consumed_at_dc1) - before),
                "delivered_again_at_dc2": len(again),
                "delivered_again_consumed_before_reconciliation": len(again & before),
                "stranded_at_dc1_until_failback": len(accepted - set(consumed_at_dc1) - consumed_at_dc2)})
            assert again and not again & before, figures
            assert again <= set(consumed_at_dc1) - before, figures

            estate.testbed("start-node", dc1.name)
            started = run_playbook("site.yml", extra_args=["--limit", dc1.name])
            assert started.rc == 0, started.output[-4000:]
            failback = run_playbook("playbooks/failback.yml", extra_args=["-e", json.dumps({
                "failback_site": "dc1", "failback_active": "dc2", "failback_groups": ["books"]})])
            assert failback.rc == 0, failback.output[-6000:]
            amqp.wait_for(lambda: accepted - set(consumed_at_dc1) - set(at_dc2.accepted_ids()),
                          lambda missing: not missing, timeout=120,
                          description="every accepted message consumed at one datacentre or the other")
        figures["lost_overall"] = len(accepted - set(consumed_at_dc1) - set(at_dc2.accepted_ids()))
    with open(os.path.join(REPO_ROOT, "tests", "drills", "results", "bridge_full_state_failover.json"), "w") as out:
        json.dump(figures, out, indent=2, sort_keys=True)
        out.write("\n")
