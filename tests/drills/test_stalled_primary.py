"""A pair's live broker stalled longer than its ZooKeeper session (chaos 2 x 2 seed 10): on a 2 x 2 systemd estate
with the ZooKeeper lock manager, under durable load on dc1's pair (two producers with the pair's URLs, and one that
knows only the live broker and keeps connecting to it while it is stopped), dc1's live broker is SIGSTOPped for
three sessions. Its backup takes the lock and becomes live; SIGCONT, the stalled broker finds its lock lost and stops
itself, exit status 0.

Round 1 runs it under `Restart=on-failure` (a drop-in: the unit before the fix): it stays down, and its datacentre
has no backup. Round 2 runs it under the broker role's own unit (`Restart=always`): systemd starts it again and it
comes back as the backup, in sync. Nothing the producers had accepted may be lost, but for what Artemis acknowledges
on the resumed broker before it notices its lost lock (docs/upstream/stalled-primary-acks-without-lock.md): those are
counted, and every one of them must have been acknowledged by that broker after SIGCONT. Figures:
tests/drills/results/stalled_primary_2x2.json.

    make drills            (or: pytest tests/drills -k stalled)
"""

import json
import os
import time
import uuid

import pytest

from support import amqp_clients as amqp
from support.estate import REPO_ROOT, Estate, layout_inventory, run_playbook

pytestmark = pytest.mark.timeout(1800)

RATE = 50  # per producer
PRODUCERS = 2
STALL_SESSIONS = 3
RESULTS = os.path.join(REPO_ROOT, "tests", "drills", "results")
DROP_IN = "/etc/systemd/system/{unit}.d/zz-restart-on-failure.conf"


@pytest.fixture
def systemd_2x2_zookeeper():
    Estate.testbed("down")
    Estate.testbed("up", "--systemd", "--dcs", "2", "--nodes-per-dc", "2", "--zookeeper")
    yield Estate.from_testbed()
    if os.environ.get("KEEP_TESTBED") != "1":
        Estate.testbed("down")


def _unit(estate, node):
    units = estate.exec(node.name, "systemctl", "list-units", "--all", "--plain", "--no-legend", "artemis-*.service")
    names = [line.split()[0] for line in units.splitlines() if line.strip()]
    assert len(names) == 1, f"{node.name}: broker units {names}"
    return names[0]


def _service(estate, node, unit):
    shown = estate.exec(node.name, "systemctl", "show", unit, "-p", "ActiveState,ExecMainStatus,NRestarts,MainPID")
    return dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)


def _restart_on_failure(estate, node, unit, present):
    """The unit as it was before the fix, through a drop-in (present), or the role's own unit again."""
    path = DROP_IN.format(unit=unit)
    if present:
        estate.exec(node.name, "sh", "-c", f"mkdir -p {os.path.dirname(path)} && "
                    f"printf '[Service]\\nRestart=on-failure\\n' > {path}")
    else:
        estate.exec(node.name, "rm", "-f", path)
    estate.exec(node.name, "systemctl", "daemon-reload")


def _wait(probe, description, timeout=120, interval=0.5):
    return amqp.wait_for(probe, bool, timeout=timeout, interval=interval, description=description)


def _stall(estate, session_s, queue, consumer, restart):
    """One round: producers on dc1's pair (the live broker first), the live broker stopped for STALL_SESSIONS
    sessions and resumed, then what became of it under ``restart`` (on-failure or always)."""
    live, backup = estate.pair_in_sync("dc1")
    unit = _unit(estate, live)
    _restart_on_failure(estate, live, unit, present=restart == "on-failure")
    restarts_before = int(_service(estate, live, unit)["NRestarts"])
    producers = [amqp.Producer([live.amqp_url, backup.amqp_url], live.user, live.password, queue, rate=RATE,
                               reconnect_delay=0.2, ca_path=live.ca_cert) for _producer in range(PRODUCERS)]
    for producer in producers:
        producer.start()
    for producer in producers:
        producer.wait_connected()
    time.sleep(5)
    assert estate.signal_broker(live.name, "STOP").returncode == 0
    stopped = time.time()
    # A client that knows only this broker (one URL, or a load balancer's pick) keeps connecting to it meanwhile.
    pinned = amqp.Producer([live.amqp_url], live.user, live.password, queue, rate=RATE, reconnect_delay=0.2,
                           ca_path=live.ca_cert)
    pinned.start()
    producers.append(pinned)
    time.sleep(STALL_SESSIONS * session_s)
    assert estate.signal_broker(live.name, "CONT").returncode == 0
    resumed = time.time()
    _wait(lambda: _service(estate, live, unit)["MainPID"] == "0" or
          int(_service(estate, live, unit)["NRestarts"]) > restarts_before, f"{live.name} stopping itself")
    exited = time.time()
    figures = {"restart": restart, "stalled": live.name, "took_over": backup.name,
               "stalled_s": round(resumed - stopped, 1), "exited_after_resume_s": round(exited - resumed, 1)}
    if restart == "on-failure":
        time.sleep(15)  # three RestartSec: systemd would have started it by now
        service = _service(estate, live, unit)
        figures.update(active_state=service["ActiveState"], exit_status=int(service["ExecMainStatus"]),
                       restarts=int(service["NRestarts"]) - restarts_before, broker_running=bool(
                           estate.broker_pids(live)))
        _restart_on_failure(estate, live, unit, present=False)
        estate.exec(live.name, "systemctl", "start", unit)
    else:
        estate.pair_in_sync("dc1")
        service = _service(estate, live, unit)
        figures.update(active_state=service["ActiveState"], restarts=int(service["NRestarts"]) - restarts_before,
                       back_in_sync_after_exit_s=round(time.time() - exited, 1))
    time.sleep(5)
    for producer in producers:
        producer.stop()
    _settle(producers, consumer, live.amqp_url, resumed)
    return figures, producers, live.amqp_url, resumed


def _settle(producers, consumer, stalled_url, resumed, timeout=120):
    """Until the consumer has every accepted message but those the resumed broker acknowledged (which it may never
    get), or ``timeout``: what is missing then is lost, and counted."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ledger = _losses(producers, consumer, stalled_url, resumed)
        if not ledger["lost_otherwise"]:
            return
        time.sleep(1)


def _losses(producers, consumer, stalled_url, resumed):
    """What was accepted and never consumed, split by who acknowledged it when: the stalled broker (the URL of the
    producer's connection) after SIGCONT, or anyone else at any time."""
    lost = {"accepted": 0, "lost": 0, "lost_acknowledged_by_the_resumed_broker": 0, "lost_otherwise": [],
            "acknowledged_by_the_resumed_broker": 0, "acknowledged_after_resume_s": []}
    consumed = set(consumer.accepted_ids())
    for producer in producers:
        for record in producer.ledger():
            if record.outcome != "accepted":
                continue
            lost["accepted"] += 1
            url = producer.urls[(record.connection - 1) % len(producer.urls)]
            by_resumed = url == stalled_url and record.settled_at is not None and record.settled_at >= resumed
            if by_resumed:
                lost["acknowledged_by_the_resumed_broker"] += 1
                lost["acknowledged_after_resume_s"].append(round(record.settled_at - resumed, 3))
            if record.id in consumed:
                continue
            lost["lost"] += 1
            if by_resumed:
                lost["lost_acknowledged_by_the_resumed_broker"] += 1
            else:
                lost["lost_otherwise"].append(record.id)
    times = lost.pop("acknowledged_after_resume_s")
    lost["acknowledged_after_resume_s"] = [min(times), max(times)] if times else []
    return lost


def test_a_primary_stalled_past_its_session_comes_back_as_the_backup(systemd_2x2_zookeeper, tmp_path):
    estate = systemd_2x2_zookeeper
    inventory = layout_inventory(tmp_path, "shared_nothing")
    built = run_playbook("site.yml", inventory=inventory)
    assert built.rc == 0, built.output[-6000:]
    session_s = estate.inventory_vars()["replication_zookeeper"]["session-ms"] / 1000
    queue = f"stalled.{uuid.uuid4().hex[:8]}"
    node = estate.dc("dc1")
    pair = [n.amqp_url for n in estate.nodes if n.dc == "dc1"]
    consumer = amqp.Consumer(pair, node.user, node.password, queue, prefetch=100, reconnect_delay=0.2,
                             ca_path=node.ca_cert)
    rounds = []
    consumer.start()
    consumer.wait_connected()
    try:
        for restart in ("on-failure", "always"):
            figures, producers, stalled_url, resumed = _stall(estate, session_s, queue, consumer, restart)
            figures["ledger"] = _losses(producers, consumer, stalled_url, resumed)
            rounds.append(figures)
    finally:
        consumer.stop()
    figures = {"drill": "stalled_primary", "estate": "2x2 shared_nothing systemd, ZooKeeper lock manager",
               "session_s": session_s, "stalled_for_sessions": STALL_SESSIONS, "producers_on_the_pair": PRODUCERS,
               "producers_on_the_stalled_broker_only": 1,
               "rate_msg_s_per_producer": RATE, "rounds": rounds}
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "stalled_primary_2x2.json"), "w") as handle:
        json.dump(figures, handle, indent=2)
        handle.write("\n")
    on_failure, always = rounds
    assert (on_failure["active_state"], on_failure["exit_status"], on_failure["broker_running"]) == (
        "inactive", 0, False), on_failure
    assert always["restarts"] >= 1 and always["active_state"] == "active", always
    for figures in rounds:
        assert figures["ledger"]["lost_otherwise"] == [], figures
