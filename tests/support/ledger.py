"""Drill ledgers in the telemetry store's format (spark/continuity_rpo/telemetry.py, kind "ledgers"), from the
test clients' own ledgers, so that the RPO/RTO job measures a drill exactly as the test counted it."""

from __future__ import annotations

import json
import os


def drill_rows(drill: str, producer, producer_datacentres: list[str], consumers: list[tuple[object, str]],
               fault_time: float, fault_datacentre: str) -> list[dict]:
    """``producer_datacentres`` names the datacentre of each of the producer's URLs (it connects to them in turn);
    ``consumers`` pairs each consumer with the datacentre it consumed from."""
    rows = [{"drill": drill, "id": None, "datacentre": fault_datacentre, "event": "fault", "time": fault_time}]
    for record in producer.ledger():
        if record.outcome == "accepted":
            datacentre = producer_datacentres[(record.connection - 1) % len(producer_datacentres)]
            rows.append({"drill": drill, "id": record.id, "datacentre": datacentre, "event": "accepted",
                         "time": record.settled_at})
    for consumer, datacentre in consumers:
        for record in consumer.ledger():
            if record.accepted_at is not None:
                rows.append({"drill": drill, "id": record.id, "datacentre": datacentre, "event": "consumed",
                             "time": record.accepted_at})
    return rows


def write(telemetry_root: str, rows: list[dict]) -> None:
    directory = os.path.join(telemetry_root, "ledgers")
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{rows[0]['drill']}.jsonl"), "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
