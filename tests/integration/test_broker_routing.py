"""The broker's own routing from the inventory (broker_queues, broker_diverts, broker_connectors, broker_bridges), and
the estate's exports (replication_external_brokers), towards a plain Artemis broker outside the estate that the test
starts itself on the test bed's controller with nothing but Artemis's defaults and a user: a divert and a core bridge
carry an address's messages there (dc1's connector `outside`, the test bed inventory's group_vars/dc1.yml); queues,
diverts and bridges added and removed in the inventory are reloaded, the broker running on; and every datacentre
exports what was produced there under the bridged group `relay` (group_vars/all/estate.yml) to the same broker."""

import json
import os
import shutil
import subprocess
import time
import uuid

import pytest
import yaml

from support import amqp_clients as amqp
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    ORIGIN_PROPERTY, exports as estate_exports)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import broker_mbean
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report
from support.estate import CONTROLLER, REPO_ROOT, TESTBED_INVENTORY, artemis_cli, cli_message_count, run_playbook
from support.plain_broker import plain_broker


def _inventory_file(*path):
    with open(os.path.join(TESTBED_INVENTORY, *path)) as handle:
        return yaml.safe_load(handle)


def _outside_broker_settings():
    """The external broker of the inventory (replication_external_brokers) and dc1's connector `outside`: one
    broker, on the controller."""
    external = _inventory_file("group_vars", "all", "estate.yml")["replication_external_brokers"][0]
    connector = next(connector for connector in _inventory_file("group_vars", "dc1.yml")["broker_connectors"]
                     if connector["name"] == "outside")
    assert external["hosts"] == [{"host": connector["host"], "port": connector["port"]}] \
        and connector["host"] == CONTROLLER, "the connector `outside` and the external broker must be one, on the controller"
    password = _inventory_file("group_vars", "all", "secrets.yml")["outside_broker_password"]
    return external, connector["port"], password


@pytest.fixture(scope="module")
def outside_broker(tmp_path_factory):
    """A plain Artemis broker where the inventory's external broker `outside` is: `artemis create` with a user (the
    test bed's generated password) and its defaults, on one port (core, AMQP and the rest, no TLS)."""
    external, port, password = _outside_broker_settings()
    directory = tmp_path_factory.mktemp("outside")
    # The test reads what arrived over AMQP with TLS (its client sends a password over TLS only).
    with plain_broker(directory, CONTROLLER, port, external["user"], password, amqps_port=port + 1):
        yield {"name": external["name"], "host": CONTROLLER, "port": port, "user": external["user"],
               "password": password, "url": f"tcp://{CONTROLLER}:{port}",
               "amqp_url": f"amqps://{CONTROLLER}:{port + 1}", "ca_cert": str(directory / "ca.pem")}


def _create_queue_outside(outside_broker, address):
    """A core bridge forwards only to an address that has a queue: the outside broker's application creates it."""
    subprocess.run([artemis_cli(), "queue", "create", "--url", outside_broker["url"], "--user", outside_broker["user"],
                    "--password", outside_broker["password"], "--name", address, "--address", address, "--anycast",
                    "--durable", "--auto-create-address", "--silent"], check=True, capture_output=True, text=True,
                   timeout=120, cwd=REPO_ROOT)


def _site_with(inventory, dc1_vars):
    (inventory / "host_vars").mkdir(exist_ok=True)
    (inventory / "host_vars" / "dc1-node1.yml").write_text(json.dumps(dc1_vars))
    result = run_playbook("site.yml", inventory=str(inventory))
    assert result.rc == 0, result.output[-6000:]
    return result


# Three site.yml runs (about 130 s): make drills, to keep make test within its budget; the export test below keeps a
# core bridge to the outside broker in make test.
@pytest.mark.drill
def test_a_divert_and_a_bridge_carry_an_address_to_a_broker_outside_the_estate(reverted_if_failed, outside_broker,
                                                                               tmp_path):
    estate = reverted_if_failed
    dc1 = estate.dc("dc1")
    address = f"outside.{uuid.uuid4().hex[:8]}"
    outbound = f"{address}.out"
    routing = {
        "broker_queues": [{"name": address}, {"name": outbound}],
        "broker_diverts": [{"name": "copy-to-outside", "address": address, "forwarding_address": outbound}],
        "broker_bridges": [{"name": "to-outside", "queue": outbound, "forwarding_address": address,
                            "routing_type": "anycast", "connectors": ["outside"],
                            "user": outside_broker["user"], "password": outside_broker["password"]}],
    }
    inventory = tmp_path / "inventory"
    shutil.copytree(TESTBED_INVENTORY, inventory)
    _create_queue_outside(outside_broker, address)

    # The connector was there from the start: queues, divert and bridge are reloaded, the broker running on.
    pid = estate.broker_pids(dc1)
    _site_with(inventory, routing)
    assert estate.broker_pids(dc1) == pid
    assert "copy-to-outside" in dc1.management().read(broker_mbean(dc1.name), "DivertNames")
    configured = estate.exec(dc1.name, "cat", "/var/opt/artemis/dc1-node1/etc/broker.xml")
    assert outside_broker["password"] not in configured, "the bridge's password is in broker.xml in clear"

    amqp.send(dc1.amqp_url, dc1.user, dc1.password, address, 20, ca_path=dc1.ca_cert)
    outside = (outside_broker["url"], outside_broker["user"], outside_broker["password"])
    amqp.wait_for(lambda: cli_message_count(*outside, address), lambda count: count == 20, timeout=60,
                  description=f"20 messages of {address} at the outside broker")
    # The divert copied, so dc1 keeps its own 20; the bridge's queue is empty once the outside broker has them.
    assert dc1.message_count(address) == 20
    amqp.wait_for(lambda: dc1.message_count(outbound), lambda count: count == 0, timeout=30,
                  description=f"{outbound} drained by the bridge")

    # Back to the inventory's own settings: divert and bridge removed, the broker running on, and the removed divert
    # does not come back from the journal. Artemis keeps the removed queues and their messages (no
    # config-delete-queues), so what is sent now stays at dc1.
    _site_with(inventory, {})
    assert estate.broker_pids(dc1) == pid
    amqp.wait_for(lambda: dc1.management().read(broker_mbean(dc1.name), "DivertNames"),
                  lambda names: "copy-to-outside" not in names, timeout=30, description="the divert removed")
    amqp.wait_for(lambda: dc1.management().read(broker_mbean(dc1.name), "BridgeNames"),
                  lambda names: "to-outside" not in names, timeout=30, description="the bridge removed")
    amqp.send(dc1.amqp_url, dc1.user, dc1.password, address, 5, ca_path=dc1.ca_cert)
    amqp.wait_for(lambda: dc1.message_count(address), lambda count: count == 25, timeout=30,
                  description=f"25 messages on {address} at dc1")
    assert dc1.message_count(outbound) == 0
    assert cli_message_count(*outside, address) == 20


def test_every_datacentre_exports_what_it_took_of_a_bridged_address_to_a_broker_outside_the_estate(
        estate, outside_broker):
    groups = estate.inventory_vars()["replication_address_groups"]
    datacentres = sorted({node.dc for node in estate.nodes})
    [export] = estate_exports(groups, [_outside_broker_settings()[0]], datacentres, "dc1")
    address = export["address"]
    _create_queue_outside(outside_broker, address)
    nodes = [estate.dc(name) for name in datacentres]
    run = uuid.uuid4().hex[:8]
    produced = dict((node.dc, amqp.send(node.amqp_url, node.user, node.password, address, 30,
                                        id_prefix=f"{address}-{run}-{node.dc}",
                                        ca_path=node.ca_cert)) for node in nodes)
    everything = sorted(message_id for ids in produced.values() for message_id in ids)
    outside = (outside_broker["url"], outside_broker["user"], outside_broker["password"])
    amqp.wait_for(lambda: cli_message_count(*outside, address), lambda count: count >= len(everything), timeout=120,
                  description=f"{len(everything)} messages of {address} at the outside broker")
    for node in nodes:
        amqp.wait_for(lambda: broker_report(node.management())["exports"],
                      lambda links: [(link["name"], link["connected"], link["backlog"]) for link in links]
                      == [(export["name"], True, 0)], timeout=60,
                      description=f"{node.name}'s export {export['name']} connected and drained")
    # The copies that crossed between datacentres carry their origin: no datacentre exports them again.
    time.sleep(10)
    assert cli_message_count(*outside, address) == len(everything)
    received = amqp.receive(outside_broker["amqp_url"], outside_broker["user"], outside_broker["password"], address,
                            len(everything), timeout=60, ca_path=outside_broker["ca_cert"])
    assert sorted(message.id for message in received) == everything
    origins = dict((message.id, message.properties.get(ORIGIN_PROPERTY)) for message in received)
    assert all(origins[message_id] == datacentre for datacentre, ids in produced.items() for message_id in ids)
    # Inside the estate the group carried them as ever: every datacentre holds each once.
    for node in nodes:
        held = amqp.receive(node.amqp_url, node.user, node.password, address, len(everything), timeout=60,
                            ca_path=node.ca_cert)
        assert sorted(message.id for message in held) == everything, node.name
