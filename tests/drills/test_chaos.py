"""The chaos run's regression schedules (make drills): each is a fixed schedule that broke a promise before its fix
(docs/chaos.md, "What the runs found"), carried out by the chaos runner on a bed of its own under the same load,
and judged by the same checker. The seeds' long runs are `make chaos`; their verdicts are in
tests/drills/results/chaos/."""

import json

import pytest

from chaos import runner
from chaos.schedule import Step

pytestmark = pytest.mark.timeout(3600)

# name: (estate, duration in seconds, steps)
REGRESSIONS = {
    # The failback waited for the queues' counts to agree between the datacentres while the active one's clients
    # went on acting: they never did, and it failed after failback_drain_timeout (600 s) with the estate wedged
    # half-way (the returning datacentre fenced, its catch-up unconfirmed).
    "failback-under-load": ("2x2", 420, [
        Step(30.0, "operation", "failover", 60, {"skip": 1, "abrupt": True}),
        Step(150.0, "operation", "failback", 60, {}),
    ]),
    # The primary of a pair powered off and back within its backup's connection TTL: without a lock manager the
    # backup took over after the primary had started again, and the pair had two live brokers.
    "primary-power-cycle": ("2x2", 300, [
        Step(30.0, "fault", "power_off", 20, {"broker": "dc2-node1", "datacentre": "dc2"}),
        Step(150.0, "fault", "power_off", 20, {"broker": "dc1-node1", "datacentre": "dc1"}),
    ]),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_a_regression_schedule_keeps_every_promise(name, tmp_path):
    estate, duration, steps = REGRESSIONS[name]
    summary = runner.run(0, estate, duration, str(tmp_path / name), steps=steps, name=f"regression-{name}")
    broken = [verdict for verdict in summary["verdicts"] if not verdict["holds"]]
    assert not broken, json.dumps(broken, indent=1)[:6000]
    assert not summary["workers_crashed"], summary["workers_crashed"]
    assert not summary["findings"], summary["findings"]
