"""The chaos runner's reading of an operation's end: a playbook's refusal is taken at its word unless the groups are
seen to have moved (3 x 1 seed 2's failback refused while the active datacentre did not answer); and its supervisor,
which starts again a broker that ended by itself (as Restart=always) and names it when it crashed."""

import types

import pytest

from chaos import world

REFUSED = "'Refused, nothing changed: failback_active (dc1) must be where all, books are active, but it is not readable'"


def _failed(output):
    return types.SimpleNamespace(returncode=2, output=f"fatal: [localhost]: FAILED! => \n  msg: {output}\n")


@pytest.mark.parametrize("output, before, after, outcome", [
    (REFUSED, None, "dc1", "refused"),   # where the groups were was unknown when it began
    (REFUSED, "dc1", None, "refused"),   # unknown when it ended
    (REFUSED, "dc1", "dc1", "refused"),
    (REFUSED, "dc1", "dc2", "failed"),   # a refusal that moved them is not one
    ("'Refused, no broker restarted: dc1-node2 not read earlier in this run'", "dc1", None, "refused"),
    ("broker unreachable", None, "dc1", "failed"),
    ("broker unreachable", "dc1", "dc1", "refused"),
])
def test_an_operation_that_says_it_refused_is_refused_unless_the_groups_moved(output, before, after, outcome):
    found, message = world.World._outcome(None, "failback", _failed(output), None, before, after, {})
    assert found == outcome
    assert message


def test_an_interrupted_or_clean_end_is_read_as_such():
    done = types.SimpleNamespace(returncode=0, output="")
    assert world.World._outcome(None, "swapover", done, None, "dc1", "dc2", {}) == ("done", "")
    interrupted = world.World._outcome(None, "swapover", _failed(REFUSED), {"signal": "SIGINT", "after": 5}, "dc1",
                                       None, {})
    assert interrupted == ("interrupted", "SIGINT after 5 s")


class _Stopping:
    """The supervisor's clock: one round, then the run stops."""

    def __init__(self):
        self.rounds = 0

    def wait(self, _seconds):
        self.rounds += 1
        return self.rounds > 1


START = ("2026-12-02 19:40:01,100 INFO  [org.apache.activemq.artemis.core.server] AMQ221000: Primary message broker is "
         "starting with configuration ...")
STOP = "2026-12-02 19:52:11,300 INFO  [org.apache.activemq.artemis.core.server] AMQ221002: Apache ActiveMQ Artemis ..."
LOCK_LOST = ("2026-12-02 19:52:10,900 ERROR [org.apache.activemq.artemis.core.server.impl.ReplicationPrimaryActivation]"
             " Quorum UNAVAILABLE: async stopping broker.")
SEQUENCE_NOT_RAISED = ("2026-12-02 19:52:10,800 ERROR [org.apache.activemq.artemis.core.server.impl."
                       "ReplicationPrimaryActivation] Unexpected exception: ... on attempted activation sequence "
                       "increment; stopping server async")
BACKUP_GAVE_UP = ("2026-12-03 17:48:23,070 ERROR [org.apache.activemq.artemis.core.server.impl."
                  "ReplicationBackupActivation] Stopping broker because of critical registration error")
CRASHED = (START,)
LOST_ITS_LOCK = (START, LOCK_LOST, STOP)


def _supervised(pids_seen, log=CRASHED):
    """A World whose only node's broker is looked for in turn with ``pids_seen`` (empty: not found), and whose
    broker log's start, stop and lock lines are ``log``."""
    supervisor = world.World.__new__(world.World)
    node = types.SimpleNamespace(name="dc2-node1", dc="dc2")
    looks = iter(pids_seen)
    supervisor.estate = types.SimpleNamespace(nodes=[node], broker_pids=lambda _node: next(looks))
    supervisor.stopping, supervisor.lock = _Stopping(), world.threading.RLock()
    supervisor.faulted, supervisor.down_datacentres, supervisor.findings, supervisor.started = set(), set(), [], []
    supervisor.restarting_play = None
    supervisor._log_lines = lambda _name, _pattern: list(log)
    supervisor._last_words = lambda _name: "AMQ224056: Primary server will not fail-back automatically"
    supervisor.logged, supervisor.written = [], []
    supervisor.log = supervisor.logged.append
    supervisor.writer = types.SimpleNamespace(write=lambda kind, **fields: supervisor.written.append((kind, fields)))
    supervisor.testbed = lambda *args, **_kwargs: supervisor.started.append(args)
    return supervisor


def test_a_broker_found_running_at_the_second_look_is_not_a_finding():
    # 2 x 2 seed 10: a look into dc2-node1 found no broker while it ran as a backup, and the run named it as ended.
    supervisor = _supervised([[], ["1665"]])
    supervisor.supervise()
    assert supervisor.findings == [] and supervisor.started == []


def test_a_broker_that_ended_by_itself_is_started_again_and_named():
    supervisor = _supervised([[], []])
    supervisor.supervise()
    assert supervisor.findings == ["dc2-node1 ended by itself: AMQ224056: Primary server will not fail-back "
                                   "automatically"]
    assert [args[:2] for args in supervisor.started] == [("exec", "dc2-node1")]


def test_a_broker_found_down_while_a_play_restarts_brokers_is_left_to_the_play_then_started_after_it():
    # 3 x 1 seed 5's fifth run: upgrade-39 stopped dc1-node1 (still starting: no clean line in its log), and the
    # supervisor started it again before the play's `artemis upgrade` as if it had crashed.
    supervisor = _supervised([[], [], [], []])
    supervisor.restarting_play = "upgrade-39"
    supervisor.stopping = types.SimpleNamespace(rounds=0)

    def wait(_seconds):
        supervisor.stopping.rounds += 1
        if supervisor.stopping.rounds == 3:
            supervisor.restarting_play = None  # the play has ended
        return supervisor.stopping.rounds > 3

    supervisor.stopping.wait = wait
    supervisor.supervise()
    assert supervisor.logged[:2] == ["dc2-node1 found down while upgrade-39 stops and starts brokers: left to it",
                                     "broker dc2-node1 started (MainThread)"]  # said once, started after the play
    assert [args[:2] for args in supervisor.started] == [("exec", "dc2-node1")]


def test_a_fault_that_ends_while_a_failover_powers_its_datacentre_off_leaves_its_broker_down():
    # 2 x 2 seed 3 at be82a4d: power_off-1's end powered dc1-node1 on between failover-3's power-offs.
    bed = world.World.__new__(world.World)
    nodes = [types.SimpleNamespace(name=f"dc1-node{index}", dc="dc1") for index in (1, 2)]
    bed.estate = types.SimpleNamespace(nodes=nodes, broker_pids=lambda _node: [])
    bed.lock, bed.faulted, bed.down_datacentres, bed.logged = world.threading.RLock(), set(), set(), []
    bed.log = bed.logged.append
    powering_off, carry_on, calls = world.threading.Event(), world.threading.Event(), []

    def testbed(*args, **_kwargs):
        calls.append(args[:2])
        if args == ("stop-node", "dc1-node1"):
            powering_off.set()
            carry_on.wait(5)

    bed.testbed = testbed
    failover = world.threading.Thread(target=bed._power_off, args=("dc1",))
    failover.start()
    assert powering_off.wait(5)
    fault_end = world.threading.Thread(target=bed._fault_end,
                                       args=("power_off", {"broker": "dc1-node1", "datacentre": "dc1"}))
    fault_end.start()
    fault_end.join(0.5)
    carry_on.set()
    failover.join(5)
    fault_end.join(5)
    assert calls == [("stop-node", "dc1-node1"), ("stop-node", "dc1-node2")]
    assert bed.logged == ["dc1-node1 stays down: a failover took its datacentre down"]


@pytest.mark.parametrize("log", [LOST_ITS_LOCK, (START, SEQUENCE_NOT_RAISED, STOP)])
def test_a_primary_that_stopped_itself_after_losing_its_lock_is_started_again_as_restart_always_would(log):
    # 2 x 2 seed 10 at 84a8470: a primary stalled past its ZooKeeper session stopped itself (exit 0) and stayed down.
    # The regression primary-stalled-past-its-lock at 3a9de63: one that had started as a backup (it logs AMQ221000,
    # starting, never AMQ221001, started) was not recognised and stayed down too.
    supervisor = _supervised([[], []], log=log)
    supervisor.supervise()
    assert supervisor.findings == []
    assert [args[:2] for args in supervisor.started] == [("exec", "dc2-node1")]
    assert any("stopped itself after losing its lock" in line for line in supervisor.logged)
    # When it stopped, for the checker: what it acknowledged until then, it lost.
    lost_at = world.datetime.datetime(2026, 12, 2, 19, 52, 10, 800000 if log[1] == SEQUENCE_NOT_RAISED else 900000)
    stopped_at = world.datetime.datetime(2026, 12, 2, 19, 52, 11, 300000)
    assert supervisor.written == [("lock_lost", {"broker": "dc2-node1", "lost_at": lost_at.timestamp(),
                                                 "stopped_at": stopped_at.timestamp()})]


def test_a_primary_whose_stop_for_its_lost_lock_did_not_end_cleanly_is_not_a_crash():
    # 2 x 2 seed 9 at 3a9de63: dc1-node1 resumed past its lock and its stop ended without AMQ221002 (a bridge's stop
    # timed out): the supervisor named it a crash. For the checker, it had stopped by the time it was found so.
    supervisor = _supervised([[], []], log=(START, LOCK_LOST))
    before = world.time.time()
    supervisor.supervise()
    assert supervisor.findings == []
    assert [args[:2] for args in supervisor.started] == [("exec", "dc2-node1")]
    (kind, fields), = supervisor.written
    assert kind == "lock_lost" and fields["lost_at"] == world.logged_at(LOCK_LOST)
    assert before <= fields["stopped_at"] <= world.time.time()


def test_a_backup_that_gave_up_as_its_live_broker_went_away_is_started_again_as_restart_always_would():
    # 2 x 2 seed 9 at 3a9de63: dc1-node1, announcing itself as a backup when its live peer stopped for a lost lock,
    # stopped itself cleanly; the supervisor took it for stopped by an operation and left it down for 7 minutes.
    supervisor = _supervised([[], []], log=(START, BACKUP_GAVE_UP, STOP))
    supervisor.supervise()
    assert supervisor.findings == [] and supervisor.written == []
    assert [args[:2] for args in supervisor.started] == [("exec", "dc2-node1")]
    assert any("as a backup whose live broker went away" in line for line in supervisor.logged)


@pytest.mark.parametrize("log", [[START, STOP], [START, LOCK_LOST, STOP, START, STOP], []])
def test_a_broker_stopped_by_someone_or_never_started_is_left_alone(log):
    supervisor = _supervised([[]], log=log)
    supervisor.supervise()
    assert supervisor.findings == [] and supervisor.started == []


def test_site_yml_run_again_reads_the_inventory_as_it_is_now_and_a_swapover_its_own_inputs():
    runner = world.World.__new__(world.World)
    runner.active = "dc2"
    interrupted = {"replication_active_datacentre": "dc1", "broker_java_max_heap": "512m"}
    assert runner._run_again_with("upgrade", interrupted) == {"replication_active_datacentre": "dc2",
                                                              "broker_java_max_heap": "512m"}
    assert runner._run_again_with("rolling_change", interrupted)["replication_active_datacentre"] == "dc2"
    swapover = {"replication_active_datacentre": "dc1", "swapover_source": "dc1", "swapover_target": "dc2"}
    assert runner._run_again_with("swapover", swapover) == swapover


def _signalling(returncode):
    runner = world.World.__new__(world.World)
    runner.estate = types.SimpleNamespace(signal_broker=lambda *_args: types.SimpleNamespace(
        returncode=returncode, stderr="pkill: failed"))
    return runner


def test_a_signal_that_reaches_no_broker_fails_unless_only_running_ones_are_meant():
    # 2 x 2 seed 10's rerun: the end's SIGCONT to every node met a node without a broker and the run died unjudged.
    _signalling(1)._broker_signal("dc1-node1", "CONT", running_only=True)
    with pytest.raises(RuntimeError, match="pkill -STOP on dc1-node1: exit 1"):
        _signalling(1)._broker_signal("dc1-node1", "STOP")
    with pytest.raises(RuntimeError, match="exit 2"):
        _signalling(2)._broker_signal("dc1-node1", "CONT", running_only=True)


def _faulting(live):
    """A World whose dc1 has ``live`` (a node name, or None) as its live broker, which records the bed's commands."""
    runner = world.World.__new__(world.World)
    runner.closing, runner.lock = world.threading.Event(), world.threading.RLock()
    runner.faulted, runner.down_datacentres, runner.counter = set(), set(), {}
    runner.redeliveries, runner.logged, runner.written, runner.commands = 60, [], [], []
    runner.estate = types.SimpleNamespace(broker_pids=lambda _node: ["1665"])
    runner.live_broker = lambda _datacentre: types.SimpleNamespace(name=live) if live else None
    runner._node = lambda name: name
    runner._id = lambda name: f"{name}-1"
    runner._sleep_until = lambda *_args, **_kwargs: None
    runner.mirror_connections = lambda _datacentre: 0
    runner.log = runner.logged.append
    runner.writer = types.SimpleNamespace(write=lambda kind, **fields: runner.written.append((kind, fields)))
    runner.testbed = lambda *args, **_kwargs: runner.commands.append(args)
    runner.start_broker = lambda node: runner.commands.append(("start", node))
    return runner


def test_a_fixed_schedule_s_fault_on_the_live_broker_falls_on_the_one_live_when_it_comes():
    # The regression of 2 x 2 seed 11 kills dc1's live broker, whichever of the pair won the lock at its start.
    step = types.SimpleNamespace(at=0.0, duration=0.0, name="kill", args={"broker": "live", "datacentre": "dc1"})
    runner = _faulting("dc1-node2")
    runner.fault(step, 0.0)
    assert runner.commands == [("kill", "dc1-node2"), ("start", "dc1-node2")]
    assert [fields["args"]["broker"] for _kind, fields in runner.written] == ["dc1-node2", "dc1-node2"]

    nobody = _faulting(None)
    nobody.fault(step, 0.0)
    assert nobody.commands == [] and nobody.written == []


def test_a_stop_that_waits_for_the_backup_s_synchronisation_starts_when_the_broker_is_stopped():
    # The regression of 2 x 2 seed 5: the primary is stopped from inside its node as it sends its journal; the fault's
    # start (where the checker's stalled window begins) is written once it is stopped, and no second SIGSTOP follows.
    step = types.SimpleNamespace(at=0.0, duration=0.0, name="stop",
                                 args={"broker": "dc2-node1", "datacentre": "dc2", "when": world.BACKUP_SYNCING})
    runner = _faulting("dc2-node1")
    runner.lock_session_s = 6.0
    signals = []
    runner._broker_signal = lambda node, name, **_kwargs: signals.append((node, name))

    def sends_its_journal(*args, **_kwargs):
        runner.commands.append(args)
        assert runner.written == [], "the fault's start written before the broker was stopped"
        return types.SimpleNamespace(returncode=0, stderr="")

    runner.testbed = sends_its_journal
    runner.fault(step, 0.0)
    (waited,) = runner.commands
    assert waited[:2] == ("exec", "dc2-node1") and world.SENDING_TO_REPLICA in waited[-1] and "pkill -STOP" in waited[-1]
    assert [(kind, fields["phase"]) for kind, fields in runner.written] == [("fault", "start"), ("fault", "end")]
    assert signals == [("dc2-node1", "CONT")]

    runner = _faulting("dc2-node1")
    runner.lock_session_s = 6.0
    runner.findings = []
    runner.testbed = lambda *_args, **_kwargs: types.SimpleNamespace(returncode=124, stderr="")
    runner.fault(step, 0.0)
    assert [fields["phase"] for _kind, fields in runner.written] == ["start", "end"]
    assert "error" in runner.written[-1][1] and "was not stopped as it sent its journal" in runner.written[-1][1]["error"]


def test_a_fault_that_waits_for_the_restart_plan_comes_when_an_operation_reaches_it_again(tmp_path, monkeypatch):
    # The regression of 3 x 1 seed 5's fourth run: dc2's broker silent as the rolling restart reads who is live. An
    # earlier operation's plan does not count; the fault starts once one more output has the play.
    (tmp_path / "swapover-1.out").write_text(world.RESTART_PLANNING_PLAY + "\n")
    step = types.SimpleNamespace(at=0.0, duration=0.0, name="stop",
                                 args={"broker": "dc2-node1", "datacentre": "dc2", "when": world.RESTART_PLANNED})
    runner = _faulting("dc2-node1")
    runner.directory, runner.lock_session_s = str(tmp_path), 6.0
    signals = []
    runner._broker_signal = lambda node, name, **_kwargs: signals.append((node, name))
    sleeps = []

    def sleep(_seconds):
        sleeps.append(_seconds)
        assert signals == [], "stopped before the plan"
        if len(sleeps) == 3:
            (tmp_path / "rolling_change-2.out").write_text("PLAY [Build]\n" + world.RESTART_PLANNING_PLAY + "\n")

    monkeypatch.setattr(world.time, "sleep", sleep)
    runner.fault(step, 0.0)
    assert len(sleeps) == 3 and signals == [("dc2-node1", "STOP"), ("dc2-node1", "CONT")]
    assert [fields["phase"] for _kind, fields in runner.written] == ["start", "end"]

    # The run closing while it waits: no fault.
    closing = _faulting("dc2-node1")
    closing.directory, closing.lock_session_s = str(tmp_path), 6.0
    closing._broker_signal = lambda node, name, **_kwargs: signals.append((node, name))
    monkeypatch.setattr(world.time, "sleep", lambda _seconds: closing.closing.set())
    closing.fault(step, 0.0)
    assert closing.written == [] and len(signals) == 2 and closing.faulted == set()
