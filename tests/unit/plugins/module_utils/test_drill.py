"""The drill's evidence from a ledger (module_utils/drill.py); the job reads the same ledger alike
(tests/unit/spark/test_metrics.py)."""

import types

from ansible_collections.continuity.artemis.plugins.module_utils import drill


def _swapover_rows():
    """m0-m9 accepted at dc1 every second and consumed there 0.2 s later; the fence at 10 s; m10-m14 accepted at dc2
    from 13 s and consumed there at 16 s; m3 consumed twice."""
    rows = [drill.fault_row("d", "dc1", 10.0)]
    for i in range(10):
        rows += [{"drill": "d", "id": f"m{i}", "datacentre": "dc1", "event": "accepted", "time": float(i)},
                 {"drill": "d", "id": f"m{i}", "datacentre": "dc1", "event": "consumed", "time": i + 0.2}]
    for i in range(10, 15):
        rows += [{"drill": "d", "id": f"m{i}", "datacentre": "dc2", "event": "accepted", "time": float(i + 3)},
                 {"drill": "d", "id": f"m{i}", "datacentre": "dc2", "event": "consumed", "time": 16.0}]
    rows.append({"drill": "d", "id": "m3", "datacentre": "dc2", "event": "consumed", "time": 16.5})
    return rows


def test_a_clean_swapover_has_no_loss_and_its_rto_runs_from_the_fence_to_the_target_serving():
    result = drill.outcome(_swapover_rows())
    assert result == {"accepted": 15, "lost": 0, "duplicates": 1, "rpo_seconds": 0.0, "rto_seconds": 3.0,
                      "fault_time": 10.0, "failed_datacentre": "dc1"}


def test_a_message_never_consumed_is_lost_and_sets_the_rpo():
    rows = [row for row in _swapover_rows() if not (row["id"] in ("m8", "m9") and row["event"] == "consumed")]
    result = drill.outcome(rows)
    assert (result["lost"], result["rpo_seconds"]) == (2, 2.0)


def test_without_a_fault_there_is_no_rto():
    result = drill.outcome(_swapover_rows()[1:])
    assert result["rto_seconds"] is None and result["fault_time"] is None


def test_the_timeline_counts_per_second_and_the_backlog_returns_to_zero():
    points = drill.timeline(_swapover_rows(), start=0.0)
    assert sum(point["accepted"] for point in points) == 15
    assert sum(point["consumed"] for point in points) == 15
    assert points[13]["backlog"] == 1 and points[-1]["backlog"] == 0
    assert points[16]["latency_max_seconds"] == 3.0


def test_ledger_rows_keep_accepted_sends_and_consumed_deliveries_with_their_datacentres():
    producer = [types.SimpleNamespace(id="a", outcome="accepted", settled_at=1.0, connection=2),
                types.SimpleNamespace(id="b", outcome="rejected", settled_at=1.1, connection=1)]
    consumer = [types.SimpleNamespace(id="a", accepted_at=1.5, connection=3),
                types.SimpleNamespace(id="a", accepted_at=None, connection=3)]
    rows = drill.ledger_rows("d", producer, ["dc1", "dc2"], [(consumer, ["dc1", "dc2"])])
    assert rows == [{"drill": "d", "id": "a", "event": "accepted", "time": 1.0, "datacentre": "dc2"},
                    {"drill": "d", "id": "a", "event": "consumed", "time": 1.5, "datacentre": "dc1"}]


def test_the_report_names_the_verdict_and_every_phase_and_escapes_what_it_shows():
    evidence = dict(drill.outcome(_swapover_rows()), drill="d<1>", source="dc1", target="dc2", round_trip=True,
                    address="drill.x", rate=50.0, objectives={"rpo_seconds": 5.0, "rto_seconds": 120.0},
                    phases=[{"operation": "swapover dc1 to dc2", "phase": "fenced", "at": "2026-01-01T00:00:10Z",
                             "seconds_since_start": 10.0}],
                    estate={"datacentres": ["dc1", "dc2"]}, failures=["1 messages duplicated"], sla_passed=False,
                    started="2026-01-01T00:00:00Z", finished="2026-01-01T00:01:00Z")
    page = drill.report_html(evidence, drill.timeline(_swapover_rows(), start=0.0))
    assert "FAILED" in page and "d&lt;1&gt;" in page and "d<1>" not in page
    assert "fenced" in page and "1 messages duplicated" in page and page.count("<svg") == 3
