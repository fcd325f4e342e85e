"""Renders a `make bench` result (benchmarks/results/<date>-<commit>.json) into benchmarks/RESULTS.md and its plots,
with what we found limits each figure (benchmarks/findings.yml, written by hand after looking at a run), and the
figures some drills measure (tests/drills/results/, make drills) beside them.

    cd tests && python -m benchmarks.render [benchmarks/results/<file>.json ...]   (default: every file there)
"""

from __future__ import annotations

import json
import os
import sys

import matplotlib
import yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after choosing the backend

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(REPO_ROOT, "benchmarks")
FINDINGS = os.path.join(OUT_DIR, "findings.yml")
RESULTS_DIR = os.path.join(OUT_DIR, "results")
GOAL_B1 = 0.85


def _b1(result: dict, out_dir: str) -> list[str]:
    summary, method = result["summary"], result["method"]
    lines = [f"Goal: {result['goal']}.", "",
             f"`artemis perf client`: {method['producers']} producer, {method['consumers']} consumer, persistent "
             f"{method['message_size']} B messages, {method['seconds']} s measured after {method['warmup_seconds']} s "
             f"warm-up, {method['rounds']} alternating rounds per placement on dc1's broker; WAN delay "
             f"{method['wan_delay_ms']} ms. Pinned: dc1's broker on CPU {method['pinned_cpus']['dc1']}, dc2's broker "
             f"on CPU {method['pinned_cpus']['dc2']}, the client on CPU {method['pinned_cpus']['client']}.", "",
             "| placement | mirror | mirrored msg/s (per round) | unmirrored msg/s (per round) | ratio per round "
             "| median ratio | all rounds | goal met |",
             "|---|---|---|---|---|---|---|---|"]
    for key, row in summary.items():
        placement, kind = key.split(".")
        met = "yes" if row["median_ratio"] is not None and row["median_ratio"] >= GOAL_B1 else "no"
        lines.append(f"| {placement} | {kind} | {', '.join(f'{v:,.0f}' for v in row['mirrored_per_s'])} "
                     f"| {', '.join(f'{v:,.0f}' for v in row['unmirrored_per_s'])} "
                     f"| {', '.join(f'{v:.2f}' for v in row['ratios'])} | **{row['median_ratio']}** "
                     f"| {row['all_rounds_ratio']} | {met if kind == 'async' and placement == 'pinned' else '-'} |")
    if result.get("backlog"):
        lines += ["", "What the producer's rate leaves behind: dc1's mirror backlog (events not yet sent to dc2) when the "
                  "run ended, and the seconds until it was sent (the next run waits for that).", "",
                  "| placement | destination | backlog at the end (per round) | sent within (s, per round) |",
                  "|---|---|---|---|"]
        for key, row in result["backlog"].items():
            placement, kind = key.split(".")
            lines.append(f"| {placement} | {kind} | {', '.join(f'{v:,}' for v in row['backlog_at_end'])} "
                         f"| {', '.join(str(v) for v in row['drain_s'])} |")
    lines += _b1_sets(result) + _b1_profiles(result)
    figure, axes = plt.subplots(figsize=(8, 3.5))
    labels, values = [], []
    for key, row in summary.items():
        labels.append(key.replace(".", "\n"))
        values.append(row["median_ratio"] or 0)
    axes.bar(labels, values, color=["#4c72b0" if "async" in label else "#dd8452" for label in labels])
    axes.axhline(GOAL_B1, color="green", linestyle="--", label=f"goal {GOAL_B1} (pinned, async)")
    axes.set_ylabel("mirrored / unmirrored (median)")
    axes.set_ylim(0, 1.1)
    axes.legend(loc="upper right")
    axes.set_title("B1 mirror cost: producer throughput ratio")
    figure.tight_layout()
    figure.savefig(os.path.join(out_dir, "b1-mirror-cost.png"), dpi=90)
    plt.close(figure)
    lines += ["", "![B1](b1-mirror-cost.png)"]
    return lines


def _pair(row: dict, pick) -> str:
    per_kind = row["per_kind"]
    mirrored, unmirrored = pick(per_kind[row.get("mirrored_kind", "async")]), pick(per_kind["unmirrored"])
    return " / ".join(f"{value:,}" if isinstance(value, (int, float)) else value for value in (mirrored, unmirrored))


def _compiler_share(per_kind: dict) -> str:
    share = per_kind.get("dc1_compiler_share_of_cpu")
    return "-" if share is None else f"{share:.0%}"


def _b1_sets(result: dict) -> list[str]:
    """Every set of B1's runs: the ratio, each broker's CPU per message and the producer's send times."""
    if not result.get("sets"):
        return []
    method = result["method"]
    lines = ["", "Pinned unless said, mirrored / unmirrored in each cell: the CPU time each broker's JVM used from "
             "before a run until dc1's mirror had sent everything, per message sent; the producer's send time "
             "(`artemis perf client`'s, the durable send's round trip) and the transfer time (send to receive) "
             f"at p50 and p99. The half-rate set sends {method['fixed_rate_per_s']:,} msg/s, half the median "
             "unmirrored CORE rate, to both destinations. "
             + (f"The set `{method['attribution_set']}` sends to a messages_only group (a mirror that does not "
                "carry acknowledgements) in place of the full_state one: beside `core`, what mirroring each "
                "acknowledgement costs. " if method.get("attribution_set") in result["sets"] else "")
             + ", ".join(f"`{name}`: `{yaml.safe_dump(overrides, default_flow_style=True, width=400).strip()}`"
                         for name, overrides in method.get("variants", {}).items()) + " (site.yml's extra variables).",
             "", "| set | msg/s mirrored (unmirrored) | median ratio | dc1 CPU µs/msg | dc2 CPU µs/msg | send p50 µs "
             "| send p99 µs | transfer p50 µs | transfer p99 µs | dc1's JIT compiler, most in a run |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, row in result["sets"].items():
        rates = (f"{', '.join(f'{v:,.0f}' for v in row['mirrored_per_s'])} "
                 f"({', '.join(f'{v:,.0f}' for v in row['unmirrored_per_s'])})")
        lines.append(f"| {name} | {rates} | **{row['median_ratio']}** "
                     f"| {_pair(row, lambda k: k['cpu_us_per_message']['dc1'])} "
                     f"| {_pair(row, lambda k: k['cpu_us_per_message']['dc2'])} "
                     f"| {_pair(row, lambda k: k['send_time_us']['50'])} "
                     f"| {_pair(row, lambda k: k['send_time_us']['99'])} "
                     f"| {_pair(row, lambda k: k['transfer_time_us']['50'])} "
                     f"| {_pair(row, lambda k: k['transfer_time_us']['99'])} "
                     f"| {_pair(row, _compiler_share)} |")
    for name, error in result.get("variant_errors", {}).items():
        lines += ["", f"**Variant {name} failed in this run:** `{error.splitlines()[0][:500]}`"]
    return lines


def _b1_profiles(result: dict) -> list[str]:
    """Where dc1's broker spends its CPU, mirrored beside unmirrored: the JIT compiler's share of the CPU of the threads
    Flight Recorder reports, then the parts (jfr_profile.PARTS) of the Java code's stack samples."""
    lines = []
    for name, kinds in result.get("profiles", {}).items():
        if not {"async", "unmirrored"} <= set(kinds):
            continue
        mirrored, unmirrored = kinds["async"], kinds["unmirrored"]
        threads = {kind: kinds[kind]["profile"].get("threads") or {} for kind in ("async", "unmirrored")}
        split = "; ".join(f"{label}: " + ", ".join(f"{kind} {share:.0%}" for kind, share in threads[key].items())
                          for key, label in (("async", "mirrored"), ("unmirrored", "unmirrored")) if threads[key])
        parts = list(dict.fromkeys([*mirrored["profile"]["cpu"]["parts"], *unmirrored["profile"]["cpu"]["parts"]]))
        compiler = {kind: (f" (its JIT compiler {kinds[kind]['compiler_share_of_cpu']:.0%} of dc1's CPU)"
                           if kinds[kind].get("compiler_share_of_cpu") is not None else "")
                    for kind in ("async", "unmirrored")}
        lines += ["", f"**{name}** ({result['method'].get('profiler', 'Flight Recorder')}): mirrored "
                  f"{mirrored['sent_per_s']:,.0f} msg/s at {mirrored['cpu_us_per_message']['dc1']:,} µs of CPU per "
                  f"message{compiler['async']}, {mirrored['profile']['cpu']['samples']:,} stack samples; unmirrored "
                  f"{unmirrored['sent_per_s']:,.0f} msg/s at {unmirrored['cpu_us_per_message']['dc1']:,} µs"
                  f"{compiler['unmirrored']}, {unmirrored['profile']['cpu']['samples']:,} samples. "
                  + (f"The CPU of the threads the recorder reports (not the garbage collector's) by kind: {split}. "
                     if split else "")
                  + "The parts below are shares of the Java code's stack samples only: the compiler, the garbage "
                  "collector and the kernel are not in them.", "",
                  "| part | mirrored | unmirrored |", "|---|---|---|"]
        for part in parts:
            shares = [kinds[kind]["profile"]["cpu"]["parts"].get(part, 0.0) for kind in ("async", "unmirrored")]
            lines.append(f"| {part} | {shares[0]:.1%} | {shares[1]:.1%} |")
        top = mirrored["profile"]["cpu"]["top_methods"][:8]
        lines += ["", "Top methods mirrored (share of samples): "
                  + "; ".join(f"`{method.rsplit('.', 2)[-2]}.{method.rsplit('.', 1)[-1]}` {share:.1%}"
                              for method, share in top) + "."]
    return lines


def _b2(result: dict, out_dir: str) -> list[str]:
    method, rows = result["method"], result["rows"]
    lines = [f"Goal: {result['goal']}.", "",
             f"A python-qpid-proton producer at dc1 sends {method['rate_per_s']:,} durable {method['message_size']} B "
             f"messages/s to an address of a `{method['address_group_mode']}` group for {method['seconds']} s after "
             f"{method['warmup_seconds']} s warm-up; a consumer at dc2 takes the mirrored copy. Lag = receive time at "
             "dc2 − send time at dc1, both on this machine's clock, for every message sent after the warm-up. The WAN "
             "delay is one way, by Toxiproxy, on the mirror's connection.", "",
             "| WAN delay (one way) | messages | p50 | p99 | max | goal (p99) | goal met |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        met = "yes" if row["p99_ms"] <= row["goal_p99_ms"] else "no"
        lines.append(f"| {row['wan_delay_ms']} ms | {row['messages']:,} | {row['p50_ms']} ms | **{row['p99_ms']} ms** "
                     f"| {row['max_ms']} ms | ≤ {row['goal_p99_ms']} ms | {met} |")
    figure, axes = plt.subplots(figsize=(8, 3.5))
    delays = [row["wan_delay_ms"] for row in rows]
    for key, label in (("p50_ms", "p50"), ("p99_ms", "p99"), ("max_ms", "max")):
        axes.plot(delays, [row[key] for row in rows], marker="o", label=label)
    axes.plot(delays, [row["goal_p99_ms"] for row in rows], linestyle="--", color="green", label="goal for p99")
    axes.set_xlabel("WAN delay, one way (ms)")
    axes.set_ylabel("lag (ms)")
    axes.set_yscale("log")
    axes.legend()
    axes.set_title("B2 replication lag at 1,000 msg/s")
    figure.tight_layout()
    figure.savefig(os.path.join(out_dir, "b2-replication-lag.png"), dpi=90)
    plt.close(figure)
    return lines + ["", "![B2](b2-replication-lag.png)"]


def _b3(result: dict, out_dir: str) -> list[str]:
    lines = [f"Goal: {result['goal']}.", "",
             f"N durable {result['method']['message_size']} B messages queued on one queue at the active site and "
             "replicated (plus one, so that N = 0 delivers something); a consumer at the other site retries every "
             f"{result['method']['consumer_retry_s']} s while that site refuses it; `playbooks/swapover.yml` moves "
             f"the groups {', '.join(result['method']['groups'])}. Time from the swapover's `fenced` event to the "
             "consumer's first message; the playbook's wall time and its phases (seconds from `started`) beside it.",
             "", "| queued | direction | fence → first consume | playbook | phases | consumed / duplicates | goal met |",
             "|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        phases = ", ".join(f"{phase} {at}" for phase, at in sorted(row["phases_s"].items(), key=lambda kv: kv[1]))
        met = ("yes" if row["fence_to_first_consume_s"] <= 30 else "no") if row["queued"] == 10_000 else "-"
        lines.append(f"| {row['queued']:,} | {row['source']} → {row['target']} | **{row['fence_to_first_consume_s']} s** "
                     f"| {row['playbook_s']} s | {phases} | {row['consumed']:,} / {row['duplicates']} | {met} |")
    return lines


def _seconds(value) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _b4(result: dict, out_dir: str) -> list[str]:
    method = result["method"]
    lines = [f"Goal: {result['goal']}.", "",
             f"A producer ({method['producer']}) at the given rate and the RPO measurement ({method['measurement']}) "
             f"for {method['load_seconds_before_fault']} s; then dc1's host is powered off ({method['fault']}); "
             f"{method['failover']}; a consumer at dc2 takes what dc2 has. Lost = accepted by dc1, never consumed at "
             "dc2 (ledger). The estimate before the fault is the RPO job's: what its last samples saw dc2 behind, plus "
             "the in-flight tail (dc1's mirror events not yet taken by its sender, on average over the window before "
             "the fault; [spark/README.md](../spark/README.md)); the bound is rate × the drill's RPO in time (from "
             "the ledger, as the job computes it) + 10.", "",
             "| rate | WAN delay | accepted | lost | job's lost | behind | in flight | estimate before the fault | error "
             "| within ±10 % or ±5 | drill RPO | loss bound | fault → activated |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        within = {True: "yes", False: "no", None: "-"}[row["estimate_within_goal"]]
        # Runs before the in-flight estimate had only the count behind.
        behind = row.get("behind_before_fault", row["estimate_before_fault"])
        lines.append(f"| {row['rate_per_s']:,}/s | {row['wan_delay_ms']} ms | {row['accepted']:,} | **{row['lost']:,}** "
                     f"| {row['job_lost']} | {behind} | {row.get('in_flight_estimate', '-')} "
                     f"| {row['estimate_before_fault']} | {row['estimate_error']} | {within} "
                     f"| {_seconds(row['drill_rpo_s'])} | {row['loss_bound']} | {row['fault_to_activated_s']} s |")
    lines += ["", "### B5 after failback", "",
              "dc1 boots with its journal, site.yml starts its broker, failback.yml brings what it had not replicated "
              "over and gives the groups back; the consumer at dc2 takes it. Goal: 0 lost overall.", "",
              "| rate | WAN delay | lost at the failover | lost after failback | duplicates overall |", "|---|---|---|---|---|"]
    lines += [f"| {row['rate_per_s']:,}/s | {row['wan_delay_ms']} ms | {row['lost']:,} | **{row['lost_after_failback']}** "
              f"| {row['duplicates_overall']} |" for row in result["rows"]]
    return lines


def _b6(result: dict, out_dir: str) -> list[str]:
    lines = [f"Goal: {result['goal']}.", "",
             "The job's command line in Spark local mode on generated telemetry (tests/benchmarks/rpo_job.py: a third "
             "probes, two thirds queue and link samples). Batch: every file read; incremental: the first run ingests "
             "everything, the next only what is new (1 % more rows).", "",
             "| rows | generate | batch job | rows/s | incremental, first run | incremental after +1 % | goal met |",
             "|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        met = ("yes" if row["job_s"] <= 60 else "no (batch)") if row["rows"] == 10_000_000 else "-"
        lines.append(f"| {row['rows']:,} | {row['generate_s']} s | **{row['job_s']} s** | {row['rows_per_s']:,} "
                     f"| {row['incremental_first_run_s']} s | {row['incremental_after_1pct_more_s']} s | {met} |")
    return lines


def _b7(result: dict, out_dir: str) -> list[str]:
    lines = ["`site.yml` from this machine as the controller: cold on a new test bed, warm right after (nothing to "
             "change).", "", "| estate | cold | warm |", "|---|---|---|"]
    lines += [f"| {row['shape']} | {row['cold_s']} s | {row['warm_s']} s |" for row in result["rows"]]
    return lines


def _b8(result: dict, out_dir: str) -> list[str]:
    method = result["method"]
    lines = ["The two replication engines on `messages_only` groups (`inflow.` mirrored, `bridged.` on core bridges), "
             "beside an address in no group. Throughput: `artemis perf client` at dc1 (one producer, one consumer, "
             f"persistent {method['message_size']} B, {method['seconds']} s after {method['warmup_seconds']} s "
             f"warm-up), {method['rounds']} rounds alternating the three, pinned as B1. After each run: seconds until "
             "dc1's links had sent everything, and the copies that reached dc2.", "",
             "| engine | msg/s (per round) | median ratio to no replication | sent within (s) | copies at dc2 |",
             "|---|---|---|---|---|"]
    for engine, row in result["throughput"].items():
        copies = ", ".join("-" if c is None else f"{c:,}" for c in row["copies_at_dc2"])
        lines.append(f"| {engine} | {', '.join(f'{v:,.0f}' for v in row['sent_per_s'])} | **{row['median_ratio']}** "
                     f"| {', '.join(str(v) for v in row['drain_s'])} | {copies} |")
    lines += ["", f"Lag as B2, at {method['lag_rate_per_s']:,} msg/s: receive time at dc2 − send time at dc1.", "",
              "| engine | WAN delay (one way) | messages | p50 | p99 | max |", "|---|---|---|---|---|---|"]
    lines += [f"| {row['engine']} | {row['wan_delay_ms']} ms | {row['messages']:,} | {row['p50_ms']} ms "
              f"| **{row['p99_ms']} ms** | {row['max_ms']} ms |" for row in result["lag"]]
    return lines


def _b9(result: dict, _out_dir: str) -> list[str]:
    steady = result["steady"]
    lines = [f"From the live-RPO drill (`tests/drills/test_live_rpo.py`, `make drills`): the rpo_job role's prober at dc3 "
             f"of a 3 x 1 systemd bed, a real Prometheus scraping its endpoint every {result['scrape_interval_s']} s "
             f"and evaluating the shipped rules every {result['rule_interval_s']} s, {result['rate_msg_s']} msg/s at "
             f"dc1, RPO objective {result['objective_s']} s. Seconds from the fault until "
             "`ContinuityArtemisRpoAboveObjectiveNow` (dc1 -> dc2) is firing in Prometheus's alerts API (goal: 30), "
             "and from the fault's end until it is not (goal: 60).", "",
             "| fault | page after | resolved after |", "|---|---|---|"]
    lines += [f"| {run['fault']} | " + ("**none in 120 s**" if run["page_s"] is None else f"**{run['page_s']} s**")
              + f" | {'-' if run['resolve_s'] is None else str(run['resolve_s']) + ' s'} |" for run in result["runs"]]
    pages = result["page_s"]
    worst = ", ".join(f"{link} {seconds:.1f} s" for link, seconds in sorted(steady["worst_live_rpo_s"].items()))
    fired = ", ".join(f"{alert['alertname']} {alert.get('source_datacentre', '')}->{alert.get('target_datacentre', '')}"
                      for alert in steady["alerts_firing"])
    lines += ["", f"Stall to page: median **{pages['median']} s**, max **{pages['max']} s**.", "",
              f"Before the stalls, {steady['seconds'] // 60} minutes of a {steady['wan_delay_ms']} ms WAN losing "
              f"{steady['wan_loss_pct']} % of its packets: "
              + (f"alerts fired: {fired}" if fired else "no alert fired")
              + f"; the highest live RPO per link: {worst}."]
    if "budget_alerts_after_the_stalls" in result:
        burning = ", ".join(f"{name} {source}->{target}"
                            for name, source, target in result["budget_alerts_after_the_stalls"])
        lines += ["", "The error budget's burn-rate alerts firing after the stalls: " + (burning or "none") + "."]
    return lines


def _b10(result: dict, out_dir: str) -> list[str]:
    from benchmarks import queue_scale  # here: queue_scale imports bench, which imports this module
    return queue_scale.render_b10(result, out_dir)


RENDERERS = {"B1": ("B1 mirror cost", _b1), "B2": ("B2 replication lag", _b2), "B3": ("B3 swapover time", _b3),
             "B4": ("B4 abrupt failover loss (and B5)", _b4), "B6": ("B6 the RPO job on telemetry", _b6), "B7": ("B7 site.yml cold and warm", _b7),
             "B8": ("B8 the two engines side by side", _b8), "B10": ("B10 scale in queues", _b10)}
# Sections rendered from a drill's results file (tests/drills/results/), run by make drills rather than make bench.
DRILL_RENDERERS = {"B9": ("B9 stall to page (the live RPO)", "live_rpo_page.json", _b9)}
DRILL_RESULTS = os.path.join(REPO_ROOT, "tests", "drills", "results")


def newest_results(paths: list[str]) -> dict[str, tuple[str, dict]]:
    """Each benchmark's newest measurement among the result files ``paths``: {name: (path, the file's results)}."""
    newest: dict[str, tuple[str, dict]] = {}
    for path in paths:
        with open(path) as handle:
            results = yaml.safe_load(handle)
        for name in results["benchmarks"]:
            if name not in newest or newest[name][1]["started"] < results["started"]:
                newest[name] = (path, results)
    return dict(sorted(newest.items(), key=lambda item: int(item[0].removeprefix("B"))))


def render(paths: list[str], out_dir: str = OUT_DIR, drill_results: str = DRILL_RESULTS) -> str:
    """RESULTS.md from the result files ``paths`` (make bench's, any number): each benchmark from the newest run that
    measured it, named in its section."""
    newest = newest_results(paths)
    findings = {}
    if os.path.exists(FINDINGS):
        with open(FINDINGS) as handle:
            findings = yaml.safe_load(handle) or {}
    latest = max((results for _path, results in newest.values()), key=lambda results: results["started"])
    machine = latest["machine"]
    lines = ["# Benchmark results", "",
             "Written by `make bench` (tests/benchmarks/bench.py) from the result files in `benchmarks/results/`: each "
             "section comes from the newest run that measured it, named under its title. Do not edit; the findings "
             "come from benchmarks/findings.yml.", "",
             f"Machine: {machine['cpus']} CPUs ({machine['model']}), {machine['memory_gib']} GiB, Linux "
             f"{machine['kernel']}. Artemis {latest['artemis_version']}. Both datacentres' brokers, the WAN proxy "
             "and the load client share this machine.", ""]
    sections = [(name, *RENDERERS[name], result, _measured_by(path, results))
                for name, (path, results) in newest.items() for result in [results["benchmarks"][name]]]
    for name, (title, file_name, renderer) in DRILL_RENDERERS.items():
        drill_path = os.path.join(drill_results, file_name)
        if os.path.exists(drill_path):
            with open(drill_path) as handle:
                sections.append((name, title, renderer, json.load(handle), []))
    for name, title, renderer, result, measured_by in sections:
        if "error" in result:
            lines += [f"## {title}", "", *measured_by,
                      f"**Failed in this run:** `{result['error'].splitlines()[0][:500]}`", ""]
            continue
        lines += [f"## {title}", "", *measured_by] + renderer(result, out_dir)
        if findings.get(name):
            lines += ["", "**What limits it.** " + findings[name].strip()]
        lines.append("")
    missing = sorted(set(RENDERERS) - set(newest), key=lambda name: int(name.removeprefix("B")))
    if missing:
        lines += ["## Not measured yet", "", f"{', '.join(missing)} (B5 is part of B4).", ""]
    target = os.path.join(out_dir, "RESULTS.md")
    with open(target, "w") as handle:
        handle.write("\n".join(lines))
    return target


def _measured_by(path: str, results: dict) -> list[str]:
    settings = yaml.safe_dump(results.get("settings", {}), default_flow_style=True, width=400).strip()
    converged = (f" `site.yml` converged the 2 x 1 test bed in {results['site_converge_s']} s."
                 if results.get("site_converge_s") is not None else "")
    return [f"Measured by `{os.path.relpath(path, REPO_ROOT)}` (commit {results['commit']}, "
            f"{results['started'][:16].replace('T', ' ')} UTC).{converged} Settings: `{settings}`", ""]


def all_result_files(directory: str = RESULTS_DIR) -> list[str]:
    return sorted(os.path.join(directory, name) for name in os.listdir(directory) if name.endswith(".json"))


if __name__ == "__main__":
    print(render(sys.argv[1:] or all_result_files()))
