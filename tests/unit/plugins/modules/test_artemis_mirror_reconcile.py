"""artemis_mirror_reconcile against stub brokers that apply the filters it sends: every other datacentre drops the
durable copies of what the source no longer holds, known by the mirror's identity (node ID of the producing broker,
its id there), and keeps its own originals, non-durable messages and what the source still holds."""

import re

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_copies import MIRROR_IDENTITY, removal
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import BrokerUnreachable
from ansible_collections.continuity.artemis.plugins.modules.artemis_mirror_reconcile import run_module
from support.module_stub import Exited, StubModule
from support.queue_stub import StubQueues

GROUPS = [{"name": "all", "addresses": []}, {"name": "east", "addresses": ["east."], "owner": "dc2"},
          {"name": "books", "addresses": ["books."], "mode": "full_state", "engine": "bridge"}]
CLAUSE = re.compile(r"""\("x-opt-amq-bkr-id" (IS NULL|= '([^']*)') AND "x-opt-amq-mr-id" BETWEEN (\d+) AND (\d+)\)""")
NODES = {"dc1": "dc1+", "dc2": "dc2+", "dc3": "dc3+"}


def _message(message_id, mirror_id=None, node=None, durable=True):
    properties = {}
    if mirror_id is not None:
        properties.update({"x-opt-amq-mr-id": mirror_id, "x-opt-amq-bkr-id": node})
    return {"messageID": message_id, "userID": None, "durable": durable, "properties": properties}


def _copies(node, ids, first_local_id=1000):
    return [_message(first_local_id + n, n, node) for n in ids]


def _matches(message_filter, message):
    properties = message["properties"]
    for _clause, node, low, high in CLAUSE.findall(message_filter):
        if (properties.get("x-opt-amq-bkr-id") == (node or None) and "x-opt-amq-mr-id" in properties
                and int(low) <= properties["x-opt-amq-mr-id"] <= int(high)):
            return True
    return False


class StubBroker(StubQueues):
    matches = staticmethod(_matches)

    def __init__(self, datacentre, queues, live=True, answers=True):
        super().__init__(queues)
        self.name, self.datacentre, self.live, self.answers = datacentre + "-node1", datacentre, live, answers
        self.relaying = {}  # mirror connection name -> [events it still holds, one count per look]

    def status(self):
        if not self.answers:
            raise BrokerUnreachable("%s does not answer" % self.name)
        return {"live": self.live, "node_id": NODES[self.datacentre]}

    def queues(self):
        mirrors = [{"name": "$ACTIVEMQ_ARTEMIS_MIRROR_" + name, "address": "$ACTIVEMQ_ARTEMIS_MIRROR_" + name,
                    "routingType": "ANYCAST", "internalQueue": "true",
                    "messageCount": str(counts.pop(0) if len(counts) > 1 else counts[0])}
                   for name, counts in self.relaying.items()]
        return [{"name": name, "address": name, "routingType": "ANYCAST", "messageCount": str(len(messages))}
                for name, messages in self.contents.items()] + mirrors

    def durable_message_counts(self):
        return {name: len([m for m in messages if m["durable"]]) for name, messages in self.contents.items()}


class Clock:
    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def _run(*brokers, source="dc1", groups=("all",), check_mode=False, clock=None):
    by_name = {broker.name: broker for broker in brokers}
    params = {"brokers": [{"name": broker.name, "datacentre": broker.datacentre} for broker in brokers],
              "source_datacentre": source, "address_groups": GROUPS, "groups": list(groups), "timeout": 30}
    with pytest.raises(Exited) as exited:
        run_module(StubModule(params, check_mode), client_for=lambda broker, _params: by_name[broker["name"]],
                   clock=clock or Clock())
    return exited.value.args[0]


def _identities(broker, queue):
    return sorted(MIRROR_IDENTITY.of(message, NODES[broker.datacentre]) for message in broker.contents[queue])


def test_a_copy_is_known_by_its_producers_node_and_id_there_and_filters_quote_the_mirrors_property_names():
    assert MIRROR_IDENTITY.of(_message(900, 17, "dc1+"), "dc2+") == ("dc1+", 17)
    assert MIRROR_IDENTITY.of(_message(17), "dc1+") == ("dc1+", 17)
    filters, originals = removal(_copies("dc1+", range(1, 6)) + [_message(7)], {("dc1+", 3)}, "dc2+",
                                 MIRROR_IDENTITY)
    assert filters == ['("x-opt-amq-bkr-id" = \'dc1+\' AND "x-opt-amq-mr-id" BETWEEN 1 AND 2) OR '
                       '("x-opt-amq-bkr-id" = \'dc1+\' AND "x-opt-amq-mr-id" BETWEEN 4 AND 5)']
    assert originals == [7]


def test_every_other_datacentre_drops_the_durable_copies_the_source_no_longer_holds():
    # dc1 (the source, fenced) still holds its originals 8 and 9 and a copy of dc2's 40. dc3 got dc2's events only
    # through dc1 and kept copies of 1..7 whose acknowledgements never came, and dc2 one of 5.
    source = StubBroker("dc1", {"q": [_message(8), _message(9), _message(2040, 40, "dc2+")], "east.q": []})
    target = StubBroker("dc2", {"q": _copies("dc1+", (5, 8, 9)) + [_message(40)], "east.q": []})
    third = StubBroker("dc3", {"q": _copies("dc1+", range(1, 10)) + _copies("dc2+", [40], 3000),
                               "east.q": _copies("dc2+", [1])})
    result = _run(source, target, third)
    assert _identities(target, "q") == [("dc1+", 8), ("dc1+", 9), ("dc2+", 40)]
    assert _identities(third, "q") == [("dc1+", 8), ("dc1+", 9), ("dc2+", 40)]
    assert third.contents["east.q"] == _copies("dc2+", [1])  # another group: not this swapover's
    assert result["removed"] == 1 + 7 and result["changed"] and result["unanswered"] == []
    assert [(entry["datacentre"], entry["removed"]) for entry in result["queues"]] == [("dc2", 1), ("dc3", 7)]
    assert third.calls == [("filter", "q")]  # one filter for the queue's ranges


def test_originals_and_non_durable_copies_stay_and_queues_in_step_are_not_read():
    # dc2's own 3 (never received by dc1, or consumed there: it cannot tell) and a non-durable copy (dc1 may have
    # lost it in a crash) stay; a queue with as many durable messages as the source's is left alone.
    source = StubBroker("dc1", {"q": [], "r": [_message(1)]})
    target = StubBroker("dc2", {"q": [_message(3), _message(1005, 5, "dc1+", durable=False),
                                      _message(1006, 6, "dc1+")],
                                "r": _copies("dc1+", [1])})
    result = _run(source, target)
    assert _identities(target, "q") == [("dc1+", 5), ("dc2+", 3)]
    assert [entry["queue"] for entry in result["queues"]] == ["q"] and result["removed"] == 1


def test_check_mode_removes_nothing_and_a_silent_datacentre_is_named():
    source = StubBroker("dc1", {"q": []})
    target = StubBroker("dc2", {"q": _copies("dc1+", (1, 2))})
    silent = StubBroker("dc3", {"q": _copies("dc1+", (1, 2))}, answers=False)
    result = _run(source, target, silent, check_mode=True)
    assert result["removed"] == 2 and target.calls == [] and result["unanswered"] == ["dc3"]


def test_groups_with_no_full_state_mirror_change_nothing():
    source = StubBroker("dc1", {"books.a": []})
    target = StubBroker("dc2", {"books.a": _copies("dc1+", (1,))})
    result = _run(source, target, groups=["books"])
    assert result == {"changed": False, "queues": [], "removed": 0, "unanswered": []} and target.calls == []


def test_it_waits_until_the_old_owner_has_relayed_what_it_holds_for_the_others_and_not_for_a_silent_one():
    # dc2 is the source; dc1, the star's centre, still holds 3 events for dc3 when its queues are first read, 1 at
    # the first look, none a second later (and 50 for dc4, which does not answer, 9 of another group).
    source = StubBroker("dc2", {"q": []})
    hub = StubBroker("dc1", {"q": []})
    hub.relaying = {"dc3_all": [3, 1, 0], "dc4_all": [50], "dc3_east": [9]}
    third = StubBroker("dc3", {"q": _copies("dc2+", (1, 2))})
    silent = StubBroker("dc4", {"q": []}, answers=False)
    clock = Clock()
    result = _run(source, hub, third, silent, source="dc2", clock=clock)
    assert clock.now == 1 and third.contents["q"] == [] and result["unanswered"] == ["dc4"]


def test_a_relay_that_does_not_drain_fails_before_anything_is_removed():
    source = StubBroker("dc2", {"q": []})
    hub = StubBroker("dc1", {"q": []})
    hub.relaying = {"dc3_all": [4]}
    third = StubBroker("dc3", {"q": _copies("dc2+", (1, 2))})
    with pytest.raises(AssertionError, match=r"still hold events for other datacentres after 30s: \{'dc1': 4\}"):
        _run(source, hub, third, source="dc2")
    assert third.calls == []
