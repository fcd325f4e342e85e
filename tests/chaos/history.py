"""The history of a chaos run: one JSON object per line, written as things happen, read whole by the checker.

Every event has ``t`` (Unix seconds, the controller's clock) and ``kind``:

    schedule     seed, estate, duration_s                                the first line: how to replay the run
    send         client, group, id, outcome (accepted | rejected | uncertain), datacentre and broker (that
                 acknowledged it, or was sent it); a
                 message every datacentre consumes a copy of (messages_only) is one send per copy,
                 ``id@datacentre``, as are its deliveries
    delivery     client, group, datacentre, id                           a consumer accepted the message
    fault        name, phase (start | end), id, args                     e.g. partition, kill, stop, power_off
    operation    name, phase (start | end), id, args; at the end outcome (done | refused | failed | interrupted:
                 the run stopped its playbook part-way) and message; one that resumes an interrupted one says
                 args.resumes
    activity     group, mode, active                                     where the estate says the group is active
    brokers      datacentre, live, silent, brokers                       its brokers that answer as live, those that
                                                                         do not answer, and all of them
    backlog      datacentre, events                                      the active datacentre's replication backlog
                                                                         (mirror and bridge queues, all links)
    lock_lost    broker, lost_at, stopped_at                            a pair's broker stopped itself after it
                                                                         lost its lock (its log's times, Unix s)
    measurement  name, scope, value                                      what the product reported: the RPO/RTO
                                                                         job's figures for an abrupt failover's
                                                                         drill ledger (failover, its id), each
                                                                         broker's replication report (at the end)

What the design allows is carried by the events that allow it, never by the checker's mood: an abrupt failover
(operation ``failover`` with ``args.abrupt``) says how many messages it puts at risk (``at_risk`` at its end) and
from how long before it (``args.loss_window_s``), and which messages its target may deliver again: those consumed
since its source's replication last kept up (``args.replication_behind_since``) or, of a bridge group
(``args.bridge_groups``), since the last reconciliation began (``args.reconciled_at``); a fault or operation that
cuts consumers off their deliveries says how many of them may come again (``args.redeliveries``).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Iterable

KINDS = ("schedule", "send", "delivery", "fault", "operation", "activity", "brokers", "backlog", "lock_lost",
         "measurement")
PHASES = ("start", "end")
OUTCOMES = ("done", "refused", "failed", "interrupted")


class HistoryError(ValueError):
    """A line that is not an event of the history."""


def validate(event: dict, line: int | None = None) -> dict:
    """``event`` if it is one the checker can read, else HistoryError naming the line and what is wrong."""
    where = f"line {line}: " if line is not None else ""
    if not isinstance(event, dict):
        raise HistoryError(f"{where}not a JSON object")
    if event.get("kind") not in KINDS:
        raise HistoryError(f"{where}kind {event.get('kind')!r} is none of {', '.join(KINDS)}")
    if not isinstance(event.get("t"), (int, float)):
        raise HistoryError(f"{where}{event['kind']} without a time t")
    if event["kind"] in ("fault", "operation") and event.get("phase") not in PHASES:
        raise HistoryError(f"{where}{event['kind']} {event.get('name')!r} without a phase start or end")
    if event["kind"] == "operation" and event["phase"] == "end" and event.get("outcome") not in OUTCOMES:
        raise HistoryError(f"{where}operation {event.get('name')!r} ends without an outcome of {', '.join(OUTCOMES)}")
    if event["kind"] in ("send", "delivery") and not event.get("id"):
        raise HistoryError(f"{where}{event['kind']} without a message id")
    return event


def read(path: str) -> list[dict]:
    """The events of a history file, in time order (lines written by several threads may interleave)."""
    events = []
    with open(path) as handle:
        for number, text in enumerate(handle, start=1):
            if text.strip():
                try:
                    event = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise HistoryError(f"line {number}: not JSON ({exc})") from exc
                events.append(validate(event, number))
    return sorted(events, key=lambda event: event["t"])


class Writer:
    """Appends events to a history file from any thread, each line whole."""

    def __init__(self, path: str):
        self._handle = open(path, "a", encoding="utf-8")  # pylint: disable=consider-using-with
        self._lock = threading.Lock()

    def write(self, kind: str, t: float | None = None, **fields) -> dict:
        event = validate(dict(fields, kind=kind, t=time.time() if t is None else t))
        with self._lock:
            self._handle.write(json.dumps(event, sort_keys=True) + "\n")
            self._handle.flush()
        return event

    def write_all(self, events: Iterable[dict]) -> None:
        for event in events:
            self.write(**event)

    def close(self) -> None:
        self._handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
