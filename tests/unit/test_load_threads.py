"""A load thread that crashes fails the test that ran it: the producer, the consumer and the measurement's threads
keep their error and raise it where the test stops them (a crash is a bug in the thread, not a lost connection,
which the threads count and survive)."""

import time

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import amqp_ledger as amqp
from support.measurement import Measurement


def _bug(*_args, **_kwargs):
    raise RuntimeError("a bug in the load thread")


# The crashed thread also ends with its exception, as an unhandled one (pytest warns of it): that is expected here.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("worker", [
    lambda: amqp.Producer("amqp://127.0.0.1:1", "user", "password", "queue", rate=10),
    lambda: amqp.Consumer("amqp://127.0.0.1:1", "user", "password", "queue"),
], ids=["producer", "consumer"])
def test_a_crashed_load_thread_fails_the_test_that_ran_it(monkeypatch, worker):
    monkeypatch.setattr(amqp, "connect", _bug)
    with pytest.raises(AssertionError, match="crashed: RuntimeError"):
        with worker():
            time.sleep(0.3)


def test_a_lost_connection_is_counted_not_raised():
    with amqp.Producer("amqp://127.0.0.1:1", "user", "password", "queue", rate=10, reconnect_delay=0.05,
                       connect_timeout=1) as producer:
        time.sleep(0.5)
    assert producer.connection_failures > 0


class _Node:
    name, dc = "dc1-node1", "dc1"
    management_url, amqp_url = "https://127.0.0.1:1/console/jolokia", "amqp://127.0.0.1:1"
    monitor_user, monitor_password, ca_cert = "monitor", "secret", None


class _Estate:
    nodes = [_Node()]

    @staticmethod
    def inventory_vars():
        return {"replication_address_groups": [{"name": "all"}], "replication_active_datacentre": "dc1"}


def test_a_crashed_measurement_thread_fails_the_test_that_ran_it(monkeypatch, tmp_path):
    from continuity_rpo import collector, prober
    monkeypatch.setattr(collector, "run", _bug)
    monkeypatch.setattr(prober, "run", lambda config, duration, stop: stop.wait(5))
    with pytest.raises(AssertionError, match="collector crashed: RuntimeError"):
        with Measurement(_Estate(), str(tmp_path), routes=[]):
            time.sleep(0.3)
