"""artemis_replication_info against stub brokers: what it reports of each broker, its comparison of the datacentres'
durable messages and its sums; which queues count; a broker that does not answer is reported, a refused login fails."""

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import AuthenticationRefused
from ansible_collections.continuity.artemis.plugins.modules import artemis_replication_info
from support.replication_stub import Estate, StubBroker, link, run_main


def _estate(**dc2):
    dc1 = StubBroker("dc1-node1", queues={"orders": 5, "events": (9, 0)}, links={"dc2_all": link(3, 40, delivering=2)},
                     bridges={"continuity.out.books.dc2": link(7, 12), "continuity.export.archive.0": link(5000)})
    return Estate(dc1=[dc1, StubBroker("dc1-node2", live=False, backup=True)],
                  dc2=[StubBroker("dc2-node1", **dict({"queues": {"orders": 5, "events": (2, 0)},
                                                       "links": {"dc1_all": link()},
                                                       "kept": {"new-queue": 2, "orders": 1}}, **dc2))])


def _info(monkeypatch, estate, **options):
    outcome = run_main(monkeypatch, artemis_replication_info, estate, options)
    assert not outcome.failed, outcome.result["msg"]
    return outcome.result


def test_each_broker_is_reported_in_the_order_given_with_its_links_exports_queues_and_kept_messages(monkeypatch):
    result = _info(monkeypatch, _estate())
    assert not result["changed"]
    assert [(b["name"], b["datacentre"], b["reachable"], b["live"]) for b in result["brokers"]] == [
        ("dc1-node1", "dc1", True, True), ("dc1-node2", "dc1", True, False), ("dc2-node1", "dc2", True, True)]
    source = result["brokers"][0]
    # Of a link's backlog, what its sender has not taken yet (the mirror's sender holds 2 of its 3).
    assert [(ln["name"], ln["engine"], ln["connected"], ln["backlog"], ln["acknowledged"], ln["undispatched"])
            for ln in source["links"]] == [("dc2_all", "mirror", True, 3, 40, 1),
                                           ("continuity.out.books.dc2", "bridge", True, 7, 12, 7)]
    assert [(e["name"], e["backlog"]) for e in source["exports"]] == [("continuity.export.archive.0", 5000)]
    # The mirror's, the bridges' and the kept queues are not application queues.
    assert [(q["name"], q["message_count"], q["durable_message_count"]) for q in source["queues"]] == [
        ("orders", 5, 5), ("events", 9, 0)]
    assert result["brokers"][1]["queues"] == [] and result["brokers"][1]["backup"]
    assert result["brokers"][2]["kept"] == {"new-queue": 2, "orders": 1}


def test_the_comparison_is_of_durable_messages_and_the_sums_leave_the_exports_out(monkeypatch):
    result = _info(monkeypatch, _estate())
    assert result["comparison"] == [
        {"queue": "events", "durable_message_counts": {"dc1": 0, "dc2": 0}, "in_sync": True},
        {"queue": "orders", "durable_message_counts": {"dc1": 5, "dc2": 5}, "in_sync": True}]
    assert result["backlog"] == 3 + 7
    assert result["kept_messages"] == 3


def test_a_queue_missing_in_a_datacentre_counts_as_empty_there_and_tolerance_bounds_the_difference(monkeypatch):
    estate = _estate(queues={"orders": 3})
    result = _info(monkeypatch, estate)
    assert result["comparison"] == [
        {"queue": "events", "durable_message_counts": {"dc1": 0, "dc2": 0}, "in_sync": True},
        {"queue": "orders", "durable_message_counts": {"dc1": 5, "dc2": 3}, "in_sync": False}]
    assert [entry["in_sync"] for entry in _info(monkeypatch, estate, tolerance=2)["comparison"]] == [True, True]


def test_include_and_exclude_prefixes_select_the_queues_reported_and_compared(monkeypatch):
    queues = {"orders.eu": 1, "orders.test": 4, "audit.log": 8}
    estate = Estate(dc1=[StubBroker("dc1-node1", queues=queues)], dc2=[StubBroker("dc2-node1", queues={})])
    result = _info(monkeypatch, estate, include_prefixes=["orders."], exclude_prefixes=["orders.test"])
    assert [q["name"] for q in result["brokers"][0]["queues"]] == ["orders.eu"]
    assert [entry["queue"] for entry in result["comparison"]] == ["orders.eu"]
    result = _info(monkeypatch, estate, exclude_prefixes=["audit."])
    assert [entry["queue"] for entry in result["comparison"]] == ["orders.eu", "orders.test"]


def test_queues_false_reports_brokers_and_links_and_compares_nothing(monkeypatch):
    result = _info(monkeypatch, _estate(), queues=False)
    assert all(broker["queues"] == [] for broker in result["brokers"])
    assert result["comparison"] == [] and result["backlog"] == 10


def test_a_broker_that_does_not_answer_is_reported_and_left_out_of_the_comparison(monkeypatch):
    result = _info(monkeypatch, _estate(reachable=False))
    silent = result["brokers"][2]
    assert silent == {"name": "dc2-node1", "datacentre": "dc2", "reachable": False,
                      "error": "broker dc2-node1 is unreachable", "live": False, "links": [], "exports": [],
                      "queues": [], "kept": {}, "unrestored": {}}
    assert [entry["durable_message_counts"] for entry in result["comparison"]] == [{"dc1": 0}, {"dc1": 5}]
    assert result["kept_messages"] == 0


def test_a_broker_that_is_not_started_is_reported_reachable_and_not_live(monkeypatch):
    silent = _info(monkeypatch, _estate(ready=False))["brokers"][2]
    assert (silent["reachable"], silent["started"], silent["live"], silent["error"]) == (
        True, False, False, "broker dc2-node1 is not started")


def test_the_brokers_of_the_datacentres_that_must_answer_and_do_not_are_named_with_why(monkeypatch):
    assert _info(monkeypatch, _estate())["silent"] == []
    assert _info(monkeypatch, _estate(reachable=False), must_answer=["dc1"])["silent"] == []
    assert _info(monkeypatch, _estate(reachable=False), must_answer=["dc1", "dc2"])["silent"] == [
        "dc2-node1 does not answer (broker dc2-node1 is unreachable)"]
    assert _info(monkeypatch, _estate(ready=False), must_answer=["dc2"])["silent"] == [
        "dc2-node1 has not started (starting, stopping, or turning back into a backup)"]


def test_a_datacentre_that_must_answer_and_has_no_broker_is_refused_before_any_broker_is_asked(monkeypatch):
    estate = _estate()
    outcome = run_main(monkeypatch, artemis_replication_info, estate, {"must_answer": ["dc2", "dc9"]})
    assert outcome.failed and outcome.result["msg"] == "must_answer names dc9, where no broker of brokers is"
    assert estate.asked == []


def test_a_refused_login_fails_the_module_with_the_brokers_reason(monkeypatch):
    refusal = AuthenticationRefused("broker dc2-node1 refused management_user 'admin' (HTTP 403)")
    outcome = run_main(monkeypatch, artemis_replication_info, _estate(refusal=refusal), {})
    assert outcome.failed and outcome.result["msg"] == str(refusal)


def test_a_negative_tolerance_is_refused_before_any_broker_is_asked(monkeypatch):
    estate = _estate()
    outcome = run_main(monkeypatch, artemis_replication_info, estate, {"tolerance": -1})
    assert outcome.failed and outcome.result["msg"] == "tolerance must be at least 0 (got -1)"
    assert estate.asked == []
