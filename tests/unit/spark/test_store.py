"""The telemetry store's writers publish only complete files, and a file left open by a killed writer is not lost."""

import json
import os

import pytest
from continuity_rpo.store import Store

DAY = 1795305600.0  # 2026-11-22T00:00:00Z


def _files(root):
    """Every file under root, relative, sorted; hidden ones included."""
    return sorted(os.path.relpath(os.path.join(where, name), root)
                  for where, _dirs, names in os.walk(root) for name in names)


def _rows(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(autouse=True)
def _hostname(monkeypatch):
    monkeypatch.setattr("socket.gethostname", lambda: "host")


def test_a_segment_stays_hidden_until_it_is_old_enough(tmp_path):
    store = Store(str(tmp_path), "collector", segment_seconds=10)
    store.append("probes", [{"n": 1}], DAY + 1)
    store.append("probes", [{"n": 2}], DAY + 5)
    assert _files(tmp_path) == [f"probes/date=2026-11-22/.collector-host-{int((DAY + 1) * 1000)}.jsonl"]

    store.append("probes", [], DAY + 11)  # a round with nothing new still publishes the old segment on time
    published = f"probes/date=2026-11-22/collector-host-{int((DAY + 1) * 1000)}.jsonl"
    assert _files(tmp_path) == [published]
    assert _rows(tmp_path / published) == [{"n": 1}, {"n": 2}]

    store.append("probes", [{"n": 3}], DAY + 12)
    store.close()
    assert _files(tmp_path) == [published, f"probes/date=2026-11-22/collector-host-{int((DAY + 12) * 1000)}.jsonl"]


def test_midnight_closes_the_segment_of_the_day_before(tmp_path):
    store = Store(str(tmp_path), "prober", segment_seconds=3600)
    store.append("probes", [{"n": 1}], DAY - 1)
    store.append("probes", [{"n": 2}], DAY + 1)
    store.close()
    assert _files(tmp_path) == [f"probes/date=2026-11-21/prober-host-{int((DAY - 1) * 1000)}.jsonl",
                                f"probes/date=2026-11-22/prober-host-{int((DAY + 1) * 1000)}.jsonl"]


def test_the_next_writer_publishes_what_a_killed_one_left_hidden(tmp_path):
    Store(str(tmp_path), "collector").append("link_samples", [{"n": 1}], DAY)  # never closed: killed
    Store(str(tmp_path), "prober").append("link_samples", [{"n": 2}], DAY)  # another writer's: not touched
    restarted = Store(str(tmp_path), "collector")
    restarted.append("link_samples", [], DAY + 1)
    assert _files(tmp_path) == [f"link_samples/date=2026-11-22/.prober-host-{int(DAY * 1000)}.jsonl",
                                f"link_samples/date=2026-11-22/collector-host-{int(DAY * 1000)}.jsonl"]
