"""The chaos schedule: the same seed gives the same run, a 20-minute run is dense with overlapping faults and
operations, and what the world does not allow never happens in it."""

import pytest

from chaos import schedule

SEEDS = range(1, 16)


def test_a_seed_replays_the_same_schedule_and_another_seed_does_not():
    assert schedule.plan(7, "2x2", 1200) == schedule.plan(7, "2x2", 1200)
    assert schedule.plan(7, "2x2", 1200) != schedule.plan(8, "2x2", 1200)
    assert schedule.plan(7, "2x2", 1200) != schedule.plan(7, "3x1", 1200)


@pytest.mark.parametrize("estate", sorted(schedule.ESTATES))
@pytest.mark.parametrize("seed", SEEDS)
def test_twenty_minutes_hold_at_least_30_overlapping_steps_of_both_kinds(seed, estate):
    steps = schedule.plan(seed, estate, 1200)
    assert all(0 <= step.at < 1200 for step in steps)
    assert schedule.overlapping(steps) >= 30, [(step.at, step.name) for step in steps]
    assert {step.kind for step in steps} == {"fault", "operation"}
    assert any(step.kind == "operation" and any(fault.kind == "fault" and fault.at < step.end() and step.at < fault.end()
                                                for fault in steps) for step in steps)


@pytest.mark.parametrize("estate", sorted(schedule.ESTATES))
@pytest.mark.parametrize("seed", SEEDS)
def test_what_the_world_does_not_allow_never_happens(seed, estate):
    steps = schedule.plan(seed, estate, 1200)
    operations = [step for step in steps if step.kind == "operation"]
    for before, after in zip(operations, operations[1:]):
        assert before.end() <= after.at, "two operations at once from one controller"
        if before.name == "failover":
            assert after.name == "failback"
    assert sum(step.name == "upgrade" for step in operations) <= 1
    assert not any(step.name in ("failover", "failback") and "interrupt" in step.args for step in operations)
    faults = [step for step in steps if step.kind == "fault"]
    for index, fault in enumerate(faults):
        for other in faults[index + 1:]:
            if not (other.at < fault.end() and fault.at < other.end()):
                continue
            assert not (fault.name in schedule.WAN_FAULTS and other.name in schedule.WAN_FAULTS)
            if fault.name in schedule.BROKER_FAULTS and other.name in schedule.BROKER_FAULTS:
                assert fault.args["datacentre"] != other.args["datacentre"], (fault, other)


@pytest.mark.parametrize("seed, estate, duration, words", [
    (1, "4x4", 1200, "ESTATE=4x4"), (1, "2x2", 0, "DURATION=0")])
def test_a_bad_estate_or_duration_is_named(seed, estate, duration, words):
    with pytest.raises(ValueError, match=words):
        schedule.plan(seed, estate, duration)
