"""site.yml builds real brokers in simulated datacentres; dc1 (active) replicates messages, acknowledgements and
queue creation to every other datacentre (two in the default run, three in the systemd run)."""

import os
import shutil
import subprocess
import time
import uuid

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import queue_mbean
from support import amqp_clients as amqp
from support.estate import TESTBED_INVENTORY, generated_secrets, run_playbook


@pytest.mark.systemd  # three datacentres on the role's systemd path; Molecule's idempotence covers the plain nodes
def test_a_second_run_from_a_fresh_copy_of_the_inventory_changes_and_restarts_nothing(estate, tmp_path):
    """As under AWX or Automation Controller, where each job gets a new temporary copy of the inventory and its
    secrets from a vault credential: the PKI is kept outside the inventory (replication_tls_pki_dir), so nothing is
    generated again, changed or restarted, and no secret is printed, even verbose."""
    pids = {node.name: estate.broker_pids(node) for node in estate.nodes}
    job_inventory = tmp_path / "job-inventory"
    shutil.copytree(TESTBED_INVENTORY, job_inventory)
    secrets = job_inventory / "group_vars" / "all" / "secrets.yml"
    vault_password = tmp_path / "vault-password"
    vault_password.write_text("correct horse battery staple\n")
    subprocess.run(["ansible-vault", "encrypt", "--vault-password-file", str(vault_password), str(secrets)],
                   check=True, capture_output=True)
    assert secrets.read_text().startswith("$ANSIBLE_VAULT;")
    started = time.monotonic()
    result = run_playbook("site.yml", inventory=str(job_inventory),
                          extra_args=["--vault-password-file", str(vault_password), "-v"])
    estate.record_timing("site_idempotent_rerun_s", time.monotonic() - started)
    assert result.rc == 0, result.output[-6000:]
    recap = result.recap()
    # Every broker, and the controller that activates each address group at its owner.
    assert set(recap) == {node.name for node in estate.nodes} | {"localhost"}
    assert all(counters["changed"] == 0 and counters["failed"] == 0 for counters in recap.values()), \
        (recap, result.changed_tasks())
    assert {node.name: estate.broker_pids(node) for node in estate.nodes} == pids
    assert not os.path.exists(job_inventory / "pki")
    assert "no broker needed a restart" in result.output
    assert not [secret for secret in generated_secrets() if secret in result.output], "a password or key was logged"


def _queue(prefix="it"):
    return f"{prefix}.{uuid.uuid4().hex[:12]}"


def _browse(node, queue):
    return amqp.browse(node.amqp_url, node.user, node.password, queue, ca_path=node.ca_cert)


def _count(node, queue):
    return node.message_count(queue)


def test_persistent_messages_sent_to_dc1_appear_on_every_passive_dc_identically(estate):
    dc1, passives = estate.dc("dc1"), estate.passive()
    queue = _queue()
    started = time.monotonic()
    ids = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 2000,
                    properties={"origin": "dc1", "kind": "replication-test"}, ca_path=dc1.ca_cert)
    sent = time.monotonic()
    for node in passives:
        amqp.wait_for(lambda node=node: _count(node, queue), lambda count: count >= len(ids), timeout=120,
                      interval=0.1)
    estate.record_timing("replication_2000_messages_send_s", sent - started)
    estate.record_timing("replication_2000_messages_on_every_passive_dc_s", time.monotonic() - started)

    originals = {m.id: m for m in amqp.browse(dc1.amqp_url, dc1.user, dc1.password, queue, ca_path=dc1.ca_cert)}
    for node in passives:
        replicated = amqp.browse(node.amqp_url, node.user, node.password, queue, ca_path=node.ca_cert)
        copies = {m.id: m for m in replicated}
        assert len(replicated) == len(copies) == len(ids), f"a message arrived twice on {node.dc}"
        assert set(copies) == set(ids)
        for message_id in ids:
            assert copies[message_id].body == originals[message_id].body
            assert copies[message_id].properties == originals[message_id].properties
            assert copies[message_id].durable


def test_consuming_on_dc1_removes_the_same_messages_on_every_passive_dc(estate):
    dc1, passives = estate.dc("dc1"), estate.passive()
    queue = _queue()
    ids = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 300, ca_path=dc1.ca_cert)
    for node in passives:
        amqp.wait_for(lambda node=node: _count(node, queue), lambda count: count == len(ids), timeout=60)

    consumed = amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, 120, timeout=60, ca_path=dc1.ca_cert)
    remaining = set(ids) - {m.id for m in consumed}
    assert len(remaining) == 180

    for node in passives:
        left = amqp.wait_for(lambda node=node: amqp.browse(node.amqp_url, node.user, node.password, queue,
                                                           ca_path=node.ca_cert),
                             lambda messages: len(messages) == len(remaining), timeout=60)
        assert {m.id for m in left} == remaining, node.dc


def test_queue_created_at_runtime_on_dc1_appears_on_every_passive_dc_and_replicates(estate):
    dc1, passives = estate.dc("dc1"), estate.passive()
    queue = _queue("runtime")
    for node in passives:
        assert queue not in node.queue_names()

    ids = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 50, ca_path=dc1.ca_cert)  # auto-created on first send

    for node in passives:
        amqp.wait_for(node.queue_names,
                      lambda names: queue in names, timeout=60)
        copies = amqp.wait_for(lambda node=node: amqp.browse(node.amqp_url, node.user, node.password, queue,
                                                             ca_path=node.ca_cert),
                               lambda messages: len(messages) >= len(ids), timeout=60)
        assert sorted(m.id for m in copies) == sorted(ids), node.dc


def test_messages_only_group_lets_every_dc_consume_its_own_copy_exactly_once(estate):
    """The test bed replicates `inflow.` addresses as messages only (estate.yml)."""
    dc1, passives = estate.dc("dc1"), estate.passive()
    queue = _queue("inflow")
    ids = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 200, ca_path=dc1.ca_cert)
    for node in passives:
        amqp.wait_for(lambda node=node: _count(node, queue), lambda count: count == len(ids), timeout=60)

    on_dc1 = amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, len(ids), timeout=60, ca_path=dc1.ca_cert)
    assert sorted(m.id for m in on_dc1) == sorted(ids)
    amqp.wait_for(lambda: dc1.link("dc2_inflow")["backlog"],
                  lambda events: events == 0, timeout=60)
    for node in passives:
        assert _count(node, queue) == len(ids), f"acknowledgements on dc1 removed messages on {node.dc}"
        on_passive = amqp.receive(node.amqp_url, node.user, node.password, queue, len(ids), timeout=60,
                                  ca_path=node.ca_cert)
        assert sorted(m.id for m in on_passive) == sorted(ids), node.dc

    added_on_dc1 = dc1.management().read(queue_mbean(dc1.name, queue, queue), "MessagesAdded")
    assert (added_on_dc1, _count(dc1, queue)) == (len(ids), 0), "a message came back to dc1"


def test_partitioned_active_active_both_owners_converge_to_identical_queues(estate):
    """dc1 owns the default group, dc2 owns `east.` addresses (estate.yml): producers and consumers run at the
    owners, and every datacentre ends with the same contents of both queues."""
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    west, east = _queue("it"), _queue("east")
    west_ids = amqp.send(dc1.amqp_url, dc1.user, dc1.password, west, 200, ca_path=dc1.ca_cert)
    east_ids = amqp.send(dc2.amqp_url, dc2.user, dc2.password, east, 200, ca_path=dc2.ca_cert)
    consumed_west = amqp.receive(dc1.amqp_url, dc1.user, dc1.password, west, 50, timeout=60, ca_path=dc1.ca_cert)
    consumed_east = amqp.receive(dc2.amqp_url, dc2.user, dc2.password, east, 70, timeout=60, ca_path=dc2.ca_cert)
    expected = {west: set(west_ids) - {m.id for m in consumed_west},
                east: set(east_ids) - {m.id for m in consumed_east}}

    for node in estate.nodes:
        for queue, ids in expected.items():
            held = amqp.wait_for(lambda node=node, queue=queue: _browse(node, queue),
                                 lambda messages, ids=ids: {m.id for m in messages} == ids, timeout=60)
            assert len(held) == len(ids), f"duplicates of {queue} on {node.dc}"
