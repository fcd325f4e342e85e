"""The bridge engine on the test bed's group `relay` (messages_only, engine bridge, group_vars/all/estate.yml): what is
produced under `relay.` at a datacentre is bridged to every other one once, stamped with its origin, and never comes
back nor goes further; anycast and multicast alike, runtime addresses and large messages too. Counted with the
Artemis CLI and by ledger. make test runs it on the three datacentres of the systemd bed (two would show less, and the
suite's time is budgeted); the partition drill runs on the main bed's two (make drills)."""

import subprocess
import time
import uuid

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import amqp_ledger as amqp
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import ORIGIN_PROPERTY, bridge_links
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report
from support.estate import REPO_ROOT, artemis_cli, cli_message_count

STABLE_FOR_S = 30
PARTITION_S = 30
RATE = 200  # messages per second under the partition


def _cli_count(node, queue):
    return cli_message_count(node.core_url, node.user, node.password, queue)


@pytest.mark.systemd  # the systemd pass: three datacentres
def test_messages_produced_at_a_datacentre_arrive_once_at_every_other_and_never_come_back(estate):
    datacentres = sorted({node.dc for node in estate.nodes})
    nodes = [estate.dc(name) for name in datacentres]
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    # `artemis queue stat` shows 25 characters of a name.
    address = f"relay.orders.{uuid.uuid4().hex[:8]}"
    topic, subscription = f"relay.ev.{uuid.uuid4().hex[:6]}", f"audit.{uuid.uuid4().hex[:6]}"
    # A multicast subscription exists where it was created: the application declares it at every datacentre.
    for node in nodes:
        subprocess.run([artemis_cli(), "queue", "create", "--url", node.core_url, "--user", node.user, "--password",
                        node.password, "--name", subscription, "--address", topic, "--multicast", "--durable",
                        "--auto-create-address", "--silent"], check=True, capture_output=True, text=True,
                       timeout=120, cwd=REPO_ROOT)

    produced = {"dc1": amqp.send(dc1.amqp_url, dc1.user, dc1.password, address, 100, id_prefix=f"{address}-dc1"),
                "dc2": amqp.send(dc2.amqp_url, dc2.user, dc2.password, address, 40, id_prefix=f"{address}-dc2")}
    events = amqp.send(dc1.amqp_url, dc1.user, dc1.password, topic, 10, id_prefix=f"{topic}-dc1", anycast=False)
    # Large messages (above Artemis's 100 KiB threshold) travel in pieces; their first piece is redirected.
    large = f"relay.large.{uuid.uuid4().hex[:6]}"
    big = amqp.send(dc1.amqp_url, dc1.user, dc1.password, large, ["L" * 300_000] * 2, id_prefix=f"{large}-dc1")
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
        received = amqp.receive(node.amqp_url, node.user, node.password, address, 140, timeout=60)
        assert sorted(message.id for message in received) == everything, node.name
        origins = {message.id: message.properties.get(ORIGIN_PROPERTY) for message in received}
        for producer, ids in produced.items():
            assert {origins[message_id] for message_id in ids} == {None if producer == node.dc else producer}, \
                (node.name, producer)
        audit = amqp.receive(node.amqp_url, node.user, node.password, f"{topic}::{subscription}", 10, timeout=60,
                             anycast=False)
        assert sorted(message.id for message in audit) == sorted(events), node.name
        received_large = amqp.receive(node.amqp_url, node.user, node.password, large, 2, timeout=60)
        assert sorted(message.id for message in received_large) == sorted(big), node.name
        assert all(len(message.body) == 300_000 for message in received_large), node.name


@pytest.mark.drill  # a minute of partition and catch-up on the shared bed; make drills
def test_a_30_s_partition_under_load_then_heal_loses_nothing_and_duplicates_nothing(estate):
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    address = f"relay.part.{uuid.uuid4().hex[:8]}"
    outbound = f"continuity.out.relay.{dc2.dc}"
    producer = amqp.Producer(dc1.amqp_url, dc1.user, dc1.password, address, rate=RATE, id_prefix=address)
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
        received = amqp.receive(node.amqp_url, node.user, node.password, address, len(accepted), timeout=120)
        assert sorted(message.id for message in received) == sorted(accepted), node.name
        assert _cli_count(node, address) == 0, f"{node.name} holds more than was accepted"
    estate.record_timing("bridge_partition_hung_link_dropped_s", dropped_after)
    estate.record_timing("bridge_partition_backlog_at_heal", backlog)
    estate.record_timing("bridge_partition_catch_up_s", caught_up_after)
    estate.record_timing("bridge_partition_messages", len(accepted))
