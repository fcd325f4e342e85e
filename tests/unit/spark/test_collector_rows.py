"""Which queue rows the collector writes: those that changed, and each window's edges (collector.QueueRows); that the
job's figures from them are those from every row is a property test (test_properties)."""

import pytest

from continuity_rpo.collector import QueueRows
from continuity_rpo.config import load_config
from continuity_rpo.errors import ConfigError

T0 = 1_700_000_000 - 1_700_000_000 % 60


def _row(now, queue, added, broker="dc1-node1"):
    return {"time": now, "broker": broker, "datacentre": broker[:3], "queue": queue, "address": queue,
            "messages_added": added, "messages_acknowledged": added, "message_count": 0, "delivering_count": 0,
            "consumer_count": 1}


def test_an_idle_queue_costs_two_rows_a_window_and_a_moving_one_a_row_a_sample():
    selection = QueueRows(60)
    written = []
    for index in range(36):  # three windows of 5 s samples
        now = T0 + 5 * index
        written += selection.select([_row(now, "idle", 7), _row(now, "moving", index)], now)
    idle = [row["time"] - T0 for row in written if row["queue"] == "idle"]
    # The first sample of each window, and the last of the window before it (written with the next window's first).
    assert idle == [0, 55, 60, 115, 120]
    assert [row["time"] - T0 for row in written if row["queue"] == "moving"] == [5 * i for i in range(36)]


def test_a_queue_that_changes_after_an_idle_stretch_is_written_from_the_sample_before_the_change():
    selection = QueueRows(60)
    written = []
    for index, added in enumerate([1, 1, 1, 4, 4, 4]):
        now = T0 + 5 * index
        written += selection.select([_row(now, "q", added)], now)
    assert [(row["time"] - T0, row["messages_added"]) for row in written] == [(0, 1), (10, 1), (15, 4)]


def test_a_broker_back_from_silence_and_a_new_queue_are_written_at_once():
    selection = QueueRows(60)
    written = []
    for index in range(6):
        now = T0 + 5 * index
        rows = [_row(now, "q", 1)]
        if index not in (2, 3):
            rows.append(_row(now, "q", 1, broker="dc2-node1"))
        if index == 4:
            rows.append(_row(now, "created", 0))
        written += [(row["time"] - T0, row["broker"], row["queue"]) for row in selection.select(rows, now)]
    assert written == [(0, "dc1-node1", "q"), (0, "dc2-node1", "q"), (4 * 5, "dc1-node1", "created")]
    # Silence within a window forgets nothing: dc2's row after it repeats its last one, so it is left out.


def test_a_broker_silent_across_a_window_edge_is_written_when_it_answers_again():
    selection = QueueRows(10)
    written = []
    for index in range(6):
        now = T0 + 5 * index
        rows = [_row(now, "q", 1)] + ([_row(now, "q", 1, broker="dc2-node1")] if index not in (1, 2) else [])
        written += [(row["time"] - T0, row["broker"]) for row in selection.select(rows, now)]
    assert [time for time, broker in written if broker == "dc2-node1"] == [0, 15, 20]


def test_a_window_shorter_than_the_interval_is_refused_by_name(tmp_path):
    password = tmp_path / "password"
    password.write_text("secret")
    config = tmp_path / "measurement.yml"
    config.write_text(f"telemetry: {tmp_path}\ninterval: 5\nwindow_seconds: 2\nlinks: [{{source: a, name: b, "
                      f"target: c}}]\nbrokers: [{{name: n, datacentre: a, management_url: http://x}}]\n"
                      f"management: {{user: m, password_file: {password}}}\n")
    with pytest.raises(ConfigError, match=r"window_seconds \(2\) must be at least interval \(5\)"):
        load_config(str(config))
