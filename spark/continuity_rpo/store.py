"""Appending rows to the telemetry store (the layout is described in telemetry.py).

A writer appends JSON lines to a hidden segment, ``<root>/<kind>/date=<UTC day>/.<writer>-<start ms>.jsonl``, and
publishes it (renames it without the dot) once it is ``segment_seconds`` old, at midnight UTC, and when the writer
stops. Spark's file sources skip names starting with a dot, so readers only ever see complete files: the batch job
reads each published row once, and the incremental job's streaming source, which reads a file only once, misses
nothing. A segment left hidden by a writer that was killed is published by the next writer of the same name
(one collector and one prober per host: the role runs each under a lock). Old days are expired by deleting
directories.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import socket


def _day(when: float) -> str:
    return datetime.datetime.fromtimestamp(when, datetime.timezone.utc).strftime("%Y-%m-%d")


def _publish(hidden: str) -> None:
    directory, name = os.path.split(hidden)
    os.replace(hidden, os.path.join(directory, name[1:]))


class Store:
    def __init__(self, root: str, writer: str, segment_seconds: float = 60.0):
        self.root = root
        self.writer = f"{writer}-{socket.gethostname()}"
        self.segment_seconds = segment_seconds
        self._segments: dict[str, tuple[str, float]] = {}  # kind -> (hidden path, start)
        self._recovered: set[str] = set()

    def append(self, kind: str, rows: list[dict], when: float) -> None:
        """Append ``rows`` (possibly none: a writer calls this on every round, so that a segment is published on
        time even when nothing new comes)."""
        if kind not in self._recovered:
            for left_over in glob.glob(os.path.join(self.root, kind, "date=*", f".{self.writer}-*.jsonl")):
                _publish(left_over)
            self._recovered.add(kind)
        segment = self._segments.get(kind)
        if segment and (when - segment[1] >= self.segment_seconds or _day(when) != _day(segment[1])):
            self._close(kind)
            segment = None
        if not rows:
            return
        if segment is None:
            directory = os.path.join(self.root, kind, f"date={_day(when)}")
            os.makedirs(directory, exist_ok=True)
            segment = (os.path.join(directory, f".{self.writer}-{int(when * 1000)}.jsonl"), when)
            self._segments[kind] = segment
        with open(segment[0], "a", encoding="utf-8") as handle:
            handle.writelines(json.dumps(row, sort_keys=True) + "\n" for row in rows)
            handle.flush()
            os.fsync(handle.fileno())

    def _close(self, kind: str) -> None:
        _publish(self._segments.pop(kind)[0])

    def close(self) -> None:
        """Publish every open segment."""
        for kind in list(self._segments):
            self._close(kind)
