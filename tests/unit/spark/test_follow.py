"""A job stopped between ingesting and computing, and --follow (the job as one long-running Spark application, its
streaming queries taking telemetry every interval), both held to what a batch run over the same telemetry publishes
(a file apart from test_incremental so that the unit tests' two workers share the Spark tests' time)."""

import threading
import time

import pytest

from continuity_rpo import job

from test_incremental import SEGMENTS, _comparable, _publish, _telemetry
from test_job import _arguments
from test_metrics import T0


@pytest.fixture(scope="module")
def what_a_batch_run_publishes(spark, tmp_path_factory):
    root, rows = tmp_path_factory.mktemp("whole"), _telemetry()
    for segment, (start, end) in enumerate(SEGMENTS):
        _publish(root / "telemetry", segment, start, end, rows)
    return _comparable(job.run(spark, _arguments(root, output=str(root / "batch"), report=None, textfile=None),
                               job.sla.load(None)))


def test_a_run_stopped_between_ingesting_and_computing_loses_nothing(spark, tmp_path, what_a_batch_run_publishes):
    """The job stops after its streaming queries committed a batch but before it computed it (killed, host down):
    the next run finds that batch in its note and recomputes from it, as a run over the whole telemetry does."""
    root, rows = tmp_path / "telemetry", _telemetry()
    incremental = _arguments(tmp_path, incremental=True, report=None, textfile=None)
    _publish(root, 0, *SEGMENTS[0], rows)
    job.run(spark, incremental, job.sla.load(None))
    _publish(root, 1, *SEGMENTS[1], rows)
    job.telemetry.ingest(spark, str(root), incremental.output)  # ... and the job stops here
    _publish(root, 2, *SEGMENTS[2], rows)
    published = job.run(spark, incremental, job.sla.load(None))

    assert (published.recomputed_from, published.read_from) == (T0 + 360, T0 + 300)  # from segment 1's rows
    for name, value in _comparable(published).items():
        assert value == what_a_batch_run_publishes[name], name
    # Computed batches are recorded and their notes removed: a run with nothing new recomputes nothing.
    assert job.telemetry.pending(spark, incremental.output, {}).rows == {}


# --follow's test publishes the first segment, then the other two at once (the plans across a stall are
# test_incremental's).
FOLLOW_STEPS = [SEGMENTS[0], (SEGMENTS[1][0], SEGMENTS[-1][1])]


def test_the_long_running_job_publishes_each_interval_what_a_batch_run_publishes(spark, tmp_path, monkeypatch,
                                                                                 what_a_batch_run_publishes):
    """--follow: one Spark application whose streaming queries take the files every interval; what is published
    while it runs is computed within a few intervals, and in the end it publishes what a batch run does."""
    rows, expected = _telemetry(), what_a_batch_run_publishes
    following = _arguments(tmp_path, incremental=True, follow=1.0, report=str(tmp_path / "report.html"),
                           textfile=str(tmp_path / "rpo.prom"))
    published, failures, stopping, reports = [], [], threading.Event(), []
    monkeypatch.setattr(job, "_print_results", published.append)
    write_report = job.report.write
    monkeypatch.setattr(job.report, "write", lambda *args: reports.append(args) or write_report(*args))

    def wait_for(condition, what):
        deadline = time.monotonic() + 120
        while not any(condition(result) for result in list(published)):
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not published within 120 s")
            time.sleep(0.2)

    def writer():
        try:
            for step, (start, end) in enumerate(FOLLOW_STEPS):
                for segment, (first, last) in enumerate(SEGMENTS):
                    if start <= first and last <= end:
                        _publish(tmp_path / "telemetry", segment, first, last, rows)
                wait_for(lambda result, end=end: result.as_of >= T0 + end - 1, f"step {step}")
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
    assert len(published) >= len(FOLLOW_STEPS)
    assert "continuity_artemis_rpo_seconds" in (tmp_path / "rpo.prom").read_text()
    # The report is drawn by the first run, then at most every REPORT_EVERY_SECONDS (longer than this test).
    assert len(reports) == 1 and (tmp_path / "report.html").stat().st_size > 0
    assert not spark.streams.active  # the queries stop with the job
