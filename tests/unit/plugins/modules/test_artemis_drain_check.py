"""artemis_drain_check's wait for a source whose clients go on acting (caught_up): done when what each link held at
its first look has been delivered, whatever arrived since; a link whose counters start again is looked at afresh. And
the module against stub brokers: when the source is drained, what it names when it is not, which links and queues
count."""

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import AuthenticationRefused
from ansible_collections.continuity.artemis.plugins.modules import artemis_drain_check
from ansible_collections.continuity.artemis.plugins.modules.artemis_drain_check import still_to_deliver
from support.replication_stub import Estate, StubBroker, link, run_polling

LINK = "dc2-node1/dc1_all"


def test_what_a_link_held_at_first_is_waited_for_and_what_arrived_since_is_not():
    marks = {}
    assert still_to_deliver({LINK: 40}, {LINK: 1000}, marks) == {LINK: 40}
    # 30 delivered, 25 new arrived: 10 of the first 40 are still to go.
    assert still_to_deliver({LINK: 35}, {LINK: 1030}, marks) == {LINK: 10}
    # The first 40 are across; the backlog under load is never empty, and need not be.
    assert still_to_deliver({LINK: 20}, {LINK: 1041}, marks) == {}


def test_an_empty_link_is_done_at_once():
    assert still_to_deliver({LINK: 0}, {LINK: 7}, {}) == {}


def test_a_link_whose_broker_restarted_is_marked_again_at_what_it_holds():
    marks = {}
    assert still_to_deliver({LINK: 40}, {LINK: 1000}, marks) == {LINK: 40}
    # The pair's backup took over: its counters start at 0, and it holds the journal's backlog.
    assert still_to_deliver({LINK: 50}, {LINK: 0}, marks) == {LINK: 50}
    assert still_to_deliver({LINK: 5}, {LINK: 50}, marks) == {}


def test_a_link_seen_only_later_is_marked_when_first_seen():
    marks = {}
    assert still_to_deliver({LINK: 0}, {LINK: 5}, marks) == {}
    other = "dc2-node1/continuity.out.books.dc1"
    assert still_to_deliver({LINK: 3, other: 8}, {LINK: 9, other: 2}, marks) == {other: 8}


def _estate(source_links=None, source_queues=None, target_queues=None, **target):
    source = StubBroker("dc1-node1", queues={"orders": 5} if source_queues is None else source_queues,
                        links={"dc2_all": link()} if source_links is None else source_links)
    return Estate(dc1=[source, StubBroker("dc1-node2", live=False, backup=True)],
                  dc2=[StubBroker("dc2-node1", queues={"orders": 5} if target_queues is None else target_queues,
                                  links={"dc1_all": link(backlog=900)}, **target)])


def _drain(monkeypatch, estate, between_looks=None, **options):
    return run_polling(monkeypatch, artemis_drain_check, estate, {"source_datacentre": "dc1", "timeout": 3, "poll_interval": 0.5}, between_looks, **options)


def test_a_source_with_no_backlog_whose_queues_agree_is_drained_at_the_first_look(monkeypatch):
    # The other datacentre's own backlog (toward dc1) is not dc1's to drain.
    outcome, clock = _drain(monkeypatch, _estate())
    assert not outcome.failed and outcome.result["drained"]
    assert outcome.result["backlog"] == {"dc1-node1/dc2_all": 0}
    assert outcome.result["out_of_sync"] == [] and outcome.result["kept"] == {}
    assert clock.sleeps == [] and len(outcome.result["progress"]) == 1


def test_the_drain_waits_while_the_links_deliver_and_the_queues_catch_up(monkeypatch):
    estate = _estate(source_links={"dc2_all": link(30)}, target_queues={"orders": 1})

    def delivering(looks):
        estate["dc1-node1"].links["dc2_all"]["backlog"] = max(0, 30 - 20 * looks)
        estate["dc2-node1"].queue_counts["orders"] = min(5, 1 + 2 * looks)

    outcome, clock = _drain(monkeypatch, estate, delivering)
    assert not outcome.failed and outcome.result["drained"]
    assert [(p["backlog"], p["out_of_sync"]) for p in outcome.result["progress"]] == [(30, 1), (10, 1), (0, 0)]
    assert outcome.result["elapsed"] == 1.0


def test_a_drain_that_times_out_names_the_backlog_per_link_and_the_durable_counts_that_differ(monkeypatch):
    estate = _estate(source_links={"dc2_all": link(7)}, source_queues={"orders": 5, "audit": 2},
                     target_queues={"orders": 3})
    outcome, clock = _drain(monkeypatch, estate)
    assert outcome.failed and not outcome.result["drained"]
    assert outcome.result["msg"] == ("dc1 did not drain within 3s: backlog per link {'dc1-node1/dc2_all': 7}; "
                                     "queues out of sync: audit {'dc1': 2, 'dc2': 0}, orders {'dc1': 5, 'dc2': 3}")
    assert len(outcome.result["progress"]) == 7 and outcome.result["elapsed"] == 3.0


def test_non_durable_messages_the_datacentres_disagree_on_do_not_keep_the_source_from_draining(monkeypatch):
    outcome, _clock = _drain(monkeypatch, _estate(source_queues={"orders": 5, "prices": (40, 0)},
                                                  target_queues={"orders": 5, "prices": (3, 0)}))
    assert not outcome.failed and outcome.result["drained"]


def test_counts_within_the_tolerance_or_not_compared_do_not_keep_the_source_from_draining(monkeypatch):
    estate = _estate(target_queues={"orders": 4})
    assert _drain(monkeypatch, estate)[0].failed
    assert not _drain(monkeypatch, estate, tolerance=1)[0].failed
    assert not _drain(monkeypatch, estate, compare_queues=False)[0].failed


def test_only_the_links_named_count_when_links_is_given(monkeypatch):
    estate = _estate(source_links={"dc2_all": link(0), "dc3_all": link(50)})
    outcome, _clock = _drain(monkeypatch, estate, links=["dc2_all"])
    assert not outcome.failed and outcome.result["backlog"] == {"dc1-node1/dc2_all": 0}
    outcome, _clock = _drain(monkeypatch, estate)
    assert outcome.failed and "{'dc1-node1/dc2_all': 0, 'dc1-node1/dc3_all': 50}" in outcome.result["msg"]


def test_a_bridge_of_the_source_counts_as_a_link(monkeypatch):
    estate = _estate()
    estate["dc1-node1"].bridge_links = {"continuity.out.books.dc2": link(4)}
    outcome, _clock = _drain(monkeypatch, estate)
    assert outcome.failed and outcome.result["backlog"]["dc1-node1/continuity.out.books.dc2"] == 4


def test_a_broker_that_does_not_answer_keeps_the_source_from_draining_and_is_named(monkeypatch):
    outcome, _clock = _drain(monkeypatch, _estate(reachable=False))
    assert outcome.failed and outcome.result["msg"].endswith(
        "queues out of sync: none; unreachable or not started: dc2-node1")
    assert outcome.result["progress"][-1]["unreachable"] == ["dc2-node1"]
    outcome, _clock = _drain(monkeypatch, _estate(reachable=False), caught_up=True)
    assert outcome.failed and outcome.result["msg"].endswith("unreachable or not started: dc2-node1")


def test_a_drain_completes_once_a_silent_broker_answers_again(monkeypatch):
    estate = _estate(reachable=False)

    def back(looks):
        estate["dc2-node1"].reachable = looks >= 2

    outcome, clock = _drain(monkeypatch, estate, back)
    assert not outcome.failed and len(clock.sleeps) == 2


def test_messages_kept_at_another_datacentre_are_named_when_the_drain_does_not_complete(monkeypatch):
    estate = _estate(source_queues={"orders": 5, "new-queue": 4}, kept={"new-queue": 4})
    outcome, _clock = _drain(monkeypatch, estate)
    assert outcome.failed and outcome.result["kept"] == {"dc2-node1": 4}
    assert outcome.result["msg"].endswith("new-queue {'dc1': 4, 'dc2': 0}; kept because the mirror found no queue "
                                          "(settle them with artemis_reconcile): {'dc2-node1': 4}")


def test_caught_up_is_done_when_what_each_link_held_at_first_is_delivered_though_new_events_arrived(monkeypatch):
    # Clients go on acting at the source: the backlog never empties and the counts never agree.
    estate = _estate(source_links={"dc2_all": link(40, 1000)}, target_queues={"orders": 2})
    looks = [(35, 1030), (20, 1041)]

    def acting(count):
        estate["dc1-node1"].links["dc2_all"].update(zip(("backlog", "acknowledged"), looks[count - 1]))

    outcome, clock = _drain(monkeypatch, estate, acting, caught_up=True)
    assert not outcome.failed and outcome.result["drained"]
    assert len(clock.sleeps) == 2 and outcome.result["backlog"] == {"dc1-node1/dc2_all": 20}
    assert outcome.result["out_of_sync"] == []


def test_caught_up_marks_a_link_again_when_its_acknowledged_count_goes_back(monkeypatch):
    estate = _estate(source_links={"dc2_all": link(40, 1000)})
    # The broker restarted after the first look: its counters start again, and it holds 50 events.
    looks = [(50, 0), (5, 45), (0, 50)]

    def restarted(count):
        estate["dc1-node1"].links["dc2_all"].update(zip(("backlog", "acknowledged"), looks[count - 1]))

    outcome, clock = _drain(monkeypatch, estate, restarted, caught_up=True)
    assert not outcome.failed and len(clock.sleeps) == 3


def test_caught_up_that_times_out_names_what_is_still_to_deliver_of_what_was_held_at_first(monkeypatch):
    estate = _estate(source_links={"dc2_all": link(40, 1000)})

    def slow(looks):
        estate["dc1-node1"].links["dc2_all"].update(backlog=40, acknowledged=1000 + looks)

    outcome, _clock = _drain(monkeypatch, estate, slow, caught_up=True, timeout=1)
    assert outcome.failed and outcome.result["msg"] == (
        "dc1 did not drain within 1s: still to deliver of what it held at first per link {'dc1-node1/dc2_all': 38}; "
        "queues out of sync: none")


def test_a_source_datacentre_none_of_the_brokers_is_in_fails_before_any_broker_is_asked(monkeypatch):
    estate = _estate()
    outcome, _clock = _drain(monkeypatch, estate, source_datacentre="dc3")
    assert outcome.failed and outcome.result["msg"] == (
        "source_datacentre 'dc3' is not the datacentre of any of the brokers (dc1, dc2)")
    assert estate.asked == []


def test_brokers_of_the_source_datacentre_alone_are_refused(monkeypatch):
    outcome, _clock = _drain(monkeypatch, Estate(dc1=[StubBroker("dc1-node1")]))
    assert outcome.failed and outcome.result["msg"] == (
        "brokers must include the other datacentres to compare with (got only dc1)")


def test_a_refused_login_fails_at_once_with_the_looks_so_far(monkeypatch):
    estate = _estate(target_queues={"orders": 1})

    def refused(looks):
        estate["dc2-node1"].refusal = AuthenticationRefused("broker dc2-node1 refused management_user 'admin'")

    outcome, _clock = _drain(monkeypatch, estate, refused)
    assert outcome.failed and outcome.result["msg"] == "broker dc2-node1 refused management_user 'admin'"
    assert len(outcome.result["progress"]) == 1


# Nothing of a source broker that answers "not started" can be read (no links, no queues), nor of one that answers as a
# backup, and the comparison leaves out a datacentre without a live broker: either would look drained at once.
@pytest.mark.parametrize("source, named", [
    ([StubBroker("dc1-node1", ready=False, links={"dc2_all": link(30)}, queues={"orders": 9})],
     "dc1-node1, no live broker at dc1"),
    ([StubBroker("dc1-node1", live=False, backup=True, links={"dc2_all": link(30)}),
      StubBroker("dc1-node2", live=False, backup=True)], "no live broker at dc1"),
], ids=["not started", "backups only"])
def test_a_source_without_a_started_live_broker_is_not_drained_and_is_named(monkeypatch, source, named):
    estate = Estate(dc1=source, dc2=[StubBroker("dc2-node1", queues={"orders": 5})])
    outcome, _clock = _drain(monkeypatch, estate)
    assert outcome.failed and not outcome.result["drained"]
    assert outcome.result["msg"].endswith("unreachable or not started: " + named)
    outcome, _clock = _drain(monkeypatch, estate, caught_up=True)
    assert outcome.failed and not outcome.result["drained"]
