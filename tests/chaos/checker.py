"""Decides, from a chaos run's history alone (history.py), whether the estate kept its promises.

    cd tests && python -m chaos.checker HISTORY.jsonl [--json]

One verdict per invariant, each with what it counted, the items that break it, the minimal excerpt of the schedule
around them (the faults and operations in progress or within EXCERPT_SECONDS) and how to replay the run. Exit status
1 when an invariant does not hold, 2 when the history cannot be read.

    no_loss                 every message accepted by the broker is delivered to a consumer by the end; a message
                            accepted within an abrupt failover's loss window may be missing only while no failback
                            followed it, and no more of them than the failover said were at risk; a message the
                            broker of a stop fault longer than its pair's lock session (args.lock_session_s)
                            acknowledged between resuming and stopping itself for a lock it found lost within
                            LOCK_NOTICE_SECONDS of resuming (lock_lost) is counted apart, an Artemis defect
                            (docs/upstream/stalled-primary-acks-without-lock.md); so is a copy for its
                            datacentre another datacentre accepted from the fault's start until that stop
    no_duplicates           no message is delivered twice, except a redelivery while a fault or operation that cuts
                            consumers off (args.redeliveries) is in progress or up to REDELIVERY_GRACE_SECONDS after,
                            no more than it allows; and after an abrupt failover, until the failback starts, a
                            message first delivered after its source's replication last kept up (a mirror group;
                            args.replication_behind_since, less IN_STEP_MARGIN_SECONDS) or after the last
                            reconciliation began (a bridge group, args.reconciled_at)
    single_active           a group of one active datacentre (any mode but active_active) is never active at two
    active_somewhere        ... nor active nowhere for longer than DARK_TOLERANCE_SECONDS outside an operation
    single_live_broker      a datacentre never has two live brokers at once (an HA pair's split brain), except a
                            broker of a stop fault as no_loss counts apart, from resuming until it stopped itself for
                            its lost lock (the same Artemis defect), beside the peer that took over: counted apart
    pair_takes_over         a pair that could have a live broker (a backup in sync answers, or both brokers answer)
                            is never without one for longer than TAKEOVER_BOUND_SECONDS outside an operation
    brokers_come_back       a broker does not answer for longer than COME_BACK_BOUND_SECONDS at once beyond what
                            took it down: a fault on it, an operation that restarts brokers (RESTARTING_OPERATIONS)
                            or a failover of its datacentre, such an operation interrupted until its last rerun ends,
                            an abrupt failover of its datacentre until the failback after it ends, a lock it found
                            lost until the supervisor started it again
    operations_end_cleanly  every operation ends done or refused, a refusal with a message and the groups active
                            where they were (judged where that was known when it began); one the run interrupted
                            is resumed by the next, which ends done
    measurement_agrees      per abrupt failover, the RPO/RTO job's published loss, duplicates, RPO and RTO over a
                            drill ledger of it are what the history says of the same ledger
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

from chaos import history, schedule

REDELIVERY_GRACE_SECONDS = 120.0
# A broker resumed after its lock session expired learns it at once from the lock manager (a second in 2 x 2 seed
# 10's third run): a lock lost later is not that stop's.
LOCK_NOTICE_SECONDS = 10.0
# How the collection's playbooks begin a refusal ("Refused, nothing changed: ...", "Refused, no broker restarted: ..."),
# and a swapover that gave the groups back to its source when a phase failed ("Swapover aborted, dc1 is active again
# and nothing was lost: ..."): both are judged as refusals, which must leave the groups where they were.
REFUSALS = ("Refused,", "Swapover aborted,")

# An acknowledgement the source sent just before its replication was seen keeping up may still have been on its way.
IN_STEP_MARGIN_SECONDS = 10.0
DARK_TOLERANCE_SECONDS = 10.0
# A broker that starts while it hears no other datacentre holds its groups (replication_activation_unheard: hold):
# dark by design from its start (up to the activation check's wait, 5 s, with room, before the isolation began) until
# another datacentre answers, which it asks every recheck (10 s) after its check's wait, with room for the sampling.
HOLD_CHECK_SECONDS = 10.0
HOLD_RELEASE_SECONDS = 25.0
# What keeps a broker's activation check from hearing another datacentre: a partition between them, no live broker
# there, or a WAN too slow for the check's wait (timeout-ms, 5 s): it reaches a broker in about six round trips (TCP,
# TLS, the Core session, the topology, a temporary queue, the query), so a one-way delay plus jitter from 5 / 6 / 2 s on.
ACTIVATION_CHECK_WAIT_SECONDS = 5.0
ACTIVATION_CHECK_ROUND_TRIPS = 6
WAN_TOO_SLOW_FOR_THE_CHECK_MS = ACTIVATION_CHECK_WAIT_SECONDS * 1000 / ACTIVATION_CHECK_ROUND_TRIPS / 2
# A pair's failure detection (replication_ha_failure_detection_ms, 10 s) and its lock's takeover, with room.
TAKEOVER_BOUND_SECONDS = 30.0
# A broker's start after what took it down ended (the supervisor's or systemd's 5 s, a start under load, a backup's
# first answer), with room: under the chaos load on the test bed's two cores a start took 98 s from the supervisor's
# start to the first answer (2 x 2 seed 9's fifth run, dc1-node2: 27 s before the JVM's first line).
COME_BACK_BOUND_SECONDS = 120.0
RESTARTING_OPERATIONS = ("rolling_change", "upgrade")
EXCERPT_SECONDS = 60.0
MAX_ITEMS = 20


def says_refused(message: str | None) -> bool:
    """Whether a playbook's failure message (as the runner quotes it) is one of the collection's refusals."""
    return (message or "").lstrip("'\"").startswith(REFUSALS)


def _spans(events: list[dict], kind: str) -> dict[str, dict]:
    """Per id, the start and end events of each fault or operation (end None while it never ended)."""
    spans = {}
    for event in events:
        if event["kind"] != kind:
            continue
        span = spans.setdefault(event["id"], {"id": event["id"], "name": event.get("name"), "start": None,
                                              "end": None})
        span[event["phase"]] = event
    return spans


def _span_times(span: dict, last: float) -> tuple[float, float]:
    start = span["start"]["t"] if span["start"] else span["end"]["t"]
    return start, span["end"]["t"] if span["end"] else last


class Run:
    """A history read once, with what the invariants share."""

    def __init__(self, events: list[dict]):
        self.events = events
        self.last = events[-1]["t"] if events else 0.0
        schedule = next((event for event in events if event["kind"] == "schedule"), {})
        self.replay = ("make chaos " + " ".join(f"{name.upper()}={schedule[key]}" for name, key in (
            ("seed", "seed"), ("estate", "estate"), ("duration", "duration_s")) if key in schedule)).strip()
        if str(schedule.get("name", "")).startswith("regression-"):  # a fixed schedule of tests/drills/test_chaos.py
            self.replay = f"pytest tests/drills/test_chaos.py -k {schedule['name'][len('regression-'):]}"
        self.faults = _spans(events, "fault")
        self.locks_lost = [event for event in events if event["kind"] == "lock_lost"]
        self.operations = _spans(events, "operation")
        self.accepted = {event["id"]: event for event in events
                         if event["kind"] == "send" and event.get("outcome") == "accepted"}
        self.deliveries = defaultdict(list)
        # Per group of a single active datacentre, its activity samples in time order: `samples` all of them,
        # `activity` the known ones.
        self.samples, self.activity = defaultdict(list), defaultdict(list)
        for event in events:
            if event["kind"] == "delivery":
                self.deliveries[event["id"]].append(event)
            elif event["kind"] == "activity" and event.get("mode") != "active_active":
                self.samples[event["group"]].append(event)
                if event.get("active") is not None:
                    self.activity[event["group"]].append(event)

    def excerpt(self, times: list[float]) -> list[dict]:
        """The start and end of every fault and operation in progress at one of ``times`` or within
        EXCERPT_SECONDS of it, in time order: the part of the schedule a replay must look at."""
        chosen = []
        for span in list(self.faults.values()) + list(self.operations.values()):
            start, end = _span_times(span, self.last)
            if any(start - EXCERPT_SECONDS <= t <= end + EXCERPT_SECONDS for t in times):
                chosen += [event for event in (span["start"], span["end"]) if event]
        return sorted(chosen, key=lambda event: event["t"])

    def lost(self) -> set[str]:
        return set(self.accepted) - set(self.deliveries)

    def failover_cut(self, span: dict) -> dict:
        """An abrupt failover as a drill ledger of it sees it: its source, the fault (its start), and the end of
        what the ledger holds (the start of the first failback after it, else the history's end)."""
        fault = span["start"]["t"]
        failbacks = [other["start"]["t"] for other in self.operations.values()
                     if other["name"] == "failback" and other["start"] and other["start"]["t"] > fault]
        return {"id": span["id"], "source": span["start"]["args"].get("failover_source"), "fault": fault,
                "until": min(failbacks, default=self.last)}

    def failover_ledger(self, cut: dict) -> tuple[dict[str, dict], dict[str, list[dict]]]:
        """The messages accepted before the fault ({id: send}) and their deliveries until the cut's end."""
        accepted = {message_id: sent for message_id, sent in self.accepted.items() if sent["t"] < cut["fault"]}
        deliveries = {message_id: [event for event in self.deliveries.get(message_id, []) if event["t"] < cut["until"]]
                      for message_id in accepted}
        return accepted, deliveries

    def failover_outcome(self, cut: dict) -> dict:
        """What the history says of a failover's ledger: lost (accepted before the fault, not delivered by the
        failback), deliveries beyond the first, the RPO in time (the fault minus the oldest lost acceptance) and the
        RTO (the fault to the first delivery at another datacentre)."""
        accepted, deliveries = self.failover_ledger(cut)
        lost = [sent["t"] for message_id, sent in accepted.items() if not deliveries[message_id]]
        recovered = [event["t"] for events in deliveries.values() for event in events
                     if event["t"] > cut["fault"] and event.get("datacentre") != cut["source"]]
        return {"lost": len(lost), "duplicates": sum(max(len(events) - 1, 0) for events in deliveries.values()),
                "rpo_seconds": cut["fault"] - min(lost) if lost else 0.0,
                "rto_seconds": min(recovered) - cut["fault"] if recovered else None}


def _verdict(run: Run, name: str, broken: list[dict], counted: dict) -> dict:
    return {"invariant": name, "holds": not broken, "counted": counted, "broken": broken[:MAX_ITEMS],
            "broken_count": len(broken), "excerpt": run.excerpt([item["t"] for item in broken[:3]]) if broken else [],
            "replay": run.replay if broken else ""}


def abrupt_failovers(run: Run) -> list[dict]:
    return [span for span in run.operations.values()
            if span["name"] == "failover" and span["start"] and span["start"].get("args", {}).get("abrupt")]


def _copy_for(sent: dict) -> str | None:
    """The datacentre a messages_only copy is for (history.py: ``id@datacentre``), None for any other message."""
    return sent["id"].rpartition("@")[2] or None


def _stalled_windows(run: Run) -> list[tuple[dict, float, float]]:
    """Each stop fault whose broker, stopped longer than its pair's lock session, found its lock lost within
    LOCK_NOTICE_SECONDS of resuming and stopped itself later (lock_lost): the fault, when it resumed and when it
    stopped. Until that stop the broker goes on as live (an Artemis defect: its acknowledgements are lost with it)."""
    windows = []
    for span in run.faults.values():
        if span["name"] != "stop" or not span["start"] or not span["end"]:
            continue
        args = span["start"].get("args", {})
        session, resumed = args.get("lock_session_s"), span["end"]["t"]
        if session is None or resumed - span["start"]["t"] <= session:
            continue
        stopped = next((event["stopped_at"] for event in run.locks_lost if event["broker"] == args["broker"]
                        and resumed <= (event.get("lost_at") or 0) <= resumed + LOCK_NOTICE_SECONDS
                        and event.get("stopped_at") is not None), None)
        if stopped is not None:
            windows.append((span, resumed, stopped))
    return windows


def _stalled_past_the_lock(run: Run, sent: dict) -> dict | None:
    """The stop fault whose broker, stopped longer than its pair's lock session, acknowledged ``sent`` after it
    resumed and before it stopped itself for the lock it found lost on resuming: a message its clients sent it, or
    a copy for its datacentre that another datacentre's broker accepted from the fault's start on and mirrored to
    it (the mirror sends what it held for the stalled broker when it resumes)."""
    for span, resumed, stopped in _stalled_windows(run):
        args = span["start"]["args"]
        if sent.get("broker") == args["broker"]:
            since = resumed
        elif _copy_for(sent) == args.get("datacentre") != sent.get("datacentre"):
            since = span["start"]["t"]
        else:
            continue
        if since <= sent["t"] <= stopped:
            return span
    return None


def no_loss(run: Run) -> dict:
    failbacks = [span["end"]["t"] for span in run.operations.values()
                 if span["name"] == "failback" and span["end"] and span["end"]["outcome"] == "done"]
    within, stalled, broken = defaultdict(int), defaultdict(int), []
    for message_id in sorted(run.lost(), key=lambda found: run.accepted[found]["t"]):
        sent = run.accepted[message_id]
        stop = _stalled_past_the_lock(run, sent)
        if stop is not None:
            stalled[stop["id"]] += 1
            continue
        allowing = None
        for failover in abrupt_failovers(run):
            started = failover["start"]["t"]
            window = float(failover["start"]["args"].get("loss_window_s", 0))
            recovered_by = min([t for t in failbacks if t > started], default=None)
            if started - window <= sent["t"] <= started and recovered_by is None:
                allowing = failover
                break
        if allowing is None:
            broken.append({"t": sent["t"], "id": message_id, "group": sent.get("group"),
                           "why": "accepted, never delivered"})
        else:
            within[allowing["id"]] += 1
    for failover_id, count in within.items():
        end = run.operations[failover_id]["end"]
        at_risk = (end or {}).get("at_risk", 0)
        if count > at_risk:
            broken.append({"t": run.operations[failover_id]["start"]["t"], "id": failover_id,
                           "why": f"{count} messages lost at this abrupt failover, which said {at_risk} were at risk"})
    return _verdict(run, "no_loss", broken, {"accepted": len(run.accepted), "lost": len(run.lost()),
                                             "lost_within_failover_bounds": dict(within),
                                             "lost_to_stalled_primaries": dict(stalled)})


def _failover_redelivery(run: Run, first: dict, again: dict) -> dict | None:
    """The abrupt failover that allows ``again``, a second delivery of the message ``first`` delivered, by design."""
    for span in abrupt_failovers(run):
        args, cut = span["start"]["args"], run.failover_cut(span)
        if not cut["fault"] < again["t"] <= cut["until"] + REDELIVERY_GRACE_SECONDS:
            continue
        if first.get("group") in args.get("bridge_groups", []):
            since = args.get("reconciled_at")
        else:
            since = args.get("replication_behind_since")
            since = None if since is None else since - IN_STEP_MARGIN_SECONDS
        if since is not None and since <= first["t"] <= cut["fault"]:
            return span
    return None


def no_duplicates(run: Run) -> dict:
    allowances = []
    for span in list(run.faults.values()) + list(run.operations.values()):
        bound = (span["start"] or span["end"]).get("args", {}).get("redeliveries")
        if bound:
            start, end = _span_times(span, run.last)
            allowances.append({"id": span["id"], "name": span["name"], "from": start,
                               "to": end + REDELIVERY_GRACE_SECONDS, "left": int(bound)})
    for span in run.operations.values():
        # The events of the mirror connections a site.yml run kept until their queues are empty reach their datacentre
        # whenever it answers, which relays them to the others: a third datacentre may take them again.
        retired = (span["end"] or {}).get("retired_backlog")
        if retired:
            allowances.append({"id": span["id"], "name": f"relayed drain of {span['name']}",
                               "from": _span_times(span, run.last)[0], "to": run.last + REDELIVERY_GRACE_SECONDS,
                               "left": int(retired)})
    for span in run.operations.values():
        # A site.yml run that moves the star of mirror connections: until the last broker restarted, two brokers
        # relay the same events to a datacentre, and Artemis's mirror recognises a copy that comes twice only within
        # a connection's credits. At most once more each copy of the groups it moved accepted meanwhile.
        move = ((span["start"] or {}).get("args") or {}).get("star_move")
        if move:
            start, end = _span_times(span, run.last)
            groups = set(move["groups"])
            copies = sum(1 for send in run.accepted.values()
                         if send.get("group") in groups and start <= send["t"] <= end)
            allowances.append({"id": span["id"], "name": f"star move of {span['name']}", "from": start,
                               "to": end + REDELIVERY_GRACE_SECONDS, "left": copies, "groups": groups})
    # A cause named for the delivery's group is charged before one that covers every group, which the other groups'
    # deliveries may need.
    allowances.sort(key=lambda entry: "groups" not in entry)
    allowed, broken = defaultdict(int), []
    extra = sorted(((deliveries[0], delivery) for deliveries in (
        sorted(found, key=lambda event: event["t"]) for found in run.deliveries.values()) for delivery in deliveries[1:]),
        key=lambda pair: pair[1]["t"])
    for first, delivery in extra:
        failover = _failover_redelivery(run, first, delivery)
        if failover is not None:
            allowed[f"failover {failover['id']} (consumed while replication was behind)"] += 1
            continue
        allowance = next((entry for entry in allowances
                          if entry["from"] <= delivery["t"] <= entry["to"] and entry["left"] > 0
                          and delivery.get("group") in entry.get("groups", (delivery.get("group"),))), None)
        if allowance is None:
            broken.append({"t": delivery["t"], "id": delivery["id"], "group": delivery.get("group"),
                           "datacentre": delivery.get("datacentre"),
                           "why": f"delivered {len(run.deliveries[delivery['id']])} times"})
        else:
            allowance["left"] -= 1
            allowed[f"{allowance['name']} {allowance['id']}"] += 1
    return _verdict(run, "no_duplicates", broken, {"delivered": len(run.deliveries), "duplicates": len(extra),
                                                   "allowed_redeliveries": dict(allowed)})


def single_active(run: Run) -> dict:
    broken = [{"t": sample["t"], "group": group, "active": sorted(sample["active"]),
               "why": f"active at {', '.join(sorted(sample['active']))} at once"}
              for group, samples in run.activity.items() for sample in samples if len(set(sample["active"])) > 1]
    return _verdict(run, "single_active", broken, {"samples": sum(len(s) for s in run.activity.values())})


def _intersect(first: list[tuple[float, float]], second: list[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(max(a, c), min(b, d)) for a, b in first for c, d in second if max(a, c) < min(b, d)]


def _covered(start: float, end: float, spans: list[tuple[float, float]]) -> float:
    """Seconds of [start, end] inside the union of ``spans``."""
    covered, reached = 0.0, start
    for span_start, span_end in sorted(spans):
        span_start, span_end = max(span_start, reached), min(span_end, end)
        if span_start < span_end:
            covered += span_end - span_start
            reached = span_end
    return covered


def _longest_uncovered(start: float, end: float, spans: list[tuple[float, float]]) -> float:
    """The longest stretch of [start, end] outside every one of ``spans``."""
    longest, reached = 0.0, start
    for span_start, span_end in sorted(spans):
        if span_end <= reached:
            continue
        if span_start >= end:
            break
        longest = max(longest, span_start - reached)
        reached = span_end
    return max(longest, end - reached)


def _union(spans: list[tuple[float, float]], gap: float = 0.0) -> list[tuple[float, float]]:
    """``spans`` merged where they overlap or lie less than ``gap`` apart."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and (start <= merged[-1][1] or start - merged[-1][1] < gap):
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _without_live_broker(run: Run, datacentre: str) -> list[tuple[float, float]]:
    """The times ``datacentre`` had no broker that answered as live (from the samples)."""
    spans, since = [], None
    for sample in (event for event in run.events if event["kind"] == "brokers" and event["datacentre"] == datacentre):
        if not sample.get("live") and since is None:
            since = sample["t"]
        elif sample.get("live") and since is not None:
            spans.append((since, sample["t"]))
            since = None
    return spans + ([(since, run.last)] if since is not None else [])


def _unheard(run: Run, datacentre: str, other: str) -> list[tuple[float, float]]:
    """The times an activation check at ``datacentre`` could not hear ``other``: a partition between them, a WAN
    between them too slow for the check, or no live broker at ``other``."""
    spans = []
    for span in run.faults.values():
        args = (span["start"] or span["end"]).get("args", {})
        if set(args.get("between", [])) != {datacentre, other}:
            continue
        too_slow = args.get("delay_ms", 0) + args.get("jitter_ms", 0) >= WAN_TOO_SLOW_FOR_THE_CHECK_MS
        if span["name"] == "partition" or span["name"] == "wan_degraded" and too_slow:
            spans.append(_span_times(span, run.last))
    return _union(spans + _without_live_broker(run, other))


def isolations(run: Run) -> dict[str, list[tuple[float, float]]]:
    """Per datacentre, the times its activation checks could hear no other datacentre (_unheard from each at once),
    stretches less than a re-check and its wait apart taken as one: a re-check can miss the window between them (2 x 2
    seed 6 at 62151ce: dc2 came back cold over a 400 ms WAN, then a partition, then dc1 without a live broker)."""
    datacentres = sorted({event["datacentre"] for event in run.events if event["kind"] == "brokers"})
    cut_off = {}
    for datacentre in datacentres:
        spans = None
        for other in datacentres:
            if other != datacentre:
                unheard = _unheard(run, datacentre, other)
                spans = unheard if spans is None else _intersect(spans, unheard)
        cut_off[datacentre] = _union(spans or [], gap=HOLD_CHECK_SECONDS + ACTIVATION_CHECK_WAIT_SECONDS)
    return cut_off


def holds(run: Run) -> list[dict]:
    """The holds the design allows: a broker of a datacentre started cold (became live, not as the backup in sync
    taking over from its live peer) while, or just before, its checks could hear no other datacentre (isolations), so
    it holds its groups until one answers and it asks again."""
    found = []
    for datacentre, spans in isolations(run).items():
        previous, synced = None, set()  # a backup seen in sync, not silent since: a takeover if it becomes live
        for sample in (event for event in run.events if event["kind"] == "brokers" and event["datacentre"] == datacentre):
            live = sample.get("live") or []
            # Live at the first sample is not a start seen.
            started = [name for name in live if previous is not None and name not in previous and name not in synced]
            synced = (synced | set(sample.get("in_sync") or [])) - set(sample.get("silent") or []) - set(live)
            previous = live
            for span_start, span_end in spans:
                if started and span_start - HOLD_CHECK_SECONDS <= sample["t"] <= span_end:
                    found.append({"datacentre": datacentre, "broker": started[0], "from": sample["t"],
                                  "to": span_end + HOLD_RELEASE_SECONDS})
    return found


def active_somewhere(run: Run) -> dict:
    """A group is dark (active nowhere) only while an operation or a hold allows it, or for a short while."""
    operations = [_span_times(span, run.last) for span in run.operations.values()]
    held = holds(run)
    allowed = operations + [(hold["from"], hold["to"]) for hold in held]
    broken, dark_seconds, excused_by_holds = [], 0.0, 0.0
    for group, samples in run.activity.items():
        started = None
        for sample in samples + [None]:
            dark = sample is not None and not sample["active"]
            if dark and started is None:
                started = sample["t"]
            elif not dark and started is not None:
                ended = sample["t"] if sample else run.last
                dark_seconds += ended - started
                covered = _covered(started, ended, allowed)
                uncovered = (ended - started) - covered
                excused_by_holds += covered - _covered(started, ended, operations)
                if uncovered > DARK_TOLERANCE_SECONDS:
                    broken.append({"t": started, "group": group, "why": f"active nowhere for "
                                   f"{ended - started:.1f} s, {uncovered:.1f} s of it outside any operation or hold"})
                started = None
    counted = {"dark_seconds": round(dark_seconds, 1)}
    if held:
        counted.update(holds=[{key: (round(value, 1) if isinstance(value, float) else value)
                               for key, value in hold.items()} for hold in held],
                       dark_seconds_only_a_hold_allowed=round(excused_by_holds, 1))
    return _verdict(run, "active_somewhere", broken, counted)


def single_live_broker(run: Run) -> dict:
    samples = [event for event in run.events if event["kind"] == "brokers"]
    windows = _stalled_windows(run)
    broken, beside_stalled = [], defaultdict(int)
    for sample in samples:
        live = sample.get("live") or []
        if len(live) < 2:
            continue
        stalled = [span["id"] for span, resumed, stopped in windows
                   if span["start"]["args"]["broker"] in live and resumed <= sample["t"] <= stopped]
        if stalled and len(live) - len(stalled) <= 1:
            beside_stalled[stalled[0]] += 1
            continue
        broken.append({"t": sample["t"], "datacentre": sample.get("datacentre"), "live": live,
                       "why": f"{' and '.join(live)} live at once"})
    return _verdict(run, "single_live_broker", broken, {"samples": len(samples),
                                                        "beside_stalled_primaries": dict(beside_stalled)})


def pair_takes_over(run: Run) -> dict:
    operations = [_span_times(span, run.last) for span in run.operations.values()]
    stretches, broken, longest = defaultdict(list), [], 0.0
    for sample in run.events:
        if sample["kind"] == "brokers" and len(sample.get("brokers") or []) > 1:
            stretches[sample["datacentre"]].append(sample)
    for datacentre, samples in stretches.items():
        started = None
        for sample in samples + [None]:
            # No live broker while the pair could have one: a backup answers in sync with the live broker it lost,
            # or every broker of the pair answers (one of them holds the newest journal). A backup still copying
            # its journal while the other does not answer waits for a good reason: it would serve a stale journal.
            # Histories written before backups' sync was sampled count every broker that answers.
            waiting = sample is not None and not sample["live"] and (
                bool(sample["in_sync"]) or not sample["silent"] if "in_sync" in sample
                else len(sample["silent"]) < len(sample["brokers"]))
            if waiting and started is None:
                started = sample["t"]
            elif not waiting and started is not None:
                ended = sample["t"] if sample else run.last
                longest = max(longest, ended - started)
                covered = any(start <= started and ended <= end for start, end in operations)
                if not covered and ended - started > TAKEOVER_BOUND_SECONDS:
                    broken.append({"t": started, "datacentre": datacentre,
                                   "why": f"no live broker for {ended - started:.1f} s while one of the pair answered"})
                started = None
    return _verdict(run, "pair_takes_over", broken, {"longest_s": round(longest, 1)})


def _takes_down(span: dict, datacentre: str) -> bool:
    """Whether an operation stops brokers of ``datacentre``: a restart-level change or an upgrade restarts every
    broker in turn, a failover powers its source's hosts off (and on again when it does not end done). A swapover,
    a reconcile or a drill restarts none."""
    args = (span["start"] or span["end"]).get("args", {})
    return span["name"] in RESTARTING_OPERATIONS or (
        span["name"] == "failover" and args.get("failover_source") == datacentre)


def _taken_down(run: Run, broker: str, datacentre: str) -> list[tuple[float, float]]:
    """The times something the run did may keep ``broker`` from answering (see brokers_come_back)."""
    operations = [span for span in run.operations.values() if _takes_down(span, datacentre)]
    spans = [_span_times(span, run.last) for span in operations]
    spans += [_span_times(span, run.last) for span in run.faults.values()
              if (span["start"] or span["end"]).get("args", {}).get("broker") == broker]
    for span in operations:
        if span["end"] and span["end"].get("outcome") == "interrupted":
            start = _span_times(span, run.last)[0]
            reruns = [_span_times(other, run.last)[1] for other in run.operations.values() if other["start"]
                      and other["start"].get("args", {}).get("resumes") == span["id"]]
            spans.append((start, max(reruns, default=run.last)))
    for span in abrupt_failovers(run):
        if span["start"]["args"].get("failover_source") == datacentre:
            start = span["start"]["t"]
            failbacks = [_span_times(other, run.last)[1] for other in run.operations.values()
                         if other["name"] == "failback" and other["start"] and other["start"]["t"] > start]
            spans.append((start, min(failbacks, default=run.last)))
    # A broker that found its lock lost (a stall past its lock session) stops itself, as Artemis does; the
    # supervisor writes lock_lost when it has started it again, so one it left down is not excused.
    spans += [(event["lost_at"], event["t"]) for event in run.locks_lost if event["broker"] == broker]
    return spans


def brokers_come_back(run: Run) -> dict:
    """A broker that stopped answering answers again soon after what took it down ended: one that stays down
    leaves its pair without a backup (2 x 2 seed 10 at 84a8470) or its datacentre dark."""
    silences = defaultdict(list)  # broker: [(from, to), ...]
    silent_since, datacentre_of = {}, {}
    for sample in (event for event in run.events if event["kind"] == "brokers"):
        silent = set(sample.get("silent") or [])
        for broker in sample.get("brokers") or []:
            datacentre_of[broker] = sample["datacentre"]
            if broker in silent:
                silent_since.setdefault(broker, sample["t"])
            elif broker in silent_since:
                silences[broker].append((silent_since.pop(broker), sample["t"]))
    for broker, since in silent_since.items():
        silences[broker].append((since, run.last))
    broken, longest = [], 0.0
    for broker, stretches in sorted(silences.items()):
        excused = _taken_down(run, broker, datacentre_of[broker])
        for start, end in stretches:
            uncovered = _longest_uncovered(start, end, excused)
            longest = max(longest, uncovered)
            if uncovered > COME_BACK_BOUND_SECONDS:
                broken.append({"t": start, "broker": broker, "why": f"did not answer for {end - start:.1f} s, "
                               f"{uncovered:.1f} s of it at once after what took it down"})
    return _verdict(run, "brokers_come_back", broken, {"brokers": len(datacentre_of),
                                                       "longest_unexcused_s": round(longest, 1)})


def _active_at(run: Run, t: float, before: bool, until: float | None = None) -> dict[str, list[str]]:
    """Per group, where it was active in the last sample before ``t``, left out while that sample did not know (a
    datacentre did not answer); or in the first known sample after it, left out when none came before ``until``."""
    found = {}
    for group in run.samples:
        if before:
            chosen = [sample for sample in run.samples[group] if sample["t"] <= t][-1:]
        else:
            chosen = [sample for sample in run.activity[group]
                      if sample["t"] >= t and (until is None or sample["t"] < until)][:1]
        if chosen and chosen[0].get("active") is not None:
            found[group] = sorted(chosen[0]["active"])
    return found


def operations_end_cleanly(run: Run) -> dict:
    broken, outcomes = [], defaultdict(int)
    for span in run.operations.values():
        start, end = span["start"], span["end"]
        t = (start or end)["t"]
        if end is None:
            broken.append({"t": t, "id": span["id"], "operation": span["name"], "why": "started, never ended"})
            continue
        outcome = end["outcome"]
        if outcome == "failed" and says_refused(end.get("message")):
            outcome = "refused"  # the playbook says it refused: judged as a refusal (did the groups move?)
        outcomes[outcome] += 1
        if outcome == "interrupted":
            resumed = [other for other in run.operations.values() if other["start"]
                       and other["start"].get("args", {}).get("resumes") == span["id"]]
            if not any(other["end"] and other["end"]["outcome"] == "done" for other in resumed):
                broken.append({"t": t, "id": span["id"], "operation": span["name"],
                               "why": "interrupted, and no run of it after ended done (wedged)"})
        elif outcome == "failed":
            broken.append({"t": t, "id": span["id"], "operation": span["name"],
                           "why": f"failed: {end.get('message') or 'no message'}"})
        elif outcome == "refused":
            if not (end.get("message") or "").strip():
                broken.append({"t": t, "id": span["id"], "operation": span["name"], "why": "refused without a message"})
            # What the estate was after the refusal: the first sample before the next operation starts, which may
            # move the groups itself before anyone could look.
            following = [other["start"]["t"] for other in run.operations.values()
                         if other["start"] and other["start"]["t"] >= end["t"] and other is not span]
            before = _active_at(run, t, before=True)
            after = _active_at(run, end["t"], before=False, until=min(following, default=None))
            changed = {group: (before[group], after[group]) for group in before
                       if group in after and before[group] != after[group]}
            if changed:
                broken.append({"t": t, "id": span["id"], "operation": span["name"],
                               "why": f"refused, but groups moved: {changed}"})
    counted = {"operations": len(run.operations), "outcomes": dict(outcomes)}
    return _verdict(run, "operations_end_cleanly", broken, counted)


# Seconds: the job and the checker subtract the same times, in doubles both.
MEASURED_TIME_TOLERANCE = 0.001


def measurement_agrees(run: Run) -> dict:
    """Per abrupt failover, what the RPO/RTO job published from its drill ledger (measurement ``failover``, scope
    the failover's id) is what the history says of the same ledger; the job's estimate before the fault and the
    replication backlog the failover was told of stand beside it, counted, not judged (estimates)."""
    broken, failovers = [], {}
    published = {event.get("scope"): event for event in run.events
                 if event["kind"] == "measurement" and event.get("name") == "failover"}
    for span in abrupt_failovers(run):
        cut = run.failover_cut(span)
        truth = run.failover_outcome(cut)
        value = (published.get(span["id"]) or {}).get("value")
        failovers[span["id"]] = dict(truth, published=value,
                                     replication_backlog=(span["end"] or {}).get("at_risk"))
        if not isinstance(value, dict) or value.get("error"):
            why = value.get("error") if isinstance(value, dict) else "nothing was published for it"
            broken.append({"t": cut["fault"], "id": span["id"], "why": f"the measurement: {why}"})
            continue
        for name in ("lost", "duplicates"):
            if value.get(name) != truth[name]:
                broken.append({"t": cut["fault"], "id": span["id"],
                               "why": f"published {value.get(name)} {name}, the history has {truth[name]}"})
        for name in ("rpo_seconds", "rto_seconds"):
            mine, theirs = truth[name], value.get(name)
            if (mine is None) != (theirs is None) or (
                    mine is not None and abs(mine - theirs) > MEASURED_TIME_TOLERANCE):
                broken.append({"t": cut["fault"], "id": span["id"],
                               "why": f"published {name} {theirs}, the history has {mine}"})
    return _verdict(run, "measurement_agrees", broken, {"failovers_checked": len(failovers),
                                                        "failovers": failovers})


INVARIANTS = (no_loss, no_duplicates, single_active, active_somewhere, single_live_broker, pair_takes_over,
              brokers_come_back, operations_end_cleanly, measurement_agrees)


def executed_steps(events: list[dict]) -> dict:
    """The faults and operations the run carried out (those that started; a planned one the world skipped, or that
    a long operation before it left no time for, did not) and how many of them overlap another in time."""
    run = Run(sorted(events, key=lambda event: event["t"]))
    spans = [_span_times(span, run.last) for kind in (run.faults, run.operations) for span in kind.values()
             if span["start"]]
    return {"steps": len(spans), "overlapping": schedule.overlapping_spans(spans)}


def check(events: list[dict]) -> list[dict]:
    """The verdict of every invariant on a history's events."""
    run = Run(sorted(events, key=lambda event: event["t"]))
    return [invariant(run) for invariant in INVARIANTS]


def print_verdicts(verdicts: list[dict]) -> None:
    for verdict in verdicts:
        state = "holds" if verdict["holds"] else f"BROKEN ({verdict['broken_count']})"
        print(f"{verdict['invariant']}: {state}  {json.dumps(verdict['counted'], sort_keys=True)}")
        for item in verdict["broken"]:
            print(f"  at {item['t']:.3f}: {json.dumps({k: v for k, v in item.items() if k != 't'}, sort_keys=True)}")
        for event in verdict["excerpt"]:
            print(f"  | {event['t']:.3f} {event['kind']} {event.get('name')} {event.get('phase')} {event.get('id')}"
                  f"{' ' + event['outcome'] if event.get('outcome') else ''}")
        if verdict["replay"]:
            print(f"  replay: {verdict['replay']}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("history")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    arguments = parser.parse_args(argv)
    try:
        verdicts = check(history.read(arguments.history))
    except (OSError, history.HistoryError) as exc:
        print(f"chaos.checker: {arguments.history}: {exc}", file=sys.stderr)
        return 2
    if arguments.json:
        print(json.dumps(verdicts, indent=1))
    else:
        print_verdicts(verdicts)
    return 0 if all(verdict["holds"] for verdict in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
