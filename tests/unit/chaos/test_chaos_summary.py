"""The chaos runs' page: the committed one is what the run files say, and a run counts only when it is long,
overlapping, clean and every invariant held."""

import json
import os

from chaos import summary


def _run(seed, **changes):
    run = {"name": f"2x2-seed{seed}", "seed": seed, "estate": "2x2", "duration_s": 1200.0,
           "code": {"at_start": "abc", "at_end": "abc"}, "steps": 40, "overlapping_steps": 35,
           "stops_reached_broker": True, "workers_crashed": [],
           "holds": True, "findings": [],
           "verdicts": [{"invariant": "no_loss", "holds": True, "counted": {"accepted": 1000, "lost": 0}},
                        {"invariant": "single_active", "holds": True, "counted": {}}]}
    return dict(run, **changes)


def test_the_committed_page_is_what_the_run_files_say():
    with open(os.path.join(summary.RESULTS, summary.PAGE)) as handle:
        assert handle.read() == summary.render(summary.runs()), "run `cd tests && python -m chaos.summary`"


def test_a_run_counts_only_when_long_overlapping_clean_and_every_invariant_held():
    assert summary.shortfalls(_run(1)) == []
    broken = _run(2, verdicts=[dict(_run(2)["verdicts"][0]), {"invariant": "single_active", "holds": False}])
    assert summary.shortfalls(broken) == ["single_active broken"]
    assert summary.shortfalls(_run(3, duration_s=480.0, overlapping_steps=12, workers_crashed=["p1"])) == [
        "480 s", "12 overlapping", "a load thread crashed"]


def test_a_run_whose_stops_did_nothing_is_counted_without_them():
    # Seed 1 on 2 x 2: 38 steps, 31 overlapping, 9 of them SIGSTOPs that never reached a broker.
    before_the_fix = _run(1)
    del before_the_fix["stops_reached_broker"]
    assert summary.effective_steps(before_the_fix) == (29, 25)
    assert summary.shortfalls(before_the_fix) == ["25 overlapping without its stops, which did nothing"]
    assert summary.effective_steps(_run(1)) == (40, 35)


def test_a_run_with_its_executed_steps_is_counted_by_them_not_by_its_schedule():
    # 2 x 2 seed 4 at 1a93e98: 45 steps planned, 39 carried out (a 9-minute upgrade left no time for the rest).
    executed = _run(4, executed={"steps": 32, "overlapping": 29})
    assert summary.effective_steps(executed) == (32, 29)
    assert summary.shortfalls(executed) == ["29 overlapping"]


def test_only_a_seeds_latest_file_is_listed_and_the_goal_counts_those_that_count(tmp_path):
    for name, run in (("2x2-seed1.json", _run(1)), ("2x2-seed1-run1.json", _run(1, holds=False)),
                      ("2x2-seed2.json", _run(2, executed={"steps": 40, "overlapping": 3})), ("regression-x.json", {"name": "x"})):
        (tmp_path / name).write_text(json.dumps(run))
    page = open(summary.write(str(tmp_path))).read()
    assert "**1 of 10** seeds count." in page and "**0 of 5** seeds count." in page
    assert "| [1](2x2-seed1.json) | abc | 40 (35) † | 1,000 | 0 | yes |" in page
    assert "| [2](2x2-seed2.json) | abc | 40 (3) | 1,000 | 0 | 3 overlapping |" in page
    assert page.count("2x2-seed1") == 1


def test_what_a_stalled_primary_lost_is_named_beside_the_verdict(tmp_path):
    counted = {"accepted": 1000, "lost": 6, "lost_to_stalled_primaries": {"stop-12": 6}}
    run = _run(10, verdicts=[{"invariant": "no_loss", "holds": True, "counted": counted}])
    (tmp_path / "2x2-seed10.json").write_text(json.dumps(run))
    page = open(summary.write(str(tmp_path))).read()
    assert "| 1,000 | 6 | yes (6 of the lost acknowledged by a primary stalled past its lock: Artemis) |" in page
