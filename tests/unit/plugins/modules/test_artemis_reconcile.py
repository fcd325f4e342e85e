"""artemis_reconcile against stub brokers: what it does with each kept message, and that it never duplicates."""

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import BrokerUnreachable
from ansible_collections.continuity.artemis.plugins.modules.artemis_reconcile import identity_filter, run_module
from support.module_stub import Exited, StubModule

SOURCE_NODE = "node-dc1"


def _kept(message_id, address, source_id, node=SOURCE_NODE):
    properties = {"_AMQ_ORIG_ADDRESS": address}
    if source_id is not None:
        properties.update({"x-opt-amq-bkr-id": node, "x-opt-amq-mr-id": source_id})
    return {"messageID": message_id, "userID": None, "properties": properties}


class StubBroker:
    """A broker as the module sees it: status, queues with message ids (source) or identities (target), and the
    kept queue; it records what the module changed."""

    def __init__(self, name, node_id, queues, kept=(), reachable=True):
        self.name, self.node_id, self.reachable = name, node_id, reachable
        self.contents = {queue: list(ids) for queue, ids in queues.items()}  # queue -> ids or (node, id) pairs
        self.kept = list(kept)
        self.calls = []

    def status(self):
        if not self.reachable:
            raise BrokerUnreachable("%s is unreachable" % self.name)
        return {"live": True, "node_id": self.node_id}

    def queue_names(self):
        return sorted(self.contents) + ["continuity.kept"]

    def queues(self):
        return [{"name": name, "address": name, "routingType": "ANYCAST"} for name in self.contents]

    def browse(self, address, queue, message_filter="", routing_type="anycast"):
        if queue == "continuity.kept":
            return list(self.kept)
        return [{"messageID": message_id, "userID": None, "properties": {}} for message_id in self.contents[queue]]

    def count_messages(self, address, queue, message_filter="", group_by=None, routing_type="anycast"):
        return sum(1 for entry in self.contents[queue] if identity_filter(*entry) == message_filter)

    def _take(self, message_id):
        message = next(m for m in self.kept if m["messageID"] == message_id)
        return message, (message["properties"]["x-opt-amq-bkr-id"], int(message["properties"]["x-opt-amq-mr-id"]))

    def move_message(self, address, queue, message_id, to_queue):
        message, identity = self._take(message_id)
        self.kept.remove(message)
        self.contents[to_queue].append(identity)
        self.calls.append(("move", message_id, to_queue))

    def copy_message(self, address, queue, message_id, to_queue):
        self.contents[to_queue].append(self._take(message_id)[1])
        self.calls.append(("copy", message_id, to_queue))

    def remove_message(self, address, queue, message_id):
        self.kept.remove(self._take(message_id)[0])
        self.calls.append(("remove", message_id))


def _reconcile(brokers, check_mode=False):
    params = {"datacentre": "dc2", "brokers": [{"name": b.name, "datacentre": dc} for dc, b in brokers]}
    by_name = dict((b.name, b) for _dc, b in brokers)
    with pytest.raises(Exited) as outcome:
        run_module(StubModule(params, check_mode), client_for=lambda broker, _params: by_name[broker["name"]])
    return outcome.value.args[0]


def _estate(source_reachable=True):
    source = StubBroker("dc1-node1", SOURCE_NODE, {"orders": [11, 12], "emptied": [], "only-dc1": [30]},
                        reachable=source_reachable)
    target = StubBroker("dc2-node1", "node-dc2", {"orders": [(SOURCE_NODE, 12)], "emptied": []}, kept=[
        _kept(101, "orders", 11),      # the source holds it: into orders
        _kept(102, "orders", 12),      # already in orders (an earlier run moved it): no second copy
        _kept(103, "emptied", 20),     # consumed at the source
        _kept(104, "new-queue", 40),   # no queue at the target yet
        _kept(105, "orders", None),    # not from a mirror
    ])
    return source, target


def test_each_kept_message_is_put_where_the_source_holds_it_discarded_or_left_with_a_reason():
    source, target = _estate()
    result = _reconcile([("dc1", source), ("dc2", target)])
    assert result["kept"] == 5 and result["changed"]
    assert [(r["kept_message_id"], r["queue"]) for r in result["reconciled"]] == [(101, "orders")]
    assert [(d["kept_message_id"], d["reason"]) for d in result["discarded"]] == [
        (102, "already in every queue"), (103, "consumed at the source")]
    assert [(p["kept_message_id"], p["reason"]) for p in result["pending"]] == [
        (104, "its address has no queue yet"), (105, "not delivered by a mirror (no source identity)")]
    assert target.contents["orders"] == [(SOURCE_NODE, 12), (SOURCE_NODE, 11)]
    assert source.calls == []
    again = _reconcile([("dc1", source), ("dc2", target)])
    assert not again["changed"] and again["kept"] == 2 and len(again["pending"]) == 2


def test_check_mode_decides_the_same_and_changes_nothing():
    source, target = _estate()
    result = _reconcile([("dc1", source), ("dc2", target)], check_mode=True)
    assert len(result["reconciled"]) == 1 and len(result["discarded"]) == 2
    assert target.calls == [] and len(target.kept) == 5


def test_nothing_is_decided_while_the_source_does_not_answer():
    source, target = _estate(source_reachable=False)
    result = _reconcile([("dc1", source), ("dc2", target)])
    assert not result["changed"] and target.calls == []
    assert {p["reason"] for p in result["pending"]} >= {
        "its source broker (node %s) is not a live broker that answers" % SOURCE_NODE}


def test_a_silent_broker_of_the_datacentre_is_left_out_and_named():
    source, target = _estate()
    down = StubBroker("dc2-node2", "node-dc2", {}, reachable=False)
    result = _reconcile([("dc1", source), ("dc2", target), ("dc2", down)])
    assert result["not_answering"] == ["dc2-node2 (dc2-node2 is unreachable)"]
    assert len(result["reconciled"]) == 1
