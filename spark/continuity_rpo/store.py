"""Appending rows to the telemetry store (the layout is described in telemetry.py).

Writers append JSON lines to ``<root>/<kind>/date=<UTC day>/<writer>.jsonl``: one file per writer and day, so
several collectors and probers never write to the same file, and old days can be expired by deleting directories.
"""

from __future__ import annotations

import datetime
import json
import os
import socket


class Store:
    def __init__(self, root: str, writer: str):
        self.root = root
        self.writer = f"{writer}-{socket.gethostname()}"

    def append(self, kind: str, rows: list[dict], when: float) -> None:
        if not rows:
            return
        day = datetime.datetime.fromtimestamp(when, datetime.timezone.utc).strftime("%Y-%m-%d")
        directory = os.path.join(self.root, kind, f"date={day}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, f"{self.writer}.jsonl"), "a", encoding="utf-8") as handle:
            handle.writelines(json.dumps(row, sort_keys=True) + "\n" for row in rows)
            handle.flush()
            os.fsync(handle.fileno())
