"""The bridge engine on the test bed's group `relay` (messages_only, engine bridge, group_vars/all/estate.yml): what is
produced under `relay.` at a datacentre is bridged to every other one once, stamped with its origin, and never comes
back nor goes further; anycast and multicast alike. Counted with the Artemis CLI and by ledger. Runs on the two
datacentres of the main bed and on the three of the systemd bed."""

import subprocess
import time
import uuid

from ansible_collections.continuity.artemis.plugins.module_utils import amqp_ledger as amqp
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import ORIGIN_PROPERTY, bridge_links
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report
from support.estate import REPO_ROOT, artemis_cli, cli_message_count

STABLE_FOR_S = 30


def _cli_count(node, queue):
    return cli_message_count(node.core_url, node.user, node.password, queue)


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
    assert (len(produced["dc1"]), len(produced["dc2"]), len(events)) == (100, 40, 10)

    for node in nodes:
        amqp.wait_for(lambda: _cli_count(node, address), lambda count: count == 140, timeout=60,
                      description=f"140 messages of {address} at {node.name}")
        amqp.wait_for(lambda: _cli_count(node, subscription), lambda count: count == 10, timeout=60,
                      description=f"10 messages of {topic} at {node.name}")
    settled_at = time.monotonic()

    # Every bridge of the group is connected and its outbound queue empty; the estate model names them all.
    expected = {(link["source"], link["name"]) for link in
                bridge_links(estate.inventory_vars()["replication_address_groups"], datacentres, "dc1")}
    reported = {(node.dc, link["name"]): link for node in nodes
                for link in broker_report(node.management())["links"] if link["engine"] == "bridge"}
    assert set(reported) == expected
    assert all(link["connected"] and link["backlog"] == 0 for link in reported.values()), reported

    # No loop, nothing forwarded further: the counts stay where they are.
    time.sleep(max(0.0, STABLE_FOR_S - (time.monotonic() - settled_at)))
    for node in nodes:
        assert (_cli_count(node, address), _cli_count(node, subscription)) == (140, 10), node.name

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
