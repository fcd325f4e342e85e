"""The job's computations on generated telemetry whose true lag, RPO, backlog, loss and duplicates are known."""

import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from ansible_collections.continuity.artemis.plugins.module_utils import drill
from continuity_rpo import metrics, telemetry

T0 = 1_700_000_000 - 1_700_000_000 % 60  # a window boundary (in the past: the job rejects rows from the future)
W = 60
NORMAL_LAG = 0.25
STALL_FROM, STALL_UNTIL, RELEASED_AT = 120, 180, 200  # probes sent in [120, 180) are seen at 200
UNSEEN_FROM, AS_OF = 290, 300  # probes sent from 290 on are never seen


def _probe_rows():
    rows = []
    for second in range(0, AS_OF):
        probe = {"probe_id": f"p{second}", "source_datacentre": "dc1", "target_datacentre": "dc2"}
        rows.append(dict(probe, event="sent", time=T0 + second))
        if second >= UNSEEN_FROM:
            continue
        stalled = STALL_FROM <= second < RELEASED_AT
        rows.append(dict(probe, event="seen", time=T0 + (RELEASED_AT if stalled else second + NORMAL_LAG)))
    return rows


@pytest.fixture(scope="module")
def latencies(spark):
    probes = telemetry.from_rows(spark, {"probes": _probe_rows()})["probes"]
    valid, rejected = metrics.probe_latencies(probes)
    assert rejected.count() == 0
    return valid.cache()


def test_lag_percentiles_per_window_are_those_of_the_probes_sent_in_it(spark, latencies):
    lag = metrics.replication_lag(latencies, W, float(T0 + AS_OF))
    # Window ending at 180: lags 80 down to 21 (sent 120..179, all seen at 200). Window ending at 240: sent 180..199
    # seen at 200 (lags 20..1), then 40 at the normal lag. Window ending at 300: 50 seen, 10 not seen by 300, which
    # count with their ages then (10 down to 1 s), not left out.
    stalled = sorted(RELEASED_AT - s for s in range(120, 180))
    expected = [
        Row(source_datacentre="dc1", target_datacentre="dc2", window_end=float(T0 + 60), probes_sent=60,
            probes_seen=60, lag_p50_seconds=NORMAL_LAG, lag_p99_seconds=NORMAL_LAG, lag_max_seconds=NORMAL_LAG),
        Row(source_datacentre="dc1", target_datacentre="dc2", window_end=float(T0 + 120), probes_sent=60,
            probes_seen=60, lag_p50_seconds=NORMAL_LAG, lag_p99_seconds=NORMAL_LAG, lag_max_seconds=NORMAL_LAG),
        Row(source_datacentre="dc1", target_datacentre="dc2", window_end=float(T0 + 180), probes_sent=60,
            probes_seen=60, lag_p50_seconds=(stalled[29] + stalled[30]) / 2,
            lag_p99_seconds=stalled[58] + 0.41 * (stalled[59] - stalled[58]), lag_max_seconds=80.0),
        Row(source_datacentre="dc1", target_datacentre="dc2", window_end=float(T0 + 240), probes_sent=60,
            probes_seen=60, lag_p50_seconds=NORMAL_LAG, lag_p99_seconds=19.41, lag_max_seconds=20.0),
        Row(source_datacentre="dc1", target_datacentre="dc2", window_end=float(T0 + 300), probes_sent=60,
            probes_seen=50, lag_p50_seconds=NORMAL_LAG, lag_p99_seconds=9.41, lag_max_seconds=10.0),
    ]
    assertDataFrameEqual(lag, expected, rtol=1e-9)


def test_the_worst_rpo_of_each_window_counts_a_stall_in_full(spark, latencies):
    rpo = metrics.rpo_over_time(latencies, W, float(T0 + AS_OF))
    # The probe sent at 120 waits until 200: 60 s old at the end of its window, 80 s when it arrives in the next;
    # at 300 the one sent at 290 is still not visible. Otherwise each probe is outstanding for the normal lag.
    expected = [Row(source_datacentre="dc1", target_datacentre="dc2", window_end=float(T0 + end), rpo_seconds=rpo)
                for end, rpo in [(60, NORMAL_LAG), (120, NORMAL_LAG), (180, 60.0), (240, 80.0), (300, 10.0)]]
    assertDataFrameEqual(rpo, expected, rtol=1e-9)


@pytest.mark.parametrize("stall_from, stall_s", [(10, 40), (35, 40), (0, 59), (50, 5)])
def test_a_stall_inside_or_across_a_window_is_its_full_length(spark, stall_from, stall_s):
    """Probes every second over two windows; those sent in [stall_from, stall_from + stall_s) all arrive at its
    end. Whatever the offset, the worst RPO seen is the stall's length (window ends alone would miss or halve it)."""
    rows = []
    for second in range(0, 2 * W):
        probe = {"probe_id": f"p{second}", "source_datacentre": "dc1", "target_datacentre": "dc2"}
        stalled = stall_from <= second < stall_from + stall_s
        rows += [dict(probe, event="sent", time=T0 + second),
                 dict(probe, event="seen", time=T0 + (stall_from + stall_s if stalled else second + NORMAL_LAG))]
    latencies, _rejected = metrics.probe_latencies(telemetry.from_rows(spark, {"probes": rows})["probes"])
    worst = max(row.rpo_seconds for row in metrics.rpo_over_time(latencies, W, float(T0 + 2 * W)).collect())
    assert worst == pytest.approx(stall_s)


def test_current_rpo_and_replicated_up_to(spark, latencies):
    current = metrics.current_rpo(latencies, float(T0 + AS_OF))
    assertDataFrameEqual(current, [Row(source_datacentre="dc1", target_datacentre="dc2", evaluated_at=float(T0 + AS_OF),
                                       replicated_up_to=float(T0 + UNSEEN_FROM - 1), rpo_seconds=10.0)])
    # In the middle of the stall: replicated up to the last probe before it, and the age of the first stalled one.
    during = metrics.current_rpo(latencies, float(T0 + 170))
    assertDataFrameEqual(during, [Row(source_datacentre="dc1", target_datacentre="dc2", evaluated_at=float(T0 + 170),
                                      replicated_up_to=float(T0 + STALL_FROM - 1), rpo_seconds=50.0)])


def test_a_probe_never_seen_stops_counting_once_a_later_one_arrived(spark):
    """The mirror delivers in order: a probe that expired, or whose prober stopped before seeing it, is not at risk
    once a later probe has reached the target."""
    rows = [dict(row) for row in _probe_rows() if not (row["probe_id"] == "p30" and row["event"] == "seen")]
    probes = telemetry.from_rows(spark, {"probes": rows})["probes"]
    latencies, _rejected = metrics.probe_latencies(probes)
    rpo = {row.window_end - T0: row.rpo_seconds for row in metrics.rpo_over_time(latencies, W, T0 + AS_OF).collect()}
    # p30 is covered when p31 arrives (31.25): outstanding 1.25 s.
    assert rpo == pytest.approx({60: 1.25, 120: NORMAL_LAG, 180: 60.0, 240: 80.0, 300: 10.0})
    current = metrics.current_rpo(latencies, float(T0 + 100)).first()
    assert current.rpo_seconds == 0.0 and current.replicated_up_to == T0 + 99


def test_a_probe_seen_before_it_was_sent_is_rejected_as_clock_skew_not_clipped(spark):
    rows = [{"probe_id": "a", "source_datacentre": "dc1", "target_datacentre": "dc2", "event": "sent", "time": 10.0},
            {"probe_id": "a", "source_datacentre": "dc1", "target_datacentre": "dc2", "event": "seen", "time": 9.0},
            {"probe_id": "b", "source_datacentre": "dc1", "target_datacentre": "dc2", "event": "seen", "time": 9.0},
            {"probe_id": "c", "source_datacentre": "dc1", "target_datacentre": "dc2", "event": "sent", "time": 10.0},
            {"probe_id": "c", "source_datacentre": "dc1", "target_datacentre": "dc2", "event": "seen", "time": 11.0}]
    valid, rejected = metrics.probe_latencies(telemetry.from_rows(spark, {"probes": rows})["probes"])
    assertDataFrameEqual(rejected, [Row(reason="probe seen before it was sent (clock skew)", count=1),
                                    Row(reason="probe seen but never sent", count=1)])
    assert [row.probe_id for row in valid.collect()] == ["c"]


def test_rows_missing_fields_or_with_unknown_events_are_counted_per_reason(spark):
    rows = {"queue_samples": [{"time": 1.0, "broker": "b", "datacentre": "dc1", "queue": "q", "messages_added": 1,
                               "messages_acknowledged": 0, "message_count": 1, "delivering_count": 0},
                              {"time": 2.0, "broker": "b", "datacentre": "dc1", "queue": "q"},
                              {"time": 3.0, "broker": "b", "datacentre": "dc1", "queue": "q", "messages_added": -1,
                               "messages_acknowledged": 0, "message_count": 1, "delivering_count": 0}],
            "probes": [{"probe_id": "x", "source_datacentre": "dc1", "target_datacentre": "dc2", "event": "lost",
                        "time": 1.0}]}
    read = telemetry.from_rows(spark, rows)
    assert read["queue_samples"].count() == 1 and read["probes"].count() == 0
    assert read.rejected == [("probes", "unknown event", 1), ("queue_samples", "missing messages_added", 1),
                             ("queue_samples", "negative counter", 1)]


def _queue_rows():
    """dc1 takes 10 messages/s and acknowledges 8/s; dc2 (the mirror) is 50 messages and 20 acknowledgements behind.
    dc1's broker restarts at 30 s (counters start again from 0)."""
    rows = []
    for second in range(0, 60, 5):
        added, acked = 10 * second, 8 * second
        restarted = second >= 30
        for dc, behind_added, behind_acked in (("dc1", 0, 0), ("dc2", 50, 20)):
            base_added = 300 if restarted and dc == "dc1" else 0
            base_acked = 240 if restarted and dc == "dc1" else 0
            rows.append({"time": T0 + second, "broker": f"{dc}-node1", "datacentre": dc, "queue": "orders",
                         "messages_added": max(added - behind_added, 0) - base_added,
                         "messages_acknowledged": max(acked - behind_acked, 0) - base_acked,
                         "message_count": 2 * second, "delivering_count": 3, "consumer_count": 1})
    return rows


def test_throughput_consumption_and_in_flight_deliveries_survive_a_counter_reset(spark):
    flow = metrics.queue_flow(telemetry.from_rows(spark, {"queue_samples": _queue_rows()})["queue_samples"], W)
    dc1 = flow.where("datacentre = 'dc1'").first()
    # 5 s steps of 50 added and 40 acknowledged, except the step across the restart (the new counter is 0 at 30 s):
    # what arrived in it is not observable, so it is left out, length included. The true rates remain.
    assert dc1.messages_in_per_second == pytest.approx(10.0)
    assert dc1.acknowledged_per_second == pytest.approx(8.0)
    assert (dc1.message_count, dc1.delivering_max, dc1.consumers) == (110, 3, 1)


def test_rates_over_a_window_covered_in_part_are_the_true_rates(spark):
    """100 msg/s sampled every 5 s for the first 25 s of a window (the newest, unfinished one) reads 100, not 42."""
    rows = [{"time": T0 + second, "broker": "dc1-node1", "datacentre": "dc1", "queue": "orders",
             "messages_added": 100 * second, "messages_acknowledged": 90 * second, "message_count": 0,
             "delivering_count": 0, "consumer_count": 1} for second in range(0, 30, 5)]
    flow = metrics.queue_flow(telemetry.from_rows(spark, {"queue_samples": rows})["queue_samples"], W).first()
    assert (flow.messages_in_per_second, flow.acknowledged_per_second) == (pytest.approx(100.0), pytest.approx(90.0))
    single = metrics.queue_flow(telemetry.from_rows(spark, {"queue_samples": rows[:1]})["queue_samples"], W).first()
    assert single.messages_in_per_second is None, "one sample measures no rate"


def test_backlog_in_messages_and_acknowledgements(spark):
    rows = [row for row in _queue_rows() if row["time"] < T0 + 30]  # before the restart counters are comparable
    flow = metrics.queue_flow(telemetry.from_rows(spark, {"queue_samples": rows})["queue_samples"], W)
    backlog = metrics.queue_backlog(flow).select("datacentre", "backlog_messages", "backlog_acknowledgements")
    assertDataFrameEqual(backlog, [Row(datacentre="dc1", backlog_messages=0, backlog_acknowledgements=0),
                                   Row(datacentre="dc2", backlog_messages=50, backlog_acknowledgements=20)])


def test_backlog_is_unknown_once_a_broker_restarted_never_a_wrong_number(spark):
    flow = metrics.queue_flow(telemetry.from_rows(spark, {"queue_samples": _queue_rows()})["queue_samples"], W)
    backlog = metrics.queue_backlog(flow).select("datacentre", "counters_reset", "backlog_messages")
    assertDataFrameEqual(backlog, [Row(datacentre="dc1", counters_reset=True, backlog_messages=None),
                                   Row(datacentre="dc2", counters_reset=False, backlog_messages=None)])


def test_link_backlog_sums_the_brokers_and_mirrors_of_the_source_datacentre(spark):
    rows = [{"time": T0 + s, "broker": broker, "datacentre": "dc1", "link": "dc2_all", "target_datacentre": "dc2",
             "connected": connected, "backlog": backlog}
            for s, broker, connected, backlog in [(1, "n1", True, 5), (2, "n1", False, 900), (3, "n1", False, 700),
                                                  (1, "n2", True, 0), (3, "n2", True, 40)]]
    # A second group's mirror on the same broker, sampled at the same times, adds its own backlog.
    rows += [dict(row, link="dc2_east", backlog=1, connected=True) for row in rows if row["broker"] == "n1"]
    link = metrics.link_backlog(telemetry.from_rows(spark, {"link_samples": rows})["link_samples"], W)
    # connected_ratio: the least connected of the mirrors (n1's dc2_all was down 2 of 3 samples).
    assertDataFrameEqual(link, [Row(source_datacentre="dc1", target_datacentre="dc2", window_end=float(T0 + 60),
                                    backlog_events_last=741, backlog_events_max=941, connected_ratio=1 / 3)])


def _ledger_rows():
    """Drill f1: 100 ids accepted at dc1 every 0.5 s; dc1 fails at 50 s. Ids 0-89 consumed at dc1, 80-84 consumed
    again at dc2 (5 duplicates), 90-94 left on dc2, 95-99 lost (the oldest accepted at 47.5 s). dc2 accepts its first
    message 5 s after the fault."""
    rows = [{"drill": "f1", "id": None, "datacentre": "dc1", "event": "fault", "time": 50.0}]
    for i in range(100):
        rows.append({"drill": "f1", "id": f"m{i}", "datacentre": "dc1", "event": "accepted", "time": i * 0.5})
        if i < 90:
            rows.append({"drill": "f1", "id": f"m{i}", "datacentre": "dc1", "event": "consumed", "time": i * 0.5 + 0.1})
        if 80 <= i < 85:
            rows.append({"drill": "f1", "id": f"m{i}", "datacentre": "dc2", "event": "consumed", "time": 60.0})
        if 90 <= i < 95:
            rows.append({"drill": "f1", "id": f"m{i}", "datacentre": "dc2", "event": "present", "time": 70.0})
    rows.append({"drill": "f1", "id": "m100", "datacentre": "dc2", "event": "accepted", "time": 55.0})
    rows.append({"drill": "f1", "id": "m100", "datacentre": "dc2", "event": "consumed", "time": 56.0})
    return rows


DRILL_F1 = {"accepted": 101, "lost": 5, "duplicates": 5, "fault_time": 50.0, "failed_datacentre": "dc1",
            "rpo_seconds": 2.5, "rto_seconds": 5.0}


def test_drill_loss_duplicates_rpo_and_rto_from_the_ledger(spark):
    ledgers = telemetry.from_rows(spark, {"ledgers": _ledger_rows()})["ledgers"]
    assertDataFrameEqual(metrics.drill_outcomes(ledgers), [Row(drill="f1", **DRILL_F1)])


def test_the_drill_playbook_reads_a_ledger_as_the_job_does():
    # The drill's own evidence (module_utils/drill.py) and the job's figures come from the same ledger.
    assert drill.outcome(_ledger_rows()) == DRILL_F1


def _undispatched_rows(datacentre, target, link, values, every=5, broker="n1"):
    return [{"time": T0 + every * i, "broker": broker, "datacentre": datacentre, "link": link,
             "target_datacentre": target, "connected": True, "backlog": 100, "undispatched": value}
            for i, value in enumerate(values)]


def test_the_estimate_before_the_fault_stands_beside_the_drill(spark):
    rows = [row for row in _queue_rows() if row["time"] < T0 + 30]
    # dc1's two mirrors to dc2 held 0, 0, 4, 0, 2, 0 and 1 each time events their senders had not taken yet, in
    # the samples of the minute before the fault; a sample after it, one older than the window and dc2's own
    # mirror do not count.
    links = (_undispatched_rows("dc1", "dc2", "dc2_all", [0, 0, 4, 0, 2, 0, 500])
             + _undispatched_rows("dc1", "dc2", "dc2_east", [1] * 6)
             + [dict(row, time=row["time"] - W - 1) for row in _undispatched_rows("dc1", "dc2", "dc2_all", [900])]
             + _undispatched_rows("dc2", "dc1", "dc1_all", [30] * 6))
    data = telemetry.from_rows(spark, {"queue_samples": rows, "link_samples": links})
    drills = spark.createDataFrame([Row(drill="f1", fault_time=float(T0 + 27), failed_datacentre="dc1")])
    # The last samples before the fault (25 s): dc2 is 50 messages behind dc1; dc1 has 3 deliveries in flight;
    # its senders had 1 + 1 events waiting on average.
    assertDataFrameEqual(metrics.at_risk_before(data["queue_samples"], data["link_samples"], drills, W), [
        Row(drill="f1", estimated_at=float(T0 + 25), messages_at_risk=50, deliveries_at_risk=3,
            messages_in_flight=2.0)])


def test_the_tail_is_the_largest_of_the_datacentres_that_could_take_over_and_unknown_without_samples(spark):
    links = (_undispatched_rows("dc1", "dc2", "dc2_all", [3, 3]) + _undispatched_rows("dc1", "dc3", "dc3_all", [5, 7])
             + _undispatched_rows("dc1", "dc2", "dc2_all", [1, 1], broker="n2"))
    samples = telemetry.from_rows(spark, {"link_samples": links})["link_samples"]
    faults = spark.createDataFrame([Row(drill="f1", fault_time=float(T0 + 6), failed_datacentre="dc1"),
                                    Row(drill="f2", fault_time=float(T0 + 6), failed_datacentre="dc9")])
    assertDataFrameEqual(metrics.in_flight_before(samples, faults, W), [Row(drill="f1", messages_in_flight=6.0)])


def test_rto_estimate_is_detection_plus_activation_plus_draining_at_the_measured_speed(spark):
    rows = [row for row in _queue_rows() if row["time"] < T0 + 30]
    flow = metrics.queue_backlog(metrics.queue_flow(
        telemetry.from_rows(spark, {"queue_samples": rows})["queue_samples"], W))
    estimate = metrics.rto_estimate(flow, detection=30.0, activation=2.0).where("datacentre = 'dc2'").first()
    speed = 8.0  # 200 acknowledged at dc1 between 0 s and 25 s: the rate over what the window covers so far
    assert estimate.consumption_per_second == pytest.approx(speed)
    assert estimate.drain_seconds == pytest.approx(50 / speed)
    assert estimate.rto_seconds == pytest.approx(32 + 50 / speed)


def test_activation_time_is_the_median_over_operations_and_the_default_without_any(spark):
    events = [{"name": "swapover", "id": op, "phase": phase, "at": at}
              for op, base in (("a", "2026-11-22T05:00:0"), ("b", "2026-11-22T06:00:0"), ("c", "2026-11-22T07:00:0"))
              for phase, at in (("started", base + "0Z"), ("activated", base + ("2Z" if op != "c" else "9Z")))]
    durations = metrics.operation_durations(telemetry.from_rows(spark, {"events": events})["events"])
    assert metrics.activation_seconds(durations, default=99.0) == pytest.approx(2.0)
    assert metrics.activation_seconds(durations.limit(0), default=99.0) == 99.0


def test_kept_messages_are_each_live_brokers_latest_sample_summed_per_datacentre_and_address(spark):
    rows = [{"time": T0 + s, "broker": broker, "datacentre": dc, "kept": kept, "kept_by_address": by_address}
            for s, broker, dc, kept, by_address in [
                (10, "dc2-n1", "dc2", 5, {"orders.a": 4, "orders.b": 1}),
                (20, "dc2-n1", "dc2", 2, {"orders.a": 2}),           # reconciled in part since
                (20, "dc2-n2", "dc2", 1, {"orders.a": 1}),           # a second live broker of dc2 (shared estate)
                (20, "dc1-n1", "dc1", 0, {}),                        # nothing kept: 0, not absent
                (-100, "dc3-n1", "dc3", 7, {"orders.c": 7})]]        # not sampled in the last window: left out
    kept = telemetry.from_rows(spark, {"kept_samples": rows})["kept_samples"]
    per_datacentre, per_address = metrics.kept_messages(kept, T0 + 30, W)
    assertDataFrameEqual(per_datacentre, [Row(datacentre="dc1", kept_messages=0),
                                          Row(datacentre="dc2", kept_messages=3)])
    assertDataFrameEqual(per_address, [Row(datacentre="dc2", address="orders.a", kept_messages=3)])


def test_the_newest_reconciliation_of_each_operation_comes_from_the_event_log(spark):
    def event(operation_id, phase, at, **details):
        return {"name": "swapover", "id": operation_id, "phase": phase, "at": at, "source": "dc1", "target": "dc2",
                "details": {key: str(value) for key, value in details.items()}}
    events = telemetry.from_rows(spark, {"events": [
        event("a", "reconciled", "2026-11-24T10:00:00Z", kept=9, reconciled=9, discarded=0, pending=0),
        event("b", "fenced", "2026-11-24T11:00:00Z"),
        event("b", "reconciled", "2026-11-24T11:00:02Z", kept=5, reconciled=4, discarded=1, pending=0)]})["events"]
    assertDataFrameEqual(metrics.last_reconciliations(events), [
        Row(operation="swapover", target_datacentre="dc2", time=1795518002.0, kept=5, reconciled=4, discarded=1,
            pending=0)])


def _notice_sample(second, broker, datacentre, source, count, sum_seconds, max_seconds, buckets, applied=0, late=0,
                   group="shared", delay=0.5, appeared=False, durable=None):
    """durable: (count, sum in seconds) of the commit timer; None: a broker whose plugin does not have it."""
    row = {"time": T0 + second, "broker": broker, "datacentre": datacentre, "group": group, "source": source,
           "count": count, "sum_seconds": sum_seconds, "max_seconds": max_seconds, "applied": applied,
           "late": late, "buckets": dict(zip(("0.1", "0.2", "0.5", "1.0", "+Inf"), buckets)),
           "staging_delay_seconds": delay, "appeared": appeared}
    if durable is not None:
        row["durable_count"], row["durable_sum_seconds"] = durable
    return row


def test_ack_notice_deltas_are_the_window_increases_of_each_brokers_histogram(spark):
    rows = [
        # dc2 receives dc1's notices: 90 before its sample before the window (not counted), 10 at 0.05 s up to its
        # first sample in the window, then 50 at 0.05 s, then 48 at 0.15 s and 2 at 0.8 s, which came after the
        # 0.5 s delay (late).
        _notice_sample(-70, "dc2-n1", "dc2", "dc1", 50, 5.0, 3.0, [50] * 5, applied=50),  # more than a window before
        _notice_sample(-10, "dc2-n1", "dc2", "dc1", 90, 9.5, 3.0, [90] * 5, applied=90),
        _notice_sample(5, "dc2-n1", "dc2", "dc1", 100, 10.0, 0.1, [100] * 5, applied=100),
        _notice_sample(30, "dc2-n1", "dc2", "dc1", 150, 12.5, 0.05, [150] * 5, applied=150),
        _notice_sample(55, "dc2-n1", "dc2", "dc1", 200, 21.3, 0.8, [150, 198, 198, 200, 200], applied=198, late=2),
        # dc1 restarted inside the window: its counters began again, 10 notices at 0.05 s are new.
        _notice_sample(5, "dc1-n1", "dc1", "dc2", 500, 40.0, 0.2, [400, 500, 500, 500, 500], applied=500),
        _notice_sample(30, "dc1-n1", "dc1", "dc2", 10, 0.5, 0.05, [10] * 5, applied=10),
        _notice_sample(55, "dc1-n1", "dc1", "dc2", 10, 0.5, 0.05, [10] * 5, applied=10),
        # dc3's first notices from dc1 arrived since its previous sample, which had none: all 5 (0.05 s) are new.
        _notice_sample(30, "dc3-n1", "dc3", "dc1", 5, 0.25, 0.05, [5] * 5, applied=5, appeared=True),
        _notice_sample(55, "dc3-n1", "dc3", "dc1", 5, 0.25, 0.05, [5] * 5, applied=5),
        # A group whose counters did not move in the window: no notice, so no delta, but its delay is shown.
        _notice_sample(30, "dc1-n1", "dc1", "dc2", 7, 0.7, 0.1, [7] * 5, group="quiet", delay=20.0),
        _notice_sample(55, "dc1-n1", "dc1", "dc2", 7, 0.7, 0.1, [7] * 5, group="quiet", delay=20.0)]
    samples = telemetry.from_rows(spark, {"notice_samples": rows})["notice_samples"]
    found = {row["group"]: row.asDict() for row in metrics.ack_notice_deltas(samples, T0 + 60, W).collect()}
    shared = found["shared"]
    assert (shared["notices"], shared["applied"], shared["late"]) == (125, 123, 2)
    assert shared["mean_seconds"] == pytest.approx((60 * 0.05 + 48 * 0.15 + 2 * 0.8 + 15 * 0.05) / 125)
    # 123 of 125 notices are within 0.2 s: the 99th (123.75) is in the bucket up to 1 s.
    assert shared["p99_seconds"] == 1.0
    assert shared["max_seconds"] == 0.8  # the sample before the window (3.0) is not the window's
    assert shared["delay_seconds"] == 0.5
    assert shared["durable_mean_seconds"] is None  # no broker of these has the commit timer
    assert found["quiet"] == {"group": "quiet", "notices": 0, "applied": 0, "late": 0, "mean_seconds": None,
                              "p99_seconds": None, "max_seconds": None, "durable_mean_seconds": None,
                              "delay_seconds": 20.0, "last_sample_time": float(T0 + 55)}


def test_the_mean_time_to_the_notices_journal_commit_is_the_window_increase_of_its_timer(spark):
    rows = [
        # dc2's commit timer: 62 notices committed in the window, 31 s in all; 2 routed but not committed yet.
        _notice_sample(-10, "dc2-n1", "dc2", "dc1", 90, 9.0, 0.2, [90] * 5, durable=(88, 44.0)),
        _notice_sample(30, "dc2-n1", "dc2", "dc1", 152, 15.2, 0.2, [152] * 5, durable=(150, 75.0)),
        # dc3's plugin does not time the commit: its notices count, its commits are unknown, not zero.
        _notice_sample(-10, "dc3-n1", "dc3", "dc1", 90, 9.0, 0.2, [90] * 5),
        _notice_sample(30, "dc3-n1", "dc3", "dc1", 100, 10.0, 0.2, [100] * 5)]
    samples = telemetry.from_rows(spark, {"notice_samples": rows})["notice_samples"]
    shared = metrics.ack_notice_deltas(samples, T0 + 60, W).first().asDict()
    assert shared["notices"] == 72 and shared["mean_seconds"] == pytest.approx(0.1)
    assert shared["durable_mean_seconds"] == pytest.approx(31.0 / 62)
