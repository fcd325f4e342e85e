"""artemis_health against stub brokers: when a datacentre is healthy, what it names when it is not, which brokers and
links it looks at, and how long it waits."""

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import AuthenticationRefused
from ansible_collections.continuity.artemis.plugins.modules import artemis_health
from support.replication_stub import Estate, StubBroker, link, run_polling

GROUPS = [{"name": "all", "addresses": []}]


def _estate():
    return Estate(dc1=[StubBroker("a1", links={"dc2_all": link()}), StubBroker("a2", live=False, backup=True)],
                  dc2=[StubBroker("b1", links={"dc1_all": link()})])


def _health(monkeypatch, estate, between_looks=None, **options):
    options = dict({"address_groups": GROUPS, "active_datacentre": "dc1"}, **options)
    return run_polling(monkeypatch, artemis_health, estate, {"datacentre": "dc1", "timeout": 2, "poll_interval": 0.5}, between_looks, **options)


def _problems(outcome):
    assert outcome.failed
    return outcome.result["problems"]


def test_a_pair_with_its_live_broker_and_a_backup_in_sync_is_healthy_at_the_first_look(monkeypatch):
    estate = _estate()
    outcome, clock = _health(monkeypatch, estate)
    assert not outcome.failed
    assert (outcome.result["healthy"], outcome.result["live"], outcome.result["problems"]) == (True, "a1", [])
    assert outcome.result["waited"] == 0.0 and clock.sleeps == []
    assert outcome.result["brokers"] == [
        {"name": "a1", "reachable": True, "started": True, "live": True, "backup": False, "replica_sync": True,
         "version": "2.56.0"},
        {"name": "a2", "reachable": True, "started": True, "live": False, "backup": True, "replica_sync": True,
         "version": "2.56.0"}]
    # The other datacentre's broker is asked for its links to dc1 (the estate model says which lead there), and not
    # when links do not count.
    assert estate.asked == ["a1", "a2", "b1"]
    estate.asked.clear()
    assert not _health(monkeypatch, estate, links=False)[0].failed and estate.asked == ["a1", "a2"]


def test_a_broker_that_does_not_answer_is_named_unless_it_is_absent(monkeypatch):
    estate = _estate()
    estate["a2"].reachable = False
    outcome, _clock = _health(monkeypatch, estate)
    assert _problems(outcome) == ["a2 does not answer (broker a2 is unreachable)"]
    assert outcome.result["msg"] == "dc1 is not healthy after 2s: a2 does not answer (broker a2 is unreachable)"
    assert outcome.result["live"] == "a1"
    assert not _health(monkeypatch, estate, absent=["a2"])[0].failed


def test_a_broker_that_answers_and_is_not_started_is_named(monkeypatch):
    estate = _estate()
    estate["a2"].ready = False
    assert _problems(_health(monkeypatch, estate)[0]) == ["a2 has not started (starting, stopping, or turning back into a backup)"]


def test_two_live_brokers_in_a_pair_or_none_are_named_and_no_live_broker_is_returned(monkeypatch):
    estate = _estate()
    estate["a2"].live, estate["a2"].backup = True, False
    outcome, _clock = _health(monkeypatch, estate, links=False)
    assert _problems(outcome) == ["dc1 has 2 live brokers (a1, a2)"] and outcome.result["live"] is None
    estate["a1"].live = estate["a2"].live = False
    estate["a1"].backup = estate["a2"].backup = True
    outcome, _clock = _health(monkeypatch, estate)
    assert _problems(outcome) == ["dc1 has 0 live brokers (none)"] and outcome.result["live"] is None


def test_the_live_broker_must_be_the_one_named(monkeypatch):
    assert _problems(_health(monkeypatch, _estate(), live="a2")[0]) == ["a1 is live in dc1, not a2"]
    assert not _health(monkeypatch, _estate(), live="a1")[0].failed


def test_a_backup_not_yet_in_sync_is_waited_for(monkeypatch):
    estate = _estate()
    estate["a2"].replica_sync = False

    def synchronising(looks):
        estate["a2"].replica_sync = looks >= 2

    outcome, clock = _health(monkeypatch, estate, synchronising)
    assert not outcome.failed and clock.sleeps == [0.5, 0.5] and outcome.result["waited"] == 1.0


def test_the_datacentres_own_link_must_be_connected_unless_links_do_not_count(monkeypatch):
    estate = _estate()
    estate["a1"].links["dc2_all"]["connected"] = False
    assert _problems(_health(monkeypatch, estate)[0]) == ["mirror dc2_all of a1 is not connected"]
    assert not _health(monkeypatch, estate, links=False)[0].failed


def test_a_link_holding_more_than_max_backlog_events_is_named(monkeypatch):
    estate = _estate()
    estate["a1"].links["dc2_all"]["backlog"] = 500
    assert _problems(_health(monkeypatch, estate, max_backlog=100)[0]) == [
        "mirror dc2_all of a1 holds 500 events (at most 100 wanted)"]
    assert not _health(monkeypatch, estate, max_backlog=500)[0].failed
    assert not _health(monkeypatch, estate)[0].failed


def test_with_the_estates_groups_the_other_datacentres_links_into_this_one_count_too(monkeypatch):
    estate = _estate()
    estate["b1"].links["dc1_all"]["connected"] = False
    outcome, _clock = _health(monkeypatch, estate, address_groups=GROUPS, active_datacentre="dc1")
    assert _problems(outcome) == ["mirror dc1_all of b1 is not connected"]
    assert estate.asked[:3] == ["a1", "a2", "b1"]
    assert [broker["name"] for broker in outcome.result["brokers"]] == ["a1", "a2"]


def test_a_link_the_estate_gives_and_the_live_broker_does_not_list_is_named(monkeypatch):
    estate = _estate()
    estate["a1"].links = {}
    outcome, _clock = _health(monkeypatch, estate, address_groups=GROUPS, active_datacentre="dc1")
    assert _problems(outcome) == ["a1 has no link dc2_all to dc2"]


def test_links_to_a_datacentre_with_a_broker_pending_its_restart_do_not_count(monkeypatch):
    estate = _estate()
    estate["b1"].links["dc1_all"]["connected"] = False
    estate["a1"].links["dc2_all"]["connected"] = False
    assert not _health(monkeypatch, estate, address_groups=GROUPS, active_datacentre="dc1", pending=["b1"])[0].failed


def test_an_unreachable_other_datacentre_is_not_held_against_this_one(monkeypatch):
    estate = _estate()
    estate["b1"].reachable = False
    assert not _health(monkeypatch, estate, address_groups=GROUPS, active_datacentre="dc1")[0].failed


def test_it_looks_until_the_timeout_and_names_what_is_still_wrong(monkeypatch):
    estate = _estate()
    estate["a2"].reachable = False
    outcome, clock = _health(monkeypatch, estate, timeout=2, poll_interval=0.5)
    assert len(clock.sleeps) == 4 and outcome.result["waited"] == 2.0 and not outcome.result["healthy"]
    outcome, clock = _health(monkeypatch, estate, timeout=0)
    assert outcome.failed and clock.sleeps == [] and estate.asked.count("a2") == 5 + 1


def test_a_refused_login_fails_at_once(monkeypatch):
    estate = _estate()
    estate["a1"].refusal = AuthenticationRefused("broker a1 refused management_user 'admin'")
    outcome, clock = _health(monkeypatch, estate)
    assert outcome.failed and outcome.result["msg"] == "broker a1 refused management_user 'admin'"
    assert clock.sleeps == []


def test_a_datacentre_without_brokers_or_live_and_absent_naming_others_fail_before_any_broker_is_asked(monkeypatch):
    estate = _estate()
    outcome, _clock = _health(monkeypatch, estate, datacentre="dc3")
    assert outcome.failed and outcome.result["msg"] == (
        "datacentre 'dc3' has no broker in brokers (datacentres: dc1, dc2)")
    outcome, _clock = _health(monkeypatch, estate, live="b1", absent=["a9"])
    assert outcome.failed and outcome.result["msg"] == "live and absent must name brokers of dc1; not of it: a9, b1"
    assert estate.asked == []


def test_groups_the_estate_model_refuses_fail_naming_them(monkeypatch):
    groups = [{"name": "all", "addresses": [], "mode": "everything"}]
    outcome, _clock = _health(monkeypatch, _estate(), address_groups=groups, active_datacentre="dc1")
    assert outcome.failed and outcome.result["msg"].startswith("address_groups: address group all: mode 'everything'")


def test_an_active_datacentre_without_brokers_fails_before_any_broker_is_asked(monkeypatch):
    estate = _estate()
    outcome, _clock = _health(monkeypatch, estate, address_groups=GROUPS, active_datacentre="dc9")
    assert outcome.failed and outcome.result["msg"] == (
        "active_datacentre 'dc9' has no broker in brokers (datacentres: dc1, dc2)")
    assert estate.asked == []
