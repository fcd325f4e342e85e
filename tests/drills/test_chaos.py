"""The chaos run's regression schedules (make drills): each is a fixed schedule that broke a promise before its fix
(tests/chaos/regressions.py, docs/chaos.md "What the runs found"), carried out by the chaos runner on a bed of its
own under the same load, and judged by the same checker. The seeds' long runs are `make chaos`; their verdicts are
in tests/drills/results/chaos/."""

import json

import pytest

from chaos import runner
from chaos.regressions import REGRESSIONS

pytestmark = pytest.mark.timeout(3600)


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_a_regression_schedule_keeps_every_promise(name, tmp_path):
    summary = runner.run_regression(name, str(tmp_path / name))
    broken = [verdict for verdict in summary["verdicts"] if not verdict["holds"]]
    assert not broken, json.dumps(broken, indent=1)[:6000]
    assert not summary["workers_crashed"], summary["workers_crashed"]
    assert not summary["findings"], summary["findings"]
