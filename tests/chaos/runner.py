"""make chaos: a bed of its own, continuous load on every kind of group, the schedule of a seed carried out, the
history written and judged.

    make chaos SEED=7 ESTATE=2x2 DURATION=1200      (or: cd tests && python -m chaos.runner --seed 7 ...)

The run's directory (tests/output/chaos/<estate>-seed<seed>/) holds history.jsonl, the runner's log, every
playbook's output and verdicts.json; tests/drills/results/chaos/ gets the verdicts. Exit status 1 when an invariant
does not hold.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid

from ansible_collections.continuity.artemis.plugins.module_utils import amqp_ledger as amqp
from chaos import checker, history, measure, schedule, summary as results_page
from chaos.regressions import REGRESSIONS
from chaos.world import World
from support.estate import REPO_ROOT, Estate, layout_inventory
from support.measurement import Measurement

RESULTS = results_page.RESULTS
RATE = 20              # msg/s per producer: 2 CPUs carry the bed, the load and the controller
PREFETCH = 10          # a consumer cut off may see this many again
RUNTIME_QUEUE_EVERY_S = 180
CONNECT_TIMEOUT_S = 120  # how long a new worker waits for a broker that takes it
DRAIN_TIMEOUT_S = 600


class Load:
    """Producers and consumers on every kind of group, with their ledgers; the history gets their sends and
    deliveries at the end (each record has its own time)."""

    def __init__(self, world: World, run_id: str):
        self.world, self.run_id = world, run_id
        self.workers: list[dict] = []  # {group, mode, producer, consumers: [(datacentre, consumer)], copies}
        self._runtime = 0

    def _urls(self, first: str, only: str | None = None) -> list[str]:
        """A failover list over every broker, the datacentre ``first`` first (``only``: that datacentre's)."""
        order = [first] + [dc for dc in self.world.datacentres if dc != first]
        return [node.amqp_url for dc in order for node in self.world.estate.nodes
                if node.dc == dc and (only is None or dc == only)]

    def _add(self, group, mode, address, first, *, consumer_at=None, anycast=True, queue=None, copies=None):
        node = self.world.estate.nodes[0]
        options = dict(ca_path=node.ca_cert, reconnect_delay=0.2, connect_timeout=3.0)
        producer = amqp.Producer(self._urls(first, only=first if copies else None), node.user, node.password,
                                 address, rate=RATE, anycast=anycast, id_prefix=f"{group}-{uuid.uuid4().hex[:6]}",
                                 **options)
        consumers = [(dc, amqp.Consumer(self._urls(dc, only=dc if copies else None), node.user, node.password,
                                        queue or address, prefetch=PREFETCH, **options))
                     for dc in (consumer_at or [first])]
        entry = {"group": group, "mode": mode, "address": address, "producer": producer, "consumers": consumers,
                 "copies": copies}
        # The consumers first, each datacentre's queue created by its own: a message mirrored to a datacentre where
        # its queue does not exist yet finds none (docs/chaos.md).
        for _dc, consumer in consumers:
            consumer.start()
        try:
            for _dc, consumer in consumers:
                consumer.wait_connected(timeout=CONNECT_TIMEOUT_S)
        except AssertionError:
            for _dc, consumer in consumers:
                consumer.stop(timeout=60)
            raise
        producer.start()
        self.workers.append(entry)
        self.world.log(f"load: {group} {address} from {first}")

    def start(self):
        run, active = self.run_id, self.world.active
        self._add("all", "full_state", f"chaos.{run}.all", active)
        self._add("books", "full_state", f"books.chaos.{run}", active)
        self._add("east", "full_state", f"east.chaos.{run}", "dc2")
        # messages_only: every datacentre consumes its own copy of what the group's owner (the first active) takes.
        self._add("inflow", "messages_only", f"inflow.chaos.{run}", active, consumer_at=self.world.datacentres,
                  copies=self.world.datacentres)
        # A durable subscription of a multicast address in the catch-all group, declared at every datacentre as an
        # operator would.
        topic, subscription = f"chaos.{run}.topic", f"chaos.{run}.sub"
        for dc in self.world.datacentres:
            self.world.create_subscription(dc, topic, subscription)
        self._add("all", "full_state", topic, active, anycast=False, queue=f"{topic}::{subscription}")

    def add_runtime_queue(self):
        """A queue the application creates while the run goes on (the mirror's create-queue race lives here). When
        no broker takes its consumer (the active datacentre without a live broker: both of a pair down, or its backup
        still copying the journal), the application waits: the queue is tried again at the next turn."""
        self._runtime += 1
        address = f"chaos.{self.run_id}.rt{self._runtime}"
        try:
            self._add("all", "full_state", address, self.world.active)
        except AssertionError as exc:
            self.world.log(f"load: {address} deferred, no broker took its consumer: {exc}")

    def stop_producers(self):
        for entry in self.workers:
            entry["producer"].stop(timeout=60)

    def missing(self) -> int:
        count = 0
        for entry in self.workers:
            accepted = set(entry["producer"].accepted_ids())
            delivered = [set(consumer.accepted_ids()) for _dc, consumer in entry["consumers"]]
            if entry["copies"]:
                count += sum(len(accepted - ids) for ids in delivered)
            else:
                count += len(accepted - set().union(*delivered))
        return count

    def stop_consumers(self) -> list[str]:
        crashed = []
        for entry in self.workers:
            for _dc, consumer in entry["consumers"]:
                try:
                    consumer.stop(timeout=60)
                except AssertionError as error:
                    crashed.append(str(error))
        return crashed

    def write_history(self, writer: history.Writer):
        """Every send and delivery, from the ledgers. A messages_only message is expected once at every
        datacentre: its copies are ``id@datacentre``."""
        node_of = {node.amqp_url: node for node in self.world.estate.nodes}
        for entry in self.workers:
            producer = entry["producer"]
            for record in producer.ledger():
                outcome = record.outcome if record.outcome != "pending" else "uncertain"
                # Each new connection of a producer takes the next URL of its failover list.
                broker = node_of[producer.urls[(record.connection - 1) % len(producer.urls)]]
                for suffix in ([f"@{dc}" for dc in entry["copies"]] if entry["copies"] else [""]):
                    writer.write("send", t=record.settled_at or record.sent_at, client=producer.name,
                                 group=entry["group"], id=record.id + suffix, outcome=outcome, datacentre=broker.dc,
                                 broker=broker.name)
            for dc, consumer in entry["consumers"]:
                for record in consumer.ledger():
                    if record.accepted_at is None or record.id is None:
                        continue
                    suffix = f"@{dc}" if entry["copies"] else ""
                    writer.write("delivery", t=record.accepted_at, client=consumer.name, group=entry["group"],
                                 datacentre=dc, id=record.id + suffix)

    def consumer_count(self) -> int:
        return sum(len(entry["consumers"]) for entry in self.workers)


def build_bed(estate_name: str, directory: str, lock_manager: bool = True,
              inventory_vars: dict | None = None) -> tuple[Estate, str]:
    """A fresh test bed of the estate's shape. Pairs lock in ZooKeeper (on the test bed's router, a third site)
    unless ``lock_manager`` is false: without one a lone pair whose primary returns before its backup noticed it
    gone ends with both live (docs/chaos.md). ``inventory_vars`` go to every datacentre's group_vars."""
    shape = schedule.ESTATES[estate_name]
    pairs = shape["brokers_per_datacentre"] > 1
    Estate.testbed("down")
    Estate.testbed("up", "--dcs", str(len(shape["datacentres"])), "--nodes-per-dc",
                   str(shape["brokers_per_datacentre"]), *(["--zookeeper"] if pairs and lock_manager else []))
    shutil.rmtree(os.path.join(directory, "inventory-mixed"), ignore_errors=True)  # an earlier run's, in the same place
    inventory = layout_inventory(directory, {dc: "shared_nothing" if pairs else "standalone"
                                             for dc in shape["datacentres"]}, extra=inventory_vars)
    return Estate.from_testbed(inventory), inventory


def keep_broker_logs(estate: Estate, directory: str) -> None:
    """Every broker's log, with its files rolled over, gzipped, into the run's directory (logs/NODE.log.gz): the
    evidence of what a run found."""
    os.makedirs(os.path.join(directory, "logs"), exist_ok=True)
    for node in estate.nodes:
        try:
            # The files rolled over (at midnight) first, then the day's.
            log = f"/var/opt/artemis/{node.name}/log/artemis.log"
            text = estate.exec(node.name, "sh", "-c", f"for file in $(ls -tr {log}.* 2>/dev/null) {log}; do "
                               f"zcat -f \"$file\"; done")
        except subprocess.CalledProcessError as exc:
            text = f"(no log: {exc.stderr.strip()})\n"
        with gzip.open(os.path.join(directory, "logs", f"{node.name}.log.gz"), "wt") as handle:
            handle.write(text)


def run_regression(name: str, directory: str, before: bool = False) -> dict:
    """A regression schedule (regressions.py) on the estate as it is, or as it was before its fix."""
    regression = REGRESSIONS[name]
    bed = regression.get("before", {}) if before else {}
    inventory_vars = dict(regression.get("inventory", {}), **bed.get("inventory", {}))
    return run(0, regression["estate"], regression["duration"], directory, steps=regression["steps"],
               name=f"regression-{name}" + ("-before-fix" if before else ""),
               lock_manager=bed.get("lock_manager", True), inventory_vars=inventory_vars or None)


def code_version() -> str:
    """The commit the collection's playbooks and modules ran from (the run reads the working tree as it goes), and
    whether the tree differed from it."""
    return subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()


def run(seed: int, estate_name: str, duration: float, directory: str, keep_bed: bool = False,
        steps: list[schedule.Step] | None = None, name: str | None = None, lock_manager: bool = True,
        inventory_vars: dict | None = None) -> dict:
    """Carry out the schedule of ``seed`` (or the fixed ``steps`` of a regression schedule called ``name``) and
    judge the history; the summary is also written to the run's directory and to RESULTS."""
    steps = steps if steps is not None else schedule.plan(seed, estate_name, duration)
    code_at_start = code_version()
    name = name or f"{estate_name}-seed{seed}" + ("" if float(duration) == 1200 else f"-{float(duration):g}s")
    os.makedirs(directory, exist_ok=True)
    history_path = os.path.join(directory, "history.jsonl")
    if os.path.exists(history_path):
        os.remove(history_path)
    upgrade = any(step.name == "upgrade" for step in steps)
    with history.Writer(history_path) as writer, open(os.path.join(directory, "runner.log"), "a") as log:
        estate, inventory = build_bed(estate_name, directory, lock_manager, inventory_vars)
        try:
            world = World(estate, inventory, writer, log, directory, upgraded=not upgrade, redeliveries=0)
            built = world.playbook("site.yml", dict(world.version(), broker_java_max_heap=world.heap), name="build")
            if built.returncode != 0:
                raise RuntimeError(f"site.yml did not build the bed: {directory}/build.out")
            writer.write("schedule", seed=seed, estate=estate_name, duration_s=duration, name=name,
                         steps=[step.__dict__ for step in steps])
            load = Load(world, uuid.uuid4().hex[:6])
            load.start()
            telemetry = os.path.join(directory, "telemetry")
            shutil.rmtree(telemetry, ignore_errors=True)
            measurement = Measurement(estate, telemetry, routes=[], interval=measure.COLLECTOR_INTERVAL_S).__enter__()
            world.redeliveries = PREFETCH * load.consumer_count()
            for datacentre in world.datacentres:
                world.log(f"run: {datacentre} has {world.mirror_connections(datacentre)} mirror connections")
            sampler = threading.Thread(target=world.sample_activity, name="activity", daemon=True)
            sampler.start()
            supervisor = threading.Thread(target=world.supervise, name="supervisor", daemon=True)
            supervisor.start()
            backlog_sampler = threading.Thread(target=world.sample_backlog, name="backlog", daemon=True)
            backlog_sampler.start()
            started = time.time()
            world.log(f"run: seed {seed}, {estate_name}, {duration} s, {len(steps)} steps")
            faults = [threading.Thread(target=world.fault, args=(step, started), daemon=True)
                      for step in steps if step.kind == "fault"]
            for thread in faults:
                thread.start()
            operations = threading.Thread(target=world.operations, args=(
                [step for step in steps if step.kind == "operation"], started, duration), daemon=True)
            operations.start()
            next_runtime_queue = started + RUNTIME_QUEUE_EVERY_S
            while time.time() < started + duration:
                if time.time() >= next_runtime_queue:
                    load.add_runtime_queue()
                    next_runtime_queue += RUNTIME_QUEUE_EVERY_S
                time.sleep(1)
            world.log("run: the schedule's time is up; ending faults and the last operation")
            world.closing.set()
            for thread in faults:
                thread.join(timeout=180)
            operations.join(timeout=1800)
            world.restore()
            load.stop_producers()
            deadline = time.time() + DRAIN_TIMEOUT_S
            while load.missing() and time.time() < deadline:
                time.sleep(5)
            world.log(f"run: {load.missing()} deliveries missing after the drain")
            time.sleep(5)
            world.stopping.set()
            sampler.join(timeout=30)
            supervisor.join(timeout=60)
            backlog_sampler.join(timeout=30)
            crashed = load.stop_consumers()
            try:
                measurement.__exit__(None, None, None)
            except AssertionError as exc:
                world.finding(str(exc))
            load.write_history(writer)
            for report in world.replication_reports():
                writer.write("measurement", name="replication_report", scope="end", value=report)
            world.log("run: the RPO/RTO job over each abrupt failover's ledger")
            writer.write_all(measure.failovers(history.read(history_path), telemetry,
                                               os.path.join(directory, "measurement")))
            keep_broker_logs(estate, directory)
        except BaseException:
            keep_broker_logs(estate, directory)  # the bed is kept up too: a run that died is examined
            raise
    events = history.read(history_path)
    verdicts = checker.check(events)
    summary = {"name": name, "seed": seed, "estate": estate_name, "duration_s": duration,
               "code": {"at_start": code_at_start, "at_end": code_version()}, "steps": len(steps),
               "overlapping_steps": schedule.overlapping(steps), "executed": checker.executed_steps(events),
               "stops_reached_broker": True,
               "workers_crashed": crashed,
               "holds": all(verdict["holds"] for verdict in verdicts) and not crashed,
               "findings": world.findings, "verdicts": verdicts}
    with open(os.path.join(directory, "verdicts.json"), "w") as handle:
        json.dump(summary, handle, indent=1)
    os.makedirs(RESULTS, exist_ok=True)
    shutil.copy(os.path.join(directory, "verdicts.json"), os.path.join(RESULTS, f"{name}.json"))
    results_page.write()
    if not keep_bed:
        Estate.testbed("down")
    return summary


def judge_again(directory: str, why: str) -> dict:
    """A finished run's history judged by the checker as it is now (the run's own verdicts kept beside, as
    `first_verdicts`), written where the run wrote them."""
    with open(os.path.join(directory, "verdicts.json")) as handle:
        summary = json.load(handle)
    events = history.read(os.path.join(directory, "history.jsonl"))
    verdicts = checker.check(events)
    summary.setdefault("first_verdicts", {verdict["invariant"]: verdict["holds"] for verdict in summary["verdicts"]})
    summary.update(verdicts=verdicts, executed=checker.executed_steps(events),
                   holds=all(verdict["holds"] for verdict in verdicts)
                   and not summary["workers_crashed"], judged_again={"checker": code_version(), "why": why})
    with open(os.path.join(directory, "verdicts.json"), "w") as handle:
        json.dump(summary, handle, indent=1)
    shutil.copy(os.path.join(directory, "verdicts.json"), os.path.join(RESULTS, f"{summary['name']}.json"))
    results_page.write()
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--regression", choices=sorted(REGRESSIONS), help="a fixed schedule instead of a seed's")
    parser.add_argument("--before", action="store_true", help="with --regression: the estate before its fix")
    parser.add_argument("--estate", choices=sorted(schedule.ESTATES), default="2x2")
    parser.add_argument("--duration", type=float, default=1200)
    parser.add_argument("--directory", help="default tests/output/chaos/<estate>-seed<seed>")
    parser.add_argument("--keep-bed", action="store_true")
    parser.add_argument("--judge-again", metavar="WHY",
                        help="no run: judge the history in --directory (or the seed's) again with this checker")
    arguments = parser.parse_args(argv)
    label = (f"regression-{arguments.regression}" + ("-before-fix" if arguments.before else "")
             if arguments.regression else f"{arguments.estate}-seed{arguments.seed}")
    directory = arguments.directory or os.path.join(REPO_ROOT, "tests", "output", "chaos", label)
    if arguments.judge_again:
        summary = judge_again(directory, arguments.judge_again)
    elif arguments.regression:
        summary = run_regression(arguments.regression, directory, arguments.before)
    else:
        summary = run(arguments.seed, arguments.estate, arguments.duration, directory, arguments.keep_bed)
    checker.print_verdicts(summary["verdicts"])
    if summary["workers_crashed"]:
        print(f"load workers crashed: {summary['workers_crashed']}")
    print(f"verdicts: {directory}/verdicts.json")
    return 0 if summary["holds"] else 1


if __name__ == "__main__":
    sys.exit(main())
