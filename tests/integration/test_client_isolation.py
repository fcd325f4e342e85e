"""Nothing an application credential does can drop, forge or delete replication. The test bed's application role
holds every permission a client role may have, on `#`; with it, over AMQP (proton) and CORE (the Artemis command-line
client): no consuming, browsing or sending on the mirrors' store-and-forward queues or the estate's internal addresses,
no attaching as a mirror (a proton sender asking for the mirror capability, and a second Artemis broker with a mirror
connection), and the properties only the estate stamps are removed from what a client sends, so such a message is
replicated like any other."""

import concurrent.futures
import json
import subprocess
import time
import uuid

import pytest

from support import amqp_clients as amqp
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    MIRROR_QUEUE_PREFIX, ORIGIN_PROPERTY, SOURCE_ID_PROPERTY, bridge_links, mirror_connections, notice_address)
from support.estate import REPO_ROOT, artemis_cli, run_playbook
from support.plain_broker import plain_broker

REFUSED = "does not have permission="


def _internal_addresses(estate, datacentre):
    """What a client must not touch at a broker of ``datacentre``: the store-and-forward queues of its mirrors, its
    bridges' outbound queues, the inbound queues and what a passive site keeps (queues); the address the other
    datacentres' mirrors send to here (anycast); the notice addresses and Artemis's notifications (multicast)."""
    inventory = estate.inventory_vars()
    groups, datacentres = inventory["replication_address_groups"], inventory["replication_datacentres"]
    mirrors = mirror_connections(groups, datacentres, inventory["replication_active_datacentre"])
    bridges = bridge_links(groups, datacentres, inventory["replication_active_datacentre"])
    queues = sorted({MIRROR_QUEUE_PREFIX + link["name"] for link in mirrors if link["source"] == datacentre}
                    | {link["name"] for link in bridges if link["source"] == datacentre}
                    | {link["inbound"] for link in bridges} | {"continuity.kept"})
    anycast = sorted({MIRROR_QUEUE_PREFIX + link["name"] for link in mirrors if link["target"] == datacentre})
    multicast = sorted({notice_address(group["name"]) for group in groups if group.get("staging_delay_ms")}
                       | {"activemq.notifications"})
    return queues, anycast, multicast


def _cli(node, command, destination, *extra):
    """The Artemis command-line client over CORE as the application user; its output (it exits 0 on a refusal)."""
    done = subprocess.run([artemis_cli(), command, "--protocol", "CORE", "--url", node.core_url, "--user", node.user,
                           "--password", node.password, "--destination", destination, *extra],
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, check=False)
    return done.stdout + done.stderr


def test_an_application_user_can_neither_consume_browse_nor_send_on_an_internal_address(estate):
    dc1 = estate.dc("dc1")
    queues, anycast, multicast = _internal_addresses(estate, "dc1")
    assert "$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all" in queues and "continuity.in.relay" in queues, queues
    # The control: the same credentials and clients work on an application queue.
    ordinary = f"isolation.{uuid.uuid4().hex[:8]}"
    assert len(amqp.send(dc1.amqp_url, dc1.user, dc1.password, ordinary, 2, ca_path=dc1.ca_cert)) == 2
    assert "Consumed: 1 messages" in _cli(dc1, "consumer", f"queue://{ordinary}", "--message-count", "1",
                                          "--receive-timeout", "5000")
    assert len(amqp.receive(dc1.amqp_url, dc1.user, dc1.password, ordinary, 1, ca_path=dc1.ca_cert)) == 1

    for queue in queues:
        with pytest.raises(amqp.AmqpError):
            amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, 1, timeout=5, ca_path=dc1.ca_cert)
        with pytest.raises(amqp.AmqpError):
            amqp.browse(dc1.amqp_url, dc1.user, dc1.password, queue, timeout=5, ca_path=dc1.ca_cert)
    for address in queues + anycast + multicast:
        with pytest.raises(amqp.AmqpError):
            amqp.send(dc1.amqp_url, dc1.user, dc1.password, address, 1, timeout=5, anycast=address not in multicast,
                      ca_path=dc1.ca_cert)

    attempts = [("consumer", f"queue://{queue}", "--receive-timeout", "2000") for queue in queues]
    attempts += [("browser", f"queue://{queue}") for queue in queues]
    attempts += [("producer", f"{'topic' if address in multicast else 'queue'}://{address}")
                 for address in queues + anycast + multicast]
    attempts += [("consumer", "topic://activemq.notifications", "--receive-timeout", "2000")]
    # Each run of the command-line client is a JVM of its own: a few side by side.
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        outputs = list(pool.map(lambda attempt: _cli(dc1, *attempt[:2], "--message-count", "1", *attempt[2:]),
                                attempts))
    for attempt, output in zip(attempts, outputs):
        assert REFUSED in output, f"{' '.join(attempt)}: {output[-2000:]}"


def test_a_forged_original_address_sent_to_an_inbound_address_goes_nowhere(estate):
    """The broker plugin sends a copy on to its original address only when another datacentre's broker delivered
    it; a client's send there is checked against the inbound address, where it may not send."""
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    target = f"relay.forged.{uuid.uuid4().hex[:8]}"
    output = _cli(dc1, "producer", "queue://continuity.in.relay", "--message-count", "3", "--properties",
                  f'[{{"type":"string","key":"_AMQ_ORIG_ADDRESS","value":"{target}"}}]')
    assert REFUSED in output, output[-2000:]
    time.sleep(2)
    for node in (dc1, dc2):
        assert target not in node.queue_names()


def _mirror_link(node, user, password, address):
    """Why the broker closed an AMQP sender link to ``address`` (it closes every link there: this one lacks the
    mirror's desired capability, which python-qpid-proton cannot declare on a link)."""
    connection = amqp.connect(node.amqp_url, user, password, timeout=10, ca_path=node.ca_cert)
    try:
        connection.create_sender(address)
        return "attached"
    except Exception as exc:  # noqa: BLE001 - proton raises several types; the text says which refusal
        return str(exc)
    finally:
        connection.close()


def test_an_application_user_cannot_attach_as_a_mirror_to_any_address_artemis_takes_for_one(estate):
    """Artemis takes a sender link to any address starting with $ACTIVEMQ_ARTEMIS_MIRROR as a mirror: it checks that
    the user may send there, then that the link declares the mirror capability. The application user stops at the
    first check; the administrator, the control, passes it and stops at the second (a real mirror, with the
    capability: the next test)."""
    dc1 = estate.dc("dc1")
    for address in (MIRROR_QUEUE_PREFIX + "dc1_all", MIRROR_QUEUE_PREFIX + "dc1_relay", "$ACTIVEMQ_ARTEMIS_MIRROR",
                    "$ACTIVEMQ_ARTEMIS_MIRRORx", MIRROR_QUEUE_PREFIX + "evil.one"):
        refusal = _mirror_link(dc1, dc1.user, dc1.password, address)
        assert "AMQ229032" in refusal and "SEND" in refusal, f"{address}: {refusal}"
        control = _mirror_link(dc1, dc1.admin_user, dc1.admin_password, address)
        assert "AMQ119024" in control and "amq.mirror" in control, f"{address}: {control}"


@pytest.fixture
def rogue_broker(estate, tmp_path):
    """A second Artemis broker on the controller, with a mirror connection to dc1 that logs in as the application
    user. Its name is not one of the estate's (those addresses were the replication role's alone before as well)."""
    dc1 = estate.dc("dc1")
    mirror = (f'<broker-connections><amqp-connection uri="tcp://{dc1.address}:5671?sslEnabled=true;'
              f'trustStoreType=PEMCA;trustStorePath={dc1.ca_cert};verifyHost=true" name="evil" user="{dc1.user}" '
              f'password="{dc1.password}" retry-interval="1000"><mirror queue-removal="true" queue-creation="true"/>'
              f'</amqp-connection></broker-connections>')
    with plain_broker(tmp_path, "127.0.0.1", 61698, "rogue", "rogue", core_addition=mirror) as log:
        yield {"url": "tcp://127.0.0.1:61698", "log": log}


def test_a_broker_mirroring_with_application_credentials_cannot_delete_a_queue(estate, rogue_broker):
    """The real attacker: an Artemis broker of its own whose mirror to dc1 logs in as the application user. Were it
    admitted, the removal of a queue of the same name on its side would remove dc1's queue, with its messages."""
    dc1 = estate.dc("dc1")
    victim = f"victim.{uuid.uuid4().hex[:8]}"
    assert len(amqp.send(dc1.amqp_url, dc1.user, dc1.password, victim, 5, ca_path=dc1.ca_cert)) == 5
    rogue = ["--url", rogue_broker["url"], "--user", "rogue", "--password", "rogue"]
    for command in (["queue", "create", "--name", victim, "--address", victim, "--anycast", "--durable",
                     "--auto-create-address", "--silent"], ["queue", "delete", "--name", victim]):
        subprocess.run([artemis_cli(), *command, *rogue], check=True, capture_output=True, text=True, timeout=120,
                       cwd=REPO_ROOT)
    amqp.wait_for(lambda: victim not in dc1.queue_names() or "AMQ119023" in rogue_broker["log"].read_text(),
                  timeout=60, description="the rogue mirror removing the queue at dc1, or dc1 refusing its link")
    assert victim in dc1.queue_names() and dc1.message_count(victim) == 5


def test_a_partition_leaves_the_store_and_forward_queue_to_the_mirror(estate):
    """The sequence of the issue: dc1 and dc2 partitioned, messages waiting in dc1's store-and-forward queue, the
    application user trying to consume them there; after the partition heals, dc2 holds every message."""
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    snf, queue = MIRROR_QUEUE_PREFIX + "dc2_all", f"isolation.{uuid.uuid4().hex[:8]}"
    estate.testbed("partition", "dc1", "dc2")
    try:
        before = dc1.message_count(snf)
        assert len(amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 50, ca_path=dc1.ca_cert)) == 50
        amqp.wait_for(lambda: dc1.message_count(snf), lambda count: count >= before + 50, timeout=30)
        with pytest.raises(amqp.AmqpError):
            amqp.receive(dc1.amqp_url, dc1.user, dc1.password, snf, 50, timeout=5, ca_path=dc1.ca_cert)
        assert REFUSED in _cli(dc1, "consumer", f"queue://{snf}", "--message-count", "50", "--receive-timeout", "2000")
        assert dc1.message_count(snf) >= before + 50
    finally:
        estate.testbed("heal")
    amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 50, timeout=120,
                  description=f"the 50 messages of {queue} at dc2")
    # Consumed at dc1, they leave dc2 as well: the estate is as the next test expects it.
    assert len(amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, 50, ca_path=dc1.ca_cert)) == 50
    amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 0, timeout=60)


def _copies(node, queue):
    return node.management().list_messages(queue, queue)


def test_the_properties_only_the_estate_stamps_are_removed_from_what_a_client_sends(estate):
    """A bridge group: a producer that sets continuity_origin (the datacentre a copy came from, which the diverts
    leave alone) or continuity_source_id (a copy's identity) is replicated like any other, over AMQP and CORE; at the
    other datacentre the copies carry the estate's stamps, not the client's."""
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = f"relay.headers.{uuid.uuid4().hex[:8]}"
    forged = {ORIGIN_PROPERTY: "dc2", SOURCE_ID_PROPERTY: 7}
    assert len(amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 20, ca_path=dc1.ca_cert)) == 20
    assert len(amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 20, properties=forged, ca_path=dc1.ca_cert)) == 20
    output = _cli(dc1, "producer", f"queue://{queue}", "--message-count", "20", "--properties",
                  f'[{{"type":"string","key":"{ORIGIN_PROPERTY}","value":"dc2"}},'
                  f'{{"type":"long","key":"{SOURCE_ID_PROPERTY}","value":"7"}}]')
    assert "Produced: 20 messages" in output, output[-2000:]
    amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 60, timeout=60,
                  description=f"60 copies of {queue} at dc2")
    time.sleep(2)
    copies = _copies(dc2, queue)
    assert len(copies) == 60 and {copy.get(ORIGIN_PROPERTY) for copy in copies} == {"dc1"}, copies[:3]
    originals = _copies(dc1, queue)
    assert len(originals) == 60 and not any(ORIGIN_PROPERTY in message for message in originals), originals[:3]
    assert not any(copy.get(SOURCE_ID_PROPERTY) == 7 for copy in copies)
    # Nothing came back to dc1.
    assert dc1.message_count(queue) == 60


def test_forged_identities_change_nothing_across_a_swapover_of_a_full_state_bridge_group(dc1_active_at_the_end):
    """`books` (full_state on bridges): the swapover removes at the target the copies of what the source consumed, by
    identity. Messages whose producer forged an identity (another datacentre's origin, a source id already taken) are
    replicated and reconciled like the others: after the swapover dc2 holds exactly what dc1 had not consumed."""
    estate = dc1_active_at_the_end
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = f"books.forged.{uuid.uuid4().hex[:8]}"
    sent = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 30, id_prefix=f"{queue}-plain", ca_path=dc1.ca_cert)
    sent += amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 30, id_prefix=f"{queue}-origin",
                      properties={ORIGIN_PROPERTY: "dc2"}, ca_path=dc1.ca_cert)
    sent += amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 30, id_prefix=f"{queue}-id",
                      properties=lambda seq: {SOURCE_ID_PROPERTY: seq + 1}, ca_path=dc1.ca_cert)
    amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 90, timeout=60,
                  description=f"90 copies of {queue} at dc2")
    consumed = {message.id for message in amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, 45,
                                                       ca_path=dc1.ca_cert)}
    result = run_playbook("playbooks/swapover.yml", extra_args=["-e", json.dumps(
        {"swapover_source": "dc1", "swapover_target": "dc2", "swapover_groups": ["books"]})])
    assert result.rc == 0, result.output[-6000:]
    held = [message.id for message in amqp.receive(dc2.amqp_url, dc2.user, dc2.password, queue, 45, timeout=60,
                                                   ca_path=dc2.ca_cert)]
    assert sorted(held) == sorted(set(sent) - consumed), "lost or duplicated across the swapover"
    assert dc2.message_count(queue) == 0, "more copies at dc2 than dc1 held"
