"""Staging until activation: the passive site holds the replicated copies but no client may consume or produce
them there, across a broker restart, until the site is activated; then its consumers get everything, once."""

import time
import uuid

import pytest

from support import amqp
from support.estate import run_playbook

MESSAGES = 300


def _refusals(consumer):
    return [detail for _when, kind, detail in consumer.events if kind == "disconnected"]


def test_a_consumer_at_the_passive_site_gets_nothing_until_activation_then_everything_once(converged_back):
    estate = converged_back
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = f"staged.{uuid.uuid4().hex[:8]}"

    def count_on(node):
        return amqp.queue_message_count(node.management_url, node.user, node.password, node.name, queue)

    sent = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, MESSAGES)
    amqp.wait_for(lambda: count_on(dc2), lambda count: count == MESSAGES, timeout=60)

    consumer = amqp.Consumer(dc2.amqp_url, dc2.user, dc2.password, queue, reconnect_delay=0.5)
    with consumer:
        time.sleep(5)
        assert consumer.received_ids() == []
        refusals = _refusals(consumer)
        assert refusals and all("AMQ229213" in reason or "not authorized" in reason.lower() for reason in refusals), \
            refusals[-3:]
        with pytest.raises(amqp.AmqpError):
            amqp.send(dc2.amqp_url, dc2.user, dc2.password, queue, 1)

        # The staged state is configuration, so it survives the broker going down and coming back.
        estate.testbed("kill", dc2.name)
        result = run_playbook("site.yml", extra_args=["--limit", dc2.name])
        assert result.rc == 0, result.output[-4000:]
        amqp.wait_for(lambda: count_on(dc2), lambda count: count == MESSAGES, timeout=120)
        time.sleep(5)
        assert consumer.received_ids() == []

        broker_pid = estate.broker_pids(dc2)
        activated_at = time.monotonic()
        result = run_playbook("site.yml", extra_args=["-e", f"replication_active_datacentre={dc2.dc}"])
        assert result.rc == 0, result.output[-4000:]
        assert result.recap()[dc2.name]["changed"] > 0
        assert estate.broker_pids(dc2) == broker_pid, "activation is a configuration reload, not a restart"
        amqp.wait_for(lambda: len(consumer.accepted_ids()), lambda count: count >= MESSAGES, timeout=60)
        estate.record_timing("staging_first_delivery_after_activation_s", time.monotonic() - activated_at)
        time.sleep(2)

    assert sorted(consumer.accepted_ids()) == sorted(sent)
    assert consumer.duplicates() == {}
    # dc2 is the active site now: its acknowledgements are mirrored back and empty dc1's copy too.
    amqp.wait_for(lambda: count_on(dc1), lambda count: count == 0, timeout=60)
