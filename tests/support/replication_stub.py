"""Stub brokers for the modules that read the estate's replication through artemis_replication.collect
(artemis_drain_check, artemis_health, artemis_replication_info): they answer the management client's calls as
Artemis would, with no network; a clock the module waits on without waiting; and the module's main() run on
given options."""

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.continuity.artemis.plugins.module_utils import artemis_replication
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_address_settings import KEPT_ADDRESS
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import MIRROR_QUEUE_PREFIX
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    BrokerNotReady, BrokerUnreachable)


def link(backlog=0, acknowledged=0, connected=True, delivering=0):
    return {"backlog": backlog, "acknowledged": acknowledged, "connected": connected, "delivering": delivering}


class StubBroker:
    """One broker's answers. ``queues``: application queue -> messages, or (messages, durable ones); ``links``:
    mirror connection -> link(); ``bridges``: the bridge engine's outbound queue (and bridge) -> link();
    ``kept``: original address -> messages on continuity.kept. Change the attributes between two looks."""

    def __init__(self, name, live=True, backup=False, replica_sync=True, queues=None, links=None, bridges=None,
                 kept=None, reachable=True, ready=True, refusal=None):
        self.name, self.live, self.backup, self.replica_sync = name, live, backup, replica_sync
        self.queue_counts = dict(queues or {})
        self.links, self.bridge_links, self.kept = dict(links or {}), dict(bridges or {}), dict(kept or {})
        self.reachable, self.ready, self.refusal = reachable, ready, refusal

    def status(self):
        if self.refusal is not None:
            raise self.refusal
        if not self.reachable:
            raise BrokerUnreachable("broker %s is unreachable" % self.name)
        if not self.ready:
            raise BrokerNotReady("broker %s is not started" % self.name)
        return {"started": True, "live": self.live, "backup": self.backup, "replica_sync": self.replica_sync,
                "shared_store": False, "version": "2.56.0", "node_id": "node-" + self.name}

    def _counts(self, name):
        counts = self.queue_counts[name]
        return counts if isinstance(counts, tuple) else (counts, counts)

    def queues(self):
        def row(name, messages, acknowledged=0, internal=False, delivering=0):
            return {"name": name, "address": name, "routingType": "ANYCAST", "messageCount": str(messages),
                    "deliveringCount": str(delivering), "consumerCount": "1", "paused": "false", "messagesAdded": "0",
                    "messagesAcked": str(acknowledged), "internalQueue": str(internal).lower(),
                    "temporary": "false"}
        rows = [row(name, self._counts(name)[0]) for name in self.queue_counts]
        rows += [row(MIRROR_QUEUE_PREFIX + name, state["backlog"], state["acknowledged"], internal=True,
                     delivering=state["delivering"]) for name, state in self.links.items()]
        rows += [row(name, state["backlog"], state["acknowledged"], delivering=state["delivering"])
                 for name, state in self.bridge_links.items()]
        if self.kept:
            rows.append(row(KEPT_ADDRESS, sum(self.kept.values())))
        return rows

    def durable_message_counts(self):
        return dict((name, self._counts(name)[1]) for name in self.queue_counts)

    def count_messages(self, address, queue, message_filter="", group_by=None, routing_type="anycast"):
        assert (address, queue, group_by) == (KEPT_ADDRESS, KEPT_ADDRESS, "_AMQ_ORIG_ADDRESS")
        return dict(self.kept)

    def broker_connections(self):
        return [{"name": name, "started": "true", "connected": str(state["connected"]).lower()}
                for name, state in self.links.items()]

    def bridges(self):
        return [{"name": name, "queue": name, "connected": state["connected"], "pending": 0}
                for name, state in self.bridge_links.items()]


class Estate:
    """Stands in for ArtemisManagement in artemis_replication: from_params gives the stub of the broker named,
    and records which brokers were asked."""

    def __init__(self, **datacentres):
        self.datacentre_of, self.stubs, self.asked = {}, {}, []
        for datacentre, stubs in sorted(datacentres.items()):
            for stub in stubs:
                self.datacentre_of[stub.name], self.stubs[stub.name] = datacentre, stub

    def __getitem__(self, name):
        return self.stubs[name]

    def brokers(self):
        return [{"name": name, "datacentre": datacentre, "management_url": "https://%s:8161" % name}
                for name, datacentre in self.datacentre_of.items()]

    def from_params(self, broker, params):
        self.asked.append(broker["name"])
        return self.stubs[broker["name"]]


class Clock:
    """time for a module that polls: sleeping moves the clock on at once and runs ``between_looks`` (what changes
    at the brokers meanwhile), each with the number of the sleep, from 1."""

    def __init__(self, between_looks=None):
        self.now, self.sleeps, self.between_looks = 0.0, [], between_looks

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds
        if self.between_looks is not None:
            self.between_looks(len(self.sleeps))


class Finished(Exception):
    def __init__(self, failed, result):
        super().__init__(failed, result)
        self.failed, self.result = failed, result


def run_main(monkeypatch, module, estate, options, clock=None):
    """Run ``module``'s main() against ``estate`` with ``options`` (brokers and credentials added); returns the
    Finished outcome: ``failed`` and the result (with ``msg`` when it failed)."""
    def exit_json(self, **result):
        raise Finished(False, result)

    def fail_json(self, msg=None, **result):
        raise Finished(True, dict(result, msg=msg))

    monkeypatch.setattr(AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(artemis_replication, "ArtemisManagement", estate)
    if hasattr(module, "time"):
        monkeypatch.setattr(module, "time", clock or Clock())
    args = dict({"brokers": estate.brokers(), "management_user": "admin", "management_password": "secret",
                 "_ansible_no_log": True}, **options)
    with patch_module_args(args), pytest.raises(Finished) as finished:
        module.main()
    return finished.value


def run_polling(monkeypatch, module, estate, defaults, between_looks=None, **options):
    """run_main for a module that polls, on a Clock running ``between_looks``: (outcome, clock)."""
    clock = Clock(between_looks)
    return run_main(monkeypatch, module, estate, dict(defaults, **options), clock), clock
