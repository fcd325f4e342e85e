"""Drill ledgers in the telemetry store's format (spark/continuity_rpo/telemetry.py, kind "ledgers"), from the
test clients' own ledgers, so that the RPO/RTO job measures a drill exactly as the test counted it. The rows are
those the drill playbook writes (plugins/module_utils/drill.py)."""

from __future__ import annotations

import os

from ansible_collections.continuity.artemis.plugins.module_utils import drill as drill_ledger


def drill_rows(drill: str, producer, producer_datacentres: list[str], consumers: list[tuple[object, str]],
               fault_time: float, fault_datacentre: str) -> list[dict]:
    """``producer_datacentres`` names the datacentre of each of the producer's URLs (it connects to them in turn);
    ``consumers`` pairs each consumer with the datacentre it consumed from."""
    return [drill_ledger.fault_row(drill, fault_datacentre, fault_time)] + drill_ledger.ledger_rows(
        drill, producer.ledger(), producer_datacentres,
        [(consumer.ledger(), [datacentre]) for consumer, datacentre in consumers])


def write(telemetry_root: str, rows: list[dict]) -> None:
    directory = os.path.join(telemetry_root, "ledgers")
    os.makedirs(directory, exist_ok=True)
    drill_ledger.write_ledger(os.path.join(directory, f"{rows[0]['drill']}.jsonl"), rows)
