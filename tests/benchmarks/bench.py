"""make bench: the collection's figures measured on a test bed of its own, written to
benchmarks/results/<date>-<commit>.json and rendered into benchmarks/RESULTS.md (tests/benchmarks/render.py).

    cd tests && python -m benchmarks.bench [--only B1] [--rounds 3] [--seconds 20] [--warmup 5]

B1, mirror cost: one producer (and one consumer) of the Artemis distribution's own `artemis perf client`, persistent
1 KiB messages, against dc1's broker; its throughput to an address the estate mirrors and to one that is not
mirrored, in alternating rounds on the same broker;
the ratios mirrored / unmirrored. Once with every process free to run on every CPU, once pinned as on separate
machines (dc1's broker alone on CPU 0; dc2's broker and the load client on CPU 1: this machine has two).

B2, replication lag at 1,000 msg/s for a one-way WAN delay of 0, 20, 50 and 100 ms (see replication_lag).
B3, swapover time with 0, 10,000 and 100,000 messages queued (see swapover_time).
B4 and B5, abrupt failover loss and failback (see failover_loss).
B6, the RPO job on 1M, 10M and 30M telemetry rows. B7, site.yml cold and warm on 2 x 1 and 2 x 2.
B8, the two replication engines side by side on messages_only groups (see engines).

Measured, never asserted. A test bed must not be up (the benchmark builds its own and removes it afterwards, unless
KEEP_TESTBED=1; --reuse runs on the bed such a run left).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid

import yaml

from ansible_collections.continuity.artemis.plugins.module_utils import artemis_estate
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import broker_mbean
from benchmarks import broker_process, render, rpo_job
from support import ledger
from support import amqp_clients as amqp
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report
from support.estate import REPO_ROOT, TESTBED, TESTBED_INVENTORY, Estate, run_playbook, set_layout_vars
from support.measurement import Measurement

INVENTORY = os.path.join(REPO_ROOT, ".cache", "bench", "inventory")
ARTEMIS_HOME = os.environ.get("ARTEMIS_HOME") or os.path.join(REPO_ROOT, ".cache", "artemis", "apache-artemis-2.56.0")
# What B1 sends to: the estate mirrors `repl.`; `local.` is in no group. (A `sync` mirror, Artemis's synchronous
# mode, is not measured: with it dc1's broker was halted by its critical analyzer twice; see the note of issue 16.)
DESTINATIONS = {"async": "repl.bench", "unmirrored": "local.bench"}
# B1's attribution set sends to a messages_only group (`inflow.`: a mirror without acknowledgements) in place of
# `async`: beside the `core` set it shows what mirroring each acknowledgement costs dc1. Its copies stay at dc2.
MESSAGES_ONLY = {"messages_only": "inflow.bench"}
ATTRIBUTION_SET = "core, acknowledgements not mirrored"
ADDRESS_GROUPS = [{"name": "repl", "addresses": ["repl."], "mode": "full_state"},
                  {"name": "inflow", "addresses": ["inflow."], "mode": "messages_only"},
                  {"name": "bridged", "addresses": ["bridged."], "mode": "messages_only", "engine": "bridge"}]
# B2 sends to a messages_only group: there dc2's own clients may consume their copy, so arrival is seen by a consumer.
LAG_ADDRESS = "inflow.lag"
# B8: a messages_only group per engine, and an address in no group.
ENGINE_PREFIXES = {"mirror": "inflow", "bridge": "bridged", "unreplicated": "local"}
# Placement when pinned (taskset CPU lists): dc1's broker alone, the rest together.
PINNED = {"dc1": "0", "dc2": "1", "client": "1"}


@dataclasses.dataclass
class Run:
    """What every benchmark gets: the converged 2 x 1 estate and the run's settings."""
    estate: Estate
    rounds: int
    seconds: int
    warmup: int
    cold_converge_s: float | None


def testbed(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([TESTBED, *args], check=check, capture_output=True, text=True, timeout=1800)


def converge(overrides: dict | None = None) -> float:
    """site.yml on the benchmark's inventory (with ``overrides`` as extra variables); its wall time."""
    started = time.monotonic()
    result = run_playbook("site.yml", inventory=INVENTORY,
                          extra_args=["--extra-vars", json.dumps(overrides)] if overrides else None)
    if result.rc != 0:  # an exception the run records for the benchmark at hand, not an exit that loses the rest
        raise RuntimeError(f"site.yml failed on the benchmark's test bed:\n{result.output[-4000:]}")
    return time.monotonic() - started


def build(nodes_per_dc: int) -> tuple[Estate, dict, float]:
    """A 2 x ``nodes_per_dc`` test bed (shared_nothing pairs when 2) converged by site.yml with the benchmark's
    address groups, in an inventory of its own; the estate, its settings and the cold converge time."""
    shutil.rmtree(INVENTORY, ignore_errors=True)
    testbed("up", "--dcs", "2", "--nodes-per-dc", str(nodes_per_dc), "--inventory-dir", INVENTORY)
    with open(os.path.join(TESTBED_INVENTORY, "group_vars", "all", "estate.yml")) as handle:
        settings = yaml.safe_load(handle)
    # Broker metrics off, as when benchmarks/RESULTS.md was measured (the role's default until 2026-11-30; a takeover
    # with them is within 10 %: tests/drills/results/takeover_metrics_2x2.json).
    settings.update(replication_address_groups=ADDRESS_GROUPS, broker_java_max_heap="1g",
                    broker_metrics_enabled=False)
    # The suite's broker outside the estate takes an address of the suite's groups, which the benchmark replaces.
    settings.pop("replication_external_brokers", None)
    with open(os.path.join(INVENTORY, "group_vars", "all", "estate.yml"), "w") as handle:
        yaml.safe_dump(settings, handle)
    if nodes_per_dc == 2:
        set_layout_vars(INVENTORY, "shared_nothing")
    return Estate.from_testbed(INVENTORY), settings, converge()


def perf_client(node, destination: str, seconds: int, warmup: int, cpus: str | None, protocol: str = "core",
                rate: int | None = None, truststore: tuple[str, str] | None = None) -> list[dict]:
    """One run of `artemis perf client` (one producer, one consumer) against ``node``, speaking CORE (the perf
    client's default) or AMQP (Qpid JMS, which needs ``truststore``: a PKCS12 file and its password), unbounded or
    at ``rate`` messages per second; its JSON report."""
    if protocol == "core":
        url = node.core_url
    else:
        location, store_password = truststore
        url = (f"{node.amqp_url}?transport.trustStoreLocation={location}&transport.trustStorePassword={store_password}"
               "&transport.verifyHost=true")
    with tempfile.TemporaryDirectory() as work:
        report = os.path.join(work, "report.json")
        command = [os.path.join(ARTEMIS_HOME, "bin", "artemis"), "perf", "client", "--silent", "--url", url,
                   "--protocol", protocol, "--user", node.user, "--password", node.password, "--persistent",
                   "--message-size", "1024", "--duration", str(seconds), "--warmup", str(warmup), "--json", report,
                   *(["--rate", str(rate)] if rate else []), f"queue://{destination}"]
        if cpus is not None:
            command = ["taskset", "-c", cpus] + command
        result = subprocess.run(command, capture_output=True, text=True, timeout=seconds + warmup + 120,
                                check=False)
        if result.returncode != 0 or not os.path.exists(report):
            raise RuntimeError(f"artemis perf client failed ({result.returncode}): {result.stderr[-2000:]}"
                               f"{result.stdout[-2000:]}")
        with open(report) as handle:
            return json.load(handle)


def amqp_truststore(ca_cert: str, work: str) -> tuple[str, str]:
    """The estate's CA as a PKCS12 trust store for Qpid JMS (which reads no PEM); a public certificate only, so its
    password protects nothing and is made up here."""
    location, store_password = os.path.join(work, "ca.p12"), uuid.uuid4().hex
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "estate-ca", "-file", ca_cert, "-keystore",
                    location, "-storetype", "PKCS12", "-storepass", store_password], check=True, capture_output=True)
    return location, store_password


def sent_rate(report: list[dict]) -> float:
    """Messages per second the producer completed over the measured period: the report's interval samples (about a
    second each, `completed` sends in each) after the warm-up ones, from the end of the last warm-up sample."""
    intervals = [sample for sample in report if sample.get("sampleType") == "interval"]
    measured = [sample for sample in intervals if not sample["warmup"]]
    warm = [sample for sample in intervals if sample["warmup"]]
    if not measured:
        raise RuntimeError(f"the perf client's report has no measured interval: {report!r:.500}")
    start = warm[-1]["time"] if warm else measured[0]["time"] - 1000
    return sum(sample["completed"] for sample in measured) / ((measured[-1]["time"] - start) / 1000)


def mirror_backlog(node) -> int:
    return sum(link.get("backlog") or 0 for link in broker_report(node.management())["links"]
               if not link.get("external"))


def wait_mirror_drained(node, timeout: float = 600) -> float:
    """Seconds until ``node``'s mirrors hold nothing more to send (each run starts with an empty backlog)."""
    started = time.monotonic()
    amqp.wait_for(lambda: mirror_backlog(node), lambda backlog: backlog == 0, timeout=timeout, interval=1,
                  description=f"{node.name}'s mirror backlog sent")
    return time.monotonic() - started


def pin(estate: Estate, pinned: bool) -> None:
    for node in estate.nodes:
        testbed("cpus", node.name, PINNED[node.dc] if pinned else "all")


def b1_variants() -> dict:
    """B1's variants that change the estate (site.yml's extra variables, converged into and back): what a part costs
    the producer. Without TLS the mirrors need a plain-text AMQP acceptor that takes their password (the replication
    role's preflight says so), and the bridge engine, which needs TLS, is left out meanwhile."""
    with open(os.path.join(REPO_ROOT, "roles", "broker", "defaults", "main.yml")) as handle:
        acceptors = yaml.safe_load(handle)["broker_acceptors"]
    plain = {"name": "mirror-plain", "port": 5672, "protocols": ["AMQP"], "tls": False, "plain_text_passwords": True}
    return {"broker metrics on": {"broker_metrics_enabled": True},
            # Each acknowledgement event is a durable message: what the journal's sync of it costs.
            "journal datasync off": {"broker_journal_datasync": False},
            # The TLS acceptor for mirrors goes away, which site.yml refuses unless told (its clients are the mirrors).
            "mirror TLS off": {"replication_tls": False, "broker_acceptors": acceptors + [plain],
                               "broker_acceptor_changes_allowed": True,
                               "replication_address_groups": [group for group in ADDRESS_GROUPS
                                                              if group.get("engine") != "bridge"]}}


def _b1_run(estate: Estate, kind: str, pinned: bool, seconds: int, warmup: int, protocol: str = "core",
            rate: int | None = None, truststore: tuple[str, str] | None = None,
            recording: broker_process.FlightRecording | None = None) -> dict:
    """One perf client run to ``kind``'s destination at dc1 (on a new queue): the producer's rate, the send and
    transfer times, each broker's CPU per message (from before the run until the mirror has sent everything), and
    within a ``recording`` of dc1's broker the run's window of it (its summary filled when the recording stops)."""
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    destination = f"{(DESTINATIONS | MESSAGES_ONLY)[kind]}.{uuid.uuid4().hex[:8]}"
    cpu_before = {node.dc: broker_process.cpu_seconds(node) for node in (dc1, dc2)}
    recorded: dict = {}
    with recording.window(recorded) if recording else contextlib.nullcontext():
        report = perf_client(dc1, destination, seconds, warmup, PINNED["client"] if pinned else None, protocol,
                             rate, truststore)
    backlog = mirror_backlog(dc1)
    drained = wait_mirror_drained(dc1)
    cpu_after = {node.dc: broker_process.cpu_seconds(node) for node in (dc1, dc2)}
    if kind in MESSAGES_ONLY:
        # dc2 keeps the copies of a messages_only group: gone before the next run, which they would slow down.
        management = dc2.management()
        management.execute(broker_mbean(management.name), "destroyQueue(java.lang.String,boolean,boolean)",
                           destination, True, True)
    cpu_used = {dc: {part: cpu_after[dc][part] - cpu_before[dc][part] for part in cpu_after[dc]} for dc in cpu_after}
    totals = next(sample for sample in report if sample.get("sampleType") == "summary")
    messages = totals["totalCompleted"]
    row = {"pinned": pinned, "kind": kind, "protocol": protocol, "rate": rate, "destination": destination,
           "sent_per_s": round(sent_rate(report), 1), "messages": messages,
           "cpu_us_per_message": {dc: round(used["total"] * 1e6 / messages, 1) for dc, used in cpu_used.items()},
           "compiler_share_of_cpu": {dc: round(used["compiler"] / used["total"], 3) if used["total"] else None
                                     for dc, used in cpu_used.items()},
           "send_time_us": {q: totals["totalSendTime"][q] for q in ("50", "99")},
           "transfer_time_us": {q: totals["totalTransferTime"][q] for q in ("50", "99")},
           "backlog_at_end": backlog, "backlog_drain_s": round(drained, 1), "report": report}
    if recording:
        row["profile"] = recorded
    return row


# A JVM is warm for B1 when its JIT compiler took less than this share of the broker's CPU over a warm-up round (a
# run to each destination with each protocol); at most WARM_UP_ROUNDS of WARM_UP_SECONDS runs.
WARM_COMPILER_SHARE = 0.05
WARM_UP_ROUNDS = 6
WARM_UP_SECONDS = 10


def warm_up(estate: Estate, truststore: tuple[str, str]) -> list[dict]:
    """Unmeasured runs on dc1's broker, pinned, until its JIT compiler is quiet: measured rounds on a JVM that is
    still compiling its hot paths see its compiler and its slower, not yet compiled code. The rounds' figures are
    kept for the record."""
    rounds = []
    for _round in range(WARM_UP_ROUNDS):
        runs = [_b1_run(estate, kind, True, WARM_UP_SECONDS, 0, protocol, truststore=truststore)
                for protocol in ("core", "amqp") for kind in DESTINATIONS]
        share = max(run["compiler_share_of_cpu"]["dc1"] or 0 for run in runs)
        rounds.append({"compiler_share_of_cpu": share, "sent_per_s": [run["sent_per_s"] for run in runs]})
        print(f"B1 warm-up: dc1's compiler took up to {share:.0%} of its CPU, {rounds[-1]['sent_per_s']} msg/s",
              flush=True)
        if share < WARM_COMPILER_SHARE:
            break
    return rounds


def b1_ratios(runs: list[dict]) -> dict:
    """Mirrored / unmirrored producer rate per round of ``runs`` (each round one run of each kind), and each kind's
    median CPU per message and send and transfer times."""
    mirrored = "async" if any(row["kind"] == "async" for row in runs) else next(iter(MESSAGES_ONLY))
    by_round: dict = {}
    for row in runs:
        by_round.setdefault(row["round"], {})[row["kind"]] = row
    rounds = [pair for pair in by_round.values() if {mirrored, "unmirrored"} <= set(pair)]
    ratios = [pair[mirrored]["sent_per_s"] / pair["unmirrored"]["sent_per_s"] for pair in rounds]
    per_kind = {}
    for kind in dict.fromkeys(row["kind"] for row in runs):
        rows = [row for row in runs if row["kind"] == kind]
        per_kind[kind] = {
            "sent_per_s": [row["sent_per_s"] for row in rows],
            "cpu_us_per_message": {dc: round(statistics.median(row["cpu_us_per_message"][dc] for row in rows), 1)
                                   for dc in ("dc1", "dc2")},
            "send_time_us": {q: statistics.median(row["send_time_us"][q] for row in rows) for q in ("50", "99")},
            "transfer_time_us": {q: statistics.median(row["transfer_time_us"][q] for row in rows)
                                 for q in ("50", "99")},
            "dc1_compiler_share_of_cpu": max((row["compiler_share_of_cpu"]["dc1"] or 0 for row in rows
                                              if "compiler_share_of_cpu" in row), default=None)}
    return {"ratios": [round(x, 3) for x in ratios],
            "median_ratio": round(statistics.median(ratios), 3) if ratios else None,
            "all_rounds_ratio": round(sum(pair[mirrored]["sent_per_s"] for pair in rounds)
                                      / sum(pair["unmirrored"]["sent_per_s"] for pair in rounds), 3) if rounds else None,
            "mirrored_kind": mirrored, "mirrored_per_s": per_kind[mirrored]["sent_per_s"],
            "unmirrored_per_s": per_kind["unmirrored"]["sent_per_s"], "per_kind": per_kind}


def mirror_cost(run: Run) -> dict:
    """B1: rounds of one run to each destination (a new queue each), CORE unpinned and pinned; then pinned: AMQP
    producers, CORE at half the unmirrored rate (the latency users feel before saturation), and one run of each
    protocol and destination under Flight Recorder; then each of b1_variants() converged in, pinned CORE rounds and a
    profile, and converged back. Measured rounds begin on a warm JVM (warm_up)."""
    estate, rounds, seconds, warmup = run.estate, run.rounds, run.seconds, run.warmup
    runs: list[dict] = []

    def measure(measured_set: str, round_number: int, kind: str, pinned: bool = True, **options) -> dict:
        row = {"set": measured_set, "round": round_number, **_b1_run(estate, kind, pinned, seconds, warmup, **options)}
        runs.append(row)
        print(f"B1 {measured_set} {'pinned' if pinned else 'unpinned'} round {round_number} {kind}: "
              f"{row['sent_per_s']} msg/s, CPU per message {row['cpu_us_per_message']} us (compiler "
              f"{row['compiler_share_of_cpu']['dc1']} of dc1's), send p99 "
              f"{row['send_time_us']['99']} us, mirror backlog {row['backlog_at_end']} at the end, sent in "
              f"{row['backlog_drain_s']} s", flush=True)
        return row

    def rounds_of(measured_set: str, pinned: bool = True, kinds: tuple = tuple(DESTINATIONS), **options) -> None:
        for round_number in range(1, rounds + 1):
            for kind in kinds:
                measure(measured_set, round_number, kind, pinned, **options)

    def profiles_of(*measured_sets: tuple[str, dict]) -> list[dict]:
        """One run of each destination per set, within one recording of dc1's broker, after a warm-up under it
        (broker_process.FlightRecording); the warm-up's rounds."""
        with broker_process.FlightRecording(estate.dc("dc1"), f"b1-{uuid.uuid4().hex[:8]}") as recording:
            warmed = warm_up(estate, truststore)
            profiled = [measure(measured_set, 1, kind, recording=recording, **options)
                        for measured_set, options in measured_sets for kind in DESTINATIONS]
        for row in profiled:
            # The allocation samples' weights estimate every byte allocated over the run's window.
            row["allocated_bytes_per_message"] = round(row["profile"]["allocation"]["bytes"] / row["messages"])
        return warmed

    converged_with: dict = {}
    variants, variant_errors, warm_ups = b1_variants(), {}, {}
    with tempfile.TemporaryDirectory() as work:
        truststore = amqp_truststore(estate.dc("dc1").ca_cert, work)
        try:
            pin(estate, True)
            warm_ups["first"] = warm_up(estate, truststore)
            pin(estate, False)
            rounds_of("core unpinned", pinned=False)
            pin(estate, True)
            rounds_of("core")
            try:
                rounds_of(ATTRIBUTION_SET, kinds=(*MESSAGES_ONLY, "unmirrored"))
            except Exception as exc:  # noqa: BLE001 - recorded; the other sets still count
                traceback.print_exc()
                variant_errors[ATTRIBUTION_SET] = f"{type(exc).__name__}: {exc}"[:3000]
            unmirrored = statistics.median(row["sent_per_s"] for row in runs
                                           if row["set"] == "core" and row["kind"] == "unmirrored")
            fixed_rate = int(unmirrored / 2)
            rounds_of("amqp", protocol="amqp", truststore=truststore)
            rounds_of("core at half the unmirrored rate", rate=fixed_rate)
            warm_ups["profiles"] = profiles_of(("core profile", {}),
                                               ("amqp profile", {"protocol": "amqp", "truststore": truststore}))
            for variant, overrides in variants.items():
                converged_with = overrides
                try:
                    converge(overrides)
                    pin(estate, True)
                    warm_ups[variant] = warm_up(estate, truststore)
                    rounds_of(variant)
                    warm_ups[f"{variant} profile"] = profiles_of((f"{variant} profile", {}))
                except Exception as exc:  # noqa: BLE001 - recorded; the next variant and the baseline still count
                    traceback.print_exc()
                    variant_errors[variant] = f"{type(exc).__name__}: {exc}"[:3000]
        finally:
            if converged_with:
                # Back to the benchmark's estate; the plain-text acceptor of "mirror TLS off" goes away again.
                converge({"broker_acceptor_changes_allowed": True})
            pin(estate, False)
    placements = {"unpinned": "core unpinned", "pinned": "core"}
    summary = {f"{placement}.async": b1_ratios([row for row in runs if row["set"] == measured_set])
               for placement, measured_set in placements.items()}
    by_set: dict = {}
    for row in runs:
        by_set.setdefault(row["set"], []).append(row)
    # A set cut short before it ran both of its kinds (its error is in variant_errors) has no ratio.
    sets = {name: b1_ratios(rows) for name, rows in by_set.items()
            if not name.endswith("profile") and "unmirrored" in {row["kind"] for row in rows}
            and {"async", *MESSAGES_ONLY} & {row["kind"] for row in rows}}
    profiles = {name: {row["kind"]: {"profile": row["profile"], "sent_per_s": row["sent_per_s"],
                                     "cpu_us_per_message": row["cpu_us_per_message"],
                                     "allocated_bytes_per_message": row["allocated_bytes_per_message"],
                                     "compiler_share_of_cpu": row["compiler_share_of_cpu"]["dc1"]}
                       for row in runs if row["set"] == name}
                for name in dict.fromkeys(row["set"] for row in runs) if name.endswith("profile")}
    backlogs = {}
    for placement, measured_set in placements.items():
        for kind in DESTINATIONS:
            rows = [row for row in runs if row["set"] == measured_set and row["kind"] == kind]
            backlogs[f"{placement}.{kind}"] = {
                "backlog_at_end": [row["backlog_at_end"] for row in rows],
                "drain_s": [row["backlog_drain_s"] for row in rows]}
    return {"goal": "mirrored / unmirrored throughput >= 0.85, pinned, async",
            "method": {"client": "artemis perf client", "producers": 1, "consumers": 1, "persistent": True,
                       "message_size": 1024, "seconds": seconds, "warmup_seconds": warmup, "rounds": rounds,
                       "destinations": DESTINATIONS, "pinned_cpus": PINNED, "wan_delay_ms": 0,
                       "fixed_rate_per_s": fixed_rate, "variants": variants, "attribution_set": ATTRIBUTION_SET,
                       "attribution_destination": MESSAGES_ONLY,
                       "profiler": "Java Flight Recorder, settings=profile, on dc1's broker: one recording for the "
                                   "base profiles and one per variant, a warm-up under it until the compiler is quiet, "
                                   "then one run of each destination, each summarised over its own time window",
                       "warm_up": f"pinned rounds of {WARM_UP_SECONDS} s runs to each destination with CORE and "
                                  f"AMQP until dc1's JIT compiler took under {WARM_COMPILER_SHARE:.0%} of its CPU "
                                  f"in one (at most {WARM_UP_ROUNDS}); again after each variant's converge"},
            "summary": summary, "sets": sets, "profiles": profiles, "variant_errors": variant_errors,
            "warm_up": warm_ups,
            "backlog": backlogs, "runs": runs}


def machine() -> dict:
    with open("/proc/meminfo") as handle:
        memory_kib = int(next(line for line in handle if line.startswith("MemTotal")).split()[1])
    return {"cpus": os.cpu_count(), "memory_gib": round(memory_kib / 2 ** 20, 1), "kernel": platform.release(),
            "model": next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                           if line.startswith("model name")), "")}


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _lag(estate: Estate, address: str, delay: int, rate: int, seconds: int, warmup: int) -> dict:
    """A proton producer at dc1 and a consumer of the replicated copy at dc2 (a messages_only group, where dc2's clients
    may consume), both on this machine's clock; a message's lag is its receive time at dc2 minus its send time at
    dc1, for every message sent after the warm-up. The WAN delay is one way (Toxiproxy)."""
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    testbed("wan", "--delay-ms", str(delay))
    consumer = amqp.Consumer([dc2.amqp_url], dc2.user, dc2.password, address, ca_path=dc2.ca_cert)
    with consumer:
        consumer.wait_connected()
        with amqp.Producer([dc1.amqp_url], dc1.user, dc1.password, address, rate=rate, body_size=1024,
                           ca_path=dc1.ca_cert) as producer:
            producer.wait_connected()
            time.sleep(warmup + seconds)
        sent = {r.id: r.sent_at for r in producer.ledger() if r.outcome == "accepted"}
        amqp.wait_for(lambda: len(set(consumer.received_ids()) & set(sent)), lambda n: n == len(sent),
                      timeout=120, description=f"every message of {address} at dc2 (WAN {delay} ms)")
    first = min(sent.values()) + warmup
    lags = [(record.received_at - sent[record.id]) * 1000 for record in consumer.ledger()
            if record.id in sent and sent[record.id] >= first]
    return {"wan_delay_ms": delay, "messages": len(lags), "rate_per_s": round(len(lags) / seconds, 1),
            "p50_ms": round(_percentile(lags, 0.5), 1), "p99_ms": round(_percentile(lags, 0.99), 1),
            "max_ms": round(max(lags), 1), "goal_p99_ms": delay + 50}


def replication_lag(run: Run, rate: int = 1000, delays_ms: tuple[int, ...] = (0, 20, 50, 100)) -> dict:
    """B2: lag (see _lag) at ``rate`` for each one-way WAN delay, on the mirror."""
    rows = []
    for delay in delays_ms:
        rows.append(_lag(run.estate, f"{LAG_ADDRESS}.{delay}ms.{uuid.uuid4().hex[:6]}", delay, rate, run.seconds,
                         run.warmup))
        print(f"B2 WAN {delay} ms: p50 {rows[-1]['p50_ms']} p99 {rows[-1]['p99_ms']} max {rows[-1]['max_ms']} ms "
              f"({rows[-1]['messages']} messages)", flush=True)
    testbed("wan", "--delay-ms", "0")
    return {"goal": "p99 <= WAN delay + 50 ms at 1,000 msg/s",
            "method": {"producer": "python-qpid-proton at dc1", "consumer": "python-qpid-proton at dc2",
                       "rate_per_s": rate, "message_size": 1024, "durable": True, "seconds": run.seconds,
                       "warmup_seconds": run.warmup, "address_group_mode": "messages_only"},
            "rows": rows}


def engines(run: Run, rate: int = 1000, delays_ms: tuple[int, ...] = (0, 50)) -> dict:
    """B8: the mirror and the bridge engine on messages_only groups (`inflow.` and `bridged.`), beside an address in
    no group (`local.`). Throughput as B1 pinned: `artemis perf client` at dc1, rounds alternating the three; after
    each replicated run, the seconds until dc1's links hold nothing more to send and the copies that reached dc2
    (removed there afterwards: nobody consumes them). Lag as B2 at ``rate`` for each WAN delay, per engine."""
    estate, rounds, seconds, warmup = run.estate, run.rounds, run.seconds, run.warmup
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    runs = []
    pin(estate, True)
    try:
        for round_number in range(1, rounds + 1):
            for engine, prefix in ENGINE_PREFIXES.items():
                destination = f"{prefix}.tp.{uuid.uuid4().hex[:8]}"
                report = perf_client(dc1, destination, seconds, warmup, PINNED["client"])
                backlog = mirror_backlog(dc1)
                drained = wait_mirror_drained(dc1)
                copies = None
                if engine != "unreplicated":
                    copies = dc2.management().message_count(destination, destination)
                    dc2.management(timeout=300).remove_messages(destination, destination, "")
                runs.append({"round": round_number, "engine": engine, "destination": destination,
                             "sent_per_s": round(sent_rate(report), 1),
                             "sent_total": sum(sample["completed"] for sample in report
                                               if sample.get("sampleType") == "interval"),
                             "backlog_at_end": backlog,
                             "backlog_drain_s": round(drained, 1), "copies_at_dc2": copies})
                print(f"B8 round {round_number} {engine}: {runs[-1]['sent_per_s']} msg/s, backlog {backlog} at the "
                      f"end, sent in {drained:.1f} s, {copies} copies at dc2", flush=True)
    finally:
        pin(estate, False)
    throughput = {}
    for engine in ENGINE_PREFIXES:
        per_round = [r for r in runs if r["engine"] == engine]
        ratios = [r["sent_per_s"] / u["sent_per_s"] for r, u in
                  zip(per_round, [r for r in runs if r["engine"] == "unreplicated"])]
        throughput[engine] = {"sent_per_s": [r["sent_per_s"] for r in per_round],
                              "median_ratio": round(statistics.median(ratios), 3),
                              "drain_s": [r["backlog_drain_s"] for r in per_round],
                              "copies_at_dc2": [r["copies_at_dc2"] for r in per_round]}
    lag = []
    for engine in ("mirror", "bridge"):
        for delay in delays_ms:
            row = _lag(estate, f"{ENGINE_PREFIXES[engine]}.lag.{delay}ms.{uuid.uuid4().hex[:6]}", delay, rate,
                       seconds, warmup)
            lag.append({"engine": engine, **row})
            print(f"B8 lag {engine} WAN {delay} ms: p50 {row['p50_ms']} p99 {row['p99_ms']} max {row['max_ms']} ms",
                  flush=True)
    testbed("wan", "--delay-ms", "0")
    return {"method": {"client": "artemis perf client", "persistent": True, "message_size": 1024,
                       "seconds": seconds, "warmup_seconds": warmup, "rounds": rounds, "pinned_cpus": PINNED,
                       "prefixes": ENGINE_PREFIXES, "lag_rate_per_s": rate},
            "throughput": throughput, "lag": lag, "runs": runs}


EVENT_LOG = os.path.expanduser("~/.local/state/continuity-artemis/events.jsonl")


def _swapover_events(since: str) -> dict:
    """{phase: time} of the newest swapover in the event log recorded since ``since`` (UTC ISO text)."""
    with open(EVENT_LOG) as handle:
        events = [event for event in map(json.loads, handle) if event["name"] == "swapover" and event["at"] >= since]
    newest = events[-1]["id"]
    return {event["phase"]: datetime.datetime.fromisoformat(event["at"].removesuffix("Z")).replace(
        tzinfo=datetime.timezone.utc).timestamp() for event in events if event["id"] == newest}


def swapover_time(run: Run, queued: tuple[int, ...] = (0, 10_000, 100_000)) -> dict:
    """B3: N durable 1 KiB messages queued on one queue of the `repl` group at the active site (and replicated), one
    more so that N = 0 has something to deliver; a consumer at the other site, retrying while that site refuses it;
    playbooks/swapover.yml moves `repl` over. Time = the swapover's `fenced` event to the consumer's first message;
    beside it the playbook's own wall time and the phases. The directions alternate; the ledger checks that every
    message arrived once."""
    estate = run.estate
    rows = []
    source, target = "dc1", "dc2"
    for count in queued:
        queue = f"repl.swap.{count}.{uuid.uuid4().hex[:6]}"
        src, dst = estate.dc(source), estate.dc(target)
        with amqp.Producer([src.amqp_url], src.user, src.password, queue, rate=None, body_size=1024,
                           max_messages=count + 1, ca_path=src.ca_cert) as producer:
            amqp.wait_for(lambda: len(producer.accepted_ids()), lambda n: n == count + 1, timeout=1800,
                          description=f"{count + 1} messages queued at {source}")
        amqp.wait_for(lambda: dst.management().message_count(queue, queue), lambda n: n == count + 1,
                      timeout=1800, description=f"{count + 1} messages replicated to {target}")
        consumer = amqp.Consumer([dst.amqp_url], dst.user, dst.password, queue, reconnect_delay=0.1,
                                 ca_path=dst.ca_cert)
        with consumer:
            since = datetime.datetime.now(datetime.timezone.utc).isoformat()
            started = time.monotonic()
            result = run_playbook("playbooks/swapover.yml", inventory=INVENTORY, extra_args=["-e", json.dumps(
                {"swapover_source": source, "swapover_target": target, "swapover_groups": ["repl"]})])
            playbook_s = time.monotonic() - started
            if result.rc != 0:
                raise RuntimeError(f"swapover {source} -> {target} failed:\n{result.output[-4000:]}")
            amqp.wait_for(lambda: len(set(consumer.accepted_ids())), lambda n: n == count + 1, timeout=1800,
                          description=f"{count + 1} messages consumed at {target}")
        phases = _swapover_events(since)
        first = min(record.received_at for record in consumer.ledger())
        rows.append({"queued": count, "source": source, "target": target,
                     "fence_to_first_consume_s": round(first - phases["fenced"], 2),
                     "playbook_s": round(playbook_s, 1),
                     "phases_s": {phase: round(at - phases["started"], 2) for phase, at in phases.items()},
                     "consumed": len(set(consumer.accepted_ids())), "duplicates": len(consumer.duplicates())})
        print(f"B3 {count} queued, {source} -> {target}: fence to first consume "
              f"{rows[-1]['fence_to_first_consume_s']} s (playbook {rows[-1]['playbook_s']} s)", flush=True)
        source, target = target, source
    if source != "dc1":  # leave dc1 active, as the inventory says
        back = run_playbook("playbooks/swapover.yml", inventory=INVENTORY, extra_args=["-e", json.dumps(
            {"swapover_source": source, "swapover_target": "dc1", "swapover_groups": ["repl"]})])
        if back.rc != 0:
            raise RuntimeError(f"swapover back to dc1 failed:\n{back.output[-4000:]}")
    return {"goal": "fence to first consume at the target <= 30 s with 10,000 messages queued",
            "method": {"message_size": 1024, "durable": True, "groups": ["repl"], "consumer_retry_s": 0.1},
            "rows": rows}


def _published(measurement: Measurement, work: str, name: str) -> dict:
    """The job over the drill's telemetry and ledger: {metric: value} of the drill ``name``."""
    with open(os.path.join(work, "sla.yml"), "w") as handle:
        handle.write(f"window_seconds: {B4_WINDOW_SECONDS}\n")
    metrics = measurement.job(work, "--sla", os.path.join(work, "sla.yml"))
    return {metric.removeprefix("continuity_artemis_drill_"): value for (metric, labels), value in metrics.items()
            if metric.startswith("continuity_artemis_drill_") and dict(labels).get("drill") == name}


# The job's window in B4: the in-flight estimate averages the samples of the window before the fault (the load's
# 15 s, at one sample a second).
B4_WINDOW_SECONDS = 15


def failover_loss(run: Run, rates: tuple[int, ...] = (100, 500, 1000), delays_ms: tuple[int, ...] = (0, 50)) -> dict:
    """B4 and B5: per rate and WAN delay, a producer at dc1 (failover list dc1, dc2) and the RPO measurement
    (collector and prober of spark/, in this process) for 15 s; dc1's host powered off (no partition before);
    failover.yml (forced, the figure recorded); a consumer at dc2 takes everything dc2 has; what dc1 held and had not
    replicated is the loss (ledger). Beside it the RPO job's estimate before the fault of the messages at risk (what
    its last samples saw behind, and the in-flight tail no sample sees), and its error. Then dc1 boots, site.yml starts its broker, failback.yml brings its
    stranded messages over and gives the groups back: the loss overall must be 0 (B5)."""
    estate = run.estate
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    route = next(r for r in artemis_estate.probe_routes(ADDRESS_GROUPS, ["dc1", "dc2"], "dc1") if r["group"] == "repl")
    rows = []
    for delay in delays_ms:
        for rate in rates:
            testbed("wan", "--delay-ms", str(delay))
            name = f"failover-{rate}-{delay}ms"
            queue = f"repl.{name}.{uuid.uuid4().hex[:6]}"
            with tempfile.TemporaryDirectory() as work:
                producer = amqp.Producer([dc1.amqp_url, dc2.amqp_url], dc1.user, dc1.password, queue, rate=rate,
                                         ca_path=dc1.ca_cert)
                consumer = amqp.Consumer([dc2.amqp_url], dc2.user, dc2.password, queue, ca_path=dc2.ca_cert)
                measurement = Measurement(estate, os.path.join(work, "telemetry"), routes=[
                    {key: route[key] for key in ("address", "source", "targets")}], window_seconds=B4_WINDOW_SECONDS)
                with producer, measurement:
                    producer.wait_connected()
                    time.sleep(15)
                    stop_requested = time.time()
                    testbed("stop-node", dc1.name)
                    failed_over = run_playbook("playbooks/failover.yml", inventory=INVENTORY, extra_args=[
                        "-e", json.dumps({"failover_target": "dc2", "failover_confirm": True,
                                          "failover_force": True})])
                    if failed_over.rc != 0:
                        raise RuntimeError(f"failover failed:\n{failed_over.output[-4000:]}")
                    activated_s = time.time() - stop_requested
                    consumer.start()
                    time.sleep(5)
                    producer.stop()
                    accepted = set(producer.accepted_ids())
                    amqp.wait_for(lambda: dc2.management().message_count(queue, queue), lambda n: n == 0,
                                  timeout=300, description="dc2's copy consumed")
                    time.sleep(2)
                    lost = accepted - set(consumer.accepted_ids())
                    # The power-off takes effect some 0.1-0.2 s after it is asked for, and dc1 accepts until then:
                    # the fault is the later of the request and dc1's last acceptance (URL 1 of 2: odd connections).
                    fault_time = max([stop_requested] + [record.settled_at for record in producer.ledger()
                                                         if record.outcome == "accepted" and record.connection % 2])
                    ledger.write(measurement.root, ledger.drill_rows(name, producer, ["dc1", "dc2"],
                                                                     [(consumer, "dc2")], fault_time, "dc1"))
                    published = _published(measurement, work, name)
                    testbed("start-node", dc1.name)
                    started = run_playbook("site.yml", inventory=INVENTORY, extra_args=["--limit", dc1.name])
                    back = run_playbook("playbooks/failback.yml", inventory=INVENTORY, extra_args=[
                        "-e", json.dumps({"failback_site": "dc1", "failback_active": "dc2"})])
                    if started.rc != 0 or back.rc != 0:
                        raise RuntimeError(f"failback failed:\n{started.output[-2000:]}\n{back.output[-4000:]}")
                    amqp.wait_for(lambda: accepted - set(consumer.accepted_ids()), lambda missing: not missing,
                                  timeout=300, description="every accepted message consumed after failback")
                consumer.stop()
            # failback.yml leaves dc1 passive: the next run's producer must find dc1 active again (else its sends
            # go to dc2 and nothing is at risk when dc1 powers off), and so must a later site.yml.
            swapped = run_playbook("playbooks/swapover.yml", inventory=INVENTORY, extra_args=["-e", json.dumps(
                {"swapover_source": "dc2", "swapover_target": "dc1",
                 "swapover_groups": [group["name"] for group in ADDRESS_GROUPS if group["mode"] == "full_state"]})])
            if swapped.rc != 0:
                raise RuntimeError(f"swapover back to dc1 failed:\n{swapped.output[-4000:]}")
            consumed = consumer.accepted_ids()
            behind, in_flight = published.get("messages_at_risk_estimate"), published.get("messages_in_flight_estimate")
            estimate = None if behind is None or in_flight is None else behind + in_flight
            rpo = published.get("rpo_seconds")
            rows.append({
                "rate_per_s": rate, "wan_delay_ms": delay, "accepted": len(accepted), "lost": len(lost),
                "job_lost": published.get("lost_messages"), "behind_before_fault": behind,
                "in_flight_estimate": None if in_flight is None else round(in_flight, 2),
                "estimate_before_fault": None if estimate is None else round(estimate, 2),
                "estimate_error": None if estimate is None else round(estimate - len(lost), 2),
                "estimate_within_goal": None if estimate is None else
                abs(estimate - len(lost)) <= max(5, 0.1 * len(lost)),
                "drill_rpo_s": rpo, "loss_bound": None if rpo is None else round(rate * rpo + 10),
                "fault_to_activated_s": round(activated_s, 1),
                "lost_after_failback": len(accepted - set(consumed)), "duplicates_overall": len(consumed) - len(set(consumed))})
            print(f"B4 {rate} msg/s WAN {delay} ms: lost {len(lost)} (job {rows[-1]['job_lost']}), estimate before "
                  f"the fault {estimate}; B5 after failback: lost {rows[-1]['lost_after_failback']}", flush=True)
    testbed("wan", "--delay-ms", "0")
    return {"goal": "loss <= rate x measured lag + 10; the estimate within 10 % or 5 messages; 0 lost after failback",
            "method": {"producer": "python-qpid-proton, failover list dc1, dc2", "load_seconds_before_fault": 15,
                       "fault": "testbed stop-node (power off, no partition before); its time: the later of the "
                                "request and dc1's last acceptance",
                       "failover": "failover.yml, forced",
                       "measurement": f"collector and prober every 1 s, the job's window {B4_WINDOW_SECONDS} s"},
            "rows": rows}


def spark_job(run: Run, rows: tuple[int, ...] = (1_000_000, 10_000_000, 30_000_000)) -> dict:
    """B6: the RPO job in Spark local mode on generated telemetry (tests/benchmarks/rpo_job.py), batch and
    incremental."""
    figures = []
    for count in rows:
        figures.append(rpo_job.measure(count))
        print(f"B6 {count:,} rows: {figures[-1]['job_s']} s ({figures[-1]['rows_per_s']:,} rows/s)", flush=True)
    return {"goal": "10M rows <= 60 s in local mode", "method": {"spark": "local mode, the job's command line"},
            "rows": figures}


def site_converge(run: Run) -> dict:
    """B7: site.yml on the benchmark's 2 x 1 bed again (warm; cold was its first run), then on a new 2 x 2
    shared_nothing bed, cold and warm. Leaves the 2 x 2 bed (it runs last)."""
    cold = None if run.cold_converge_s is None else round(run.cold_converge_s, 1)
    rows = [{"shape": "2 x 1", "cold_s": cold, "warm_s": round(converge(), 1)}]
    testbed("down")
    cold = build(2)[2]
    rows.append({"shape": "2 x 2 shared_nothing", "cold_s": round(cold, 1), "warm_s": round(converge(), 1)})
    for row in rows:
        print(f"B7 {row['shape']}: cold {row['cold_s']} s, warm {row['warm_s']} s", flush=True)
    return {"goal": "none set; measured", "method": {"playbook": "site.yml", "controller": "this machine"},
            "rows": rows}


def queue_scale(run: Run) -> dict:
    """B10: scale in queues on a 2 x 2 bed of its own (benchmarks/queue_scale.py); it replaces the bed, so it runs
    last."""
    from benchmarks import queue_scale as b10  # here: queue_scale imports this module
    return b10.queue_scale(run)


def benchmark_order(name: str) -> int:
    return int(name.removeprefix("B"))


BENCHMARKS = {"B1": mirror_cost, "B2": replication_lag, "B3": swapover_time, "B4": failover_loss, "B6": spark_job,
              "B7": site_converge, "B8": engines, "B10": queue_scale}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--only", action="append", choices=sorted(BENCHMARKS), help="run only these (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=20, help="measured seconds per run")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up seconds per run")
    parser.add_argument("--reuse", action="store_true",
                        help="use the test bed an earlier run left up (KEEP_TESTBED=1) instead of building one")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    started = datetime.datetime.now(datetime.timezone.utc)
    results = {"commit": commit, "started": started.isoformat(), "machine": machine(),
               "artemis_version": os.path.basename(ARTEMIS_HOME).removeprefix("apache-artemis-"), "benchmarks": {}}
    up = bool(json.loads(testbed("status", "--json").stdout))
    if up and not args.reuse:
        raise SystemExit("a test bed is up: make bench builds its own (run tests/testbed/testbed down first)")
    try:
        if args.reuse:
            with open(os.path.join(INVENTORY, "group_vars", "all", "estate.yml")) as handle:
                settings = yaml.safe_load(handle)
            estate, cold = Estate.from_testbed(INVENTORY), None
            converge()
        else:
            estate, settings, cold = build(1)
        run = Run(estate, args.rounds, args.seconds, args.warmup, cold)
        results["settings"] = {key: value for key, value in settings.items()
                               if key.startswith(("broker_java", "broker_journal", "replication_address_groups"))}
        results["site_converge_s"] = None if cold is None else round(cold, 1)
        for name in sorted(args.only or BENCHMARKS, key=benchmark_order):
            try:
                results["benchmarks"][name] = BENCHMARKS[name](run)
            except Exception as exc:  # noqa: BLE001 - the others still run; the failure is recorded and rendered
                traceback.print_exc()
                results["benchmarks"][name] = {"error": f"{type(exc).__name__}: {exc}"[:3000]}
            _save(results, started)  # each benchmark's figures are kept even if a later one breaks the run
    finally:
        if os.environ.get("KEEP_TESTBED") != "1":
            testbed("down", check=False)
    results["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat()
    _save(results, started)
    print(f"rendered: {render.render(render.all_result_files())}")
    return 1 if any("error" in result for result in results["benchmarks"].values()) else 0


def _save(results: dict, started: datetime.datetime) -> str:
    os.makedirs(render.RESULTS_DIR, exist_ok=True)
    path = os.path.join(render.RESULTS_DIR, f"{started:%Y-%m-%d}-{results['commit']}.json")
    with open(path, "w") as handle:
        json.dump(results, handle, indent=1)
    print(f"results: {path}", flush=True)
    return path


if __name__ == "__main__":
    sys.exit(main())
