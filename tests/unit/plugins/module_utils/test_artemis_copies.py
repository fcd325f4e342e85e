"""artemis_copies.Datacentre: which brokers of a datacentre it reads, and that it asks them all at once."""

import threading

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_copies import (
    BRIDGE_IDENTITY, Datacentre, DatacentreDark)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    AuthenticationRefused, BrokerNotReady, BrokerUnreachable)


class _Broker:
    """A broker's management API that answers status and queues; ``answer``: its status, or the error it raises.
    Each broker waits at ``together`` before answering: brokers asked one after another never let it open."""

    def __init__(self, name, answer, together, queues=("books.orders",)):
        self.name, self.answer, self.together, self.names = name, answer, together, queues

    def status(self):
        self.together.wait()
        if isinstance(self.answer, Exception):
            raise self.answer
        return {"live": self.answer}

    def queues(self):
        return [{"name": name, "address": name, "routingType": "ANYCAST"} for name in self.names]


def _datacentre(answers):
    together = threading.Barrier(len(answers), timeout=5)
    brokers = [_Broker(f"dc1-node{index}", answer, together) for index, answer in enumerate(answers, 1)]
    return brokers, Datacentre("dc1", brokers, lambda queue: True, BRIDGE_IDENTITY)


def test_every_broker_is_asked_at_once_and_only_the_live_ones_are_read():
    # A pair whose primary is powered off: asked in turn, the backup waited for the primary's request timeout.
    brokers, datacentre = _datacentre([BrokerUnreachable("dc1-node1: no answer"), True, False])
    assert datacentre.live == [brokers[1]]
    assert datacentre.queues == {"books.orders": [(brokers[1], brokers[1].queues()[0])]}


def test_a_datacentre_without_a_live_broker_that_answers_is_dark():
    with pytest.raises(DatacentreDark, match="datacentre dc1 has no live broker that answers"):
        _datacentre([BrokerUnreachable("dc1-node1: no answer"), BrokerNotReady("dc1-node2: starting")])


def test_a_refused_login_is_raised_not_taken_for_a_dark_broker():
    with pytest.raises(AuthenticationRefused):
        _datacentre([AuthenticationRefused("dc1-node1: login refused"), True])
