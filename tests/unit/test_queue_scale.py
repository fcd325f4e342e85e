"""B10's pure parts (tests/benchmarks/queue_scale.py): the queue plan and its inventory entries, the task times read
from profile_tasks' recap, the collector's figures and the rendered section. The figures here are made up."""

import json
from types import SimpleNamespace

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_broker_config import config_errors
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    drain_scope, normalise_groups)
from benchmarks import queue_scale
from benchmarks.bench import ADDRESS_GROUPS


def test_the_plan_declares_half_creates_half_and_keeps_every_queue_in_the_swapped_group():
    plan = queue_scale.queue_plan(5_000)
    assert len(plan["declared"]) == len(plan["runtime"]) == 2_500
    names = plan["declared"] + plan["runtime"]
    assert len(set(names)) == 5_000
    assert plan["measured"] in plan["declared"]
    group = next(group for group in normalise_groups(ADDRESS_GROUPS, "dc1") if group["name"] == "repl")
    assert group["mode"] == "full_state" and group["engine"] == "mirror"
    assert all(name.startswith(tuple(group["addresses"])) for name in names)
    # The drain check and the swapover compare exactly these queues.
    assert drain_scope(ADDRESS_GROUPS, queue_scale.GROUPS, ["dc1", "dc2"])["include_prefixes"] == group["addresses"]


def test_an_odd_size_declares_the_larger_half():
    plan = queue_scale.queue_plan(5)
    assert (len(plan["declared"]), len(plan["runtime"])) == (3, 2)


def test_the_declared_queues_are_broker_queues_the_role_accepts():
    declared = queue_scale.queue_plan(50)["declared"]
    entries = queue_scale.declared_queue_vars(declared)
    assert [entry["name"] for entry in entries] == declared
    assert config_errors([{"name": "DLQ"}, {"name": "ExpiryQueue"}], [], entries, [], [], []) == []


RECAP = """\
PLAY RECAP *********************************************************************
localhost                  : ok=40   changed=6    unreachable=0    failed=0    skipped=9    rescued=0    ignored=0

TASKS RECAP ********************************************************************
Tuesday 01 December 2026  10:00:42 +0000 (0:00:00.021)       0:00:41.880 ******
===============================================================================
Fence dc1 --------------------------------------------------------------- 31.40s
Put what the target kept into its queues where the source still holds it, dc2 --- 2.10s
Drop the copies of what the source consumed, full_state groups on mirrors, every other datacentre -- 1.50s
Drop the copies of what the source consumed, full_state groups on bridges, dc2 --- 0.70s
Record the phase fenced ------------------------------------------------- 0.30s
Record the phase fenced ------------------------------------------------- 0.20s
A task longer than a thousand seconds  1234.56s
[WARNING]: something the run said on stderr 9.99s
"""


def test_task_times_are_read_from_the_recap_and_a_repeated_name_is_summed():
    tasks = queue_scale.task_seconds(RECAP)
    assert tasks == {"Fence dc1": 31.4,
                     "Put what the target kept into its queues where the source still holds it, dc2": 2.1,
                     "Drop the copies of what the source consumed, full_state groups on mirrors, every other "
                     "datacentre": 1.5,
                     "Drop the copies of what the source consumed, full_state groups on bridges, dc2": 0.7,
                     "Record the phase fenced": 0.5, "A task longer than a thousand seconds": 1234.56}
    assert list(queue_scale.slowest(tasks, 2)) == ["A task longer than a thousand seconds", "Fence dc1"]
    assert queue_scale.reconcile_seconds(tasks) == 4.3


def test_without_a_recap_there_are_no_task_times():
    assert queue_scale.task_seconds("PLAY RECAP ****\nlocalhost : ok=1\n") == {}
    assert queue_scale.reconcile_seconds({}) is None


def _row(now, broker, queue):
    return {"time": now, "broker": broker, "queue": queue}


def test_the_collector_figures_put_the_rows_written_beside_every_row_computed():
    idle = {"q1", "q2", "q3"}
    brokers = ["dc1-node1", "dc2-node1"]
    cycle_times = [float(5 * cycle) for cycle in range(24) for _broker in brokers for _link in range(2)]
    # Over two minutes: each idle queue written at each edge of two windows, the busy one at every sample.
    rows = [_row(t, broker, queue) for t in (0, 55, 60, 115) for broker in brokers for queue in sorted(idle)]
    rows += [_row(5 * cycle, broker, "busy") for cycle in range(24) for broker in brokers]
    figures = queue_scale.collector_figures(rows, cycle_times, 120.0, 6.0, rows_per_full_sample=8, live_brokers=2,
                                            idle_queues=idle)
    assert figures["cycles"] == 24
    assert figures["cpu_s_per_cycle"] == 0.25
    assert figures["samples_per_minute"] == 12
    assert figures["idle_queue_rows_per_minute"] == 12  # 24 rows in 2 minutes
    assert figures["queue_rows_per_minute"] == 36
    assert figures["every_row_idle_per_minute_computed"] == 3 * 2 * 12
    assert figures["every_row_per_minute_computed"] == 8 * 12


def _swapover(source, target, playbook_s, first_consume_s=None):
    swap = {"source": source, "target": target, "playbook_s": playbook_s, "reconcile_s": 1.2,
            "phases_s": {"started": 0.0, "fenced": 1.7, "reconciled": 3.9, "drained": 5.1, "activated": 6.7},
            "slowest_tasks_s": {"Fence dc1": 0.9, "Activate dc2": 0.8}}
    if first_consume_s is not None:
        swap.update(fence_to_first_consume_s=first_consume_s,
                    light_load={"accepted": 1_900, "consumed": 1_900, "duplicates": 0, "lost": 0})
    return swap


def _result(large_playbook_s):
    rows = []
    for queues, playbook_s in ((50, 12.0), (5_000, large_playbook_s)):
        rows.append({
            "queues": queues, "declared": queues // 2, "runtime": queues // 2, "site_cold_s": 75.0,
            "site_warm_s": 41.0, "runtime_create_s": 2.5, "runtime_at_target_s": 1.0, "drain_check_s": 4.2,
            "drain_check_module_s": 0.8, "job_s": 35.0,
            "job_follow": {"runs": 9, "first_s": 40.0, "later_median_s": 6.5, "later_max_s": 9.1,
                           "later_queue_rows_median": 2_480},
            "swapover": _swapover("dc1", "dc2", playbook_s, 5.0), "swapover_back": _swapover("dc2", "dc1", 11.0),
            "collector": {"seconds": 180.0, "cpu_s_per_cycle": 0.4, "samples_per_minute": 12.0,
                          "queue_rows_per_minute": 20_150, "idle_queue_rows_per_minute": 20_000,
                          "every_row_idle_per_minute_computed": 119_976, "silent_samples": 0}})
    return {"goal": "a swapover with 5,000 idle queues within 2x of one with 50",
            "method": {"estate": "2 x 2 shared_nothing", "group": "repl (full_state, mirror)",
                       "runtime_queues": "AMQP receivers", "light_load": {"rate_per_s": 10, "message_size": 1024},
                       "drain_check": "artemis_drain_check", "collector": "every 5 s", "job": "one batch run",
                       "task_times": "profile_tasks"},
            "rows": rows, "summary": queue_scale.scale_ratios(rows)}


def test_the_section_has_a_row_per_size_and_direction_and_judges_the_goal():
    lines = queue_scale.render_b10(_result(large_playbook_s=18.0), "unused")
    assert lines[0] == "Goal: a swapover with 5,000 idle queues within 2x of one with 50."
    swapovers = [line for line in lines if line.startswith(("| 50 |", "| 5,000 |")) and "→" in line]
    assert len(swapovers) == 4
    assert "| 5,000 | dc1 → dc2 | **5.0 s** | **18.0 s** | 1.2 s |" in swapovers[2]
    assert swapovers[3].endswith("| - |")  # the swap back has no clients
    assert ("| 5,000 | **0.4 s** | 12.0 | 20,150 | **20,000** | 119,976 | 0 | **35.0 s** | 40.0 s, **6.5 s (9.1 s)** "
            "| 2,480 |") in lines
    assert "playbook **1.5×** (goal ≤ 2×: met)" in lines[-1]


def test_a_swapover_more_than_twice_as_long_misses_the_goal():
    result = _result(large_playbook_s=30.0)
    assert result["summary"] == {"queues": [50, 5_000], "playbook": 2.5, "fence_to_first_consume": 1.0}
    assert "(goal ≤ 2×: not met)" in queue_scale.render_b10(result)[-1]


def test_the_entry_point_assembles_a_json_result_that_renders(monkeypatch):
    rows = {row["queues"]: row for row in _result(large_playbook_s=18.0)["rows"]}
    measured = []

    def fake_measure(total, warmup, seconds):
        measured.append((total, warmup, seconds))
        return rows[total]

    monkeypatch.setattr(queue_scale, "_measure", fake_measure)
    result = queue_scale.queue_scale(SimpleNamespace(warmup=5, seconds=20))
    assert measured == [(50, 5, 20), (5_000, 5, 20)]
    assert json.loads(json.dumps(result)) == result
    assert result["summary"]["playbook"] == 1.5
    lines = queue_scale.render_b10(result)
    assert "created at runtime at dc1 (AMQP receivers attaching with the queue capability, 4 connections" in lines[2]


FOLLOW_STDERR = """\
26/12/05 14:20:01 WARN NativeCodeLoader: Unable to load native-hadoop library
continuity_rpo: ingested 60012 queue_samples row(s)
continuity_rpo: ingested 36 link_samples row(s)
continuity_rpo: run took 41.5 s, longer than --follow 15
continuity_rpo: ingested 2500 queue_samples row(s)
continuity_rpo: recomputing the windows from 1764944460, reading from 1764944400
continuity_rpo: run took 7.25 s
continuity_rpo: ingested 2460 queue_samples row(s)
continuity_rpo: ingested 4 link_samples row(s)
continuity_rpo: run took 9.0 s
"""


def test_the_follow_figures_part_the_first_run_from_the_later_ones():
    assert queue_scale.follow_figures(FOLLOW_STDERR) == {
        "runs": 3, "first_s": 41.5, "later_median_s": 8.125, "later_max_s": 9.0, "later_queue_rows_median": 2480}


def test_a_follow_job_that_printed_no_run_has_no_figures():
    assert queue_scale.follow_figures("continuity_rpo: telemetry under /x: no telemetry yet\n") == {
        "runs": 0, "first_s": None, "later_median_s": None, "later_max_s": None, "later_queue_rows_median": None}
