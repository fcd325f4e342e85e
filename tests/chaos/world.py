"""What a chaos run does to the estate: the faults (test bed commands), the operations (the collection's playbooks,
as an operator runs them) and where the estate says each group is active, every event into the run's history.

Where the world would not allow a step (a fault on a broker of a datacentre a failover took down, a failback with
nothing failed over), the runner skips it and says so in its log; the history holds only what happened.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import re
import signal
import subprocess
import threading
import time

import yaml

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    BrokerUnreachable, ManagementError)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report
from chaos.checker import RESTARTING_OPERATIONS, says_refused
from support.estate import REPO_ROOT, TESTBED

# The groups that follow the active datacentre (the test bed's `all` and `books`), and `east`, owned by dc2.
MOVING_GROUPS = ["all", "books"]
BRIDGE_GROUPS = ["books"]  # the test bed's full_state bridge group (`shared` is active everywhere)
MESSAGES_ONLY_GROUPS = ["inflow"]  # every datacentre consumes its own copy (the runner's load)
PROBE_ADDRESSES = {"all": "chaos.probe", "books": "books.chaos.probe", "east": "east.chaos.probe"}
NOT_CLIENTS = {"amq", "replication"}
ACTIVITY_INTERVAL_S = 1.0
LIVE_BROKER = "live"  # a fixed schedule's fault broker: whichever of its datacentre's is live when the fault comes
# A fixed schedule's stop fault with ``when: BACKUP_SYNCING`` waits for the broker to send its journal to its backup
# (its first AMQ221025, "Replication: sending ... to replica") and stops it there, from inside its node: the
# synchronisation lasts a second or two.
BACKUP_SYNCING = "backup_syncing"
SENDING_TO_REPLICA = "AMQ221025"
# A fixed schedule's fault with ``when: RESTART_PLANNED`` waits for an operation's rolling restart to read what each
# broker waits for, the moment before it reads which brokers are live and puts them in order (within 15 minutes).
RESTART_PLANNED = "restart_planned"
RESTART_PLANNING_PLAY = "PLAY [Read what each broker waits for and where it answers now]"
# The credits of a mirror connection (the acceptors' amqpCredits, set by the broker role): after a fault that cuts a
# mirror connection, its source may send that many messages again, and Artemis's target does not always recognise
# them (docs/upstream/mirror-duplicate-cache.md): each comes again at that datacentre.
with open(os.path.join(REPO_ROOT, "roles", "broker", "vars", "main.yml"), encoding="utf-8") as _vars:
    MIRROR_CREDITS = int(yaml.safe_load(_vars)["_broker_acceptor_parameters"]["amqpCredits"])
# How often the run reads the active datacentre's replication backlog, and the most events a link may hold while it
# keeps up (under the run's load, a sample a link keeps up in shows a few dozen).
BACKLOG_INTERVAL_S, IN_STEP_EVENTS = 5.0, 200
FAILOVER_LOSS_WINDOW_S = 30.0
RESUME_ATTEMPTS, RESUME_PAUSE_S = 3, 30
# How long an operation's end waits for every moving group's datacentre to answer before calling where they are.
SETTLE_ATTEMPTS, SETTLE_PAUSE_S = 10, 3


# What a broker logs when it has started, when it has stopped cleanly, when a pair's live broker has lost its lock
# and stops itself (the lock manager told it, or its activation sequence could not be raised), and when a backup
# stops itself because the live broker it announced itself to went away (ReplicationBackupActivation).
# A broker logs AMQ221000 as its process starts, as a primary or a backup; AMQ221001 (started) only as a primary.
# A broker stopping for a lost lock may end before its clean stop's line (2 x 2 seed 9: a bridge's stop timed out).
STARTED, STOPPED = "AMQ221000", "AMQ221002"
LOCK_LOST = ("Quorum UNAVAILABLE", "on attempted activation sequence increment")
BACKUP_GAVE_UP = ("Stopping broker because of critical registration error",)
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def logged_at(line: str) -> float | None:
    """The Unix time a broker's log line was written (the broker logs the host's local time), None if unstamped."""
    stamp = LOG_TIME.match(line)
    return None if stamp is None else datetime.datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


# What the broker role says of a mirror connection it keeps, routing nothing, until its queue is empty.
RETIRED_CONNECTION = re.compile(r"(\S+) \((\d+) events\)")


def retired_backlog(output_path: str) -> int:
    """How many events the mirror connections that a site.yml run kept, routing nothing, held then (its output's "keeps
    the mirror connections A (N events), ..."): what they deliver later, once their datacentre answers, the datacentre
    there relays to the others, and a third one that had them already from their source takes them again when its
    duplicate cache no longer holds them (one per source broker, a connection's credits)."""
    with open(output_path, errors="replace") as output:
        text = " ".join(output.read().split())
    return sum(int(count) for said in re.findall(r"keeps the mirror connections (.*?), routing nothing", text)
               for _name, count in RETIRED_CONNECTION.findall(said))


def _failure_message(output: str) -> str:
    """The message of the task that failed a playbook (its `msg`, as the YAML callback prints it), else the last
    lines."""
    lines = output.splitlines()
    for number in range(len(lines) - 1, -1, -1):
        if lines[number].startswith(("fatal:", "failed:")):
            block = lines[number + 1:]
            block = block[:next((i for i, line in enumerate(block) if not line.strip()), len(block))]
            for i, line in enumerate(block):
                if line.strip().startswith("msg:"):
                    text = [line.strip()[4:].strip()] + [more.strip() for more in block[i + 1:]
                                                         if more.startswith(" " * (len(line) - len(line.lstrip()) + 1))]
                    return " ".join(text)[:600]
            return lines[number][:600]
    return " ".join(output.strip().splitlines()[-3:])[:600]


class World:
    PREVIOUS_RELEASE = "2.44.0"
    RESTART_LEVEL_HEAPS = ("512m", "640m")

    def __init__(self, estate, inventory, writer, log_handle, directory, upgraded, redeliveries):
        self.estate, self.inventory, self.writer, self.directory = estate, inventory, writer, directory
        # How long a pair's live broker may stall before it loses its lock (None: no lock manager).
        session_ms = (estate.inventory_vars().get("replication_zookeeper") or {}).get("session-ms")
        self.lock_session_s = None if session_ms is None else session_ms / 1000
        self._log_handle = log_handle
        self.datacentres = sorted({node.dc for node in estate.nodes})
        self.active = "dc1"
        # Where the last site.yml that ended put the star of mirror connections (three or more datacentres).
        self.star_at = self.active
        self.failed_over: dict | None = None
        self.upgraded = upgraded
        self.heap = self.RESTART_LEVEL_HEAPS[0]
        self.redeliveries = redeliveries
        self.lock = threading.RLock()
        self.down_datacentres: set[str] = set()    # powered off by a failover
        self.faulted: set[str] = set()             # brokers under a fault
        # The operation whose play stops and starts brokers now (a rolling change, an upgrade), if any.
        self.restarting_play: str | None = None
        self.closing = threading.Event()           # the schedule's time is up
        self.stopping = threading.Event()          # the run is over
        self.findings: list[str] = []
        # Interrupted operations whose resumes were all refused, run once more when the estate is restored.
        self.unresumed: list[tuple[str, str, dict]] = []
        self._count = 0
        # Per datacentre, when its replication was last seen keeping up; when playbooks/reconcile.yml last started.
        self.in_step_at: dict[str, float] = {}
        self._mirror_counts: dict[str, int] = {}
        self.reconciled_at = time.time()

    # -- the record --------------------------------------------------------------------------------------------

    def log(self, text: str) -> None:
        with self.lock:
            self._log_handle.write(f"{time.strftime('%H:%M:%S')} {text}\n")
            self._log_handle.flush()

    def _id(self, name: str) -> str:
        with self.lock:
            self._count += 1
            return f"{name}-{self._count}"

    def nodes_of(self, datacentre: str):
        return [node for node in self.estate.nodes if node.dc == datacentre]

    # -- the bed ----------------------------------------------------------------------------------------------

    def testbed(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        if args[0] in ("start-node", "stop-node", "kill"):
            # Which of the run's threads powers a node or a broker off and on (3 x 1 seed 2: a node a failover had
            # powered off ran its broker again before its failback, and nothing in the log said why).
            self.log(f"testbed {' '.join(args)} ({threading.current_thread().name})")
        done = subprocess.run([TESTBED, *args], capture_output=True, text=True, timeout=600, check=False)
        if check and done.returncode:
            raise RuntimeError(f"testbed {' '.join(args)}: {done.stderr[-500:]}")
        return done

    def _broker_signal(self, node: str, name: str, running_only: bool = False) -> None:
        """Signal the node's broker JVM; ``running_only``: a node without one has nothing to signal (pkill's 1).
        Any other failure raises: until 2026-12-02 pkill took the pattern, which begins with a dash, for an option
        and no run's SIGSTOP reached a broker, unchecked (docs/chaos.md)."""
        done = self.estate.signal_broker(node, name)
        if done.returncode and not (running_only and done.returncode == 1):
            raise RuntimeError(f"pkill -{name} on {node}: exit {done.returncode} {done.stderr[-300:]}")

    def start_broker(self, node: str) -> bool:
        """As the node's init would at boot: the broker's own service script. False when it was running."""
        if self.estate.broker_pids(self._node(node)):
            return False
        self.log(f"broker {node} started ({threading.current_thread().name})")
        self.testbed("exec", node, "--", "sh", "-c", f"rm -f /var/opt/artemis/{node}/data/artemis.pid && runuser -u "
                     f"artemis -- /var/opt/artemis/{node}/bin/artemis-service start >/dev/null 2>&1")
        return True

    def _node(self, name: str):
        return next(node for node in self.estate.nodes if node.name == name)

    def create_subscription(self, datacentre: str, topic: str, subscription: str) -> None:
        live = self.live_broker(datacentre)
        cli = os.path.join(os.environ["ARTEMIS_HOME"], "bin", "artemis")
        subprocess.run([cli, "queue", "create", "--url", live.core_url, "--user", live.admin_user, "--password",
                        live.admin_password, "--name", subscription, "--address", topic, "--multicast", "--durable",
                        "--auto-create-address", "--silent"], check=True, capture_output=True, text=True,
                       timeout=120, cwd=REPO_ROOT)

    def live_broker(self, datacentre: str, timeout: float = 2.0):
        """The broker of ``datacentre`` that is live now (None when none answers as live)."""
        return next(iter(self.brokers(datacentre, timeout)["live"]), None)

    def brokers(self, datacentre: str, timeout: float = 2.0) -> dict:
        """The brokers of ``datacentre`` that answer as live, the backups that answer in sync with their live
        broker (those that could take over), and those that do not answer."""
        seen = {"live": [], "in_sync": [], "silent": []}
        for node in self.nodes_of(datacentre):
            try:
                status = node.management(timeout=timeout).status()
            except (BrokerUnreachable, ManagementError, OSError):
                seen["silent"].append(node)
                continue
            if status["live"]:
                seen["live"].append(node)
            elif status["backup"] and status["replica_sync"]:
                seen["in_sync"].append(node)
        return seen

    def supervise(self) -> None:
        """What the broker's systemd unit does on a host (Restart=always), for the test bed's plain nodes: a broker
        that ended by itself (not stopped by an operation, nor by one of the run's faults) is started again after
        5 s. One that crashed is a finding; one that stopped itself after losing its pair's lock (a primary stalled
        longer than its ZooKeeper session, docs/limitations.md), or a backup that gave up as its live broker went
        away, is only logged."""
        left_to: dict[str, str] = {}
        while not self.stopping.wait(5):
            for node in self.estate.nodes:
                with self.lock:
                    if node.name in self.faulted or node.dc in self.down_datacentres:
                        continue
                    restarting = self.restarting_play
                if self.estate.broker_pids(node):
                    continue
                found_ended = time.time()
                ending, last_lines = self._ending(node.name)
                if ending not in ("crashed", "lock_lost", "backup_gave_up"):
                    continue
                if restarting is not None:
                    # systemd does not restart a broker its play stopped (systemctl stop), and the play's stop of a
                    # broker still starting leaves no clean line: 3 x 1 seed 5's fifth run started dc1-node1 between
                    # upgrade-39's stop and its `artemis upgrade`. The play starts it, or the supervisor after it.
                    if left_to.get(node.name) != restarting:
                        left_to[node.name] = restarting
                        self.log(f"{node.name} found down while {restarting} stops and starts brokers: left to it")
                    continue
                with self.lock:
                    if node.name in self.faulted or node.dc in self.down_datacentres:
                        continue
                    last_words = self._last_words(node.name)
                    # Found running at the second look (a look into the node that failed under load: 2 x 2 seed
                    # 10, dc2-node1 as a backup), it had not ended.
                    if not self.start_broker(node.name):
                        continue
                    if ending == "crashed":
                        self.finding(f"{node.name} ended by itself: {last_words}")
                    elif ending == "backup_gave_up":
                        self.log(f"{node.name} stopped itself as a backup whose live broker went away, started "
                                 f"again: {last_words}")
                    else:
                        # Without its clean stop's line, it had stopped by the time it was found without a JVM.
                        stopped_at = logged_at(last_lines[-1]) if len(last_lines) > 1 else found_ended
                        self.writer.write("lock_lost", broker=node.name, lost_at=logged_at(last_lines[0]),
                                          stopped_at=stopped_at)
                        self.log(f"{node.name} stopped itself after losing its lock, started again: {last_words}")

    def _log_lines(self, node: str, pattern: str) -> list[str]:
        """The broker log's last 20 lines that match, the day's file after the one rolled over before it: the log
        rolls over at midnight, and a run that crossed it (2 x 2 seed 9 at e4abd09) found no start in the new file
        and left a broker down for 12 minutes as never started."""
        log = f"/var/opt/artemis/{node}/log/artemis.log"
        done = self.testbed("exec", node, "--", "sh", "-c", f"for file in $(ls -tr {log}.* 2>/dev/null | tail -n 1) "
                            f"{log}; do zcat -f \"$file\"; done | grep -E '{pattern}' | tail -n 20 || true",
                            check=False)
        return done.stdout.splitlines()

    def _ending(self, node: str) -> tuple[str | None, list[str]]:
        """How the broker's last run ended, from its log: ``lock_lost`` (it lost its lock after its last start,
        AMQ221000, whether or not its stop got as far as its clean line, AMQ221002), ``crashed`` (no clean stop
        otherwise), ``backup_gave_up`` (its clean stop came right after a backup's give-up), ``stopped`` (by someone:
        an operation's restart), None (never started); and the lines that say so (the lost lock's and the stop's)."""
        lines = self._log_lines(node, "|".join((STARTED, STOPPED) + LOCK_LOST + BACKUP_GAVE_UP))
        since_start = next((lines[index:] for index in range(len(lines) - 1, -1, -1) if STARTED in lines[index]), [])
        if not since_start:
            return None, []
        stop = since_start[-1:] if STOPPED in since_start[-1] else []
        lost = next((line for line in since_start if any(marker in line for marker in LOCK_LOST)), None)
        if lost is not None:
            return "lock_lost", [lost] + stop
        if not stop:
            return "crashed", since_start[-1:]
        if len(since_start) > 1 and any(marker in since_start[-2] for marker in BACKUP_GAVE_UP):
            return "backup_gave_up", since_start[-2:]
        return "stopped", stop

    def _last_words(self, node: str) -> str:
        lines = self._log_lines(node, " ERROR | FATAL |AMQ224079|OutOfMemory")
        return lines[-1][:400] if lines else "nothing logged"

    # -- where clients may act --------------------------------------------------------------------------------

    def activity(self, pairs: dict | None = None) -> dict[str, dict]:
        """Per group, where its clients may send or consume now: {group: {active: [...], unreachable: [...]}}.
        ``pairs``, when given, gets per datacentre what brokers() saw."""
        seen = {group: {"active": [], "unreachable": []} for group in PROBE_ADDRESSES}
        for datacentre in self.datacentres:
            brokers = self.brokers(datacentre)
            if pairs is not None:
                pairs[datacentre] = brokers
            live = brokers["live"][0] if brokers["live"] else None
            for group, address in PROBE_ADDRESSES.items():
                try:
                    roles = live.management(timeout=2.0).roles(address) if live else None
                except (BrokerUnreachable, ManagementError, OSError):
                    roles = None
                if roles is None:
                    seen[group]["unreachable"].append(datacentre)
                elif any(role["name"] not in NOT_CLIENTS and (role.get("send") or role.get("consume"))
                         for role in roles):
                    seen[group]["active"].append(datacentre)
        return seen

    def sample_activity(self) -> None:
        while not self.stopping.is_set():
            began = time.monotonic()
            try:
                pairs = {}
                for group, seen in self.activity(pairs).items():
                    # Active nowhere that answers while a datacentre does not answer: unknown, not dark.
                    active = seen["active"] if seen["active"] or not seen["unreachable"] else None
                    self.writer.write("activity", group=group, mode="full_state", active=active,
                                      unreachable=seen["unreachable"])
                for datacentre, brokers in pairs.items():
                    self.writer.write("brokers", datacentre=datacentre,
                                      live=[node.name for node in brokers["live"]],
                                      in_sync=[node.name for node in brokers["in_sync"]],
                                      silent=[node.name for node in brokers["silent"]],
                                      brokers=[node.name for node in self.nodes_of(datacentre)])
            except Exception as exc:  # pylint: disable=broad-except  # recorded, the sampling goes on
                self.log(f"activity: {exc!r}")
            self.stopping.wait(max(0.0, ACTIVITY_INTERVAL_S - (time.monotonic() - began)))

    def sample_backlog(self) -> None:
        """Every BACKLOG_INTERVAL_S, the active datacentre's replication backlog into the history; when it keeps up,
        the time, which an abrupt failover from there declares (what its target may deliver again was consumed after
        it)."""
        while not self.stopping.wait(BACKLOG_INTERVAL_S):
            datacentre = self.active
            try:
                events = self._backlog(datacentre)
            except Exception as exc:  # pylint: disable=broad-except  # recorded, the sampling goes on
                self.log(f"backlog of {datacentre}: {exc!r}")
                continue
            if events is None:
                continue
            now = time.time()
            self.writer.write("backlog", datacentre=datacentre, events=events)
            if events <= IN_STEP_EVENTS:
                with self.lock:
                    self.in_step_at[datacentre] = now

    def where_active(self) -> str | None:
        """The one datacentre where every moving group is active, if there is one."""
        seen = self.activity()
        places = {tuple(seen[group]["active"]) for group in MOVING_GROUPS}
        if len(places) == 1:
            (place,) = places
            if len(place) == 1:
                return place[0]
        return None

    # -- faults ------------------------------------------------------------------------------------------------

    def fault(self, step, started: float) -> None:
        self._sleep_until(started + step.at)
        if self.closing.is_set():
            return
        args = dict(step.args)
        fault_id = self._id(step.name)
        if args.get("broker") == LIVE_BROKER:
            live = self.live_broker(args["datacentre"])
            if live is None:
                self.log(f"fault {step.name} on the live broker of {args['datacentre']} skipped: none answers as live")
                return
            args["broker"] = live.name
        broker = args.get("broker")
        with self.lock:
            if broker and (broker in self.faulted or args["datacentre"] in self.down_datacentres
                           or not self.estate.broker_pids(self._node(broker))):
                self.log(f"fault {step.name} on {broker} skipped: the broker is down or under another fault")
                return
            if broker:
                self.faulted.add(broker)
        if step.name == "stop":
            args["lock_session_s"] = self.lock_session_s
        cut = [args["datacentre"]] if broker else args.get("between", [])
        resend = MIRROR_CREDITS * sum(self.mirror_connections(datacentre) for datacentre in cut)
        if broker or resend:
            # Consumers cut off their deliveries (a broker fault), and the windows of the mirror connections it cuts.
            args["redeliveries"] = (self.redeliveries if broker else 0) + resend
            args["mirror_resend"] = resend
        waits = step.name == "stop" and args.get("when") == BACKUP_SYNCING
        begun = False
        try:
            if waits:
                self._stop_as_it_sends_its_journal(broker)
            elif args.get("when") == RESTART_PLANNED and not self._wait_for_output(RESTART_PLANNING_PLAY, 900):
                return
            self.writer.write("fault", name=step.name, phase="start", id=fault_id, args=args)
            begun = True
            self.log(f"fault {fault_id} start {args}")
            if not waits:
                self._fault_start(step.name, args)
            self._sleep_until(time.time() + step.duration, stop_at_closing=True)
            self._fault_end(step.name, args)
            self.writer.write("fault", name=step.name, phase="end", id=fault_id, args=args)
            self.log(f"fault {fault_id} end")
        except Exception as exc:  # pylint: disable=broad-except  # a fault the bed could not carry out is a finding
            self.finding(f"fault {fault_id} {step.name} {args}: {exc!r}")
            if not begun:
                self.writer.write("fault", name=step.name, phase="start", id=fault_id, args=args)
            self.writer.write("fault", name=step.name, phase="end", id=fault_id, args=args, error=repr(exc))
        finally:
            with self.lock:
                self.faulted.discard(broker)

    def _fault_start(self, name, args) -> None:
        if name == "partition":
            self.testbed("partition", *args["between"])
        elif name == "wan_degraded":
            self.testbed("wan", "--delay-ms", str(args["delay_ms"]), "--jitter-ms", str(args["jitter_ms"]),
                         "--loss-pct", str(args["loss_percent"]))
        elif name == "kill":
            self.testbed("kill", args["broker"])
        elif name == "power_off":
            self.testbed("stop-node", args["broker"])
        elif name == "stop":
            self._broker_signal(args["broker"], "STOP")

    def _stop_as_it_sends_its_journal(self, node: str) -> None:
        """SIGSTOP the node's broker as it logs sending a journal file to its backup (within 10 minutes)."""
        # "[.]": the pattern matches the JVM's command line, not this shell's, which holds the pattern itself. The
        # stopped broker logs nothing more, so tail would wait for a line to fail writing: it is ended (a child of
        # this shell: $$ is the shell's pid in its subshells too).
        done = self.testbed("exec", node, "--", "timeout", "600", "sh", "-c",
                            f"tail -n 0 -F /var/opt/artemis/{node}/log/artemis.log | {{ grep -m 1 -q "
                            f"{SENDING_TO_REPLICA} && pkill -STOP -f -- '-Dartemis[.]instance=/var/opt/artemis/{node} ';"
                            f" stopped=$?; pkill -P $$ -x tail; exit $stopped; }}", check=False)
        if done.returncode:
            raise RuntimeError(f"{node} was not stopped as it sent its journal to its backup: exit {done.returncode} "
                               f"{done.stderr[-300:]}")

    def _wait_for_output(self, line: str, timeout: float) -> bool:
        """Until an operation's output (<name>.out) has ``line`` once more than it had when this began; False when
        the run closes first."""
        def seen() -> dict:
            counts = {}
            for path in glob.glob(os.path.join(self.directory, "*.out")):
                with open(path, errors="replace") as handle:
                    counts[path] = handle.read().count(line)
            return counts
        before = seen()
        deadline = time.time() + timeout
        while not self.closing.is_set():
            if any(count > before.get(path, 0) for path, count in seen().items()):
                return True
            if time.time() > deadline:
                raise RuntimeError(f"no operation's output had {line!r} within {timeout:.0f} s")
            time.sleep(0.5)
        return False

    def _fault_end(self, name, args) -> None:
        if name == "partition":
            self.testbed("heal")
            return
        if name == "wan_degraded":
            self.testbed("wan", "--delay-ms", "0")
            return
        with self.lock:  # not while a failover powers the datacentre off
            if args["datacentre"] in self.down_datacentres:
                self.log(f"{args['broker']} stays down: a failover took its datacentre down")
            elif name == "kill":
                self.start_broker(args["broker"])
            elif name == "power_off":
                self.testbed("start-node", args["broker"])
                self.start_broker(args["broker"])
            elif name == "stop":
                self._broker_signal(args["broker"], "CONT")

    # -- operations -------------------------------------------------------------------------------------------

    def operations(self, steps, started: float, duration: float) -> None:
        for step in steps:
            self._sleep_until(started + step.at)
            if self.closing.is_set():
                return
            try:
                self.operation(step.name, dict(step.args))
            except Exception as exc:  # pylint: disable=broad-except  # the runner's own failure is a finding
                self.finding(f"operation {step.name}: the runner failed: {exc!r}")

    def _run_again_with(self, name: str, extra: dict) -> dict:
        """The variables an interrupted operation is run again with: its own (an operator relaunches the job), but
        site.yml reads the inventory as it is now, which follows the swapovers and failovers made since (2 x 2 seed
        4: upgrade-11's last run came after swapover-41 and named the datacentre it had left)."""
        if name in RESTARTING_OPERATIONS:
            return dict(extra, replication_active_datacentre=self.active)
        return extra

    def _target(self, skip: int) -> str:
        return self.datacentres[(self.datacentres.index(self.active) + skip) % len(self.datacentres)]

    def operation(self, name: str, args: dict, extra: dict | None = None) -> str:
        """Carry out one operation and return its outcome; ``extra``: its playbook's variables when it resumes an
        interrupted one."""
        if name == "failback" and not self.failed_over:
            self.log("failback skipped: nothing failed over")
            return "skipped"
        if name == "failback" and self.active == self.failed_over["source"]:
            # A swapover (a drill's) since moved the groups back to the returning datacentre: it has rejoined.
            self.log("failback skipped: the groups are active at the returning datacentre again")
            self._bring_back(self.failed_over["source"])
            self.failed_over = None
            return "skipped"
        if name == "failover" and self.failed_over:
            self.log("failover skipped: the last one has not been failed back")
            return "skipped"
        planned, playbook = self._playbook_for(name, args)
        extra = self._run_again_with(name, extra) if extra else planned
        op_id = self._id(name)
        args = dict(args, **{key: value for key, value in extra.items() if not key.endswith("_confirm")})
        if name in ("failover", "failback", "rolling_change", "upgrade"):
            args["redeliveries"] = self.redeliveries
        if name == "failover":
            source = self.active
            args["at_risk_before"] = self._backlog(source) or 0
            args["loss_window_s"] = FAILOVER_LOSS_WINDOW_S
            # By design (docs/engines.md) an abrupt failover delivers again at its target what the source consumed
            # while its replication was behind (the acknowledgements had not crossed: a mirror group), and of a
            # full_state bridge group what the source consumed since the last reconciliation. What was consumed
            # before these times must not come again (the checker judges each message by them).
            with self.lock:
                args["replication_behind_since"] = self.in_step_at.get(source, self.reconciled_at)
            args["bridge_groups"] = BRIDGE_GROUPS
            args["reconciled_at"] = self.reconciled_at
            self._power_off(source)
        if name == "failback":
            self._bring_back(self.failed_over["source"])
        owner = extra.get("replication_active_datacentre")
        if name in RESTARTING_OPERATIONS and len(self.datacentres) >= 3 and owner != self.star_at:
            # By design (docs/limitations.md) a move of the star delivers some messages_only copies twice: while the
            # brokers restart one by one, two of them relay the same events to a datacentre.
            args["star_move"] = {"from": self.star_at, "to": owner, "groups": MESSAGES_ONLY_GROUPS}
        before, started_at = self.where_active(), time.time()
        self.writer.write("operation", name=name, phase="start", id=op_id, args=args)
        self.log(f"operation {op_id} start {playbook} {extra}")
        interrupt = args.get("interrupt")
        with self.lock:
            self.restarting_play = op_id if name in RESTARTING_OPERATIONS else None
        try:
            process = self.playbook(playbook, extra, name=op_id, interrupt=interrupt)
        finally:
            with self.lock:
                self.restarting_play = None
        after = self.where_active()
        for _attempt in range(SETTLE_ATTEMPTS):
            # A broker that does not answer (under a fault) leaves where the groups are unknown, not moved.
            if after is not None or process.returncode == 0 or self.closing.is_set():
                break
            time.sleep(SETTLE_PAUSE_S)
            after = self.where_active()
        outcome, message = self._outcome(name, process, interrupt, before, after, extra)
        end = {"outcome": outcome, "message": message, "rc": process.returncode, "active_after": after}
        if name == "failover":
            end["at_risk"] = args["at_risk_before"]
        if name in RESTARTING_OPERATIONS:
            end["retired_backlog"] = retired_backlog(os.path.join(self.directory, f"{op_id}.out"))
        self.writer.write("operation", name=name, phase="end", id=op_id, **end)
        self.log(f"operation {op_id} end {outcome} (rc {process.returncode}, active at {after}) {message[:300]}")
        self._follow(name, outcome, extra, after)
        if name == "reconcile" and outcome == "done":
            self.reconciled_at = started_at
        if outcome == "interrupted" and "resumes" not in args:
            # A following operation must work: the same one, run again to its end (its source and target as the
            # interrupted one had them, whatever that one left), as an operator would, while a fault refuses it;
            # still refused, once more when the run has restored the estate.
            resumed = False
            # A drill is not resumed but run again from where the groups are now (it swaps over and back).
            again = None if name == "drill" else extra
            for _attempt in range(RESUME_ATTEMPTS):
                resumed = self.operation(name, {"resumes": op_id}, extra=again) == "done"
                if resumed or self.closing.is_set():
                    break
                time.sleep(RESUME_PAUSE_S)
            if not resumed:
                with self.lock:
                    self.unresumed.append((name, op_id, again))
        return outcome

    def _playbook_for(self, name, args) -> tuple[dict, str]:
        common = {"replication_active_datacentre": self.active}
        if name == "swapover":
            target = args.get("target") or self._target(args.get("skip", 1))
            return dict(common, swapover_source=self.active, swapover_target=target,
                        swapover_groups=MOVING_GROUPS), "playbooks/swapover.yml"
        if name == "failover":
            return dict(common, failover_source=self.active, failover_target=self._target(args["skip"]),
                        failover_groups=MOVING_GROUPS, failover_confirm=True, failover_force=True), \
                "playbooks/failover.yml"
        if name == "failback":
            return dict(common, failback_site=self.failed_over["source"], failback_active=self.failed_over["target"],
                        failback_groups=MOVING_GROUPS), "playbooks/failback.yml"
        if name == "reconcile":
            return common, "playbooks/reconcile.yml"
        if name == "drill":
            return dict(common, drill_target=self._target(1)), "playbooks/drill.yml"
        if name == "rolling_change":
            heap = self.RESTART_LEVEL_HEAPS[1 - self.RESTART_LEVEL_HEAPS.index(self.heap)]
            return dict(common, broker_java_max_heap=heap, **self.version()), "site.yml"
        if name == "upgrade":
            return dict(common, broker_java_max_heap=self.heap), "site.yml"
        raise ValueError(f"no operation {name}")

    def version(self) -> dict:
        return {} if self.upgraded else {"broker_version": self.PREVIOUS_RELEASE}

    def _outcome(self, name, process, interrupt, before, after, extra) -> tuple[str, str]:
        if interrupt:
            return "interrupted", f"{interrupt['signal']} after {interrupt['after']} s"
        if process.returncode == 0:
            return "done", ""
        message = _failure_message(process.output)
        # A playbook that stopped with the estate as it was refused; otherwise it failed (the checker decides which
        # groups moved from the activity samples; this is the runner's reading for its own bookkeeping). A refusal
        # that says so is taken at its word unless the groups are seen to have moved (where they were, or are, may
        # be unknown while a datacentre does not answer: failback-24 of 3 x 1 seed 2).
        moved = before != after and not (says_refused(message) and (before is None or after is None))
        return ("failed" if moved else "refused"), message

    def _follow(self, name, outcome, extra, after) -> None:
        """The runner's view of the estate after an operation, as the operator's inventory would follow it: where
        the groups are active, else (a datacentre did not answer) where the operation that ended done put them."""
        previous = self.active
        if after:
            self.active = after
        elif outcome == "done" and name in ("swapover", "failover"):
            self.active = extra[f"{name}_target"]
        if self.active != previous:
            # Nothing was consumed there while it was passive: its replication keeps up from here.
            with self.lock:
                self.in_step_at[self.active] = time.time()
        if name == "failover":
            source = extra["failover_source"]
            if outcome == "done":
                self.failed_over = {"source": source, "target": extra["failover_target"]}
            else:
                self._bring_back(source)
        elif name == "failback" and outcome == "done":
            self.failed_over = None
        if name in RESTARTING_OPERATIONS and outcome == "done":
            self.star_at = extra["replication_active_datacentre"]
        if name == "rolling_change" and outcome in ("done", "interrupted"):
            self.heap = extra["broker_java_max_heap"]
        elif name == "upgrade" and outcome in ("done", "interrupted"):
            self.upgraded = True

    def _power_off(self, datacentre: str) -> None:
        """An abrupt failover's fault: every node of ``datacentre`` powered off. Down first, and under the lock a
        fault's end takes to start a broker again: 2 x 2 seed 3 at be82a4d, power_off-1's end powered dc1-node1 on
        between failover-3's power-offs, and the failover refused (dc1 still answered)."""
        with self.lock:
            self.down_datacentres.add(datacentre)
            for node in self.nodes_of(datacentre):
                self.faulted.add(node.name)
                self.testbed("stop-node", node.name)

    def _bring_back(self, datacentre: str) -> None:
        """Power a datacentre a failover took down on again and start its brokers (as their init would)."""
        self.log(f"{datacentre} comes back: its nodes are powered on and their brokers started")
        for node in self.nodes_of(datacentre):
            self.testbed("start-node", node.name)
            self.start_broker(node.name)
            with self.lock:
                self.faulted.discard(node.name)
        with self.lock:
            self.down_datacentres.discard(datacentre)
        deadline = time.time() + 180
        while self.live_broker(datacentre) is None and time.time() < deadline:
            time.sleep(2)

    def mirror_connections(self, datacentre: str) -> int:
        """How many mirror connections a broker of ``datacentre`` has to the others (read once from a live broker)."""
        if datacentre not in self._mirror_counts:
            try:
                links = self._links(datacentre)
            except (BrokerUnreachable, ManagementError, OSError):
                links = None
            if links is None:
                return 0  # not known yet: the next fault reads it again
            self._mirror_counts[datacentre] = sum(1 for link in links if link.get("engine") == "mirror")
        return self._mirror_counts[datacentre]

    def _backlog(self, datacentre: str) -> int | None:
        """What the live broker of ``datacentre`` has not yet sent across (mirror backlogs, bridge queues); None when
        no broker of it is live."""
        links = self._links(datacentre)
        return None if links is None else sum(int(link.get("backlog") or 0) for link in links)

    def _links(self, datacentre: str) -> list[dict] | None:
        """The replication links of the live broker of ``datacentre`` (its report's), None when none is live."""
        live = self.live_broker(datacentre)
        return None if live is None else broker_report(live.management(timeout=5)).get("links", [])

    def playbook(self, playbook: str, extra: dict, name: str, interrupt: dict | None = None):
        """Run a playbook as the operator's controller does; its output goes to <name>.out."""
        env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_FORCE_COLOR="0")
        out_path = os.path.join(self.directory, f"{name}.out")
        with open(out_path, "w") as out:
            # -v: each result, a retried task's failures too (2 x 2 seed 3's third run: a failover said only "FAILED - RETRYING").
            process = subprocess.Popen(["ansible-playbook", "-v", "-i", self.inventory, playbook, "-e", json.dumps(extra)],
                                       cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
            try:
                process.wait(timeout=interrupt["after"] if interrupt else 1800)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, getattr(signal, interrupt["signal"]) if interrupt else signal.SIGKILL)
                try:
                    process.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    # As an operator would after a Ctrl-C that does not end the play (ansible-core 2.19 once hung
                    # in a worker: "Could not detach from stdio", 2 x 2 seed 3).
                    self.finding(f"operation {name}: ansible-playbook still ran 120 s after "
                                 f"{interrupt['signal'] if interrupt else 'SIGKILL'}; killed")
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=60)
        with open(out_path) as handle:
            process.output = handle.read()
        return process

    # -- the end ----------------------------------------------------------------------------------------------

    def restore(self) -> None:
        """Heal the WAN, power every node on and start its broker, fail back what is failed over, and put the
        moving groups at one datacentre again: what an operator does after an incident."""
        self.testbed("heal", check=False)
        self.testbed("wan", "--delay-ms", "0", check=False)
        for node in self.estate.nodes:
            self._broker_signal(node.name, "CONT", running_only=True)
            self.testbed("start-node", node.name, check=False)
            self.start_broker(node.name)
        with self.lock:
            self.down_datacentres.clear()
        time.sleep(10)
        if self.failed_over:
            self.operation("failback", {})
        if self.where_active() is None:
            seen = self.activity()
            self.finding(f"after the run the moving groups are not active at one datacentre: {seen}")
            elsewhere = sorted({dc for group in MOVING_GROUPS for dc in seen[group]["active"]} - {self.active})
            source = (elsewhere or [dc for dc in self.datacentres if dc != self.active])[0]
            self.operation("swapover", {"repairs": True}, extra={
                "replication_active_datacentre": self.active, "swapover_source": source,
                "swapover_target": self.active, "swapover_groups": MOVING_GROUPS})
        with self.lock:
            unresumed, self.unresumed = self.unresumed, []
        for name, op_id, extra in unresumed:
            self.operation(name, {"resumes": op_id}, extra=extra)

    def replication_reports(self) -> list[dict]:
        reports = []
        for node in self.estate.nodes:
            try:
                report = broker_report(node.management(timeout=5))
                reports.append({"broker": node.name, "links": report.get("links", [])})
            except (BrokerUnreachable, ManagementError, OSError) as exc:
                reports.append({"broker": node.name, "error": str(exc)})
        return reports

    def finding(self, text: str) -> None:
        self.log(f"FINDING {text}")
        with self.lock:
            self.findings.append(text)

    def _sleep_until(self, when: float, stop_at_closing: bool = False) -> None:
        while time.time() < when:
            if stop_at_closing and self.closing.is_set():
                return
            time.sleep(min(1.0, max(0.0, when - time.time())))
