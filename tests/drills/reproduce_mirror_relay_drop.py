"""Re-check an Artemis release for what 3 x 1 seed 5 of the chaos runs found (docs/upstream/mirror-relay-drop.md): a
broker that relays one datacentre's mirror events to another drops them, instead of storing them for later, while its
own mirror connection to that other datacentre has not connected since the broker started.

    make reproduce-mirror-relay-drop

Three plain brokers on the controller in a star, as the collection mirrors a `messages_only` group over three
datacentres: `b` (the group's owner) mirrors to `a` and to `c`, and each of them back to `b`; `a` and `c` are not
connected. Messages sent to `a` reach `c` only as `b` relays them. With `c` stopped, `a` receives LATER messages,
twice: once while `b` runs on (the control: `b` stores them for `c`), once after `b` was killed and started again
while `c` was still down. What `c` holds once started again says how many of them `b` relayed. Runs once with
Artemis alone and once with the collection's broker plugin on the brokers (continuity.artemis.replication.
RelayIdentities, the workaround; `make plugins` builds it). Writes tests/drills/results/mirror_relay_drop.json; exits
0 either way (a measurement).
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import tempfile

from support import amqp_clients as amqp
from support.estate import REPO_ROOT
from support.plain_broker import RestartableBroker, settled_count
from support.reproduction import artemis_version, write_result

FIRST, LATER = 10, 100
USER, PASSWORD = "repro", "repro-" + os.urandom(6).hex()
HOST = "127.0.0.1"
PORTS = {"a": 62646, "b": 62656, "c": 62666}
QUEUE = "inflow.q"
CONNECTED = "AMQ111003"  # a broker connection connected
PLUGIN_JAR = os.path.join(REPO_ROOT, "roles", "broker", "files", "plugins", "replication.jar")
PLUGIN = ('<broker-plugins><broker-plugin class-name="continuity.artemis.replication.RelayIdentities"/>'
          "</broker-plugins>")
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "mirror_relay_drop.json")


def mirrors(*targets: str) -> str:
    connections = "".join(
        f'<amqp-connection uri="tcp://{HOST}:{PORTS[target]}" name="to_{target}" user="{USER}" '
        f'password="{PASSWORD}" retry-interval="500" reconnect-attempts="-1">'
        '<mirror message-acknowledgements="false" queue-creation="true" queue-removal="false" address-filter="inflow."/>'
        "</amqp-connection>" for target in targets)
    return f"<broker-connections>{connections}</broker-connections>"


def one_run(directory: pathlib.Path, with_plugin: bool) -> dict:
    addresses = f'<address name="{QUEUE}"><anycast><queue name="{QUEUE}"/></anycast></address>'
    peers = {"a": ("b",), "b": ("a", "c"), "c": ("b",)}
    brokers = {name: RestartableBroker(directory, name, HOST, PORTS[name], USER, PASSWORD, addresses,
                                       mirrors(*targets) + (PLUGIN if with_plugin else ""),
                                       (PLUGIN_JAR,) if with_plugin else ())
               for name, targets in peers.items()}
    a, b, c = brokers["a"], brokers["b"], brokers["c"]
    try:
        for broker in (c, b, a):
            broker.start()
        amqp.wait_for(lambda: b.log_count(CONNECTED) >= 2 and a.log_count(CONNECTED) >= 1
                      and c.log_count(CONNECTED) >= 1, timeout=60, description="every mirror connection connected")
        a.produce(QUEUE, FIRST)
        amqp.wait_for(lambda: c.count(QUEUE) >= FIRST, timeout=60, description=f"the first {FIRST} relayed to c")

        c.stop()
        a.produce(QUEUE, LATER)
        amqp.wait_for(lambda: b.count(QUEUE) >= FIRST + LATER, timeout=60, description="the control's messages at b")
        c.start()
        control = settled_count(c, QUEUE) - FIRST

        c.stop()
        b.kill()
        b.start()
        a.produce(QUEUE, LATER)
        amqp.wait_for(lambda: b.count(QUEUE) >= FIRST + 2 * LATER, timeout=90,
                      description="the messages sent after b's restart at b")
        c.start()
        after_restart = settled_count(c, QUEUE) - FIRST - control
        return {"plugin": "RelayIdentities" if with_plugin else None, "sent_to_a": LATER,
                "relayed_to_c_b_running": control, "relayed_to_c_b_restarted": after_restart}
    finally:
        for broker in brokers.values():
            broker.stop()


def main() -> int:
    runs = []
    for with_plugin in (False, True):
        with tempfile.TemporaryDirectory(prefix="mirror-relay-drop-") as scratch:
            runs.append(one_run(pathlib.Path(scratch), with_plugin))
            print(json.dumps(runs[-1]), flush=True)
    alone, with_plugin = runs

    def verdict(run: dict) -> str:
        return (f"b relayed {run['relayed_to_c_b_running']} of {LATER} while running on and "
                f"{run['relayed_to_c_b_restarted']} of {LATER} after its restart cut off from c")

    result = {"artemis_version": artemis_version(), "runs": runs,
              "summary": f"Artemis alone: {verdict(alone)}; with RelayIdentities: {verdict(with_plugin)}"}
    write_result(RESULTS, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
