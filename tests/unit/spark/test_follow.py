"""--follow: the job as one long-running Spark application, its streaming queries taking telemetry every interval
(a file of its own so that the unit tests' two workers share the Spark tests' time)."""

import threading
import time

from continuity_rpo import job

from test_incremental import SEGMENTS, _comparable, _publish, _telemetry
from test_job import _arguments
from test_metrics import T0


def test_the_long_running_job_publishes_each_interval_what_a_batch_run_publishes(spark, tmp_path, monkeypatch):
    """--follow: one Spark application whose streaming queries take the files every interval; each segment published
    while it runs is computed within a few intervals, and in the end it publishes what a batch run does."""
    rows = _telemetry()
    for segment, (start, end) in enumerate(SEGMENTS):
        _publish(tmp_path / "whole", segment, start, end, rows)
    expected = _comparable(job.run(spark, _arguments(tmp_path, telemetry=str(tmp_path / "whole"),
                                                     output=str(tmp_path / "batch"), report=None, textfile=None),
                                   job.sla.load(None)))
    following = _arguments(tmp_path, incremental=True, follow=1.0, report=None, textfile=str(tmp_path / "rpo.prom"))
    published, failures, stopping = [], [], threading.Event()
    monkeypatch.setattr(job, "_print_results", published.append)

    def wait_for(condition, what):
        deadline = time.monotonic() + 120
        while not any(condition(result) for result in list(published)):
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not published within 120 s")
            time.sleep(0.2)

    def writer():
        try:
            for segment, (start, end) in enumerate(SEGMENTS):
                _publish(tmp_path / "telemetry", segment, start, end, rows)
                wait_for(lambda result, end=end: result.as_of >= T0 + end - 1, f"segment {segment}")
            wait_for(lambda result: _comparable(result) == expected, "what the batch run publishes")
        except AssertionError as exc:
            failures.append(exc)
        finally:
            stopping.set()

    thread = threading.Thread(target=writer)
    thread.start()
    job.follow(spark, following, job.sla.load(None), stopping)
    thread.join()

    assert not failures, failures
    assert len(published) >= len(SEGMENTS)
    assert "continuity_artemis_rpo_seconds" in (tmp_path / "rpo.prom").read_text()
    assert not spark.streams.active  # the queries stop with the job
