"""The HTML report from the job's rows: one verdict per objective that agrees with the windows its plot draws,
"No data" where there is nothing, times in UTC, headings in words, the RTO breakdown and throughput."""

import re

from continuity_rpo import report, sla
from continuity_rpo.results import Results

T0 = 1_700_000_040.0  # a window boundary for 60 s windows
LINK = {"source_datacentre": "dc1", "target_datacentre": "dc2"}


def _rows(**overrides):
    return Results(as_of=T0 + 180, clock=T0 + 200, **overrides)


def _stall_rows():
    """Three windows; the middle one held a 40 s stall: one window of three over a 5 s objective."""
    worst = [0.25, 40.0, 0.25]
    link_windows = [dict(LINK, window_end=T0 + 60 * (i + 1), rpo_seconds=rpo, lag_p50_seconds=0.2,
                         lag_p99_seconds=rpo, lag_max_seconds=rpo, backlog_events_max=3)
                    for i, rpo in enumerate(worst)]
    link_sla = [dict(LINK, windows=3, good_ratio=2 / 3, worst_rpo_seconds=40.0, objective_seconds=5.0,
                     passed=False, burn_rate=(1 / 3) / 0.001)]
    queue_windows = [{"datacentre": "dc2", "queue": "orders", "window_end": T0 + 60 * (i + 1),
                      "messages_in_per_second": 100.0, "acknowledged_per_second": 100.0,
                      "message_count_max": 3920 if i == 1 else 20} for i in range(3)]
    rto = [{"datacentre": "dc2", "queue": "orders", "window_end": T0 + 180, "message_count": 5000,
            "consumption_per_second": 100.0, "detection_seconds": 30.0, "activation_seconds": 30.0,
            "drain_seconds": 50.0, "rto_seconds": 110.0},
           {"datacentre": "dc2", "queue": "idle", "window_end": T0 + 180, "message_count": 7,
            "consumption_per_second": None, "detection_seconds": 30.0, "activation_seconds": 30.0,
            "drain_seconds": None, "rto_seconds": None}]
    config = sla.load(None)
    return _rows(link_windows=link_windows, link_sla=link_sla, queue_windows=queue_windows, rto=rto,
                 queue_sla=sla.queue_compliance(config, rto),
                 current_rpo=[dict(LINK, rpo_seconds=0.25, evaluated_at=T0 + 180, replicated_up_to=T0 + 179.75)]), config


def test_each_objective_has_one_verdict_that_agrees_with_the_windows_the_plot_draws():
    rows, config = _stall_rows()
    html = report.render(rows, config)

    over = [row for row in rows.link_windows if row["rpo_seconds"] > config["objectives"]["rpo_seconds"]]
    assert len(over) == 1
    assert "dc1 → dc2: <b class=\"missed\">MISSED</b> — 1 of 3 window(s) over 5 s" in html
    # The same verdict captions the RPO plot of the link.
    caption = re.search(r"<figcaption>RPO in time, dc1 → dc2[^<]*(.*?)</figcaption>", html).group(1)
    assert "MISSED" in caption and "1 of 3 window(s)" in caption
    assert "dc2, queue orders: <b class=\"met\">MET</b> — estimated 110 s against 120 s" in html
    assert "dc2, queue idle: <b class=\"unknown\">UNKNOWN</b> — no consumption measured" in html


def test_a_window_is_drawn_as_one_step_from_its_start_to_its_end():
    rows, _config = _stall_rows()
    xs, ys = report.step_series(rows.link_windows, "rpo_seconds", 60)
    assert [x.timestamp() for x in xs] == [T0, T0 + 60, T0 + 120, T0 + 180]
    assert ys == [0.25, 40.0, 0.25, 0.25]


def test_the_rto_breakdown_and_throughput_are_shown_in_words_and_utc():
    rows, config = _stall_rows()
    html = report.render(rows, config)
    for heading in ("Messages waiting", "Consumption speed", "Detection", "Activation", "Draining", "RTO estimate"):
        assert f"<th>{heading}</th>" in html
    cells = [re.findall(r"<td>([^<]*)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", html)]
    assert ["dc2", "orders", "5,000", "100 msg/s", "30 s", "30 s", "50 s", "110 s", "120 s", "yes"] in cells
    # No estimate without a consumption speed: neither met nor missed, as its verdict says.
    assert ["dc2", "idle", "7", "-", "30 s", "30 s", "-", "-", "120 s", "-"] in cells
    assert "Throughput per queue" in html and html.count("data:image/png;base64,") == 5
    assert "<h1>RPO and RTO as of 2023-11-14 22:17:00 UTC</h1>" in html
    assert "2023-11-14 22:16:59 UTC" in html  # replicated up to, in UTC
    # RPO now: 0.25 s at 22:17:00, so the oldest probe at risk was sent at 22:16:59.75.
    assert ["dc1 → dc2", "0.25 s", "2023-11-14 22:17:00 UTC", "2023-11-14 22:16:59 UTC",
            "2023-11-14 22:16:59 UTC"] in cells
    assert str(int(T0)) not in html and "_seconds" not in html and "source_datacentre" not in html


def test_nothing_to_show_says_no_data_instead_of_an_empty_plot():
    html = report.render(_rows(), sla.load(None))
    assert "data:image/png" not in html
    assert html.count('<p class="no-data">No data</p>') == 14  # three verdict lists, five plots, six tables


def test_a_group_active_everywhere_shows_its_acknowledgements_against_its_delay():
    config = sla.load(None)
    quiet = report.render(_rows(), config)
    assert "acknowledgements against the staging delay" not in quiet  # no such group in the estate
    html = report.render(_rows(ack_notices=[
        {"group": "shared", "notices": 3000, "applied": 3000, "late": 0, "mean_seconds": 0.12, "p99_seconds": 1.43,
         "max_seconds": 2.5, "durable_mean_seconds": 0.65, "delay_seconds": 20.0, "last_sample_time": T0 + 180},
        {"group": "hasty", "notices": 10, "applied": 2, "late": 8, "mean_seconds": 0.04, "p99_seconds": 0.09,
         "max_seconds": 0.1, "durable_mean_seconds": None, "delay_seconds": 0.005, "last_sample_time": T0 + 180}]),
        config)
    assert ("<td>shared</td><td>3,000</td><td>0</td><td>120 ms</td><td>1,430 ms</td><td>2,500 ms</td>"
            "<td>650 ms</td><td>20,000 ms</td><td>yes</td>") in html
    assert ("<td>hasty</td><td>10</td><td>8</td><td>40 ms</td><td>90 ms</td><td>100 ms</td><td>-</td>"
            "<td>5 ms</td><td>no</td>") in html


def test_per_queue_plots_draw_the_busiest_queues_and_say_how_many_of_how_many(monkeypatch):
    _rows_with_one, config = _stall_rows()
    queue_windows = [{"datacentre": dc, "queue": f"q{index:02d}", "window_end": T0 + 60,
                      "messages_in_per_second": float(index), "acknowledged_per_second": float(index),
                      "message_count_max": 100 - index}
                     for dc in ("dc1", "dc2") for index in range(30)]
    drawn = {}

    def panel(title, _ylabel, lines, _window, _objective=None):
        drawn[title] = [label for label, _windows, _column, _style in lines]
        return "cGxvdA=="
    monkeypatch.setattr(report, "_panel", panel)
    html = report.render(_rows(queue_windows=queue_windows, link_windows=_rows_with_one.link_windows), config)

    assert len(drawn["Throughput"]) == 2 * report.DRAWN_QUEUES
    assert {label.rsplit(" ", 1)[0] for label in drawn["Throughput"]} == {
        f"{dc} q{index}" for dc in ("dc1", "dc2") for index in range(25, 30)}
    assert set(drawn["Queue depth"]) == {f"{dc} q{index:02d}" for dc in ("dc1", "dc2") for index in range(5)}
    assert f"the {report.DRAWN_QUEUES} busiest of 60 queue series drawn" in html
    assert f"the {report.DRAWN_QUEUES} deepest of 60 queue series drawn" in html
