"""The chaos runs at a glance: tests/drills/results/chaos/README.md, rendered from the runs' files.

    cd tests && python -m chaos.summary

A seed's file (`<estate>-seed<N>.json`) is its latest run; files with anything after the seed (`-run1`,
`-before-...`, a duration) are earlier runs kept for the record, and regressions are listed in docs/chaos.md. The
runner writes this page after every run; a unit test fails when the committed page is not what the files say.
"""

from __future__ import annotations

import glob
import json
import os
import re

from chaos import schedule
from support.estate import REPO_ROOT

RESULTS = os.path.join(REPO_ROOT, "tests", "drills", "results", "chaos")

GOALS = {"2x2": 10, "3x1": 5}
MIN_DURATION_S = 1200
MIN_OVERLAPPING = 30
SEED_FILE = re.compile(r"^(?P<estate>\dx\d)-seed(?P<seed>\d+)\.json$")
PAGE = "README.md"


def runs(directory: str = RESULTS) -> list[dict]:
    """The latest run of every seed, by estate and seed."""
    found = []
    for path in glob.glob(os.path.join(directory, "*.json")):
        if SEED_FILE.match(os.path.basename(path)):
            with open(path) as handle:
                found.append(json.load(handle))
    return sorted(found, key=lambda run: (run["estate"], run["seed"]))


def effective_steps(run: dict) -> tuple[int, int]:
    """(steps, overlapping) of what the run did: counted from its history where its file has them (`executed`, since
    2026-12-04), else from its schedule. Until 2026-12-02 a SIGSTOP never reached a broker (the runner's pkill refused
    its pattern, unchecked): a run whose file does not say that its stops reached the broker is counted without its
    schedule's stop steps."""
    if "executed" in run:
        return run["executed"]["steps"], run["executed"]["overlapping"]
    if run.get("stops_reached_broker"):
        return run["steps"], run["overlapping_steps"]
    done = [step for step in schedule.plan(run["seed"], run["estate"], run["duration_s"]) if step.name != "stop"]
    return len(done), schedule.overlapping(done)


def shortfalls(run: dict) -> list[str]:
    """Why a run does not count towards the goal (none when it does)."""
    reasons = []
    if run["duration_s"] < MIN_DURATION_S:
        reasons.append(f"{run['duration_s']:g} s")
    overlapping = effective_steps(run)[1]
    if overlapping < MIN_OVERLAPPING:
        reasons.append(f"{overlapping} overlapping" + ("" if run.get("stops_reached_broker")
                                                       else " without its stops, which did nothing"))
    reasons += [f"{verdict['invariant']} broken" for verdict in run["verdicts"] if not verdict["holds"]]
    if run["workers_crashed"]:
        reasons.append("a load thread crashed")
    return reasons


def _no_loss(run: dict) -> dict:
    return next(verdict["counted"] for verdict in run["verdicts"] if verdict["invariant"] == "no_loss")


def _accepted_and_lost(run: dict) -> tuple[int, int]:
    counted = _no_loss(run)
    return counted["accepted"], counted["lost"]


def render(all_runs: list[dict]) -> str:
    lines = ["# Chaos runs", "",
             f"Rendered by `cd tests && python -m chaos.summary` from the files beside it ([docs/chaos.md]"
             f"(../../../../docs/chaos.md)). A run counts when it lasted {MIN_DURATION_S // 60} minutes, had at "
             f"least {MIN_OVERLAPPING} overlapping faults and operations, every invariant held and every load "
             "thread ended cleanly. Steps are those the run carried out, counted from its history (since "
             "2026-12-04; † an older run's are its schedule's, planned, some perhaps never reached). * Until "
             "2026-12-02 the runner's SIGSTOP faults did not reach the broker: those runs' steps are counted "
             "without them.", ""]
    for estate, goal in GOALS.items():
        mine = [run for run in all_runs if run["estate"] == estate]
        counting = [run for run in mine if not shortfalls(run)]
        lines += [f"## {estate[0]} x {estate[2]}", "",
                  f"**{len(counting)} of {goal}** seeds count.", "",
                  "| seed | code | steps (overlapping) | accepted | lost | counts |", "|---|---|---|---|---|---|"]
        for run in mine:
            accepted, lost = _accepted_and_lost(run)
            verdict = "; ".join(shortfalls(run)) or "yes"
            stalled = sum(_no_loss(run).get("lost_to_stalled_primaries", {}).values())
            if stalled:
                verdict += f" ({stalled:,} of the lost acknowledged by a primary stalled past its lock: Artemis)"
            if run.get("judged_again"):
                verdict += " (judged again: " + run["judged_again"]["why"].split(";")[0] + ")"
            steps, overlapping = effective_steps(run)
            lines.append(f"| [{run['seed']}]({run['name']}.json) | {run['code']['at_start']} "
                         f"| {steps} ({overlapping}){'' if 'executed' in run else ' †'}"
                         f"{'' if run.get('stops_reached_broker') else ' *'} "
                         f"| {accepted:,} | {lost:,} | {verdict} |")
        lines.append("")
    return "\n".join(lines)


def write(directory: str = RESULTS) -> str:
    path = os.path.join(directory, PAGE)
    with open(path, "w") as handle:
        handle.write(render(runs(directory)))
    return path


if __name__ == "__main__":
    print(write())
