"""Benchmark of the RPO/RTO job in Spark local mode on generated telemetry (make bench-rpo ROWS=1000000).

Writes ROWS rows of telemetry (a third probes, two thirds queue and link samples, as a collector sampling 2
datacentres every 5 s and a prober probing every second would), runs the job's command line over them and prints
the job's wall time and rows per second as JSON; then the incremental mode: a first run that ingests everything,
and a run after 1% more rows arrived, following on from the others (it recomputes only the windows they touch).
The figures are also written to tests/benchmarks/results/rpo_job-<rows>.json, with the commit and the machine, to
be committed with the change they measure. Measured, never asserted.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QUEUES = 50
T0 = 1_700_000_000.0


def _write(root: str, rows: int, part: str = "part", t0: float = T0, queues: int = QUEUES) -> None:
    probes_wanted, samples_wanted = rows // 3, rows - rows // 3
    os.makedirs(f"{root}/probes/date=bench", exist_ok=True)
    with open(f"{root}/probes/date=bench/{part}.jsonl", "w") as handle:
        for n in range(probes_wanted // 2):
            probe = f'"probe_id": "{part}{n}", "source_datacentre": "dc1", "target_datacentre": "dc2"'
            handle.write(f'{{{probe}, "event": "sent", "time": {t0 + n}}}\n')
            handle.write(f'{{{probe}, "event": "seen", "time": {t0 + n + 0.05 + (n % 97) / 100}}}\n')
    os.makedirs(f"{root}/queue_samples/date=bench", exist_ok=True)
    os.makedirs(f"{root}/link_samples/date=bench", exist_ok=True)
    per_sample = 2 * queues + 2
    with open(f"{root}/queue_samples/date=bench/{part}.jsonl", "w") as queue_file, \
            open(f"{root}/link_samples/date=bench/{part}.jsonl", "w") as links:
        for step in range(samples_wanted // per_sample):
            now = t0 + 5 * step
            for dc, behind in (("dc1", 0), ("dc2", 3)):
                links.write(json.dumps({"time": now, "broker": f"{dc}-node1", "datacentre": dc, "link": f"x_{dc}",
                                        "target_datacentre": "dc2" if dc == "dc1" else "dc1", "connected": True,
                                        "backlog": step % 7}) + "\n")
                for q in range(queues):
                    added = 50 * step - behind
                    queue_file.write(json.dumps({"time": now, "broker": f"{dc}-node1", "datacentre": dc,
                                                 "queue": f"q{q}", "address": f"q{q}", "messages_added": added,
                                                 "messages_acknowledged": max(added - 40, 0), "message_count": 40,
                                                 "delivering_count": 2, "consumer_count": 1}) + "\n")


def _end(rows: int, t0: float = T0, queues: int = QUEUES) -> float:
    """Where the telemetry _write(rows) writes ends: the later of the probes and the samples."""
    return t0 + max((rows // 3) // 2, 5 * ((rows - rows // 3) // (2 * queues + 2)))


def _job_seconds(work: str, *arguments: str) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "continuity_rpo.job", "--telemetry", f"{work}/telemetry", "--textfile",
                    f"{work}/out.prom", "--report", f"{work}/report.html", *arguments],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def measure(rows: int) -> dict:
    """The job's figures on ``rows`` generated rows (also make bench's B6)."""
    with tempfile.TemporaryDirectory() as work:
        started = time.monotonic()
        _write(f"{work}/telemetry", rows)
        generated = time.monotonic() - started
        batch = _job_seconds(work, "--output", f"{work}/history")
        first = _job_seconds(work, "--output", f"{work}/incremental", "--incremental")
        _write(f"{work}/telemetry", rows // 100, part="more", t0=_end(rows))  # the next rows, as a collector would
        more = _job_seconds(work, "--output", f"{work}/incremental", "--incremental")
    figures = {"rows": rows, "generate_s": round(generated, 1), "job_s": round(batch, 1),
               "rows_per_s": round(rows / batch), "incremental_first_run_s": round(first, 1),
               "incremental_after_1pct_more_s": round(more, 1)}
    return figures


def main(rows: int) -> None:
    figures = measure(rows)
    print(json.dumps(figures))
    _record(figures)


def _record(figures: dict) -> None:
    commit = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    machine = {"cpus": os.cpu_count(), "memory_gib": round(memory / 2 ** 30)}
    results = os.path.join(REPO_ROOT, "tests", "benchmarks", "results")
    os.makedirs(results, exist_ok=True)
    with open(os.path.join(results, f"rpo_job-{figures['rows']}.json"), "w") as handle:
        json.dump(dict(figures, commit=commit, machine=machine,
                       measured_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")),
                  handle, indent=2)
        handle.write("\n")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
