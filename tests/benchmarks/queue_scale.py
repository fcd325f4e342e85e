"""B10, scale in queues: what 5,000 durable queues cost the collection beside 50, under light load, on a test bed of
its own: 2 x 2 shared_nothing (two datacentres, each an HA pair replicating its journal). bench.py runs it as B10;
it replaces whatever test bed is up, so it runs after the benchmarks that use bench.py's own bed.

For each size N, on a new bed: half the queues declared in the inventory (broker_queues), half created at runtime by
clients at dc1, every one under the `repl` group (full_state, mirrored), so that a swapover of `repl` moves them
all. Figures: site.yml cold (the first converge, the declared queues in it) and warm (again, nothing to change);
the runtime creation; the drain check as a swapover runs it; the RPO collector's CPU per sampling cycle and the rows
it writes, then the RPO job once over them; a swapover dc1 -> dc2 and back with every queue idle but one, which
takes the light load (a producer at the active site; during the swapover a consumer at the target). Task times come
from ansible.posix.profile_tasks. Measured, never asserted.

Runtime queues are created as an application creates its own: its receiver attaches to an address that does not
exist yet, and Artemis creates the address and a durable queue (the role's address settings auto-create; the
application role holds createAddress and createDurableQueue). The management API's createQueue is an operator's
tool, not something an application calls.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import glob
import io
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import yaml
from continuity_rpo import collector, prober

from ansible_collections.continuity.artemis.plugins.module_utils import artemis_estate
from ansible_collections.continuity.artemis.plugins.module_utils.amqp_ledger import (
    QUEUE_CAPABILITY, SourceCapabilities, close_quietly, connect)
from benchmarks import bench
from support import amqp_clients as amqp
from support.estate import TESTBED_INVENTORY, Estate, run_module, run_playbook, set_layout_vars
from support.measurement import Measurement

SIZES = (50, 5_000)
GOAL_RATIO = 2.0
GROUPS = ["repl"]
# Under bench.ADDRESS_GROUPS' `repl.` (full_state, on the mirror).
SCALE_PREFIX = "repl.scale."
# Clients creating the runtime queues side by side: the brokers (4 JVMs on this 2-CPU machine) do the work.
RUNTIME_CONNECTIONS = 4
LIGHT_LOAD_PER_S = 10
# The measurement as the rpo_job role deploys it by default (collector every 5 s, the prober every second, the job's
# 60 s window, the collector's 5 s request timeout); three windows of it.
COLLECTOR_INTERVAL_S = 5.0
PROBE_INTERVAL_S = 1.0
WINDOW_S = 60
COLLECTOR_REQUEST_TIMEOUT_S = 5.0
COLLECTOR_WINDOWS = 3
# Then the job as the rpo_job role runs it on systemd hosts (rpo_job_follow_seconds), over that many more windows.
FOLLOW_S = 15
FOLLOW_WINDOWS = 2
FOLLOW_RUN = re.compile(r"continuity_rpo: run took (\d+(?:\.\d+)?) s")
FOLLOW_INGESTED = re.compile(r"continuity_rpo: ingested (?P<rows>\d+) (?P<kind>\w+) row\(s\)")
PROFILE_ENV = {"ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks", "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "all"}
# The swapover's reconciliation tasks (playbooks/tasks/swapover.yml): artemis_reconcile, then artemis_bridge_reconcile
# and artemis_mirror_reconcile.
RECONCILE_TASKS = ("Put what the target kept into its queues", "Drop the copies of what the source consumed")
SLOWEST_TASKS = 5
# A profile_tasks recap line: the task's name, a space, dashes (none for a long name that took 1,000 s or more), a
# space, its seconds: "Fence dc1 ------- 3.21s".
RECAP_LINE = re.compile(r"^(?P<name>.+?) -* (?P<seconds>\d+\.\d\d)s$")


# -- pure parts --------------------------------------------------------------------------------------------------

def queue_plan(total: int) -> dict:
    """The queue names of one size: ``declared`` (in the inventory, the larger half when ``total`` is odd),
    ``runtime`` (created by clients) and ``measured``, the one queue that takes the light load: a declared one, in
    broker.xml at both sites from the start, so its first messages cannot overtake the mirror's creation of it
    (docs/upstream/mirror-create-queue-race.md)."""
    declared = [f"{SCALE_PREFIX}declared.{index:05d}" for index in range(math.ceil(total / 2))]
    runtime = [f"{SCALE_PREFIX}runtime.{index:05d}" for index in range(total - len(declared))]
    return {"declared": declared, "runtime": runtime, "measured": declared[0]}


def declared_queue_vars(names: list[str]) -> list[dict]:
    """broker_queues entries: one anycast durable queue on an address of its own name (the role's defaults)."""
    return [{"name": name} for name in names]


def task_seconds(output: str) -> dict[str, float]:
    """{task name: seconds} from the recap ansible.posix.profile_tasks prints at the end of a run (a name that
    ran more than once summed); empty when the output has none."""
    _before, found, recap = output.rpartition("TASKS RECAP")
    if not found:
        return {}
    lines = recap.splitlines()
    start = next((index + 1 for index, line in enumerate(lines) if line.startswith("====")), len(lines))
    tasks: dict[str, float] = {}
    for line in lines[start:]:
        match = RECAP_LINE.match(line.rstrip())
        if not match:
            break
        name = match.group("name")
        tasks[name] = round(tasks.get(name, 0.0) + float(match.group("seconds")), 2)
    return tasks


def slowest(tasks: dict[str, float], count: int = SLOWEST_TASKS) -> dict[str, float]:
    return dict(sorted(tasks.items(), key=lambda item: item[1], reverse=True)[:count])


def reconcile_seconds(tasks: dict[str, float]) -> float | None:
    """The swapover's reconciliation tasks together; None without task times."""
    times = [seconds for name, seconds in tasks.items() if name.startswith(RECONCILE_TASKS)]
    return round(sum(times), 2) if times else None


def collector_figures(queue_rows: list[dict], cycle_times: list[float], seconds: float, cpu_seconds: float,
                      rows_per_full_sample: int, live_brokers: int, idle_queues: set[str]) -> dict:
    """The collector's figures over a run of ``seconds``: CPU seconds per sampling cycle (``cycle_times``: the time
    of every link row written, one distinct time per cycle), samples per minute, the queue rows written per minute
    (all of them, and those of ``idle_queues``); beside them, computed, what a collector writing every queue's row
    at every sample would have written: queues x live brokers (a backup reports no queues) x samples per minute."""
    minutes = seconds / 60
    cycles = len(set(cycle_times))
    samples_per_minute = cycles / minutes
    idle_rows = sum(1 for row in queue_rows if row["queue"] in idle_queues)
    return {"seconds": round(seconds, 1), "cycles": cycles, "cpu_s": round(cpu_seconds, 2),
            "cpu_s_per_cycle": round(cpu_seconds / cycles, 3) if cycles else None,
            "samples_per_minute": round(samples_per_minute, 2),
            "queue_rows_per_minute": round(len(queue_rows) / minutes),
            "idle_queue_rows_per_minute": round(idle_rows / minutes),
            "every_row_idle_per_minute_computed": round(len(idle_queues) * live_brokers * samples_per_minute),
            "every_row_per_minute_computed": round(rows_per_full_sample * samples_per_minute),
            "queue_rows_per_full_sample": rows_per_full_sample, "live_brokers": live_brokers}


def scale_ratios(rows: list[dict]) -> dict:
    """The largest size's swapover (dc1 -> dc2) over the smallest's: the playbook's wall time and fence to first
    consume."""
    ordered = sorted(rows, key=lambda row: row["queues"])
    small, large = ordered[0]["swapover"], ordered[-1]["swapover"]

    def ratio(key: str) -> float | None:
        return round(large[key] / small[key], 2) if small.get(key) and large.get(key) is not None else None

    return {"queues": [ordered[0]["queues"], ordered[-1]["queues"]], "playbook": ratio("playbook_s"),
            "fence_to_first_consume": ratio("fence_to_first_consume_s")}


def _s(value) -> str:
    return "-" if value is None else f"{value} s"


def _met(ratio: float | None) -> str:
    return "-" if ratio is None else ("met" if ratio <= GOAL_RATIO else "not met")


def render_b10(result: dict, _out_dir: str | None = None) -> list[str]:
    """B10's section of RESULTS.md (render.py's RENDERERS call it with the output directory, unused here)."""
    method, rows = result["method"], result["rows"]
    light = method["light_load"]
    lines = [f"Goal: {result['goal']}.", "",
             f"A new {method['estate']} bed per size; half the queues declared in the inventory (`broker_queues`), "
             f"half created at runtime at dc1 ({method['runtime_queues']}), all in the group "
             f"`{method['group']}`. Light load: {light['rate_per_s']} durable {light['message_size']} B msg/s to one "
             "declared queue at the active site, every other queue idle. Drain check: "
             f"{method['drain_check']}. Task times: {method['task_times']}.", "",
             "| queues | site.yml cold | warm | runtime queues created | at the target after | drain check (module) |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['queues']:,} | **{_s(row['site_cold_s'])}** | **{_s(row['site_warm_s'])}** "
                     f"| {row['runtime']:,} in {_s(row['runtime_create_s'])} | {_s(row['runtime_at_target_s'])} "
                     f"| {_s(row['drain_check_s'])} ({_s(row['drain_check_module_s'])}) |")
    lines += ["", "Swapover of the group, `playbooks/swapover.yml`: fence to the light load's first message consumed "
              "at the target (the swapover's `fenced` event); the playbook's wall time; the reconciliation tasks "
              "(`artemis_reconcile`, `artemis_bridge_reconcile`, `artemis_mirror_reconcile`) together; the phases "
              "(seconds from `started`); the slowest tasks. The swap back runs without clients.", "",
              "| queues | direction | fence → first consume | playbook | reconciliation | phases | slowest tasks "
              "| consumed / duplicates / lost |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for swap in (row["swapover"], row["swapover_back"]):
            phases = ", ".join(f"{phase} {at}" for phase, at in sorted(swap["phases_s"].items(), key=lambda kv: kv[1]))
            tasks = "; ".join(f"{name} {seconds} s" for name, seconds in list(swap["slowest_tasks_s"].items())[:3])
            load = swap.get("light_load")
            clients = "-" if load is None else f"{load['consumed']:,} / {load['duplicates']} / {load['lost']}"
            lines.append(f"| {row['queues']:,} | {swap['source']} → {swap['target']} "
                         f"| **{_s(swap.get('fence_to_first_consume_s'))}** | **{_s(swap['playbook_s'])}** "
                         f"| {_s(swap['reconcile_s'])} | {phases} | {tasks or '-'} | {clients} |")
    collected = rows[0]["collector"] if rows else {}
    lines += ["", f"The RPO measurement for {collected.get('seconds', '-')} s, idle but for the light load and the "
              f"prober: {method['collector']}. Every row, computed: what a collector writing each queue's row at "
              "each sample would write, queues × live brokers × samples per minute. The job: "
              f"{method['job']}.", "",
              "| queues | collector CPU per cycle | samples/min | queue rows/min | idle queues' rows/min "
              "| every row of the idle queues (computed) | samples without an answer | job run | job --follow: "
              "first run, later runs median (max) | queue rows per later run |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        figures, follow = row["collector"], row.get("job_follow") or {}
        later = (f"{_s(follow.get('later_median_s'))} ({_s(follow.get('later_max_s'))})"
                 if follow.get("later_median_s") is not None else "-")
        rows_later = follow.get("later_queue_rows_median")
        lines.append(f"| {row['queues']:,} | **{_s(figures['cpu_s_per_cycle'])}** | {figures['samples_per_minute']} "
                     f"| {figures['queue_rows_per_minute']:,} | **{figures['idle_queue_rows_per_minute']:,}** "
                     f"| {figures['every_row_idle_per_minute_computed']:,} | {figures['silent_samples']} "
                     f"| **{_s(row['job_s'])}** | {_s(follow.get('first_s'))}, **{later}** "
                     f"| {'-' if rows_later is None else f'{rows_later:,.0f}'} |")
    ratios = result.get("summary") or {}
    if ratios.get("queues"):
        small, large = ratios["queues"]
        lines += ["", f"Swapover with {large:,} queues over {small:,}: playbook **{ratios['playbook']}×** "
                  f"(goal ≤ {GOAL_RATIO:g}×: {_met(ratios['playbook'])}), fence → first consume "
                  f"**{ratios['fence_to_first_consume']}×** ({_met(ratios['fence_to_first_consume'])})."]
    return lines


# -- on the test bed ---------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _task_timings():
    """ansible-playbook runs started meanwhile print profile_tasks' recap (run_playbook passes os.environ on)."""
    saved = {name: os.environ.get(name) for name in PROFILE_ENV}
    os.environ.update(PROFILE_ENV)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _playbook(playbook: str, extra_vars: dict | None = None) -> tuple[float, dict[str, float]]:
    """A playbook on the bed's inventory: its wall time and task times; raises with its output's tail if it fails."""
    with _task_timings():
        started = time.monotonic()
        result = run_playbook(playbook, inventory=bench.INVENTORY, timeout=3600,
                              extra_args=["-e", json.dumps(extra_vars)] if extra_vars else None)
        seconds = time.monotonic() - started
    if result.rc != 0:
        raise RuntimeError(f"{playbook} {extra_vars or ''} failed on B10's test bed:\n{result.output[-4000:]}")
    return seconds, task_seconds(result.output)


def _build(declared: list[str]) -> tuple[Estate, float, dict[str, float]]:
    """A new 2 x 2 shared_nothing bed with bench.build's settings and the ``declared`` queues in the inventory,
    converged by site.yml: the estate, the cold converge's seconds and its task times."""
    bench.testbed("down")
    shutil.rmtree(bench.INVENTORY, ignore_errors=True)
    bench.testbed("up", "--dcs", "2", "--nodes-per-dc", "2", "--inventory-dir", bench.INVENTORY)
    with open(os.path.join(TESTBED_INVENTORY, "group_vars", "all", "estate.yml")) as handle:
        settings = yaml.safe_load(handle)
    settings.update(replication_address_groups=bench.ADDRESS_GROUPS, broker_java_max_heap="1g",
                    broker_metrics_enabled=False, broker_queues=declared_queue_vars(declared))
    settings.pop("replication_external_brokers", None)  # as bench.build: its address is in no group here
    with open(os.path.join(bench.INVENTORY, "group_vars", "all", "estate.yml"), "w") as handle:
        yaml.safe_dump(settings, handle)
    set_layout_vars(bench.INVENTORY, "shared_nothing")
    seconds, tasks = _playbook("site.yml")
    return Estate.from_testbed(bench.INVENTORY), seconds, tasks


def create_runtime_queues(node, names: list[str], connections: int = RUNTIME_CONNECTIONS) -> float:
    """Seconds to create ``names`` at ``node`` as applications do: a receiver attaches to each (with the `queue`
    capability: an ANYCAST address and its queue) and detaches; ``connections`` clients side by side, each
    attaching to its share one after another on one connection."""
    def attach_each(share: list[str]) -> None:
        connection = connect(node.amqp_url, node.user, node.password, role="b10-queues", ca_path=node.ca_cert)
        try:
            for name in share:
                connection.create_receiver(name, credit=0, options=[SourceCapabilities(QUEUE_CAPABILITY)]).close()
        finally:
            close_quietly(connection)

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(connections) as pool:
        list(pool.map(attach_each, [names[index::connections] for index in range(connections)]))
    return time.monotonic() - started


def _scale_queues(node) -> list[dict]:
    return [queue for queue in node.management(timeout=120).queues() if queue["name"].startswith(SCALE_PREFIX)]


def _wait_for_queues(node, prefix: str, count: int, timeout: float = 900) -> float:
    """Seconds until ``node`` lists ``count`` queues under ``prefix`` (the mirror creating them at a passive site)."""
    started = time.monotonic()
    amqp.wait_for(lambda: sum(name.startswith(prefix) for name in node.management(timeout=60).queue_names()),
                  lambda found: found >= count, timeout=timeout, interval=2,
                  description=f"{count} queues under {prefix} at {node.name}")
    return time.monotonic() - started


def _drain_check(estate: Estate) -> tuple[float, float]:
    """artemis_drain_check as the swapover's second drain calls it (the group's links, its queues compared), run as
    a module from the controller: its wall time and the module's own elapsed."""
    scope = artemis_estate.drain_scope(bench.ADDRESS_GROUPS, GROUPS, ["dc1", "dc2"])
    started = time.monotonic()
    result, output = run_module("artemis_drain_check", dict(
        estate.management_args(), source_datacentre="dc1", links=scope["links"],
        include_prefixes=scope["include_prefixes"], exclude_prefixes=scope["exclude_prefixes"],
        compare_queues=scope["compare_queues"], tolerance=0, timeout=600), timeout=900)
    seconds = time.monotonic() - started
    if result.get("failed"):
        raise RuntimeError(f"the drain check failed: {result.get('msg')}\n{output[-3000:]}")
    return seconds, result["elapsed"]


def _published_rows(root: str, kind: str) -> list[dict]:
    rows = []
    for path in sorted(glob.glob(os.path.join(root, kind, "date=*", "*.jsonl"))):
        with open(path, encoding="utf-8") as handle:
            rows += [json.loads(line) for line in handle if line.strip()]
    return rows


def _collect(config: dict, seconds: float) -> tuple[float, float, str]:
    """The collector for ``seconds`` in this thread (time.thread_time then counts its CPU alone), the prober beside
    it: (the collector's CPU seconds, wall seconds, what it said on stderr: the brokers that did not answer)."""
    stop, prober_errors = threading.Event(), []

    def probe() -> None:
        try:
            prober.run(config, 0, stop)
        except Exception as exc:  # noqa: BLE001 - raised below, in this thread
            prober_errors.append(exc)

    probing = threading.Thread(target=probe, name="b10-prober", daemon=True)
    probing.start()
    said = io.StringIO()
    try:
        cpu, started = time.thread_time(), time.monotonic()
        with contextlib.redirect_stderr(said):
            collector.run(config, seconds)
        cpu, seconds = time.thread_time() - cpu, time.monotonic() - started
    finally:
        stop.set()
        probing.join(timeout=30)
    if prober_errors:
        raise RuntimeError(f"the prober crashed: {prober_errors[0]!r}") from prober_errors[0]
    return cpu, seconds, said.getvalue()


def follow_figures(stderr: str) -> dict:
    """The job's runs in --follow mode from what it printed: each run's seconds ("run took 12.3 s"), the first
    (everything so far) apart from the later ones (what arrived since the run before); the rows the later runs
    ingested ("ingested N queue_samples row(s)")."""
    took, rows_per_run, rows = [], [], 0
    for line in stderr.splitlines():
        if (ingested := FOLLOW_INGESTED.search(line)) and ingested.group("kind") == "queue_samples":
            rows += int(ingested.group("rows"))
        elif run := FOLLOW_RUN.search(line):
            took.append(float(run.group(1)))
            rows_per_run.append(rows)
            rows = 0
    later, later_rows = took[1:], rows_per_run[1:]
    return {"runs": len(took), "first_s": took[0] if took else None,
            "later_median_s": statistics.median(later) if later else None, "later_max_s": max(later, default=None),
            "later_queue_rows_median": statistics.median(later_rows) if later_rows else None}


def _follow_job(config: dict, work: str) -> dict:
    """The job as the rpo_job role runs it on a systemd host (--follow FOLLOW_S, the report at most every 300 s)
    while the collector and the prober write FOLLOW_WINDOWS more windows beside what is there: follow_figures."""
    log = os.path.join(work, "follow.log")
    with open(log, "w", encoding="utf-8") as stderr:
        job = subprocess.Popen([sys.executable, "-m", "continuity_rpo.job", "--telemetry", config["telemetry"],
                                "--output", os.path.join(work, "follow"), "--follow", str(FOLLOW_S),
                                "--textfile", os.path.join(work, "follow.prom"),
                                "--report", os.path.join(work, "follow.html")],
                               stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            _collect(config, FOLLOW_WINDOWS * WINDOW_S)
        finally:
            job.send_signal(signal.SIGTERM)
            returncode = job.wait(timeout=900)
    with open(log, encoding="utf-8") as handle:
        said = handle.read()
    if returncode != 0:
        raise RuntimeError(f"the job in --follow mode ended with {returncode}:\n{said[-4000:]}")
    return follow_figures(said)


def _telemetry(estate: Estate, idle_queues: set[str]) -> tuple[dict, float, dict]:
    """The collector and the prober for COLLECTOR_WINDOWS windows; then the RPO job once over what they wrote; then
    the job in --follow mode while they write FOLLOW_WINDOWS more: (collector_figures, the batch job's seconds,
    follow_figures)."""
    route = next(route for route in artemis_estate.probe_routes(bench.ADDRESS_GROUPS, ["dc1", "dc2"], "dc1")
                 if route["group"] == GROUPS[0])
    with tempfile.TemporaryDirectory() as work:
        measurement = Measurement(estate, os.path.join(work, "telemetry"), interval=COLLECTOR_INTERVAL_S,
                                  window_seconds=WINDOW_S,
                                  routes=[{key: route[key] for key in ("address", "source", "targets")}])
        config = measurement.config
        config["management"]["request_timeout"] = COLLECTOR_REQUEST_TIMEOUT_S
        config["probes"]["interval"] = PROBE_INTERVAL_S
        full_sample = collector.sample(config, time.time())[0]["queue_samples"]
        cpu, seconds, said = _collect(config, COLLECTOR_WINDOWS * WINDOW_S)
        figures = collector_figures(
            _published_rows(config["telemetry"], "queue_samples"),
            [row["time"] for row in _published_rows(config["telemetry"], "link_samples")], seconds, cpu,
            len(full_sample), len({row["broker"] for row in full_sample}), idle_queues)
        figures["silent_samples"] = said.count("collector: no answer")
        started = time.monotonic()
        measurement.job(work)
        batch_s = round(time.monotonic() - started, 1)
        return figures, batch_s, _follow_job(config, work)


def _swapover(source: str, target: str) -> tuple[dict, dict]:
    """playbooks/swapover.yml of GROUPS from ``source`` to ``target``: (its figures, {phase: Unix time})."""
    since = datetime.datetime.now(datetime.timezone.utc).isoformat()
    seconds, tasks = _playbook("playbooks/swapover.yml",
                               {"swapover_source": source, "swapover_target": target, "swapover_groups": GROUPS})
    phases = bench._swapover_events(since)
    figures = {"source": source, "target": target, "playbook_s": round(seconds, 1),
               "phases_s": {phase: round(at - phases["started"], 2) for phase, at in phases.items()},
               "reconcile_s": reconcile_seconds(tasks), "slowest_tasks_s": slowest(tasks)}
    return figures, phases


def _swapover_under_light_load(estate: Estate, producer, queue: str, seconds_after: int) -> dict:
    """The swapover dc1 -> dc2 while ``producer`` sends to ``queue`` at dc1 (then at dc2, its failover) and a
    consumer at dc2 retries until it may consume; the producer stops ``seconds_after`` the swapover, and whatever it
    had accepted that the consumer does not get within 5 minutes is lost."""
    target = estate.dc("dc2")
    consumer = amqp.Consumer([target.amqp_url], target.user, target.password, queue, reconnect_delay=0.1,
                             ca_path=target.ca_cert)
    with consumer:
        figures, phases = _swapover("dc1", "dc2")
        time.sleep(seconds_after)
        producer.stop()
        accepted = set(producer.accepted_ids())
        with contextlib.suppress(AssertionError):  # what is still missing then is counted as lost
            amqp.wait_for(lambda: accepted - set(consumer.accepted_ids()), lambda missing: not missing,
                          timeout=300, interval=1, description=f"every accepted message of {queue} consumed at dc2")
    received = consumer.ledger()
    first = min((record.received_at for record in received), default=None)
    figures["fence_to_first_consume_s"] = None if first is None else round(first - phases["fenced"], 2)
    figures["light_load"] = {"accepted": len(accepted), "consumed": len(set(consumer.accepted_ids())),
                             "duplicates": len(consumer.duplicates()),
                             "lost": len(accepted - set(consumer.accepted_ids()))}
    return figures


def _measure(total: int, warmup: int, seconds: int) -> dict:
    plan = queue_plan(total)
    estate, cold_s, cold_tasks = _build(plan["declared"])
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    runtime_prefix = f"{SCALE_PREFIX}runtime."
    create_s = create_runtime_queues(dc1, plan["runtime"])
    at_target_s = _wait_for_queues(dc2, runtime_prefix, len(plan["runtime"]))
    at_dc1 = _scale_queues(dc1)
    row = {"queues": total, "declared": len(plan["declared"]), "runtime": len(plan["runtime"]),
           "site_cold_s": round(cold_s, 1), "site_cold_slowest_tasks_s": slowest(cold_tasks),
           "runtime_create_s": round(create_s, 1), "runtime_at_target_s": round(at_target_s, 1),
           "queues_found": {"dc1": len(at_dc1), "dc2": len(_scale_queues(dc2))},
           "runtime_durable_at_dc1": sum(1 for queue in at_dc1 if queue["name"].startswith(runtime_prefix)
                                         and str(queue.get("durable")).lower() == "true")}
    warm_s, warm_tasks = _playbook("site.yml")
    row.update(site_warm_s=round(warm_s, 1), site_warm_slowest_tasks_s=slowest(warm_tasks))
    drain_s, drain_module_s = _drain_check(estate)
    row.update(drain_check_s=round(drain_s, 1), drain_check_module_s=round(drain_module_s, 2))
    producer = amqp.Producer([dc1.amqp_url, dc2.amqp_url], dc1.user, dc1.password, plan["measured"],
                             rate=LIGHT_LOAD_PER_S, body_size=1024, ca_path=dc1.ca_cert)
    with producer:
        producer.wait_connected()
        time.sleep(warmup)
        idle = set(plan["declared"] + plan["runtime"]) - {plan["measured"]}
        row["collector"], row["job_s"], row["job_follow"] = _telemetry(estate, idle)
        row["swapover"] = _swapover_under_light_load(estate, producer, plan["measured"], seconds)
    row["swapover_back"] = _swapover("dc2", "dc1")[0]  # dc1 active again, as the inventory says
    return row


def queue_scale(run) -> dict:
    """B10 (see the module's description). ``run``: bench.py's Run, for its settings only: the light load runs
    ``warmup`` seconds before anything is measured under it, and ``seconds`` after the swapover's activation."""
    rows = []
    for total in SIZES:
        rows.append(_measure(total, run.warmup, run.seconds))
        row, swap = rows[-1], rows[-1]["swapover"]
        print(f"B10 {total:,} queues: site.yml cold {row['site_cold_s']} s, warm {row['site_warm_s']} s; drain check "
              f"{row['drain_check_s']} s; swapover {swap['playbook_s']} s, fence to first consume "
              f"{swap['fence_to_first_consume_s']} s; collector {row['collector']['cpu_s_per_cycle']} CPU s per "
              f"cycle; job {row['job_s']} s", flush=True)
        print(f"B10 {total:,} queues, every figure: {json.dumps(row)}", flush=True)  # kept in the log if a size fails
    return {"goal": f"a swapover with {SIZES[-1]:,} idle queues within {GOAL_RATIO:g}x of one with {SIZES[0]:,} "
                    "(sub-linear where the work does not grow)",
            "method": {"estate": "2 x 2 shared_nothing", "group": f"{GROUPS[0]} (full_state, mirror)",
                       "declared_queues": "broker_queues in group_vars/all: one anycast queue per address",
                       "runtime_queues": f"AMQP receivers attaching with the queue capability, {RUNTIME_CONNECTIONS} "
                                         "connections side by side, Artemis auto-creating",
                       "queue_prefix": SCALE_PREFIX,
                       "light_load": {"rate_per_s": LIGHT_LOAD_PER_S, "message_size": 1024, "durable": True,
                                      "producer": "python-qpid-proton, failover list dc1, dc2",
                                      "consumer": "at the target during the swapover, retrying every 0.1 s",
                                      "warmup_s": run.warmup, "after_swapover_s": run.seconds},
                       "drain_check": "artemis_drain_check from the controller (`ansible localhost -m`, its start "
                                      "included) with the swapover's scope, queues compared; the module's own "
                                      "elapsed in brackets",
                       "collector": f"collector.run in one thread (its CPU: time.thread_time) every "
                                    f"{COLLECTOR_INTERVAL_S:g} s, {WINDOW_S} s window, request timeout "
                                    f"{COLLECTOR_REQUEST_TIMEOUT_S:g} s, prober every {PROBE_INTERVAL_S:g} s",
                       "job": "continuity_rpo.job, one batch run (one trigger) over that telemetry, Spark local "
                              "mode, its start included; then in --follow mode (as on a systemd host: every "
                              f"{FOLLOW_S} s, the report at most every 300 s) while the collector and the prober "
                              f"write {FOLLOW_WINDOWS} more windows, on the same 2 CPUs as the brokers",
                       "task_times": "ansible.posix.profile_tasks"},
            "rows": rows, "summary": scale_ratios(rows)}
