"""site.yml builds real brokers in two simulated datacentres and replicates messages and acknowledgements."""

import time
import uuid

from support import amqp
from support.estate import run_playbook, generated_secrets


def test_site_converges_and_a_second_run_changes_nothing(estate):
    started = time.monotonic()
    result = run_playbook("site.yml")
    estate.record_timing("site_idempotent_rerun_s", time.monotonic() - started)
    assert result.rc == 0, result.output[-6000:]
    recap = result.recap()
    assert set(recap) == {node.name for node in estate.nodes}
    assert all(counters["changed"] == 0 and counters["failed"] == 0 for counters in recap.values()), recap
    assert not [secret for secret in generated_secrets() if secret in result.output], "a password was logged"


def _queue():
    return "it." + uuid.uuid4().hex[:12]


def _browse_ids(node, queue, expected):
    """Browse a queue until it holds `expected` messages (or time runs out); return the messages."""
    return amqp.wait_for(lambda: amqp.browse(node.amqp_url, node.user, node.password, queue),
                         lambda messages: len(messages) >= expected, timeout=60)


def test_persistent_messages_sent_to_dc1_appear_on_dc2_identically(estate):
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = _queue()
    started = time.monotonic()
    ids = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 2000,
                    properties={"origin": "dc1", "kind": "replication-test"})
    sent = time.monotonic()
    amqp.wait_for(lambda: amqp.queue_message_count(dc2.management_url, dc2.user, dc2.password, dc2.name, queue),
                  lambda count: count >= len(ids), timeout=120, interval=0.1)
    estate.record_timing("replication_2000_messages_send_s", sent - started)
    estate.record_timing("replication_2000_messages_on_dc2_s", time.monotonic() - started)
    replicated = amqp.browse(dc2.amqp_url, dc2.user, dc2.password, queue)

    originals = {m.id: m for m in amqp.browse(dc1.amqp_url, dc1.user, dc1.password, queue)}
    copies = {m.id: m for m in replicated}
    assert len(replicated) == len(copies) == len(ids), "a message arrived twice on dc2"
    assert set(copies) == set(ids)
    for message_id in ids:
        assert copies[message_id].body == originals[message_id].body
        assert copies[message_id].properties == originals[message_id].properties
        assert copies[message_id].durable


def test_consuming_on_dc1_removes_the_same_messages_on_dc2(estate):
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = _queue()
    ids = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 300)
    _browse_ids(dc2, queue, len(ids))

    consumed = amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, 120, timeout=60)
    remaining = set(ids) - {m.id for m in consumed}
    assert len(remaining) == 180

    left_on_dc2 = amqp.wait_for(lambda: amqp.browse(dc2.amqp_url, dc2.user, dc2.password, queue),
                                lambda messages: len(messages) == len(remaining), timeout=60)
    assert {m.id for m in left_on_dc2} == remaining


def test_queue_created_at_runtime_on_dc1_appears_on_dc2_and_replicates(estate):
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = "runtime." + uuid.uuid4().hex[:12]
    assert queue not in amqp.queue_names(dc2.management_url, dc2.user, dc2.password, dc2.name)

    ids = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 50)  # auto-created on first send

    amqp.wait_for(lambda: amqp.queue_names(dc2.management_url, dc2.user, dc2.password, dc2.name),
                  lambda names: queue in names, timeout=60)
    assert {m.id for m in _browse_ids(dc2, queue, len(ids))} == set(ids)
