"""Least privilege: the measurement's monitoring user reads every count, the messages of its own probes only, and
changes nothing but its probes; the administrator keeps the operations. Against the test bed's real brokers."""

import uuid

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    OperationRefused, broker_mbean, queue_mbean)
from support import amqp_clients as amqp

PROBE = "continuity.probe"  # the catch-all group's probe address (the estate model's probe routes)


def test_the_monitoring_user_reads_every_count_no_message_and_changes_no_application_queue(estate):
    dc1 = estate.dc("dc1")
    queue = f"lp.{uuid.uuid4().hex[:8]}"
    amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 3, ca_path=dc1.ca_cert)
    monitor = dc1.management(dc1.monitor_user, dc1.monitor_password)

    assert monitor.status()["live"]
    assert queue in [row["name"] for row in monitor.queues()]
    assert monitor.message_count(queue, queue) == 3
    refused = {
        "list an application queue's messages": lambda: monitor.list_messages(queue, queue),
        "browse an application queue": lambda: monitor.browse(queue, queue),
        "list the mirror's events": lambda: monitor.list_messages("$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all",
                                                                  "$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all"),
        "remove an application queue's messages": lambda: monitor.remove_messages(queue, queue, ""),
        "pause an application queue": lambda: monitor.pause_queue(
            {"address": queue, "name": queue, "routingType": "ANYCAST"}),
        "reset a queue's message counter": lambda: monitor.execute(
            queue_mbean(dc1.name, queue, queue), "resetMessageCounter"),
        "force a failover": lambda: monitor.execute(broker_mbean(dc1.name), "forceFailover"),
    }
    for what, operation in refused.items():
        with pytest.raises(OperationRefused, match="not authorized"):
            operation()
        assert dc1.message_count(queue) == 3, what
    # Nor may it send to an application address.
    with pytest.raises(amqp.AmqpError):
        amqp.send(dc1.amqp_url, dc1.monitor_user, dc1.monitor_password, queue, 1, ca_path=dc1.ca_cert)
    # The administrator may.
    assert dc1.management().remove_messages(queue, queue, "") == 3


def test_the_monitoring_user_sends_and_removes_only_its_probes(estate):
    dc1 = estate.dc("dc1")
    monitor = dc1.management(dc1.monitor_user, dc1.monitor_password)
    sent = amqp.send(dc1.amqp_url, dc1.monitor_user, dc1.monitor_password, PROBE, 2, ca_path=dc1.ca_cert)
    assert len(sent) == 2
    assert len(monitor.list_messages(PROBE, PROBE)) >= 2
    assert monitor.remove_messages(PROBE, PROBE, "") >= 2
    assert dc1.message_count(PROBE) == 0
