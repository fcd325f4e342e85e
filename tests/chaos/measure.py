"""The product's measurement of a chaos run: the RPO/RTO job's collector samples the brokers all along (as the
rpo_job role deploys it), and at the end the job runs once per abrupt failover over that telemetry and a drill ledger
of the failover made from the history (what was accepted before the fault, and its deliveries until the failback
started: the ledger drill.yml would have written). What the job published goes back into the history, for the
checker's measurement_agrees; so does a job that failed."""

from __future__ import annotations

import os
import subprocess
import sys

from ansible_collections.continuity.artemis.plugins.module_utils import drill as drill_ledger
from chaos.checker import Run, abrupt_failovers
from support.measurement import published

COLLECTOR_INTERVAL_S = 5.0
JOB_TIMEOUT_S = 900
# What the job publishes of the latest drill in its ledgers, by the names the checker compares.
DRILL_METRICS = {"lost": "continuity_artemis_drill_lost_messages",
                 "duplicates": "continuity_artemis_drill_duplicate_messages",
                 "rpo_seconds": "continuity_artemis_drill_rpo_seconds",
                 "rto_seconds": "continuity_artemis_drill_rto_seconds",
                 "messages_at_risk": "continuity_artemis_drill_messages_at_risk_estimate"}
COUNTS = ("lost", "duplicates", "messages_at_risk")


def ledger_rows(run: Run, cut: dict) -> list[dict]:
    accepted, deliveries = run.failover_ledger(cut)
    rows = [drill_ledger.fault_row(cut["id"], cut["source"], cut["fault"])]
    for message_id, sent in accepted.items():
        rows.append({"drill": cut["id"], "id": message_id, "event": drill_ledger.ACCEPTED, "time": sent["t"],
                     "datacentre": sent["datacentre"]})
        rows += [{"drill": cut["id"], "id": message_id, "event": drill_ledger.CONSUMED, "time": event["t"],
                  "datacentre": event["datacentre"]} for event in deliveries[message_id]]
    return rows


def failovers(events: list[dict], telemetry: str, directory: str) -> list[dict]:
    """The measurement events of every abrupt failover in ``events``: the job over ``telemetry`` and the
    failover's ledger, its output under ``directory``/<failover id>/."""
    run = Run(events)
    measured = []
    for span in abrupt_failovers(run):
        cut = run.failover_cut(span)
        where = os.path.join(directory, cut["id"])
        os.makedirs(os.path.join(where, "ledgers"), exist_ok=True)
        drill_ledger.write_ledger(os.path.join(where, "ledgers", f"{cut['id']}.jsonl"), ledger_rows(run, cut))
        textfile = os.path.join(where, "continuity_artemis.prom")
        job = subprocess.run([sys.executable, "-m", "continuity_rpo.job", "--telemetry", telemetry, "--ledgers",
                              os.path.join(where, "ledgers"), "--output", os.path.join(where, "history"),
                              "--textfile", textfile], capture_output=True, text=True, timeout=JOB_TIMEOUT_S,
                             check=False)
        with open(os.path.join(where, "job.log"), "w") as log:
            log.write(job.stdout + job.stderr)
        if job.returncode != 0:
            value = {"error": f"the job exited {job.returncode}: {job.stderr.strip()[-500:]}"}
        else:
            metrics = published(textfile)
            value = {}
            for name, metric in DRILL_METRICS.items():
                figure = metrics.get((metric, (("drill", cut["id"]),)))
                value[name] = int(figure) if figure is not None and name in COUNTS else figure
        measured.append({"kind": "measurement", "name": "failover", "scope": cut["id"], "value": value})
    return measured
