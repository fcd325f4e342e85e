"""What keeps a datacentre from being healthy (artemis_health, the rolling restart's gate), on known reports."""

import threading

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    AuthenticationRefused, BrokerNotReady, BrokerUnreachable)
from ansible_collections.continuity.artemis.plugins.module_utils import artemis_replication
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import (
    assess_datacentre, broker_report, collect)


def _broker(name, datacentre, live, backup=False, replica_sync=True, shared_store=False, links=(), **extra):
    return dict({"name": name, "datacentre": datacentre, "reachable": True, "started": True, "live": live,
                 "backup": backup, "replica_sync": replica_sync, "shared_store": shared_store,
                 "links": [{"name": link, "connected": connected, "backlog": backlog}
                           for link, connected, backlog in links]}, **extra)


def _pair(primary_live=True, backup_sync=True, links=(("dc2_all", True, 0),)):
    return [_broker("a1", "dc1", primary_live, backup=not primary_live, links=links if primary_live else ()),
            _broker("a2", "dc1", not primary_live, backup=primary_live, replica_sync=backup_sync,
                    links=() if primary_live else links)]


TARGETS = {("dc1", "dc2_all"): "dc2", ("dc2", "dc1_all"): "dc1"}


def test_a_pair_with_a_live_broker_and_a_backup_in_sync_is_healthy():
    assert assess_datacentre(_pair(), "dc1") == []
    assert assess_datacentre(_pair(), "dc1", live="a1") == []


def test_a_backup_out_of_sync_or_the_wrong_live_broker_is_named():
    assert assess_datacentre(_pair(backup_sync=False), "dc1") == [
        "a2 is a backup not yet in sync with the live broker"]
    assert assess_datacentre(_pair(primary_live=False), "dc1", live="a1") == ["a2 is live in dc1, not a1"]


def test_an_absent_broker_is_not_required_but_one_live_broker_is():
    reports = _pair()
    reports[0].update(reachable=False, live=False, error="refused", links=[])
    assert "a1 does not answer (refused)" in assess_datacentre(reports, "dc1")
    # Stopped on purpose: its backup has not taken over yet, then it has.
    assert assess_datacentre(reports, "dc1", absent=["a1"]) == ["dc1 has 0 live brokers (none)"]
    reports[1].update(live=True, backup=False, replica_sync=False)
    assert assess_datacentre(reports, "dc1", absent=["a1"]) == []


def test_a_shared_store_backup_needs_no_replica_sync():
    reports = [_broker("s1", "dc1", True, shared_store=True, replica_sync=False),
               _broker("s2", "dc1", False, backup=True, shared_store=True, replica_sync=False)]
    assert assess_datacentre(reports, "dc1") == []


def test_two_live_brokers_in_one_pair_are_a_problem():
    reports = _pair()
    reports[1].update(live=True, backup=False)
    assert assess_datacentre(reports, "dc1") == ["dc1 has 2 live brokers (a1, a2)"]


def test_links_out_of_and_into_the_datacentre_must_be_connected_and_caught_up():
    reports = _pair(links=(("dc2_all", True, 5000),)) + [_broker("b1", "dc2", True, links=(("dc1_all", False, 0),))]
    assert assess_datacentre(reports, "dc1", link_targets=TARGETS) == ["mirror dc1_all of b1 is not connected"]
    assert assess_datacentre(reports, "dc1", link_targets=TARGETS, max_backlog=1000) == [
        "mirror dc2_all of a1 holds 5000 events (at most 1000 wanted)", "mirror dc1_all of b1 is not connected"]
    # Without the estate model only the datacentre's own links are known.
    assert assess_datacentre(reports, "dc1") == []


def test_a_link_the_estate_gives_a_live_broker_and_it_does_not_list_is_a_problem():
    # Artemis stops every bridge of a broker once one is refused a send (AMQ224058): they vanish from its list.
    reports = _pair(links=()) + [_broker("b1", "dc2", True, links=(("dc1_all", True, 0),))]
    assert assess_datacentre(reports, "dc1", link_targets=TARGETS) == ["a1 has no link dc2_all to dc2"]
    assert assess_datacentre(reports, "dc1", link_targets=TARGETS, settling=["dc2"]) == []
    assert assess_datacentre(reports, "dc1") == []


def test_links_to_a_datacentre_that_still_waits_for_a_restart_do_not_count_yet():
    reports = _pair(links=(("dc2_all", False, 900),)) + [_broker("b1", "dc2", True, links=(("dc1_all", False, 0),))]
    assert assess_datacentre(reports, "dc1", link_targets=TARGETS, settling=["dc2"]) == []
    assert assess_datacentre(reports, "dc1", link_targets=TARGETS, settling=["dc1"]) == []
    assert len(assess_datacentre(reports, "dc1", link_targets=TARGETS, settling=["dc3"])) == 2


def test_an_unreachable_other_datacentre_is_not_held_against_this_one():
    reports = _pair() + [{"name": "b1", "datacentre": "dc2", "reachable": False, "live": False, "links": []}]
    assert assess_datacentre(reports, "dc1", link_targets=TARGETS) == []


class _Broker:
    """What the management client answers for a live broker of a bridge group that also exports to an outside
    broker: one mirror connection, a bridge to another datacentre and an export, each with its outbound queue."""

    def status(self):
        return {"started": True, "live": True, "backup": False, "replica_sync": False, "shared_store": False,
                "version": "2.56.0", "node_id": "n1"}

    def broker_connections(self):
        return [{"name": "dc2_all", "started": "true", "connected": "true"}]

    def bridges(self):
        return [{"name": "continuity.out.relay.dc2", "queue": "continuity.out.relay.dc2", "connected": True,
                 "pending": 0},
                {"name": "continuity.export.archive.0", "queue": "continuity.export.archive.0", "connected": False,
                 "pending": 0}]

    def queues(self):
        def queue(name, count):
            return {"name": name, "address": name, "routingType": "ANYCAST", "messageCount": str(count),
                    "deliveringCount": "0", "consumerCount": "0", "paused": "false"}
        return [queue("$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all", 3), queue("continuity.out.relay.dc2", 7),
                queue("continuity.export.archive.0", 5000), queue("orders", 1)]

    def durable_message_counts(self):
        return {"$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all": 3, "continuity.out.relay.dc2": 7,
                "continuity.export.archive.0": 5000, "orders": 0}


def test_an_export_to_a_broker_outside_the_estate_is_reported_apart_from_the_estate_links():
    report = broker_report(_Broker())
    assert [(link["name"], link["engine"], link["connected"], link["backlog"]) for link in report["links"]] == [
        ("dc2_all", "mirror", True, 3), ("continuity.out.relay.dc2", "bridge", True, 7)]
    assert [(link["name"], link["connected"], link["backlog"]) for link in report["exports"]] == [
        ("continuity.export.archive.0", False, 5000)]
    # So the health gate (and the drain check, the swapover's verification, the collector) never see it.
    reports = [dict(report, name="a1", datacentre="dc1", reachable=True)]
    assert assess_datacentre(reports, "dc1", link_targets={("dc1", "dc2_all"): "dc2",
                                                           ("dc1", "continuity.out.relay.dc2"): "dc2"},
                             max_backlog=10) == []


class _BrokerWithItsBridgesStopped(_Broker):
    """After AMQ224058 Artemis lists no bridge of the broker: their outbound queues still hold what did not cross."""

    def bridges(self):
        return []


def test_an_outbound_queue_whose_bridge_is_not_listed_still_counts_as_backlog():
    report = broker_report(_BrokerWithItsBridgesStopped())
    assert [(link["name"], link.get("listed", True), link["connected"], link["backlog"]) for link in report["links"]] \
        == [("dc2_all", True, True, 3), ("continuity.out.relay.dc2", False, False, 7)]
    assert report["exports"] == []
    # The health gate names the missing link once, as missing.
    reports = [dict(report, name="a1", datacentre="dc1", reachable=True)]
    assert assess_datacentre(reports, "dc1", link_targets={("dc1", "dc2_all"): "dc2",
                                                           ("dc1", "continuity.out.relay.dc2"): "dc2"}) == [
        "a1 has no link continuity.out.relay.dc2 to dc2"]


class _AskedBroker:
    """A broker's management answers; `together` is a barrier every broker's first request waits at."""

    def __init__(self, name, together, fails_with=None):
        self.name, self.together, self.fails_with = name, together, fails_with

    def status(self):
        self.together.wait()
        if self.fails_with:
            raise self.fails_with
        return {"live": False, "backup": True}


def _collect(monkeypatch, brokers, together):
    clients = {name: _AskedBroker(name, together, fails_with) for name, fails_with in brokers.items()}

    class Management:
        @staticmethod
        def from_params(broker, params):
            return clients[broker["name"]]

    monkeypatch.setattr(artemis_replication, "ArtemisManagement", Management)
    return collect([{"name": name, "datacentre": "dc1"} for name in brokers], {})


def test_every_broker_is_asked_at_once_and_an_unreachable_or_starting_one_is_reported(monkeypatch):
    # B4: the failover's look at every datacentre asked one broker after another, and each broker of a datacentre
    # powered off cost the request timeout in turn. A sequential collect never lets the barrier open.
    together = threading.Barrier(3, timeout=5)
    reports = _collect(monkeypatch, {"a1": None, "a2": BrokerUnreachable("a2: no answer"), "a3": BrokerNotReady("a3: starting")},
                       together)
    assert [(report["name"], report["reachable"], report.get("started", True), report["live"]) for report in reports] \
        == [("a1", True, True, False), ("a2", False, True, False), ("a3", True, False, False)]
    assert reports[1]["error"] == "a2: no answer"


def test_a_refused_login_is_raised_not_reported(monkeypatch):
    with pytest.raises(AuthenticationRefused):
        _collect(monkeypatch, {"a1": None, "a2": AuthenticationRefused("a2: login refused")}, threading.Barrier(2, timeout=5))


@pytest.mark.parametrize("name, application", [
    ("orders", True), ("continuity.activation", False), ("continuity.kept", False), ("continuity.out.dc2_books", False),
    ("$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all", False)])
def test_the_estate_s_own_queues_are_no_application_s(name, application):
    # The activation records differ between brokers while one holds its groups (it keeps that it holds them there):
    # a drain that compared them would wait for nothing a client sent.
    queue = {"name": name, "internalQueue": False, "temporary": False}
    assert artemis_replication.is_application_queue(queue) is application
