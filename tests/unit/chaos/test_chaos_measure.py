"""The measurement of a chaos run: the RPO/RTO job, run as its command line over collector telemetry and a drill ledger
made of a hand-made history's failover, publishes the figures the checker finds in the same history."""

import time

from chaos import checker, measure
from continuity_rpo.store import Store

START = time.time() - 600  # the job refuses telemetry from the future, not from ten minutes ago


def _history():
    """m0-m9 accepted at dc1 at +10..+19; dc1 failed over to dc2 at +20 and failed back at +150: m8 and m9 came only
    after the failback, m5 twice (once at dc2, at +24, the first delivery there after the fault)."""
    events = [{"kind": "schedule", "t": START, "seed": 1, "estate": "2x2", "duration_s": 300}]
    events += [{"kind": "send", "t": START + 10 + n, "client": "p", "group": "all", "id": f"m{n}",
                "outcome": "accepted", "datacentre": "dc1"} for n in range(10)]
    deliveries = [(10.5 + n, f"m{n}", "dc1") for n in range(8)] + [(24, "m5", "dc2"), (161, "m8", "dc2"),
                                                                   (162, "m9", "dc2")]
    events += [{"kind": "delivery", "t": START + t, "client": "c", "group": "all", "datacentre": dc, "id": message_id}
               for t, message_id, dc in deliveries]
    events += [{"kind": "operation", "t": START + 20, "name": "failover", "phase": "start", "id": "failover-1",
                "args": {"abrupt": True, "loss_window_s": 30, "failover_source": "dc1", "redeliveries": 1}},
               {"kind": "operation", "t": START + 25, "name": "failover", "phase": "end", "id": "failover-1",
                "outcome": "done", "message": "", "at_risk": 2},
               {"kind": "operation", "t": START + 150, "name": "failback", "phase": "start", "id": "failback-2",
                "args": {}},
               {"kind": "operation", "t": START + 160, "name": "failback", "phase": "end", "id": "failback-2",
                "outcome": "done", "message": ""}]
    return sorted(events, key=lambda event: event["t"])


def _collector_samples(root):
    """The last samples before the fault: dc1's queue had 10 added, dc2's copy 7."""
    store = Store(str(root), "collector", 60)
    for datacentre, added in (("dc1", 10), ("dc2", 7)):
        store.append("queue_samples", [{
            "time": START + 19.5, "broker": f"{datacentre}-node1", "datacentre": datacentre, "queue": "all",
            "address": "all", "messages_added": added, "messages_acknowledged": 0, "message_count": added,
            "delivering_count": 0, "consumer_count": 1}], START + 19.5)
    store.close()


def test_the_job_over_a_failovers_ledger_publishes_what_the_history_says(tmp_path):
    _collector_samples(tmp_path / "telemetry")
    events = _history()
    measured = measure.failovers(events, str(tmp_path / "telemetry"), str(tmp_path / "measurement"))
    assert [(event["name"], event["scope"]) for event in measured] == [("failover", "failover-1")]
    value = measured[0]["value"]
    assert {name: value[name] for name in ("lost", "duplicates", "messages_at_risk")} == {
        "lost": 2, "duplicates": 1, "messages_at_risk": 3}
    verdict = {verdict["invariant"]: verdict for verdict in checker.check(
        events + [dict(event, t=START + 300) for event in measured])}["measurement_agrees"]
    assert verdict["holds"], verdict
    assert verdict["counted"]["failovers"]["failover-1"]["rto_seconds"] == 4


def test_a_job_that_fails_is_published_as_its_error(tmp_path):
    (tmp_path / "telemetry").mkdir()  # no sample at all: the job has nothing to measure
    measured = measure.failovers(_history(), str(tmp_path / "telemetry"), str(tmp_path / "measurement"))
    assert "the job exited 2" in measured[0]["value"]["error"]
    assert "nothing to measure" in measured[0]["value"]["error"]
