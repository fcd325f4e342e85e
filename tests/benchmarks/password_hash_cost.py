"""What the password hashes' PBKDF2 iterations cost each login (make bench-password-hash).

On the two-datacentre test bed (brought up if it is not, and taken down again then), site.yml with
broker_user_hash_iterations at each of ITERATIONS, then at dc1's broker: management requests (the management API
logs in on every request; Artemis caches no HTTP login) as the administrator and as the monitoring user, and AMQP
connections that each log in and send one message (Artemis caches a client's login for its security invalidation
interval). Medians and maxima in milliseconds, written to tests/benchmarks/results/password_hash_cost.json with the
commit and the machine, to be committed with the change they measure. Measured, never asserted. The inventory's own
setting is applied again at the end.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests"))

from support.estate import TESTBED, Estate, run_playbook  # noqa: E402
from support import amqp_clients as amqp  # noqa: E402

ITERATIONS = (1024, 10000, 100000)
REQUESTS = 40
SETTLE_S = 12  # the users file is reloaded by the broker every few seconds


def _milliseconds(action, count=REQUESTS):
    took = []
    for _request in range(count):
        started = time.perf_counter()
        action()
        took.append((time.perf_counter() - started) * 1000)
    return {"median_ms": round(statistics.median(took), 1), "max_ms": round(max(took), 1)}


def _measure(estate):
    dc1 = estate.dc("dc1")
    admin, monitor = dc1.management(), dc1.management(dc1.monitor_user, dc1.monitor_password)
    queue = f"bench.login.{uuid.uuid4().hex[:6]}"
    figures = {"management_admin": _milliseconds(admin.status),
               "management_monitor": _milliseconds(monitor.status),
               "amqp_connect_and_send": _milliseconds(lambda: amqp.send(dc1.amqp_url, dc1.user, dc1.password,
                                                                        queue, 1, ca_path=dc1.ca_cert))}
    amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, REQUESTS, ca_path=dc1.ca_cert)
    return figures


def main() -> int:
    brought_up = subprocess.run([TESTBED, "status", "--json"], check=True, capture_output=True,
                                text=True).stdout.strip() == "[]"
    subprocess.run([TESTBED, "up"], check=True, capture_output=True, text=True)
    results = []
    try:
        for iterations in ITERATIONS:
            converged = run_playbook("site.yml", extra_args=["-e", f"broker_user_hash_iterations={iterations}"])
            if converged.rc != 0:
                print(converged.output[-4000:], file=sys.stderr)
                return 1
            time.sleep(SETTLE_S)
            results.append(dict(iterations=iterations, **_measure(Estate.from_testbed())))
            print(json.dumps(results[-1]), flush=True)
    finally:
        run_playbook("site.yml")
        if brought_up:
            subprocess.run([TESTBED, "down"], check=False, capture_output=True, text=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, check=True,
                            text=True).stdout.strip()
    record = {"commit": commit, "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": {"cpus": os.cpu_count(), "system": platform.platform()}, "requests": REQUESTS,
              "results": results}
    path = os.path.join(REPO_ROOT, "tests", "benchmarks", "results", "password_hash_cost.json")
    with open(path, "w") as handle:
        json.dump(record, handle, indent=2)
        handle.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
