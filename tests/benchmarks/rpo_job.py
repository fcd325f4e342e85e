"""Benchmark of the RPO/RTO job in Spark local mode on generated telemetry (make bench-rpo ROWS=1000000).

Writes ROWS rows of telemetry (a third probes, two thirds queue and link samples, as a collector sampling 2
datacentres every 5 s and a prober probing every second would), runs the job's command line over them and prints
the job's wall time and rows per second as JSON. Measured, never asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QUEUES = 50
T0 = 1_800_000_000.0


def _write(root: str, rows: int) -> None:
    probes_wanted, samples_wanted = rows // 3, rows - rows // 3
    os.makedirs(f"{root}/probes/date=bench")
    with open(f"{root}/probes/date=bench/part.jsonl", "w") as handle:
        for n in range(probes_wanted // 2):
            probe = f'"probe_id": "p{n}", "source_datacentre": "dc1", "target_datacentre": "dc2"'
            handle.write(f'{{{probe}, "event": "sent", "time": {T0 + n}}}\n')
            handle.write(f'{{{probe}, "event": "seen", "time": {T0 + n + 0.05 + (n % 97) / 100}}}\n')
    os.makedirs(f"{root}/queue_samples/date=bench")
    os.makedirs(f"{root}/link_samples/date=bench")
    per_sample = 2 * QUEUES + 2
    with open(f"{root}/queue_samples/date=bench/part.jsonl", "w") as queues, \
            open(f"{root}/link_samples/date=bench/part.jsonl", "w") as links:
        for step in range(samples_wanted // per_sample):
            now = T0 + 5 * step
            for dc, behind in (("dc1", 0), ("dc2", 3)):
                links.write(json.dumps({"time": now, "broker": f"{dc}-node1", "datacentre": dc, "link": f"x_{dc}",
                                        "target_datacentre": "dc2" if dc == "dc1" else "dc1", "connected": True,
                                        "backlog": step % 7}) + "\n")
                for q in range(QUEUES):
                    added = 50 * step - behind
                    queues.write(json.dumps({"time": now, "broker": f"{dc}-node1", "datacentre": dc,
                                             "queue": f"q{q}", "address": f"q{q}", "messages_added": added,
                                             "messages_acknowledged": max(added - 40, 0), "message_count": 40,
                                             "delivering_count": 2, "consumer_count": 1}) + "\n")


def main(rows: int) -> None:
    with tempfile.TemporaryDirectory() as work:
        started = time.monotonic()
        _write(f"{work}/telemetry", rows)
        generated = time.monotonic() - started
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(REPO_ROOT, "spark"),
                                                          os.path.join(REPO_ROOT, ".collections")]))
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "continuity_rpo.job", "--telemetry", f"{work}/telemetry", "--output",
                        f"{work}/history", "--textfile", f"{work}/out.prom", "--report", f"{work}/report.html"],
                       check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        took = time.monotonic() - started
    print(json.dumps({"rows": rows, "generate_s": round(generated, 1), "job_s": round(took, 1),
                      "rows_per_s": round(rows / took)}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
