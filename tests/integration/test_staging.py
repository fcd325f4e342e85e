"""Staging until activation, and artemis_site: the passive site holds the replicated copies but no client may
consume or produce them there, across a broker restart, until the site is activated; then its consumers get
everything, once. Activation is fenced and survives a restart too."""

import time
import uuid

import pytest

from support import amqp_clients as amqp
from support.estate import run_module, run_playbook

MESSAGES = 300


def _site(estate, datacentre, state, check_mode=False, **extra):
    """artemis_site for the groups this test moves (`books`, on bridges, stays dc1's)."""
    return run_module("artemis_site", {**estate.site_args(datacentre, state), "groups": ["all", "east"], **extra},
                      check_mode=check_mode)


def _restart(estate, node):
    """SIGKILL the broker, then let the estate's own playbook start it again (broker.xml stages dc2)."""
    estate.testbed("kill", node.name)
    result = run_playbook("site.yml", extra_args=["--limit", node.name])
    assert result.rc == 0, result.output[-4000:]


def _refusals(consumer):
    return [detail for _when, kind, detail in consumer.events if kind == "disconnected"]


@pytest.fixture
def swapped_back(estate):
    """After the test: dc2 fenced again, then the estate's activation makes each group active where the inventory
    says (the test changed no setting: its restarts rewrote nothing)."""
    yield estate
    result, output = _site(estate, "dc2", "passive")
    assert not result.get("failed"), output[-3000:]
    result = run_playbook("tests/integration/playbooks/activate.yml")
    assert result.rc == 0, result.output[-4000:]


def test_a_consumer_at_the_passive_site_gets_nothing_until_activation_then_everything_once(swapped_back):
    estate = swapped_back
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = f"staged.{uuid.uuid4().hex[:8]}"

    def count_on(node):
        return node.message_count(queue)

    sent = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, MESSAGES, ca_path=dc1.ca_cert)
    amqp.wait_for(lambda: count_on(dc2), lambda count: count == MESSAGES, timeout=60)

    consumer = amqp.Consumer(dc2.amqp_url, dc2.user, dc2.password, queue, reconnect_delay=0.5, ca_path=dc2.ca_cert)
    with consumer:
        time.sleep(5)
        assert consumer.received_ids() == []
        refusals = _refusals(consumer)
        assert refusals and all("AMQ229213" in reason or "not authorized" in reason.lower() for reason in refusals), \
            refusals[-3:]
        with pytest.raises(amqp.AmqpError):
            amqp.send(dc2.amqp_url, dc2.user, dc2.password, queue, 1, ca_path=dc2.ca_cert)

        # Staging is in broker.xml, so it survives the broker going down and coming back.
        _restart(estate, dc2)
        amqp.wait_for(lambda: count_on(dc2), lambda count: count == MESSAGES, timeout=120)
        time.sleep(5)
        assert consumer.received_ids() == []

        # Fenced: dc1 is reachable and active, so dc2 is not activated, and nothing changes.
        result, output = _site(estate, "dc2", "active")
        assert result.get("failed"), output[-3000:]
        assert "refusing to activate dc2: already active at dc1 (broker dc1-node1: #)" in result["msg"]
        time.sleep(3)
        assert consumer.received_ids() == []

        # Controlled: fence dc1 (check mode first shows what would change, and changes nothing) ...
        dc1_consumer = amqp.Consumer(dc1.amqp_url, dc1.user, dc1.password, f"{queue}.dc1", reconnect_delay=0.5,
                                     ca_path=dc1.ca_cert)
        with dc1_consumer:
            dc1_consumer.wait_connected()
            result, output = _site(estate, "dc1", "passive", check_mode=True)
            assert result["changed"] and result["changed_settings"] == {dc1.name: ["#"]}, output[-3000:]
            assert dc1_consumer.connection_count == 1
            result, output = _site(estate, "dc1", "passive")
            # dc1 was active for `all` and already passive for `east` (dc2's group).
            assert result["changed"] and result["previous_state"] == "mixed", output[-3000:]
            assert result["closed_connections"][dc1.name] >= 1
            amqp.wait_for(lambda: _refusals(dc1_consumer), timeout=30)
        with pytest.raises(amqp.AmqpError):
            amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 1, ca_path=dc1.ca_cert)

        # ... then activate dc2: the waiting consumer gets every message, once; no restart was needed.
        broker_pid = estate.broker_pids(dc2)
        activated_at = time.monotonic()
        result, output = _site(estate, "dc2", "active")
        assert result["changed"] and result["previous_state"] == "mixed", output[-3000:]
        assert result["diff"]["after"][dc2.name]["#"]["consume"] == ["amq", "app"]
        amqp.wait_for(lambda: len(consumer.accepted_ids()), lambda count: count >= MESSAGES, timeout=60)
        estate.record_timing("staging_first_delivery_after_activation_s", time.monotonic() - activated_at)
        assert estate.broker_pids(dc2) == broker_pid
        result, output = _site(estate, "dc2", "active")
        assert not result["changed"], output[-3000:]
        time.sleep(2)

    assert sorted(consumer.accepted_ids()) == sorted(sent)
    assert consumer.duplicates() == {}
    # dc2 is the active site now: its acknowledgements are mirrored back and empty dc1's copy too.
    amqp.wait_for(lambda: count_on(dc1), lambda count: count == 0, timeout=60)

    # The activation lives in the broker's journal: it survives a restart although broker.xml still stages dc2.
    _restart(estate, dc2)
    amqp.send(dc2.amqp_url, dc2.user, dc2.password, queue, 5, ca_path=dc2.ca_cert)
    assert len(amqp.receive(dc2.amqp_url, dc2.user, dc2.password, queue, 5, ca_path=dc2.ca_cert)) == 5
