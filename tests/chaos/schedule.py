"""A chaos run's schedule, drawn from its seed: faults and operations at random times, overlapping where the world
allows. The same seed, estate and duration always give the same schedule (``make chaos SEED=`` replays it).

What the world allows:
- operations come from one controller, one after the other; a failover is followed by a failback before the next
  failover, and an upgrade happens once;
- a fault may overlap anything, including an operation (that is the point), but a broker has one fault at a time, a
  datacentre loses one broker at a time (kill, power off, stop), and one WAN fault (partition or degradation) holds
  at a time;
- an operation may be interrupted (``interrupt``: SIGINT or SIGKILL of its ansible-playbook) part-way through.
"""

from __future__ import annotations

import dataclasses
import random

ESTATES = {"2x2": {"datacentres": ["dc1", "dc2"], "brokers_per_datacentre": 2},
           "3x1": {"datacentres": ["dc1", "dc2", "dc3"], "brokers_per_datacentre": 1}}

# name: (shortest, longest) seconds it lasts.
FAULTS = {"partition": (10, 60), "wan_degraded": (30, 120), "kill": (5, 30), "power_off": (10, 40),
          "stop": (5, 20)}
WAN_FAULTS = ("partition", "wan_degraded")
BROKER_FAULTS = ("kill", "power_off", "stop")
# name: (typical seconds, weight) of the operations; the rolling change and the upgrade restart every broker.
OPERATIONS = {"swapover": (60, 4), "failover": (60, 2), "reconcile": (30, 2), "rolling_change": (240, 1),
              "drill": (120, 1), "upgrade": (300, 1)}
INTERRUPTED_SHARE = 0.15
MEAN_FAULT_GAP_SECONDS = 30.0
OPERATION_PAUSE_SECONDS = (10, 60)


@dataclasses.dataclass(frozen=True)
class Step:
    at: float            # seconds from the start of the run
    kind: str            # fault | operation
    name: str
    duration: float      # a fault's length; an operation's expected length (it takes what it takes)
    args: dict

    def end(self) -> float:
        return self.at + self.duration


def _brokers(estate: str) -> list[tuple[str, str]]:
    shape = ESTATES[estate]
    return [(datacentre, f"{datacentre}-node{n}") for datacentre in shape["datacentres"]
            for n in range(1, shape["brokers_per_datacentre"] + 1)]


def _operations(rng: random.Random, estate: str, duration: float) -> list[Step]:
    """The controller's operations, one after the other. Where a swapover or failover goes is resolved when it
    runs (an interrupted one may or may not have moved a group): ``skip`` is how many datacentres after the active
    one, in the estate's order; a failback returns to where the failover came from."""
    others = len(ESTATES[estate]["datacentres"]) - 1
    steps, at, failed_over, upgraded = [], rng.uniform(*OPERATION_PAUSE_SECONDS), False, False
    while at < duration:
        if failed_over:
            name = "failback"
        else:
            names = [name for name in OPERATIONS if not (name == "upgrade" and upgraded)]
            name = rng.choices(names, weights=[OPERATIONS[name][1] for name in names])[0]
        length = OPERATIONS[name][0] if name in OPERATIONS else OPERATIONS["failover"][0]
        args = {}
        if name in ("swapover", "failover"):
            args["skip"] = rng.randint(1, others)
        if name == "failover":
            args["abrupt"] = True
        failed_over = name == "failover"
        upgraded = upgraded or name == "upgrade"
        if rng.random() < INTERRUPTED_SHARE and name not in ("failover", "failback"):
            args["interrupt"] = {"after": round(rng.uniform(0.1, 0.9) * length, 1),
                                 "signal": rng.choice(["SIGINT", "SIGKILL"])}
        steps.append(Step(round(at, 1), "operation", name, length, args))
        at += length + rng.uniform(*OPERATION_PAUSE_SECONDS)
    return steps


def _faults(rng: random.Random, estate: str, duration: float) -> list[Step]:
    datacentres = ESTATES[estate]["datacentres"]
    brokers = _brokers(estate)
    steps, at = [], rng.expovariate(1 / MEAN_FAULT_GAP_SECONDS)
    busy_until = {}  # a broker, a datacentre or "wan": until when a fault holds it
    while at < duration:
        name = rng.choice(sorted(FAULTS))
        length = round(rng.uniform(*FAULTS[name]), 1)
        if name in WAN_FAULTS:
            pair = sorted(rng.sample(datacentres, 2))
            holders = ["wan"]
            args = {"between": pair}
            if name == "wan_degraded":
                args.update(delay_ms=rng.choice([50, 150, 400]), jitter_ms=rng.choice([0, 20, 100]),
                            loss_percent=rng.choice([0, 1, 5]))
        else:
            datacentre, broker = rng.choice(brokers)
            holders = [broker, datacentre]
            args = {"broker": broker, "datacentre": datacentre}
        if all(busy_until.get(holder, 0) <= at for holder in holders):
            steps.append(Step(round(at, 1), "fault", name, length, args))
            for holder in holders:
                busy_until[holder] = at + length
        at += rng.expovariate(1 / MEAN_FAULT_GAP_SECONDS)
    return steps


def plan(seed: int, estate: str, duration: float) -> list[Step]:
    """The schedule of a run: its faults and operations in time order."""
    if estate not in ESTATES:
        raise ValueError(f"ESTATE={estate}: one of {', '.join(ESTATES)}")
    if duration <= 0:
        raise ValueError(f"DURATION={duration}: a number of seconds above 0")
    rng = random.Random(f"{seed}/{estate}/{float(duration):g}")  # DURATION=1200 and 1200.0 are one schedule
    return sorted(_operations(rng, estate, duration) + _faults(rng, estate, duration),
                  key=lambda step: (step.at, step.kind, step.name))


def overlapping(steps: list[Step]) -> int:
    """How many steps overlap another one in time."""
    return overlapping_spans([(step.at, step.end()) for step in steps])


def overlapping_spans(spans: list[tuple[float, float]]) -> int:
    """How many of the (start, end) spans overlap another one."""
    return sum(1 for index, (start, end) in enumerate(spans)
               if any(other != index and other_start < end and start < other_end
                      for other, (other_start, other_end) in enumerate(spans)))
