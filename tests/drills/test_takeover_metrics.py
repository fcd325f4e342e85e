"""What broker metrics cost an HA takeover: on a 2 x 2 shared_nothing estate under 500 msg/s per address group, the
live broker of each datacentre's pair is killed (SIGKILL) in turn, its backup takes over, the killed broker is
started again and becomes the backup (no failback, the role's default), again and again; one datacentre's brokers
serve their metrics (broker_metrics_enabled), the other's do not, and halfway through the two swap (a rolling
site.yml run), so that each setting is measured on both pairs.

With TAKEOVER_ENDING=stop the live broker is stopped gracefully instead, as a rolling restart stops it. A takeover is
measured from the kill (or the stop) to the moment the backup's client port accepts a TCP connection (Artemis binds
its acceptors once the broker is live), and split by the backup's own log: the first line it logs after the kill
(it saw the primary go), `AMQ221007 Server is now active`, the first acceptor started. Nothing the producers had
accepted may be lost. Figures: tests/drills/results/takeover_metrics_2x2.json (and _stop.json).

    make drills            (or: pytest tests/drills -k takeover)
"""

import datetime
import json
import os
import re
import socket
import statistics
import time
import urllib.parse
import uuid

import pytest

from support import amqp_clients as amqp
from support.estate import REPO_ROOT, Estate, broker_role_default, layout_inventory, run_playbook, set_layout_vars
from support.priority import niceness

pytestmark = pytest.mark.timeout(3600)

RATE = 500
PREFETCH = 100
# Takeovers per datacentre and arrangement: two arrangements, so twice this many per setting.
CYCLES = int(os.environ.get("TAKEOVER_CYCLES", "3"))
# How the live broker goes: "kill" (SIGKILL, a crash) or "stop" (Artemis's graceful stop, as a rolling restart does
# it: the broker unregisters its queues, and their meters, before it exits).
ENDING = os.environ.get("TAKEOVER_ENDING", "kill")
CONTROLLER_NICE = 10
RESULTS = os.path.join(REPO_ROOT, "tests", "drills", "results")
GROUPS = {"all": ("dc1", "takeover.{id}"), "east": ("dc2", "east.takeover.{id}")}
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


@pytest.fixture
def fresh_2x2():
    Estate.testbed("down")
    Estate.testbed("up", "--dcs", "2", "--nodes-per-dc", "2", "--metrics")
    yield Estate.from_testbed()
    if os.environ.get("KEEP_TESTBED") != "1":
        Estate.testbed("down")


def _arrangement(metrics_at):
    return {dc: {"broker_metrics_enabled": dc == metrics_at} for dc in ("dc1", "dc2")}


def _node(estate, name):
    return next(node for node in estate.nodes if node.name == name)


def _client_port(node):
    url = urllib.parse.urlsplit(node.amqp_url)
    return url.hostname, url.port


def _bound(node):
    try:
        socket.create_connection(_client_port(node), timeout=0.2).close()
        return True
    except OSError:
        return False


def _log_lines(estate, node):
    return estate.exec(node.name, "cat", f"/var/opt/artemis/{node.name}/log/artemis.log").splitlines()


def _logged_at(line):
    stamp = LOG_LINE.match(line)
    if stamp is None:
        return None
    return datetime.datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def _start_broker(estate, node):
    estate.exec(node.name, "sh", "-c", f"rm -f /var/opt/artemis/{node.name}/data/artemis.pid && runuser -u artemis -- "
                f"/var/opt/artemis/{node.name}/bin/artemis-service start")


def _takeover(estate, dc, metrics):
    """Kill the live broker of ``dc``'s pair, time its backup's takeover, start the killed one again (it becomes the
    backup: the role's default is no failback) and wait for the pair to be in sync."""
    live, backup = estate.pair_in_sync(dc)
    time.sleep(3)
    logged_before = len(_log_lines(estate, backup))
    killed = time.time()
    if ENDING == "stop":  # in the background: the backup may be live before the script returns
        estate.exec(live.name, "sh", "-c", f"setsid runuser -u artemis -- /var/opt/artemis/{live.name}/bin/"
                    "artemis-service stop >/dev/null 2>&1 < /dev/null &")
    else:
        estate.testbed("kill", live.name)
    deadline = killed + 120
    while not _bound(backup):
        assert time.time() < deadline, f"{backup.name} did not take over within 120 s"
        time.sleep(0.02)
    bound = time.time()
    time.sleep(1)
    after = _log_lines(estate, backup)[logged_before:]
    stamped = [(at, line) for at, line in ((_logged_at(line), line) for line in after) if at is not None]

    def first(marker):
        return next((round(at - killed, 3) for at, line in stamped if marker in line), None)

    figures = {"datacentre": dc, "metrics": metrics, "killed": live.name,
               "at": datetime.datetime.fromtimestamp(killed, datetime.timezone.utc).isoformat(timespec="seconds"),
               "client_port_bound_s": round(bound - killed, 3),
               "first_log_line_s": round(stamped[0][0] - killed, 3) if stamped else None,
               "server_active_logged_s": first("AMQ221007"),
               "first_acceptor_logged_s": first("AMQ221020"),
               "longest_log_pauses": _longest_pauses(stamped, killed, bound)}
    time.sleep(4)
    amqp.wait_for(lambda: not estate.broker_pids(live), timeout=60, description=f"{live.name}'s JVM gone")
    started = time.monotonic()
    _start_broker(estate, live)
    estate.pair_in_sync(dc)
    figures["backup_again_in_sync_s"] = round(time.monotonic() - started, 1)
    return figures


def _longest_pauses(stamped, killed, bound, count=3):
    """Where the takeover's time went: the longest silences of the backup's log between the kill and the client port
    bound, each as (seconds after the kill it ended, its length, the start of the line that ended it)."""
    ends = [(at, line) for at, line in stamped if at <= bound]
    starts = [killed] + [at for at, _line in ends]
    pauses = [(at - previous, at, line) for previous, (at, line) in zip(starts, ends)]
    return [(round(at - killed, 3), round(length, 3), line[24:140])
            for length, at, line in sorted(pauses, reverse=True)[:count]]


def _summary(takeovers, metrics):
    seconds = [t["client_port_bound_s"] for t in takeovers if t["metrics"] == metrics]
    return {"takeovers": len(seconds), "mean_s": round(statistics.mean(seconds), 3),
            "median_s": round(statistics.median(seconds), 3), "min_s": min(seconds), "max_s": max(seconds)}


def test_takeover_with_and_without_broker_metrics(fresh_2x2, tmp_path):
    estate = fresh_2x2
    heap = {"broker_java_max_heap": broker_role_default("broker_java_max_heap")}
    inventory = layout_inventory(tmp_path, "shared_nothing", extra=heap, per_datacentre=_arrangement("dc1"))
    built = run_playbook("site.yml", inventory=inventory)
    assert built.rc == 0, built.output[-6000:]

    drill_id = uuid.uuid4().hex[:8]
    node = estate.nodes[0]
    workers = {}
    for group, (owner, queue) in GROUPS.items():
        urls = [n.amqp_url for n in estate.nodes if n.dc == owner]
        queue = queue.format(id=drill_id)
        workers[group] = (amqp.Producer(urls, node.user, node.password, queue, rate=RATE, reconnect_delay=0.2,
                                        ca_path=node.ca_cert),
                          amqp.Consumer(urls, node.user, node.password, queue, prefetch=PREFETCH,
                                        reconnect_delay=0.2, ca_path=node.ca_cert))
    takeovers, site_runs = [], []
    with niceness(CONTROLLER_NICE):
        for producer, consumer in workers.values():
            consumer.start()
            producer.start()
        for producer, consumer in workers.values():
            producer.wait_connected()
            consumer.wait_connected()
        for metrics_at in ("dc1", "dc2"):
            if metrics_at == "dc2":
                set_layout_vars(inventory, "shared_nothing", extra=heap, per_datacentre=_arrangement("dc2"))
                started = time.monotonic()
                swapped = run_playbook("site.yml", inventory=inventory, timeout=3000)
                assert swapped.rc == 0, swapped.output[-6000:]
                site_runs.append({"metrics_moved_to": "dc2", "site_yml_s": round(time.monotonic() - started, 1),
                                  "restarted": [b for rolling in swapped.rolling_restart_passes() for b in rolling]})
            for _cycle in range(CYCLES):
                for dc in ("dc1", "dc2"):
                    takeovers.append(_takeover(estate, dc, metrics=dc == metrics_at))
        time.sleep(5)
        for producer, _consumer in workers.values():
            producer.stop()
        for producer, consumer in workers.values():
            amqp.wait_for(lambda: set(producer.accepted_ids()) - set(consumer.accepted_ids()), lambda left: not left,
                          timeout=180, interval=1, description="every accepted message consumed")
            consumer.stop()

    ledgers = {}
    for group, (producer, consumer) in workers.items():
        accepted, consumed = set(producer.accepted_ids()), consumer.accepted_ids()
        ledgers[group] = {"accepted": len(accepted), "consumed": len(consumed),
                          "lost": len(accepted - set(consumed)), "duplicates": len(consumed) - len(set(consumed)),
                          "in_flight_bound": consumer.stats()["disconnections"] * PREFETCH}
    with_metrics, without = _summary(takeovers, True), _summary(takeovers, False)
    figures = {"drill": "takeover_metrics", "estate": "2x2 shared_nothing", "rate_msg_s_per_group": RATE,
               "ending": ENDING,
               "controller_and_load_nice": CONTROLLER_NICE, "heap": heap["broker_java_max_heap"],
               "with_metrics": with_metrics, "without_metrics": without,
               "mean_ratio_with_to_without": round(with_metrics["mean_s"] / without["mean_s"], 3),
               "site_runs": site_runs, "ledgers": ledgers, "takeovers": takeovers}
    os.makedirs(RESULTS, exist_ok=True)
    name = "takeover_metrics_2x2.json" if ENDING == "kill" else f"takeover_metrics_2x2_{ENDING}.json"
    with open(os.path.join(RESULTS, name), "w") as handle:
        json.dump(figures, handle, indent=2)
        handle.write("\n")
    assert with_metrics["takeovers"] == without["takeovers"] == 2 * CYCLES
    for group, ledger in ledgers.items():
        assert ledger["lost"] == 0, f"{group}: {ledger}"
        assert ledger["duplicates"] <= ledger["in_flight_bound"], f"{group}: {ledger}"
