"""artemis_bridge_reconcile against stub brokers that apply the filters it sends: the target ends up holding exactly
the identities the source still holds, in few calls, and nothing is removed when the source holds what the target
lacks."""

import re

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_copies import BRIDGE_IDENTITY
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import BrokerNotReady
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_copies import removal as _removal
from ansible_collections.continuity.artemis.plugins.modules.artemis_bridge_reconcile import run_module
from support.module_stub import Exited, StubModule
from support.queue_stub import StubQueues


def identity(message, datacentre):
    return BRIDGE_IDENTITY.of(message, datacentre)


def removal(held, kept, datacentre):
    return _removal(held, kept, datacentre, BRIDGE_IDENTITY)


GROUPS = [{"name": "all", "addresses": []},
          {"name": "books", "addresses": ["books."], "mode": "full_state", "engine": "bridge"}]
CLAUSE = re.compile(r"\(continuity_origin (IS NULL|= '([^']*)') AND continuity_source_id BETWEEN (\d+) AND (\d+)\)")


def _message(message_id, source_id=None, origin=None):
    properties = {}
    if source_id is not None:
        properties["continuity_source_id"] = source_id
    if origin is not None:
        properties["continuity_origin"] = origin
    return {"messageID": message_id, "userID": None, "properties": properties}


def _matches(message_filter, message):
    properties = message["properties"]
    for _origin_clause, origin, low, high in CLAUSE.findall(message_filter):
        if (properties.get("continuity_origin") == (origin or None)
                and properties.get("continuity_source_id") is not None
                and int(low) <= properties["continuity_source_id"] <= int(high)):
            return True
    return False


class StubBroker(StubQueues):
    matches = staticmethod(_matches)

    def __init__(self, name, datacentre, queues, live=True):
        super().__init__(queues)
        self.name, self.datacentre, self.live = name, datacentre, live

    def status(self):
        return {"live": self.live}

    def queues(self):
        return [{"name": name, "address": name, "routingType": "ANYCAST"} for name in self.contents]


def _run(source, target, groups=("books",), check_mode=False, source_fenced=True):
    brokers = {broker.name: broker for broker in (source, target)}
    params = {"brokers": [{"name": name, "datacentre": broker.datacentre} for name, broker in brokers.items()],
              "source_datacentre": source.datacentre, "target_datacentre": target.datacentre,
              "address_groups": GROUPS, "groups": list(groups), "source_fenced": source_fenced}
    module = StubModule(params, check_mode)
    with pytest.raises(Exited) as exited:
        run_module(module, client_for=lambda broker, _params: brokers[broker["name"]])
    return exited.value.args[0]


def test_the_identity_of_a_copy_is_its_origin_and_source_id_and_of_an_original_its_datacentre_and_id():
    assert identity(_message(900, 17, "dc1"), "dc2") == ("dc1", 17)
    assert identity(_message(17, 17), "dc1") == ("dc1", 17)
    assert identity(_message(33), "dc2") == ("dc2", 33)  # no stamp: its own id


def test_consumed_messages_become_one_range_per_run_between_messages_to_keep():
    held = [_message(100 + n, n, "dc1") for n in range(1, 11)]
    filters, unstamped = removal(held, {("dc1", 4), ("dc1", 9)}, "dc2")
    assert unstamped == []
    assert filters == ["(continuity_origin = 'dc1' AND continuity_source_id BETWEEN 1 AND 3) OR "
                       "(continuity_origin = 'dc1' AND continuity_source_id BETWEEN 5 AND 8) OR "
                       "(continuity_origin = 'dc1' AND continuity_source_id BETWEEN 10 AND 10)"]


def test_the_targets_own_originals_are_selected_by_a_null_origin_and_unstamped_ones_by_id():
    held = [_message(5, 5), _message(6, 6), _message(7)]
    filters, unstamped = removal(held, {("dc2", 6)}, "dc2")
    assert filters == ["(continuity_origin IS NULL AND continuity_source_id BETWEEN 5 AND 5)"]
    assert unstamped == [7]


def test_the_target_keeps_exactly_what_the_source_still_holds_in_every_queue():
    # dc1 produced 1..1000 on books.a and consumed all but 998..1000 and 500; it also holds a copy of dc2's 7 (an
    # original of dc2's last time as owner), which dc2 still has beside 8, consumed at dc1.
    source = StubBroker("dc1-node1", "dc1", {
        "books.a": [_message(n) for n in (500, 998, 999, 1000)] + [_message(2000, 7, "dc2")],
        "books.b": []})
    target = StubBroker("dc2-node1", "dc2", {
        "books.a": [_message(5000 + n, n, "dc1") for n in range(1, 1001)] + [_message(7, 7), _message(8, 8)],
        "books.b": [_message(7000 + n, n, "dc1") for n in range(1001, 1011)],
        "all.x": [_message(1)]})
    result = _run(source, target)
    assert sorted(identity(m, "dc2") for m in target.contents["books.a"]) == [
        ("dc1", 500), ("dc1", 998), ("dc1", 999), ("dc1", 1000), ("dc2", 7)]
    assert target.contents["books.b"] == [] and len(target.contents["all.x"]) == 1
    assert result["removed"] == 1000 - 4 + 1 + 10 and result["changed"]
    assert target.calls == [("filter", "books.a"), ("filter", "books.b")]  # every range of a queue at once


def test_check_mode_reports_what_it_would_remove_and_removes_nothing():
    source = StubBroker("dc1-node1", "dc1", {"books.a": [_message(3)]})
    target = StubBroker("dc2-node1", "dc2", {"books.a": [_message(10 + n, n, "dc1") for n in (1, 2, 3)]})
    result = _run(source, target, check_mode=True)
    assert result["removed"] == 2 and result["changed"] and target.calls == []


def test_nothing_is_removed_when_the_source_holds_a_message_the_target_lacks():
    source = StubBroker("dc1-node1", "dc1", {"books.a": [_message(3), _message(4)]})
    target = StubBroker("dc2-node1", "dc2", {"books.a": [_message(10 + n, n, "dc1") for n in (1, 2, 3)]})
    with pytest.raises(AssertionError, match=r"books.a: dc1 holds 1 messages that dc2 does not"):
        _run(source, target)
    assert target.calls == []


def test_groups_without_a_full_state_bridge_group_change_nothing():
    source = StubBroker("dc1-node1", "dc1", {"books.a": []})
    target = StubBroker("dc2-node1", "dc2", {"books.a": [_message(1, 1, "dc1")]})
    result = _run(source, target, groups=["all"])
    assert result == {"changed": False, "queues": [], "removed": 0} and target.calls == []


def test_while_the_source_is_active_only_what_it_consumed_goes_and_a_range_never_spans_what_it_still_holds():
    # dc1 holds 5 (its copy still on the bridge), 9 (being delivered) and 12 (not at dc2 yet); dc2 holds copies of
    # 1..4 and 6..10, so 1-4, 6-8 and 10 go, and the copy of 5 arriving later is not in any range.
    source = StubBroker("dc1-node1", "dc1", {"books.a": [_message(5), _message(12)]})
    source.in_delivery = {"books.a": [_message(9)]}
    target = StubBroker("dc2-node1", "dc2", {"books.a": [_message(100 + n, n, "dc1") for n in (1, 2, 3, 4, 6, 7, 8,
                                                                                               9, 10)]})
    result = _run(source, target, source_fenced=False)
    assert sorted(identity(m, "dc2") for m in target.contents["books.a"]) == [("dc1", 9)]
    assert result["removed"] == 8
    arriving = _message(105, 5, "dc1")
    assert not any(_matches(f, arriving) for f in removal(
        [_message(100 + n, n, "dc1") for n in (1, 2, 3, 4, 6)], {("dc1", 5)}, "dc2")[0])


def test_a_fenced_source_with_a_delivery_not_yet_acknowledged_keeps_its_copy():
    source = StubBroker("dc1-node1", "dc1", {"books.a": []})
    source.in_delivery = {"books.a": [_message(2)]}
    target = StubBroker("dc2-node1", "dc2", {"books.a": [_message(100 + n, n, "dc1") for n in (1, 2, 3)]})
    _run(source, target)
    assert [identity(m, "dc2") for m in target.contents["books.a"]] == [("dc1", 2)]


def test_after_a_failover_the_copies_of_what_the_target_had_consumed_do_not_count_as_missing():
    # dc1 consumed its 1 and 2 before it was lost; dc2, active since the failover, still holds their copies and a
    # copy of 3, which dc1 holds too. Swapping back to dc1 brings nothing back and needs nothing from the bridges.
    source = StubBroker("dc2-node1", "dc2", {"books.a": [_message(100 + n, n, "dc1") for n in (1, 2, 3)]})
    target = StubBroker("dc1-node1", "dc1", {"books.a": [_message(3, 3)]})
    result = _run(source, target)
    assert [identity(m, "dc1") for m in target.contents["books.a"]] == [("dc1", 3)]
    assert result["queues"][0]["consumed_at_target_before"] == 2 and result["removed"] == 0


class _StartingBroker(StubBroker):
    def status(self):
        raise BrokerNotReady(f"broker {self.name} is starting")


@pytest.mark.parametrize("source_fenced", [True, False])
def test_a_datacentre_whose_broker_is_still_starting_is_a_refusal_that_changes_nothing(source_fenced):
    # Chaos 3 x 1 seed 6: the periodic reconcile.yml started as dc1's only broker was killed; restarted, it was still
    # loading its journal when the module looked, and the module failed ("what was done so far is in the result")
    # where it had read and changed nothing: a refusal, in the collection's words.
    source = _StartingBroker("dc1-node1", "dc1", {"books.a": [_message(3)]})
    target = StubBroker("dc2-node1", "dc2", {"books.a": [_message(10 + n, n, "dc1") for n in (1, 2, 3)]})
    with pytest.raises(AssertionError, match=r"'msg': 'Refused, nothing changed: datacentre dc1 has no live broker"):
        _run(source, target, source_fenced=source_fenced)
    assert target.calls == []
