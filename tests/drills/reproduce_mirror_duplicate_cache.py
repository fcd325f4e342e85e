"""Re-check an Artemis release for what 3 x 1 seed 2 of the chaos runs found (docs/chaos.md): a mirror target
delivers again messages it already had, when their source broker crashed before it heard they had arrived and its
other mirror connections to the same target brought more messages meanwhile than one connection's credits.

    make reproduce-mirror-duplicate-cache

Two plain brokers on the controller, A mirroring to B over two broker connections (as the collection's estates
do, one per address group): `l1` for the addresses under `a.`, through a Toxiproxy that holds B's answers back (its
settlements of what it received), and `l2` for those under `b.`, direct. A receives COUNT messages on `a.q`, which
reach B at once; then BURST messages on `b.q`; then A is killed (SIGKILL) and started again, and sends over `l1`
again what B never confirmed. What B's `a.q` holds then says whether B recognised the resent messages: COUNT, or
more (each resent message it did not recognise is there twice). Once with a small BURST (the control), once with a
BURST larger than the credits of a connection (1,000 by default). Writes tests/drills/results/mirror_duplicate_cache.json;
exits 0 either way (a measurement).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import urllib.request

from support import amqp_clients as amqp
from support.estate import REPO_ROOT
from support.plain_broker import RestartableBroker, settled_count
from support.reproduction import artemis_version, write_result

COUNT = 500
BURSTS = (100, 1500)      # below and above one connection's credits (Artemis's default amqpCredits, 1,000)
HOLD_BACK_MS = 60000      # how long B's answers on l1 are held back: longer than the test takes before the kill
USER, PASSWORD = "repro", "repro-" + os.urandom(6).hex()
HOST = "127.0.0.1"
PORT_A, PORT_B, PORT_PROXY, PORT_TOXIPROXY = 62616, 62626, 62700, 62474
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "mirror_duplicate_cache.json")
QUEUES = "".join(f'<address name="{name}"><anycast><queue name="{name}"/></anycast></address>'
                 for name in ("a.q", "a.warm", "b.q"))
MIRRORS = f"""<broker-connections>
  <amqp-connection uri="tcp://{HOST}:{PORT_PROXY}" name="l1" user="{USER}" password="{PASSWORD}" retry-interval="500">
    <mirror message-acknowledgements="true" queue-creation="true" queue-removal="false" address-filter="a."/>
  </amqp-connection>
  <amqp-connection uri="tcp://{HOST}:{PORT_B}" name="l2" user="{USER}" password="{PASSWORD}" retry-interval="500">
    <mirror message-acknowledgements="true" queue-creation="true" queue-removal="false" address-filter="b."/>
  </amqp-connection>
</broker-connections>"""


class Toxiproxy:
    def __init__(self, directory: pathlib.Path):
        binary = os.environ.get("TOXIPROXY_SERVER") or os.path.join(REPO_ROOT, ".tools", "bin", "toxiproxy-server")
        self.api = f"http://{HOST}:{PORT_TOXIPROXY}"
        with open(directory / "toxiproxy.log", "a") as log:
            self.process = subprocess.Popen([binary, "-host", HOST, "-port", str(PORT_TOXIPROXY)], stdout=log,
                                            stderr=subprocess.STDOUT)
        amqp.wait_for(self._answers, timeout=30, description="toxiproxy answers")

    def _answers(self) -> bool:
        try:
            return self.request("GET", "/version") is not None
        except OSError:
            return False

    def request(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.api + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.read()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def one_run(directory: pathlib.Path, burst: int) -> dict:
    proxy = Toxiproxy(directory)
    target = RestartableBroker(directory, "b", HOST, PORT_B, USER, PASSWORD, QUEUES)
    source = RestartableBroker(directory, "a", HOST, PORT_A, USER, PASSWORD, QUEUES, MIRRORS)
    try:
        proxy.request("POST", "/proxies", {"name": "l1", "listen": f"{HOST}:{PORT_PROXY}",
                                           "upstream": f"{HOST}:{PORT_B}"})
        target.start()
        source.start()
        amqp.wait_for(lambda: source.log.read_text().count("AMQ111003") >= 2, timeout=60,
                      description="both mirror connections of a connected")
        # One message through l1 before its answers are held back: its link is attached and has B's credits.
        source.produce("a.warm", 1)
        amqp.wait_for(lambda: target.count("a.warm") >= 1, timeout=60, description="l1 carrying messages")
        proxy.request("POST", "/proxies/l1/toxics", {"name": "hold", "type": "latency", "stream": "downstream",
                                                     "attributes": {"latency": HOLD_BACK_MS}})
        source.produce("a.q", COUNT)
        amqp.wait_for(lambda: target.count("a.q") >= COUNT, timeout=60, description="a.q's messages at b")
        source.produce("b.q", burst)
        amqp.wait_for(lambda: target.count("b.q") >= burst, timeout=120, description="b.q's messages at b")
        source.kill()
        # Toxiproxy's API hangs removing a latency toxic from a connection whose end stopped reading
        # (Shopify/toxiproxy#558): a Toxiproxy of its own, started again, without it.
        proxy.stop()
        proxy = Toxiproxy(directory)
        proxy.request("POST", "/proxies", {"name": "l1", "listen": f"{HOST}:{PORT_PROXY}",
                                           "upstream": f"{HOST}:{PORT_B}"})
        source.start()
        held = settled_count(target, "a.q")
        return {"burst": burst, "sent_to_a_q": COUNT, "a_q_at_b": held, "delivered_again": held - COUNT}
    finally:
        source.stop()
        target.stop()
        proxy.stop()


def main() -> int:
    runs = []
    for burst in BURSTS:
        with tempfile.TemporaryDirectory(prefix="mirror-dup-cache-") as scratch:
            runs.append(one_run(pathlib.Path(scratch), burst))
            print(json.dumps(runs[-1]), flush=True)
    result = {"artemis_version": artemis_version(), "credits": 1000, "runs": runs,
              "summary": "B recognised every resent message" if all(run["delivered_again"] == 0 for run in runs)
              else "B took again resent messages it already had: " + ", ".join(
                  f"{run['delivered_again']} after a burst of {run['burst']}" for run in runs)}
    write_result(RESULTS, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
