"""The chaos checker on hand-made histories: each kind of broken promise is caught, named and placed in the schedule,
and what the design allows (an abrupt failover's bounded loss, redeliveries after a kill) is counted, not blamed."""

import json

import pytest

from chaos import checker, history

SCHEDULE = {"kind": "schedule", "t": 0.0, "seed": 7, "estate": "2x2", "duration_s": 1200}


def _send(t, message_id, outcome="accepted"):
    return {"kind": "send", "t": t, "client": "p1", "group": "orders", "id": message_id, "outcome": outcome}


def _delivery(t, message_id, datacentre="dc1"):
    return {"kind": "delivery", "t": t, "client": "c1", "group": "orders", "datacentre": datacentre, "id": message_id}


def _activity(t, *active, group="orders", mode="full_state"):
    return {"kind": "activity", "t": t, "group": group, "mode": mode, "active": list(active)}


def _operation(t_start, t_end, name, operation_id, outcome="done", message="", **args):
    events = [{"kind": "operation", "t": t_start, "name": name, "phase": "start", "id": operation_id, "args": args}]
    if t_end is not None:
        events.append({"kind": "operation", "t": t_end, "name": name, "phase": "end", "id": operation_id,
                       "outcome": outcome, "message": message})
    return events


def _fault(t_start, t_end, name, fault_id, **args):
    return [{"kind": "fault", "t": t_start, "name": name, "phase": "start", "id": fault_id, "args": args},
            {"kind": "fault", "t": t_end, "name": name, "phase": "end", "id": fault_id, "args": args}]


def _clean():
    """Ten messages each delivered once, a partition, and a swapover dc1 -> dc2 (the group dark for 5 s inside it)."""
    events = [SCHEDULE, _activity(1, "dc1")]
    events += [_send(10 + n, f"m{n}") for n in range(10)] + [_delivery(10.5 + n, f"m{n}") for n in range(10)]
    events += _fault(30, 60, "partition", "f1", between=["dc1", "dc2"])
    events += _operation(100, 110, "swapover", "o1")
    events += [_activity(104), _activity(106), _activity(109, "dc2")]
    return events


def _verdicts(events):
    return {verdict["invariant"]: verdict for verdict in checker.check(events)}


def _broken(events):
    return sorted(name for name, verdict in _verdicts(events).items() if not verdict["holds"])


def test_a_clean_history_keeps_every_promise():
    verdicts = _verdicts(_clean())
    assert all(verdict["holds"] for verdict in verdicts.values()), verdicts
    assert verdicts["no_loss"]["counted"] == {"accepted": 10, "lost": 0, "lost_within_failover_bounds": {},
                                              "lost_to_stalled_primaries": {}}
    assert verdicts["active_somewhere"]["counted"] == {"dark_seconds": 5.0}


def test_a_lost_message_is_caught_with_the_schedule_around_it_and_how_to_replay():
    events = [event for event in _clean() if not (event["kind"] == "delivery" and event["id"] == "m3")]
    verdict = _verdicts(events)["no_loss"]
    assert not verdict["holds"]
    assert [(item["id"], item["why"]) for item in verdict["broken"]] == [("m3", "accepted, never delivered")]
    # Sent at 13: the partition (30-60) is within a minute of it, the swapover (100-110) is not.
    assert [(event["id"], event["phase"]) for event in verdict["excerpt"]] == [("f1", "start"), ("f1", "end")]
    assert verdict["replay"] == "make chaos SEED=7 ESTATE=2x2 DURATION=1200"
    assert _broken(events) == ["no_loss"]


def _stalled(stopped_for, lock_session_s=6.0, acknowledged_by="dc1-node1", after_resume=1.0, stopped_after=20.0,
             lost_after=1.0):
    """A stop fault on dc1-node1 from 200; the broker found its lock lost ``lost_after`` s after it resumed and
    stopped itself ``stopped_after`` s after; a message acknowledged ``after_resume`` s after it resumed, lost."""
    events = _clean() + _fault(200, 200 + stopped_for, "stop", "f7", broker="dc1-node1", datacentre="dc1",
                               lock_session_s=lock_session_s)
    if stopped_after is not None:
        resumed = 200 + stopped_for
        events.append({"kind": "lock_lost", "t": 260, "broker": "dc1-node1", "lost_at": resumed + lost_after,
                       "stopped_at": resumed + stopped_after})
    return events + [dict(_send(200 + stopped_for + after_resume, "s1"), broker=acknowledged_by)]


def test_what_a_primary_stalled_past_its_lock_acknowledged_until_it_stopped_is_lost_apart_and_only_that():
    # 2 x 2 seed 10 at 84a8470 and 7b429e1: Artemis's resumed primary acknowledges until it has stopped itself.
    verdict = _verdicts(_stalled(stopped_for=10, after_resume=15))["no_loss"]
    assert verdict["holds"] and verdict["counted"]["lost_to_stalled_primaries"] == {"f7": 1}
    for events in (_stalled(stopped_for=10, acknowledged_by="dc1-node2"), _stalled(stopped_for=10, after_resume=21),
                   _stalled(stopped_for=10, after_resume=-1), _stalled(stopped_for=4),
                   _stalled(stopped_for=10, lock_session_s=None), _stalled(stopped_for=10, stopped_after=None),
                   # a lock lost minutes after this stop ended (2 x 2 seed 10: stop-21, then stop-26 lost it)
                   _stalled(stopped_for=10, lost_after=150, stopped_after=170)):
        verdict = _verdicts(events)["no_loss"]
        assert [item["id"] for item in verdict["broken"]] == ["s1"], verdict


def test_a_message_rejected_or_uncertain_is_not_a_promise():
    events = _clean() + [_send(20, "r1", outcome="rejected"), _send(21, "u1", outcome="uncertain")]
    assert _broken(events) == []


def test_loss_at_an_abrupt_failover_is_within_its_bound_until_a_failback_should_have_recovered_it():
    events = [event for event in _clean() if not (event["kind"] == "delivery" and event["id"] in ("m8", "m9"))]
    # m8 and m9 were sent at 18 and 19: within 5 s before a failover that started at 20 and said 2 were at risk.
    events += _operation(20, 25, "failover", "o2", abrupt=True, loss_window_s=5)
    events[-1]["at_risk"] = 2
    verdict = _verdicts(events)["no_loss"]
    assert verdict["holds"], verdict
    assert verdict["counted"]["lost_within_failover_bounds"] == {"o2": 2}

    too_many = [dict(event, at_risk=1) if event.get("id") == "o2" and event.get("phase") == "end" else event
                for event in events]
    assert "said 1 were at risk" in _verdicts(too_many)["no_loss"]["broken"][0]["why"]

    failed_back = events + _operation(150, 160, "failback", "o3")
    verdict = _verdicts(failed_back)["no_loss"]
    assert [item["id"] for item in verdict["broken"]] == ["m8", "m9"]


def test_a_duplicate_is_caught_unless_a_fault_that_cuts_consumers_off_allows_it_and_then_only_so_many():
    twice = _clean() + [_delivery(15, "m2", datacentre="dc2")]
    verdict = _verdicts(twice)["no_duplicates"]
    assert not verdict["holds"] and verdict["broken"][0]["id"] == "m2"
    assert verdict["broken"][0]["why"] == "delivered 2 times"

    killed = _clean() + _fault(40, 45, "kill", "f2", node="dc1-node1", redeliveries=1)
    allowed = killed + [_delivery(50, "m2")]
    verdict = _verdicts(allowed)["no_duplicates"]
    assert verdict["holds"] and verdict["counted"]["allowed_redeliveries"] == {"kill f2": 1}
    assert not _verdicts(allowed + [_delivery(51, "m4")])["no_duplicates"]["holds"]  # over its bound
    late = killed + [_delivery(45 + checker.REDELIVERY_GRACE_SECONDS + 1, "m2")]
    assert not _verdicts(late)["no_duplicates"]["holds"]


def test_what_kept_mirror_connections_held_may_come_again_once_anywhere_after_the_change_and_no_more():
    events = _clean() + _operation(60, 90, "rolling_change", "o9")
    events[-1]["retired_backlog"] = 1
    # Their queues drain whenever their datacentre answers again, long after the change: no time limit but the run's.
    allowed = events + [_delivery(400, "m2", datacentre="dc2")]
    verdict = _verdicts(allowed)["no_duplicates"]
    assert verdict["holds"] and verdict["counted"]["allowed_redeliveries"] == {"relayed drain of rolling_change o9": 1}
    assert not _verdicts(allowed + [_delivery(401, "m4", datacentre="dc2")])["no_duplicates"]["holds"]
    before = events + [_delivery(50, "m2", datacentre="dc2")]
    assert not _verdicts(before)["no_duplicates"]["holds"]


def test_a_move_of_the_star_may_deliver_each_copy_it_overlapped_once_more_in_the_groups_it_moved_only():
    events = _clean() + _operation(5, 30, "rolling_change", "o9",
                                   star_move={"from": "dc1", "to": "dc2", "groups": ["orders"]})
    # m0-m9 were accepted at 10-19, inside the change: ten copies may come twice until its end and the grace.
    allowed = events + [_delivery(25, "m1", datacentre="dc2"), _delivery(28, "m2", datacentre="dc3")]
    verdict = _verdicts(allowed)["no_duplicates"]
    assert verdict["holds"] and verdict["counted"]["allowed_redeliveries"] == {"star move of rolling_change o9": 2}
    late = 30 + checker.REDELIVERY_GRACE_SECONDS + 1
    assert not _verdicts(events + [_delivery(late, "m1", datacentre="dc2")])["no_duplicates"]["holds"]
    other_group = dict(_delivery(25, "m3", datacentre="dc2"), group="books")
    assert not _verdicts(events + [other_group])["no_duplicates"]["holds"]
    beyond = events + [_delivery(20 + n * 0.1, f"m{n % 10}", datacentre="dc2") for n in range(11)]
    assert not _verdicts(beyond)["no_duplicates"]["holds"]


def test_a_second_copy_is_charged_to_the_cause_named_for_its_group_before_one_that_covers_every_group():
    # 3 x 1 seed 5: the star move's second copies of its group came first and used up the upgrade's restart
    # redeliveries, which a full_state group's consumer needed when the active broker restarted.
    events = _clean() + _operation(5, 30, "upgrade", "o9", redeliveries=1,
                                   star_move={"from": "dc1", "to": "dc2", "groups": ["orders"]})
    books = [dict(_send(12, "b1"), group="books"), dict(_delivery(12.5, "b1"), group="books")]
    again = [_delivery(22, "m1", datacentre="dc2"), dict(_delivery(26, "b1"), group="books")]
    verdict = _verdicts(events + books + again)["no_duplicates"]
    assert verdict["holds"], verdict["broken"]
    assert verdict["counted"]["allowed_redeliveries"] == {"star move of upgrade o9": 1, "upgrade o9": 1}


def _behind_failover(**args):
    """m0-m9 delivered at 10.5-19.5 at dc1 (group orders, a mirror group; m6-m9 also `books`, a bridge group); an
    abrupt failover dc1 -> dc2 at 40 whose source's replication last kept up at 30 (so from 20 on, with the
    margin) and whose last reconciliation began at 18; a failback at 200."""
    events = [event if event.get("id") not in ("m6", "m7", "m8", "m9") else dict(event, group="books")
              for event in _clean()]
    args = dict(abrupt=True, loss_window_s=5, failover_source="dc1", redeliveries=0, bridge_groups=["books"],
                replication_behind_since=20 + checker.IN_STEP_MARGIN_SECONDS, reconciled_at=18)
    return events + _operation(40, 50, "failover", "o2", **args) + _operation(200, 210, "failback", "o3")


def _again(t, message_id, group="orders"):
    return dict(_delivery(t, message_id, datacentre="dc2"), group=group)


def test_an_abrupt_failover_may_deliver_again_only_what_its_source_consumed_while_replication_was_behind():
    verdict = _verdicts(_behind_failover() + [_again(60, "m9", group="books"), _again(190, "m8", group="books")])
    assert verdict["no_duplicates"]["holds"], verdict["no_duplicates"]
    assert verdict["no_duplicates"]["counted"]["allowed_redeliveries"] == {
        "failover o2 (consumed while replication was behind)": 2}
    # m5 was consumed at 15.5, before the replication of the mirror group last fell behind (20): it must not come again.
    broken = _verdicts(_behind_failover() + [_again(60, "m5")])["no_duplicates"]
    assert [item["id"] for item in broken["broken"]] == ["m5"]
    # m6 (a bridge group) was consumed at 16.5, before the last reconciliation began at 18.
    broken = _verdicts(_behind_failover() + [_again(60, "m6", group="books")])["no_duplicates"]
    assert [item["id"] for item in broken["broken"]] == ["m6"]
    # Once the failback has started, a failover's redeliveries are over.
    late = 200 + checker.REDELIVERY_GRACE_SECONDS + 1
    assert not _verdicts(_behind_failover() + [_again(late, "m9", group="books")])["no_duplicates"]["holds"]


def test_split_brain_is_caught_but_an_active_active_group_may_be_active_everywhere():
    events = _clean() + [_activity(120, "dc1", "dc2")]
    verdict = _verdicts(events)["single_active"]
    assert not verdict["holds"] and verdict["broken"][0]["why"] == "active at dc1, dc2 at once"
    shared = _clean() + [_activity(120, "dc1", "dc2", group="shared", mode="active_active")]
    assert _broken(shared) == []


def test_two_live_brokers_of_one_datacentre_are_caught():
    pair = {"kind": "brokers", "datacentre": "dc2", "silent": []}
    events = _clean() + [dict(pair, t=50, live=["dc2-node2"]), dict(pair, t=51, live=["dc2-node1", "dc2-node2"])]
    verdict = _verdicts(events)["single_live_broker"]
    assert not verdict["holds"] and verdict["broken"][0]["why"] == "dc2-node1 and dc2-node2 live at once"
    assert _verdicts(events[:-1])["single_live_broker"]["holds"]


def test_two_live_brokers_are_counted_apart_only_while_one_is_a_primary_stalled_past_its_lock_until_it_stopped():
    # 2 x 2 seed 11: dc2-node2, SIGSTOPped 20 s past its 6 s lock session, answered as live beside dc2-node1, which
    # had taken over, 2.5 s after it resumed and 17 s before it stopped itself for its lost lock.
    pair = {"kind": "brokers", "datacentre": "dc1", "silent": [], "live": ["dc1-node1", "dc1-node2"]}
    events = [event for event in _stalled(stopped_for=10) if event.get("id") != "s1"]
    verdict = _verdicts(events + [dict(pair, t=215)])["single_live_broker"]
    assert verdict["holds"] and verdict["counted"]["beside_stalled_primaries"] == {"f7": 1}, verdict
    for late in (209, 231):  # still stopped; after its stop
        assert not _verdicts(events + [dict(pair, t=late)])["single_live_broker"]["holds"]
    short = [event for event in _stalled(stopped_for=4) if event.get("id") != "s1"]
    assert not _verdicts(short + [dict(pair, t=210)])["single_live_broker"]["holds"]


def test_a_pair_that_leaves_its_datacentre_without_a_live_broker_too_long_is_caught():
    pair = {"kind": "brokers", "datacentre": "dc2", "brokers": ["dc2-node1", "dc2-node2"]}
    events = _clean() + [dict(pair, t=200, live=["dc2-node1"], silent=[]),
                         dict(pair, t=201, live=[], silent=["dc2-node1"]),
                         dict(pair, t=240, live=["dc2-node2"], silent=["dc2-node1"])]
    verdict = _verdicts(events)["pair_takes_over"]
    assert not verdict["holds"] and verdict["broken"][0]["why"] == (
        "no live broker for 39.0 s while one of the pair answered")
    events[-1]["t"] = 225
    assert _verdicts(events)["pair_takes_over"]["holds"]
    # The whole datacentre down (a failover's power-off) is not the pair's to answer for.
    events[-2]["silent"] = ["dc2-node1", "dc2-node2"]
    events[-1]["t"] = 260
    assert _verdicts(events)["pair_takes_over"]["holds"]


def test_only_a_backup_in_sync_is_expected_to_take_over():
    """The first 20-minute run on 2 x 2: a backup powered on again was still copying its live broker's journal when
    that broker was killed; Artemis keeps such a backup waiting (it would serve a stale journal) until the primary
    is back."""
    pair = {"kind": "brokers", "datacentre": "dc1", "brokers": ["dc1-node1", "dc1-node2"]}
    events = _clean() + [dict(pair, t=200, live=[], in_sync=[], silent=["dc1-node1"]),
                         dict(pair, t=274, live=["dc1-node1"], in_sync=[], silent=[])]
    assert _verdicts(events)["pair_takes_over"]["holds"]
    events[-2]["in_sync"] = ["dc1-node2"]
    verdict = _verdicts(events)["pair_takes_over"]
    assert not verdict["holds"] and verdict["broken"][0]["why"] == (
        "no live broker for 74.0 s while one of the pair answered")


def test_a_pair_whose_brokers_all_answer_as_backups_is_caught():
    """The replay of seed 1 on 2 x 2: both brokers of dc2 came back as backups, neither in sync, and none went
    live; one of them held the newest journal."""
    pair = {"kind": "brokers", "datacentre": "dc2", "brokers": ["dc2-node1", "dc2-node2"]}
    events = _clean() + [dict(pair, t=200, live=[], in_sync=[], silent=[]),
                         dict(pair, t=400, live=[], in_sync=[], silent=[])]
    verdict = _verdicts(events)["pair_takes_over"]
    assert not verdict["holds"] and verdict["broken"][0]["why"].startswith("no live broker for ")


def _silent_dc1_node2(since, answers_at):
    """dc1-node2 does not answer from ``since`` until ``answers_at`` (None: never again), its peer live."""
    pair = {"kind": "brokers", "datacentre": "dc1", "brokers": ["dc1-node1", "dc1-node2"], "in_sync": []}
    events = [dict(pair, t=since - 1, live=["dc1-node2"], silent=[]),
              dict(pair, t=since, live=["dc1-node1"], silent=["dc1-node2"])]
    if answers_at is not None:
        events.append(dict(pair, t=answers_at, live=["dc1-node1"], in_sync=["dc1-node2"], silent=[]))
    return events + [_activity(600, "dc1")]


def _copy_mirrored_to_the_stalled(copy_id, at, accepted_by="dc2-node1", accepted_at="dc2"):
    """_stalled's stop (200 to 210, lock found lost at 211, stopped at 230) and a messages_only copy accepted by
    another datacentre's broker at ``at``, lost."""
    events = _stalled(stopped_for=10)[:-1]
    return events + [dict(_send(at, copy_id), group="inflow", broker=accepted_by, datacentre=accepted_at)]


def test_a_copy_mirrored_to_a_primary_stalled_past_its_lock_is_lost_apart_until_it_stopped():
    """2 x 2 seed 4 at 53be140: dc2-node2, SIGSTOPped 18 s, acknowledged to dc1-node1's mirror the inflow copies for
    dc2 it had held while stopped, until its stop for the lost lock: 152 lost."""
    for at in (200.5, 209, 225):
        verdict = _verdicts(_copy_mirrored_to_the_stalled("s1@dc1", at))["no_loss"]
        assert verdict["holds"] and verdict["counted"]["lost_to_stalled_primaries"] == {"f7": 1}, at
    for events in (_copy_mirrored_to_the_stalled("s1@dc1", 199), _copy_mirrored_to_the_stalled("s1@dc1", 231),
                   _copy_mirrored_to_the_stalled("s1@dc2", 209),
                   _copy_mirrored_to_the_stalled("s1@dc1", 209, accepted_by="dc1-node2", accepted_at="dc1"),
                   _copy_mirrored_to_the_stalled("s1", 209)):
        verdict = _verdicts(events)["no_loss"]
        assert [item["id"] for item in verdict["broken"]] == [events[-1]["id"]], verdict


def test_a_broker_that_stays_down_after_what_took_it_down_is_caught():
    """The regression primary-stalled-past-its-lock at 3a9de63: dc1-node2, a backup become live, stopped itself for
    its lost lock after a SIGSTOP; the test bed's supervisor looked for a primary's start line, found none and left
    it down until the run's end. Nothing else noticed: its peer was live and took over."""
    stop = _fault(200, 220, "stop", "stop-2", broker="dc1-node2", datacentre="dc1")
    left_down = _clean() + stop + _silent_dc1_node2(201, None)
    verdict = _verdicts(left_down)["brokers_come_back"]
    assert not verdict["holds"] and verdict["broken"][0]["broker"] == "dc1-node2"
    assert verdict["broken"][0]["why"] == "did not answer for 399.0 s, 380.0 s of it at once after what took it down"
    assert [event["id"] for event in verdict["excerpt"]] == ["stop-2", "stop-2"]
    started_again = _clean() + stop + _silent_dc1_node2(201, 220 + checker.COME_BACK_BOUND_SECONDS - 1)
    assert _broken(started_again) == []
    # Another broker's fault does not excuse it.
    other = _fault(200, 220, "stop", "stop-2", broker="dc1-node1", datacentre="dc1")
    assert _broken(_clean() + other + _silent_dc1_node2(201, 201 + checker.COME_BACK_BOUND_SECONDS + 10)) == [
        "brokers_come_back"]


def test_a_broker_taken_down_again_and_again_is_judged_by_each_stretch_after_what_took_it_down():
    """2 x 2 seed 9's fifth run: dc2-node1 under four faults in five minutes, silent between them while it started
    each time, never longer at once than a start takes."""
    gap = checker.COME_BACK_BOUND_SECONDS - 10
    faults = (_fault(200, 220, "stop", "stop-2", broker="dc1-node2", datacentre="dc1")
              + _fault(220 + gap, 240 + gap, "kill", "kill-3", broker="dc1-node2", datacentre="dc1"))
    assert _broken(_clean() + faults + _silent_dc1_node2(201, 240 + 2 * gap)) == []
    assert _broken(_clean() + faults + _silent_dc1_node2(201, 240 + 2 * gap + 20)) == ["brokers_come_back"]


def test_a_lock_the_broker_found_lost_excuses_it_until_the_supervisor_started_it_again():
    """2 x 2 seed 9's fifth run: dc1-node2 stopped itself for the lock a stall past its session lost, and the
    supervisor started it again 28 s after its stop line."""
    stop = _fault(200, 220, "stop", "stop-2", broker="dc1-node2", datacentre="dc1")
    lost = [{"kind": "lock_lost", "t": 260, "broker": "dc1-node2", "lost_at": 221, "stopped_at": 232}]
    answers_at = 260 + checker.COME_BACK_BOUND_SECONDS - 1
    assert _broken(_clean() + stop + lost + _silent_dc1_node2(201, answers_at)) == []
    # Without the supervisor's start (no lock_lost), the same silence is a broker left down.
    assert _broken(_clean() + stop + _silent_dc1_node2(201, answers_at)) == ["brokers_come_back"]


@pytest.mark.parametrize("taken_down_by", [
    _operation(150, 400, "rolling_change", "o2"),
    _operation(150, 160, "rolling_change", "o2", outcome="interrupted", message="SIGKILL after 10 s")
    + _operation(200, 250, "rolling_change", "o3", outcome="refused", message="Refused, nothing changed: a fault",
                 resumes="o2") + _operation(300, 400, "rolling_change", "o4", resumes="o2"),
    _operation(150, 170, "failover", "o2", abrupt=True, failover_source="dc1")
    + _operation(380, 400, "failback", "o3"),
])
def test_an_operation_an_interrupted_one_until_its_last_rerun_or_a_failover_until_the_failback_excuse_it(
        taken_down_by):
    events = _clean() + taken_down_by + _silent_dc1_node2(155, 400 + checker.COME_BACK_BOUND_SECONDS - 1)
    assert _verdicts(events)["brokers_come_back"]["holds"]
    events = _clean() + taken_down_by + _silent_dc1_node2(155, 400 + checker.COME_BACK_BOUND_SECONDS + 10)
    assert not _verdicts(events)["brokers_come_back"]["holds"]


@pytest.mark.parametrize("not_taken_down_by", [
    _operation(150, 400, "swapover", "o2"),
    _operation(150, 400, "reconcile", "o2"),
    _operation(150, 400, "drill", "o2"),
    _operation(150, 400, "failover", "o2", outcome="refused", message="Refused, nothing changed: a fault",
               failover_source="dc2"),
    _operation(150, 160, "swapover", "o2", outcome="interrupted", message="SIGINT after 10 s")
    + _operation(300, 400, "swapover", "o3", resumes="o2"),
])
def test_an_operation_that_restarts_no_broker_of_its_datacentre_does_not_excuse_it(not_taken_down_by):
    """2 x 2 seed 9's fourth run: a broker left down 12 minutes was excused by the swapovers in that time, which
    restart no broker."""
    events = _clean() + not_taken_down_by + _silent_dc1_node2(155, 155 + checker.COME_BACK_BOUND_SECONDS + 10)
    verdict = _verdicts(events)["brokers_come_back"]
    assert not verdict["holds"] and verdict["broken"][0]["broker"] == "dc1-node2"
    refused_at_its_own = _operation(150, 400, "failover", "o2", outcome="refused",
                                    message="Refused, nothing changed: a fault", failover_source="dc1")
    events = _clean() + refused_at_its_own + _silent_dc1_node2(155, 400 + checker.COME_BACK_BOUND_SECONDS - 1)
    assert _verdicts(events)["brokers_come_back"]["holds"]


def test_a_group_active_nowhere_outside_an_operation_is_caught_beyond_the_tolerance():
    short = _clean() + [_activity(120), _activity(120 + checker.DARK_TOLERANCE_SECONDS - 1, "dc2")]
    assert _broken(short) == []
    long = _clean() + [_activity(120), _activity(150, "dc2")]
    verdict = _verdicts(long)["active_somewhere"]
    assert not verdict["holds"] and verdict["broken"][0]["why"] == (
        "active nowhere for 30.0 s, 30.0 s of it outside any operation or hold")
    unknown = _clean() + [dict(_activity(120), active=None), _activity(150, "dc2")]  # not reachable: not known dark
    assert _broken(unknown) == []
    # Dark across two operations, one right after the other, is within what they allow.
    back_to_back = _clean() + _operation(200, 230, "failover", "o2") + _operation(231, 260, "failback", "o3") + [
        _activity(205), _activity(255, "dc1")]
    assert _broken(back_to_back) == []


def _returning_dc2(live_at, in_sync_before=False):
    """dc2's pair powered off (silent), then dc2-node1 live at ``live_at`` and dc2-node2 its backup 10 s later; with ``in_sync_before`` dc2-node1 was
    instead the backup in sync of a live dc2-node2 that went silent (a takeover, not a cold start)."""
    pair = {"kind": "brokers", "datacentre": "dc2", "brokers": ["dc2-node1", "dc2-node2"]}
    if in_sync_before:
        before = [dict(pair, t=150, live=["dc2-node2"], in_sync=["dc2-node1"], silent=[]),
                  dict(pair, t=live_at - 1, live=[], in_sync=[], silent=["dc2-node2"])]
    else:
        before = [dict(pair, t=150, live=[], in_sync=[], silent=["dc2-node1", "dc2-node2"])]
    return before + [dict(pair, t=live_at, live=["dc2-node1"], in_sync=[], silent=["dc2-node2"]),
                     dict(pair, t=live_at + 10, live=["dc2-node1"], in_sync=["dc2-node2"], silent=[]),
                     {"kind": "brokers", "t": 150, "datacentre": "dc1", "brokers": ["dc1-node1"], "live": ["dc1-node1"],
                      "in_sync": [], "silent": []}]


def test_a_datacentre_that_starts_cold_while_cut_off_may_hold_its_groups_until_the_partition_ends_and_it_asks():
    """2 x 2 seed 5 with the hold: dc2 came back from an abrupt failover during a partition; its broker heard no
    other datacentre and held its groups, `east` (owned by dc2) among them, until the partition ended."""
    partition = _fault(190, 240, "partition", "f2", between=["dc1", "dc2"])
    release = 240 + checker.HOLD_RELEASE_SECONDS
    held = _clean() + partition + _returning_dc2(200) + [_activity(202), _activity(release - 1, "dc2")]
    verdict = _verdicts(held)["active_somewhere"]
    assert verdict["holds"], verdict
    assert verdict["counted"]["holds"] == [{"datacentre": "dc2", "broker": "dc2-node1", "from": 200, "to": release}]
    assert verdict["counted"]["dark_seconds_only_a_hold_allowed"] == release - 1 - 202
    # Held longer than the partition and a re-check allow: a hold that does not let go.
    wedged = _clean() + partition + _returning_dc2(200) + [_activity(202), _activity(release + 30, "dc2")]
    assert _broken(wedged) == ["active_somewhere"]
    # A backup in sync taking over does not hold, nor does a cold start that hears the others.
    takeover = (_clean() + partition + _returning_dc2(200, in_sync_before=True)
                + [_activity(202), _activity(release - 1, "dc2")])
    assert _broken(takeover) == ["active_somewhere"]
    heard = _clean() + _returning_dc2(200) + [_activity(202), _activity(release - 1, "dc2")]
    assert _broken(heard) == ["active_somewhere"]


def _dc1_live(t, live=True):
    return {"kind": "brokers", "t": t, "datacentre": "dc1", "brokers": ["dc1-node1"], "live": ["dc1-node1"] if live
            else [], "in_sync": [], "silent": [] if live else ["dc1-node1"]}


@pytest.mark.parametrize("delay_ms, jitter_ms, excused", [(400, 100, True), (300, 120, True), (150, 100, False)])
def test_a_cold_start_over_a_wan_too_slow_for_the_activation_check_may_hold_until_the_wan_is_back(
        delay_ms, jitter_ms, excused):
    # 2 x 2 seed 6 at 62151ce: dc2 came back from an abrupt failover over a 400 ms (+100 ms jitter, 5 % loss) WAN;
    # its broker's check heard neither of dc1's brokers within its 5 s and held `east` until dc1 answered.
    slow = _fault(190, 240, "wan_degraded", "f2", between=["dc1", "dc2"], delay_ms=delay_ms, jitter_ms=jitter_ms,
                  loss_percent=5)
    release = 240 + checker.HOLD_RELEASE_SECONDS
    held = _clean() + slow + _returning_dc2(200) + [_activity(202), _activity(release - 1, "dc2")]
    assert _broken(held) == ([] if excused else ["active_somewhere"])


def test_a_cold_start_while_no_other_datacentre_has_a_live_broker_may_hold_until_one_has():
    release = 300 + checker.HOLD_RELEASE_SECONDS
    dark_dc1 = [_dc1_live(190, live=False), _dc1_live(300)]
    held = _clean() + _returning_dc2(200) + dark_dc1 + [_activity(202), _activity(release - 1, "dc2")]
    verdict = _verdicts(held)["active_somewhere"]
    assert verdict["holds"], verdict
    assert verdict["counted"]["holds"] == [{"datacentre": "dc2", "broker": "dc2-node1", "from": 200, "to": release}]
    wedged = _clean() + _returning_dc2(200) + dark_dc1 + [_activity(202), _activity(release + 30, "dc2")]
    assert _broken(wedged) == ["active_somewhere"]


def test_what_cuts_a_datacentre_off_one_after_the_other_is_one_isolation_when_a_re_check_can_miss_the_gap():
    # A slow WAN, then 6 s later a partition, then 8 s later dc1 without a live broker (seed 6's chain).
    slow = _fault(190, 240, "wan_degraded", "f2", between=["dc1", "dc2"], delay_ms=400, jitter_ms=100)
    partition = _fault(246, 286, "partition", "f3", between=["dc1", "dc2"])
    dark_dc1 = [_dc1_live(294, live=False), _dc1_live(370)]
    release = 370 + checker.HOLD_RELEASE_SECONDS
    chain = _clean() + slow + partition + _returning_dc2(200) + dark_dc1
    assert _broken(chain + [_activity(202), _activity(release - 1, "dc2")]) == []
    # A gap longer than a re-check and its wait is a window the hold had to see: it ends there.
    late_partition = _fault(240 + checker.HOLD_CHECK_SECONDS + checker.ACTIVATION_CHECK_WAIT_SECONDS + 30, 320,
                            "partition", "f3", between=["dc1", "dc2"])
    apart = _clean() + slow + late_partition + _returning_dc2(200)
    assert _broken(apart + [_activity(202), _activity(300, "dc2")]) == ["active_somewhere"]


@pytest.mark.parametrize("events, why", [
    (_operation(120, None, "swapover", "o9"), "started, never ended"),
    (_operation(120, 130, "swapover", "o9", outcome="failed", message="broker unreachable"),
     "failed: broker unreachable"),
    (_operation(120, 130, "swapover", "o9", outcome="refused"), "refused without a message"),
    (_operation(120, 130, "swapover", "o9", outcome="refused", message="dc2 is behind") + [_activity(131, "dc1")],
     "refused, but groups moved: {'orders': (['dc2'], ['dc1'])}"),
])
def test_a_wedged_failed_or_half_done_operation_is_caught(events, why):
    verdict = _verdicts(_clean() + events)["operations_end_cleanly"]
    assert not verdict["holds"] and [item["why"] for item in verdict["broken"]] == [why]


def test_an_interrupted_operation_is_clean_only_when_a_run_of_it_after_ends_done():
    interrupted = _clean() + _operation(120, 130, "swapover", "o9", outcome="interrupted", message="SIGKILL after 5 s")
    wedged = interrupted + _operation(131, 150, "swapover", "o10", outcome="refused", message="dc1 is fenced",
                                      resumes="o9")
    verdict = _verdicts(wedged)["operations_end_cleanly"]
    assert not verdict["holds"]
    assert [item["why"] for item in verdict["broken"]] == ["interrupted, and no run of it after ended done (wedged)"]
    resumed = interrupted + _operation(131, 150, "swapover", "o10", resumes="o9")
    assert _broken(resumed + [_activity(151, "dc2")]) == []


def test_a_refusal_with_a_message_that_left_the_estate_as_it_was_is_clean():
    events = _clean() + _operation(120, 130, "swapover", "o9", outcome="refused", message="dc1 is partitioned")
    events.append(_activity(131, "dc2"))
    verdict = _verdicts(events)["operations_end_cleanly"]
    assert verdict["holds"] and verdict["counted"]["outcomes"] == {"done": 1, "refused": 1}


def test_a_refusal_that_began_while_a_datacentre_did_not_answer_is_not_held_to_a_state_nobody_knew():
    # The group was seen at dc2 at 109, then a datacentre did not answer (unknown) when a resumed swapover began; it
    # was seen dark after its refusal (what the interrupted one had fenced before it was stopped).
    events = _clean() + [dict(_activity(115), active=None)]
    events += _operation(120, 130, "swapover", "o9", outcome="refused", message="dc2-node1 does not answer")
    events.append(_activity(131))
    verdict = _verdicts(events)["operations_end_cleanly"]
    assert verdict["holds"], verdict


def test_a_refusal_is_not_charged_with_what_the_next_operation_did_before_anyone_could_look():
    # Refused at 130, a swapover back to dc1 started at 130.5 and moved the group before the next sample (131).
    events = _clean() + _operation(120, 130, "swapover", "o9", outcome="refused", message="dc1 is partitioned")
    events += _operation(130.5, 140, "swapover", "o10") + [_activity(131, "dc1")]
    verdict = _verdicts(events)["operations_end_cleanly"]
    assert verdict["holds"], verdict
    # A sample between the refusal and the next operation still judges it.
    moved = events[:-4] + [_activity(130.2, "dc1")] + events[-4:]
    verdict = _verdicts(moved)["operations_end_cleanly"]
    assert [item["why"] for item in verdict["broken"]] == ["refused, but groups moved: {'orders': (['dc2'], ['dc1'])}"]


@pytest.mark.parametrize("name, said", [
    ("upgrade", "'Refused, no broker restarted: dc1-node2 not read earlier in this run'"),
    # 2 x 2 seed 9's fourth run: a swapover whose drain timed out gave the groups back and was judged failed.
    ("swapover", "'Swapover aborted, dc2 is active again and nothing was lost: dc2 did not drain within 300s'"),
])
def test_an_operation_the_runner_called_failed_that_says_it_refused_is_judged_as_a_refusal(name, said):
    events = _clean() + _operation(120, 130, name, "o9", outcome="failed", message=said)
    verdict = _verdicts(events + [_activity(131, "dc2")])["operations_end_cleanly"]
    assert verdict["holds"] and verdict["counted"]["outcomes"] == {"done": 1, "refused": 1}
    verdict = _verdicts(events + [_activity(131, "dc1")])["operations_end_cleanly"]
    assert [item["why"] for item in verdict["broken"]] == ["refused, but groups moved: {'orders': (['dc2'], ['dc1'])}"]


def test_the_steps_a_run_carried_out_are_those_that_started_and_overlap_counts_them_only():
    events = (_fault(100, 150, "kill", "f1", broker="dc1-node1", datacentre="dc1")
              + _operation(140, 200, "swapover", "o1") + _operation(300, None, "reconcile", "o2")
              + _fault(400, 410, "stop", "f2", broker="dc2-node1", datacentre="dc2")[1:]  # an end without a start
              + [_activity(500, "dc1")])
    assert checker.executed_steps(events) == {"steps": 3, "overlapping": 2}


def test_the_command_line_reads_a_history_file_and_exits_1_on_a_broken_promise(tmp_path, capsys):
    path = tmp_path / "history.jsonl"
    with history.Writer(str(path)) as writer:
        writer.write_all(reversed(_clean()))  # written out of order, as threads do
    assert checker.main([str(path)]) == 0
    with history.Writer(str(path)) as writer:
        writer.write("activity", t=300, group="orders", mode="full_state", active=["dc1", "dc2"])
    assert checker.main([str(path)]) == 1
    assert "single_active: BROKEN (1)" in capsys.readouterr().out
    assert checker.main([str(path), "--json"]) == 1
    assert not json.loads(capsys.readouterr().out)[2]["holds"]


@pytest.mark.parametrize("line, words", [
    ("not json", "line 1: not JSON"),
    ('{"kind": "gossip", "t": 1}', "line 1: kind 'gossip'"),
    ('{"kind": "send", "id": "m1"}', "line 1: send without a time t"),
    ('{"kind": "operation", "t": 1, "name": "swapover", "phase": "end", "id": "o1"}', "without an outcome"),
])
def test_a_history_line_the_checker_cannot_read_is_named(tmp_path, capsys, line, words):
    path = tmp_path / "history.jsonl"
    path.write_text(line + "\n")
    assert checker.main([str(path)]) == 2
    assert words in capsys.readouterr().err


def _failed_over():
    """m0-m9 sent at 10-19 at dc1; a failover dc1 -> dc2 at 20, failed back at 150: m8 and m9 were not delivered
    before the failback, m5 twice, and the first delivery at dc2 after the fault came at 24."""
    events = [SCHEDULE, _activity(1, "dc1")]
    events += [dict(_send(10 + n, f"m{n}"), datacentre="dc1") for n in range(10)]
    events += [_delivery(10.5 + n, f"m{n}") for n in range(8)] + [_delivery(24, "m5", datacentre="dc2")]
    events += _operation(20, 25, "failover", "o2", abrupt=True, loss_window_s=5, failover_source="dc1", redeliveries=1)
    events[-1]["at_risk"] = 3
    events += _operation(150, 160, "failback", "o3")
    events += [_delivery(161, "m8", datacentre="dc2"), _delivery(162, "m9", datacentre="dc2")]
    return events


def _published(**value):
    figures = {"lost": 2, "duplicates": 1, "rpo_seconds": 20 - 18, "rto_seconds": 24 - 20, "messages_at_risk": 5}
    return {"kind": "measurement", "t": 300, "name": "failover", "scope": "o2", "value": dict(figures, **value)}


def test_what_the_measurement_published_for_a_failover_is_held_to_the_same_ledger_in_the_history():
    events = _failed_over()
    assert _broken(events + [_published()]) == []
    counted = _verdicts(events + [_published()])["measurement_agrees"]["counted"]
    assert counted["failovers_checked"] == 1
    assert counted["failovers"]["o2"] == {"lost": 2, "duplicates": 1, "rpo_seconds": 2, "rto_seconds": 4,
                                          "published": _published()["value"], "replication_backlog": 3}

    wrong = _verdicts(events + [_published(lost=1)])["measurement_agrees"]
    assert [item["why"] for item in wrong["broken"]] == ["published 1 lost, the history has 2"]
    assert wrong["excerpt"] and wrong["broken"][0]["id"] == "o2"
    late = _verdicts(events + [_published(rto_seconds=5.0)])["measurement_agrees"]
    assert [item["why"] for item in late["broken"]] == ["published rto_seconds 5.0, the history has 4"]
    silent = _verdicts(events)["measurement_agrees"]
    assert [item["why"] for item in silent["broken"]] == ["the measurement: nothing was published for it"]
    failed = _verdicts(events + [{"kind": "measurement", "t": 300, "name": "failover", "scope": "o2",
                                  "value": {"error": "the job exited 1"}}])["measurement_agrees"]
    assert [item["why"] for item in failed["broken"]] == ["the measurement: the job exited 1"]


def test_without_a_failover_the_measurement_has_nothing_to_answer_for():
    verdict = _verdicts(_clean())["measurement_agrees"]
    assert verdict["holds"] and verdict["counted"] == {"failovers_checked": 0, "failovers": {}}


def test_the_world_reads_how_many_events_the_kept_mirror_connections_held_from_the_runs_output(tmp_path):
    from chaos.world import retired_backlog
    output = tmp_path / "rolling_change-3.out"
    output.write_text("ok: [dc1-node1] => \n    msg: dc1-node1 keeps the mirror connections dc2_inflow (1921 events), dc2_all (7998\n"
                      "        events), routing nothing, until their queues are empty; a later run drops them.\n"
                      "    msg: dc2-node1 keeps the mirror connections dc1_all (queue not read), routing nothing, until\n")
    assert retired_backlog(str(output)) == 9919
    output.write_text("PLAY RECAP\n")
    assert retired_backlog(str(output)) == 0
