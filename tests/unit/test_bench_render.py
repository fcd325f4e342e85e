"""The smoke of make bench in make test: a result file in the shape bench.py writes renders into RESULTS.md (tables,
goals, findings) and its plots. The figures here are made up; the measured ones are in benchmarks/results/."""

import json

from benchmarks import bench, render


def _b1_summary():
    summary = {}
    for placement, ratio in (("unpinned", 0.5), ("pinned", 0.9)):
        for kind, factor in (("async", 1.0), ("sync", 0.5)):
            mirrored = [1000 * ratio * factor] * 3
            summary[f"{placement}.{kind}"] = {"ratios": [ratio * factor] * 3, "median_ratio": ratio * factor,
                                              "all_rounds_ratio": ratio * factor, "mirrored_per_s": mirrored,
                                              "unmirrored_per_s": [1000.0] * 3}
    return summary


RESULT = {
    "commit": "abc1234", "started": "2026-11-25T10:00:00+00:00", "finished": "2026-11-25T10:20:00+00:00",
    "machine": {"cpus": 2, "memory_gib": 23.5, "kernel": "6.1", "model": "a CPU"}, "artemis_version": "2.56.0",
    "settings": {"broker_java_max_heap": "1g"}, "site_converge_s": 180.0,
    "benchmarks": {
        "B1": {"goal": "ratio >= 0.85, pinned, async", "summary": _b1_summary(), "runs": [],
               "method": {"producers": 1, "consumers": 1, "message_size": 1024, "seconds": 20, "warmup_seconds": 5,
                          "rounds": 3, "wan_delay_ms": 0, "pinned_cpus": {"dc1": "0", "dc2": "1", "client": "1"}}},
        "B2": {"goal": "p99 <= delay + 50 ms",
               "method": {"rate_per_s": 1000, "message_size": 1024, "seconds": 30, "warmup_seconds": 5,
                          "address_group_mode": "messages_only"},
               "rows": [{"wan_delay_ms": d, "messages": 30000, "p50_ms": d + 3, "p99_ms": d + (20 if d < 50 else 80),
                         "max_ms": d + 200, "goal_p99_ms": d + 50} for d in (0, 20, 50, 100)]},
        "B3": {"goal": "<= 30 s at 10,000", "method": {"message_size": 1024, "groups": ["repl"], "consumer_retry_s": 0.1},
               "rows": [{"queued": 10_000, "source": "dc1", "target": "dc2", "fence_to_first_consume_s": 12.5,
                         "playbook_s": 20.0, "phases_s": {"started": 0.0, "fenced": 3.0, "activated": 14.0},
                         "consumed": 10_001, "duplicates": 0}]},
        "B8": {"method": {"message_size": 1024, "seconds": 20, "warmup_seconds": 5, "rounds": 2,
                          "lag_rate_per_s": 1000},
               "throughput": {"mirror": {"sent_per_s": [8000.0, 8200.0], "median_ratio": 0.4, "drain_s": [0.1, 0.2],
                                         "copies_at_dc2": [160000, 164000]},
                              "unreplicated": {"sent_per_s": [20000.0, 20500.0], "median_ratio": 1.0,
                                               "drain_s": [0.1, 0.1], "copies_at_dc2": [None, None]}},
               "lag": [{"engine": "bridge", "wan_delay_ms": 50, "messages": 20000, "p50_ms": 55.0, "p99_ms": 90.5,
                        "max_ms": 150.0}]}}}

LIVE_RPO_DRILL = {
    "drill": "live_rpo_page", "rate_msg_s": 200, "objective_s": 5, "scrape_interval_s": 5, "rule_interval_s": 5,
    "runs": [{"fault": "partition dc1 dc2", "page_s": 14.1, "resolve_s": 43.8},
             {"fault": "dc2's broker stopped", "page_s": None, "resolve_s": 0.0}],
    "steady": {"seconds": 600, "wan_delay_ms": 50, "wan_loss_pct": 1, "worst_live_rpo_s": {"dc1->dc2": 236.2},
               "alerts_firing": [{"alertname": "ContinuityArtemisRpoAboveObjectiveNow", "source_datacentre": "dc1",
                                  "target_datacentre": "dc2"}]},
    "budget_alerts_after_the_stalls": [["ContinuityArtemisRpoBudgetFastBurn", "dc1", "dc2"]],
    "page_s": {"median": 14.1, "max": 14.1}}


def test_a_result_renders_its_tables_goals_and_plots(tmp_path, monkeypatch):
    path = tmp_path / "2026-11-25-abc1234.json"
    path.write_text(json.dumps(RESULT))
    findings = tmp_path / "findings.yml"
    findings.write_text("B1: The shared CPUs.\n")
    monkeypatch.setattr(render, "FINDINGS", str(findings))
    drills = tmp_path / "drills"
    drills.mkdir()
    (drills / "live_rpo_page.json").write_text(json.dumps(LIVE_RPO_DRILL))
    text = open(render.render([str(path)], str(tmp_path), str(drills))).read()
    assert "| pinned | async | 900, 900, 900 | 1,000, 1,000, 1,000 | 0.90, 0.90, 0.90 | **0.9** | 0.9 | yes |" in text
    assert "| unpinned | async |" in text and "| - |" in text
    assert "| 50 ms | 30,000 | 53 ms | **130 ms** | 250 ms | ≤ 100 ms | no |" in text
    assert "| 20 ms | 30,000 | 23 ms | **40 ms** | 220 ms | ≤ 70 ms | yes |" in text
    assert "**What limits it.** The shared CPUs." in text
    assert ("| 10,000 | dc1 → dc2 | **12.5 s** | 20.0 s | started 0.0, fenced 3.0, activated 14.0 | 10,001 / 0 | yes |"
            in text)
    assert "| mirror | 8,000, 8,200 | **0.4** | 0.1, 0.2 | 160,000, 164,000 |" in text
    assert "| unreplicated | 20,000, 20,500 | **1.0** | 0.1, 0.1 | -, - |" in text
    assert "| bridge | 50 ms | 20,000 | 55.0 ms | **90.5 ms** | 150.0 ms |" in text
    assert "## Not measured yet\n\nB4, B6, B7, B10 (B5 is part of B4)." in text
    assert "| partition dc1 dc2 | **14.1 s** | 43.8 s |" in text
    assert "| dc2's broker stopped | **none in 120 s** | 0.0 s |" in text
    assert "Stall to page: median **14.1 s**, max **14.1 s**." in text
    assert "alerts fired: ContinuityArtemisRpoAboveObjectiveNow dc1->dc2;" in text
    assert "burn-rate alerts firing after the stalls: ContinuityArtemisRpoBudgetFastBurn dc1->dc2." in text
    assert (tmp_path / "b1-mirror-cost.png").stat().st_size > 1000
    assert (tmp_path / "b2-replication-lag.png").stat().st_size > 1000


def _b1_kind(sent, cpu, send_p99):
    return {"sent_per_s": [sent], "cpu_us_per_message": {"dc1": cpu, "dc2": cpu / 2},
            "send_time_us": {"50": 100, "99": send_p99}, "transfer_time_us": {"50": 2000, "99": 9000}}


def _profile(sent, cpu, parts, allocated, compiler):
    return {"sent_per_s": sent, "cpu_us_per_message": {"dc1": cpu, "dc2": 10.0}, "allocated_bytes_per_message": allocated,
            "profile": {"cpu": {"samples": 2500, "parts": parts,
                                "top_methods": [["org.apache.qpid.proton.codec.EncoderImpl.writeObject", 0.12]]},
                        "allocation": {"bytes": 10 ** 9, "parts": {}},
                        "threads": {"Java threads": round(1 - compiler, 3), "JIT compiler": compiler}}}


def test_b1s_sets_and_profile_render_cpu_per_message_by_part(tmp_path):
    result = json.loads(json.dumps(RESULT))
    b1 = result["benchmarks"]["B1"]
    b1["method"].update(fixed_rate_per_s=10_000, variants={"mirror TLS off": {"replication_tls": False}})
    b1["sets"] = {"amqp": {"ratios": [0.5], "median_ratio": 0.5, "all_rounds_ratio": 0.5,
                           "mirrored_per_s": [8000.0], "unmirrored_per_s": [16000.0],
                           "per_kind": {"async": dict(_b1_kind(8000, 90.0, 4000), dc1_compiler_share_of_cpu=0.12),
                                        "unmirrored": _b1_kind(16000, 45.0, 900)}}}
    b1["profiles"] = {"core profile": {
        "async": dict(_profile(8000, 100.0, {"journal": 0.4, "TLS": 0.3, "mirror": 0.3}, 3000, 0.3),
                      compiler_share_of_cpu=0.02),
        "unmirrored": _profile(20000, 50.0, {"journal": 0.8, "CORE protocol": 0.2}, 1500, 0.1)}}
    b1["variant_errors"] = {"broker metrics on": "RuntimeError: site.yml failed\nmore"}
    path = tmp_path / "2026-11-25-abc1234.json"
    path.write_text(json.dumps(result))
    text = open(render.render([str(path)], str(tmp_path), str(tmp_path / "no-drills"))).read()
    expected = [
        "| amqp | 8,000 (16,000) | **0.5** | 90.0 / 45.0 | 45.0 / 22.5 | 100 / 100 | 4,000 / 900 | 2,000 / 2,000 "
        "| 9,000 / 9,000 | 12% / - |",
        "`mirror TLS off`: `{replication_tls: false}`",
        "| journal | 40.0% | 80.0% |", "| TLS | 30.0% | 0.0% |", "| CORE protocol | 0.0% | 20.0% |",
        "mirrored 8,000 msg/s at 100.0 µs of CPU per message (its JIT compiler 2% of dc1's CPU), 2,500 stack "
        "samples; unmirrored 20,000 msg/s at 50.0 µs, 2,500 samples",
        "by kind: mirrored: Java threads 70%, JIT compiler 30%; unmirrored: Java threads 90%, JIT compiler 10%.",
        "`EncoderImpl.writeObject` 12.0%",
        "**Variant broker metrics on failed in this run:** `RuntimeError: site.yml failed`"]
    assert [line for line in expected if line not in text] == []


def test_each_section_comes_from_the_newest_run_that_measured_it(tmp_path):
    older, newer = json.loads(json.dumps(RESULT)), json.loads(json.dumps(RESULT))
    newer.update(commit="def5678", started="2026-11-26T10:00:00+00:00", benchmarks={"B3": older["benchmarks"]["B3"]})
    newer["benchmarks"]["B3"]["rows"][0]["fence_to_first_consume_s"] = 7.5
    paths = []
    for results in (newer, older):
        paths.append(tmp_path / f"{results['started'][:10]}-{results['commit']}.json")
        paths[-1].write_text(json.dumps(results))
    text = open(render.render([str(p) for p in paths], str(tmp_path), str(tmp_path / "no-drills"))).read()
    b3 = text.split("## B3", 1)[1].split("## ", 1)[0]
    assert "(commit def5678, 2026-11-26 10:00 UTC)" in b3 and "**7.5 s**" in b3 and "**12.5 s**" not in b3
    assert "(commit abc1234, 2026-11-25 10:00 UTC)" in text.split("## B1", 1)[1].split("## ", 1)[0]


def _b4_row(**figures):
    row = {"rate_per_s": 1000, "wan_delay_ms": 50, "accepted": 17_000, "lost": 4, "job_lost": 4.0,
           "estimate_before_fault": 0.0, "estimate_error": -4.0, "estimate_within_goal": True, "drill_rpo_s": 0.0,
           "loss_bound": 10, "fault_to_activated_s": 13.5, "lost_after_failback": 0, "duplicates_overall": 0}
    return dict(row, **figures)


def test_b4_shows_the_in_flight_tail_beside_what_was_behind_and_a_run_from_before_it_without(tmp_path):
    result = dict(RESULT, benchmarks={"B4": {
        "goal": "the estimate within 10 % or 5 messages",
        "method": {"producer": "proton", "load_seconds_before_fault": 15, "fault": "power off",
                   "failover": "forced", "measurement": "every 1 s"},
        "rows": [_b4_row(behind_before_fault=1.0, in_flight_estimate=2.5, estimate_before_fault=3.5,
                         estimate_error=-0.5), _b4_row(rate_per_s=100)]}})
    path = tmp_path / "2026-12-01-abc1234.json"
    path.write_text(json.dumps(result))
    text = open(render.render([str(path)], str(tmp_path), str(tmp_path))).read()
    assert "| 1,000/s | 50 ms | 17,000 | **4** | 4.0 | 1.0 | 2.5 | 3.5 | -0.5 | yes | 0.00 s | 10 | 13.5 s |" in text
    assert "| 100/s | 50 ms | 17,000 | **4** | 4.0 | 0.0 | - | 0.0 | -4.0 | yes |" in text


def test_b1s_attribution_set_pairs_the_messages_only_mirror_with_unmirrored(tmp_path):
    result = json.loads(json.dumps(RESULT))
    b1 = result["benchmarks"]["B1"]
    b1["method"].update(fixed_rate_per_s=10_000, attribution_set="core, acknowledgements not mirrored")
    b1["sets"] = {"core, acknowledgements not mirrored": {
        "ratios": [0.6], "median_ratio": 0.6, "all_rounds_ratio": 0.6, "mirrored_kind": "messages_only",
        "mirrored_per_s": [9000.0], "unmirrored_per_s": [15000.0],
        "per_kind": {"messages_only": _b1_kind(9000, 80.0, 3000), "unmirrored": _b1_kind(15000, 50.0, 800)}}}
    path = tmp_path / "2026-11-25-abc1234.json"
    path.write_text(json.dumps(result))
    text = open(render.render([str(path)], str(tmp_path), str(tmp_path / "no-drills"))).read()
    assert "| core, acknowledgements not mirrored | 9,000 (15,000) | **0.6** | 80.0 / 50.0 |" in text
    assert "The set `core, acknowledgements not mirrored` sends to a messages_only group" in text


def test_b1s_ratios_take_the_messages_only_runs_as_the_mirrored_ones_when_no_full_state_run_is_in_the_set():
    def run(kind, round_number, rate):
        return {"kind": kind, "round": round_number, "sent_per_s": rate, "cpu_us_per_message": {"dc1": 1, "dc2": 2},
                "send_time_us": {"50": 1, "99": 2}, "transfer_time_us": {"50": 1, "99": 2},
                "compiler_share_of_cpu": {"dc1": 0.01, "dc2": 0.0}}

    ratios = bench.b1_ratios([run("messages_only", 1, 600.0), run("unmirrored", 1, 1000.0),
                              run("messages_only", 2, 400.0), run("unmirrored", 2, 1000.0)])
    assert (ratios["mirrored_kind"], ratios["ratios"], ratios["mirrored_per_s"]) == (
        "messages_only", [0.6, 0.4], [600.0, 400.0])
    assert bench.b1_ratios([run("async", 1, 300.0), run("unmirrored", 1, 1000.0)])["ratios"] == [0.3]
