"""Property-based tests: generated telemetry (stalls at any offset and length against the windows, any rate, rows in
any order, a start anywhere in a window) gives the numbers a small, independent plain-Python reference computes
from the definitions: RPO at an instant is the age of the oldest probe not yet covered at the target."""

import random

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.testing import assertDataFrameEqual

from continuity_rpo import job, metrics, sla, telemetry

from test_metrics import T0

# Each example is a Spark computation of a second or two: few, reproducible examples (the same ones in CI).
SPARK_EXAMPLES = settings(max_examples=6, deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@st.composite
def probe_runs(draw):
    """Probes every second over a few windows, each seen after the normal lag, except those sent during a stall,
    which all arrive when it ends; the newest may not have arrived when the job runs."""
    window = draw(st.sampled_from([10, 30, 60]))
    start = T0 + draw(st.floats(0, window, allow_nan=False)) // 0.01 * 0.01
    count = draw(st.integers(2 * window, 4 * window))
    lag = draw(st.floats(0.01, 2.0))
    stalls = draw(st.lists(st.tuples(st.floats(0, count), st.floats(0.5, 2.5 * window)), max_size=2))
    as_of = start + count + draw(st.floats(0, 2 * window))
    probes = []
    for index in range(count):
        sent = start + index
        ends = [start + offset + length for offset, length in stalls if offset <= index < offset + length]
        seen = max(ends) if ends else sent + lag
        probes.append((f"p{index:05d}", sent, seen if seen <= as_of else None))
    return window, as_of, probes, draw(st.randoms(use_true_random=False))


def _rows(probes, shuffle):
    rows = []
    for probe_id, sent, seen in probes:
        probe = {"probe_id": probe_id, "source_datacentre": "dc1", "target_datacentre": "dc2"}
        rows.append(dict(probe, event="sent", time=sent))
        if seen is not None:
            rows.append(dict(probe, event="seen", time=seen))
    shuffle.shuffle(rows)  # segments are published in any order
    return rows


def _reference_rpo(probes, instant):
    """RPO just before ``instant``: its age, for the oldest probe sent before it that neither it nor any later probe
    had shown at the target by then."""
    covered = {}
    earliest_later = None
    for probe_id, _sent, seen in sorted(probes, key=lambda probe: probe[1], reverse=True):
        if seen is not None and (earliest_later is None or seen < earliest_later):
            earliest_later = seen
        covered[probe_id] = earliest_later
    at_risk = [sent for probe_id, sent, _seen in probes
               if sent < instant and (covered[probe_id] is None or covered[probe_id] >= instant)]
    return instant - min(at_risk) if at_risk else 0.0


def _reference_worst_per_window(probes, window, as_of):
    """The largest RPO in each complete window [end - window, end): RPO only grows between cover events, so its
    largest values are reached just before one, or at the window's end."""
    first = min(sent for _id, sent, _seen in probes)
    ends = range((int(first // window) + 1) * window, int(as_of // window) * window + 1, window)
    covers = sorted({seen for _id, _sent, seen in probes if seen is not None})
    worst = {}
    for end in ends:
        instants = [end] + [cover for cover in covers if end - window < cover < end]
        worst[float(end)] = max(_reference_rpo(probes, instant) for instant in instants)
    return worst


@SPARK_EXAMPLES
@given(run=probe_runs())
def test_worst_rpo_per_window_and_the_verdict_match_the_reference(spark, run):
    window, as_of, probes, shuffle = run
    latencies, rejected = metrics.probe_latencies(
        telemetry.from_rows(spark, {"probes": _rows(probes, shuffle)}, now=as_of)["probes"])
    assert rejected.count() == 0
    expected = _reference_worst_per_window(probes, window, as_of)
    windows = metrics.rpo_over_time(latencies, window, as_of).cache()
    assertDataFrameEqual(windows.select("window_end", "rpo_seconds"),
                         spark.createDataFrame(sorted(expected.items()), "window_end double, rpo_seconds double"),
                         atol=1e-6)

    objectives = {"rpo_seconds": 5.0, "target_ratio": 0.9}
    (verdict,) = sla.link_compliance([row.asDict() for row in windows.collect()], objectives)
    good = sum(value <= 5.0 for value in expected.values()) / len(expected)
    assert verdict["good_ratio"] == pytest.approx(good)
    assert verdict["passed"] == (good >= 0.9)

    (current,) = metrics.current_rpo(latencies, as_of).collect()
    assert current.rpo_seconds == pytest.approx(_reference_rpo(probes, as_of + 1e-9), abs=1e-6)


@st.composite
def queue_runs(draw):
    """A broker sampled every few seconds from anywhere in a window, messages arriving and acknowledged at constant
    rates; the samples end anywhere in a later window (the newest one unfinished)."""
    window = draw(st.sampled_from([30, 60]))
    interval = draw(st.sampled_from([1, 2, 5]))
    start = T0 + draw(st.integers(0, window - 1))
    incoming = draw(st.floats(0.5, 5000))
    acknowledged = draw(st.floats(0, 1)) * incoming
    count = draw(st.integers(2, 3 * window // interval))
    samples = [{"time": float(start + i * interval), "broker": "dc1-node1", "datacentre": "dc1", "queue": "q",
                "messages_added": round(incoming * i * interval), "messages_acknowledged":
                round(acknowledged * i * interval), "message_count": 0, "delivering_count": 0, "consumer_count": 1}
               for i in range(count)]
    return window, incoming, acknowledged, samples, draw(st.randoms(use_true_random=False))


@SPARK_EXAMPLES
@given(run=queue_runs())
def test_rates_are_the_true_rates_in_every_window_a_step_ends_in(spark, run):
    window, incoming, acknowledged, samples, shuffle = run
    rows = list(samples)
    shuffle.shuffle(rows)
    flow = metrics.queue_flow(telemetry.from_rows(spark, {"queue_samples": rows}, now=samples[-1]["time"])
                              ["queue_samples"], window)
    # Reference: a window holds a measured rate when a step (between two consecutive samples) ends in it.
    measured = {float((int(later["time"] // window) + 1) * window) for later in samples[1:]}
    rates = {row.window_end: (row.messages_in_per_second, row.acknowledged_per_second) for row in flow.collect()}
    assertDataFrameEqual(flow.where("messages_in_per_second IS NOT NULL").select("window_end"),
                         spark.createDataFrame([(int(end),) for end in sorted(measured)], "window_end long"))
    for end in measured:
        # Counters are whole messages: each step's rounding is at most one message over the window's span.
        rate, ack = rates[end]
        assert rate == pytest.approx(incoming, abs=1.0)
        assert ack == pytest.approx(acknowledged, abs=1.0)


def test_the_job_answer_does_not_depend_on_the_order_rows_arrive_in(spark):
    probes = [(f"p{i:03d}", T0 + i, T0 + i + (30 - i % 30 if 40 <= i < 70 else 0.3)) for i in range(120)]
    config = sla.load(None)
    answers = []
    for seed in (1, 2):
        data = telemetry.from_rows(spark, {"probes": _rows(probes, random.Random(seed))}, now=T0 + 200)
        results = job.compute(spark, data, config, as_of=T0 + 120)
        answers.append((results.current_rpo, results.link_sla, results.latest_lag))
    assert answers[0] == answers[1]


@st.composite
def estate_samples(draw):
    """Every few seconds, a sample of two brokers' queues over a few windows: each queue idle, or taking messages in
    bursts (counters and depth moving), a broker silent for a while, a broker restarting (its counters from 0)."""
    window = draw(st.sampled_from([10, 30, 60]))
    interval = draw(st.sampled_from([1, 2, 5]))
    start = T0 + draw(st.integers(0, window - 1))
    count = draw(st.integers(2, 4 * window // interval))
    silent = draw(st.tuples(st.integers(0, count), st.integers(0, count)))
    restart = draw(st.integers(0, 2 * count))
    queues = draw(st.lists(st.tuples(st.sampled_from(["idle", "bursts", "steady"]), st.integers(1, 50)),
                           min_size=1, max_size=4))
    bursts = draw(st.lists(st.booleans(), min_size=count, max_size=count))
    samples = []
    totals = {}
    for index in range(count):
        rows = []
        for broker, datacentre in (("dc1-node1", "dc1"), ("dc2-node1", "dc2")):
            if broker == "dc2-node1" and silent[0] <= index < silent[0] + silent[1] // 4:
                continue
            if broker == "dc1-node1" and index == restart:
                totals = {key: value for key, value in totals.items() if key[0] != broker}
            for number, (kind, rate) in enumerate(queues):
                added, acked = totals.get((broker, number), (0, 0))
                moving = kind == "steady" or (kind == "bursts" and bursts[index])
                if moving:
                    added, acked = added + rate * interval, acked + (rate * interval) // 2
                totals[(broker, number)] = (added, acked)
                rows.append({"time": float(start + index * interval), "broker": broker, "datacentre": datacentre,
                             "queue": f"q{number}", "address": f"q{number}", "messages_added": added,
                             "messages_acknowledged": acked, "message_count": added - acked,
                             "delivering_count": min(added - acked, 3 if moving else 0), "consumer_count": 1})
        samples.append((float(start + index * interval), rows))
    return window, samples


# Without shrinking: a failing example is printed as found (shrinking one took Spark more than five minutes).
@settings(SPARK_EXAMPLES, phases=[Phase.explicit, Phase.generate])
@given(run=estate_samples())
def test_the_collectors_changed_rows_give_the_figures_of_every_row(spark, run):
    from continuity_rpo.collector import QueueRows
    window, samples = run
    every_row = [row for _time, rows in samples for row in rows]
    selection = QueueRows(window)
    written = [row for now, rows in samples for row in selection.select(rows, now)]
    now = samples[-1][0]
    # The broker's newest sample, as the job takes it from the collector's every row of any kind.
    sampled_until = spark.createDataFrame(
        sorted({(row["broker"], max(other["time"] for other in every_row if other["broker"] == row["broker"]))
                for row in every_row}), "broker string, reported_up_to double")

    def flow(rows):
        samples = telemetry.from_rows(spark, {"queue_samples": rows}, now=now)["queue_samples"]
        return metrics.queue_flow(metrics.queue_samples_until(samples, sampled_until, window), window)

    from_written, from_every_row = flow(written).cache(), flow(every_row).cache()
    assertDataFrameEqual(from_written, from_every_row)
    assertDataFrameEqual(metrics.queue_backlog(from_written), metrics.queue_backlog(from_every_row))
