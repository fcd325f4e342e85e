"""measured_rpo, the failover's figure: the module run by Ansible on the controller reads the RPO job's textfile, and
the same figure from a real Prometheus that scrapes that textfile. No test bed."""

import http.server
import threading
import time

import pytest
from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

from ansible_collections.continuity.artemis.plugins.module_utils.published_rpo import EVALUATED_METRIC, RPO_METRIC
from support import prometheus as prometheus_server
from support.estate import run_module

LINK = ["source_datacentre", "target_datacentre"]


def _publish(path, rpo_seconds, evaluated_at):
    """A textfile as the job writes it (prometheus_client), for dc1 -> dc2 and the way back."""
    registry = CollectorRegistry()
    rpo = Gauge(RPO_METRIC, "RPO", LINK, registry=registry)
    evaluated = Gauge(EVALUATED_METRIC, "evaluated at", LINK, registry=registry)
    rpo.labels("dc1", "dc2").set(rpo_seconds)
    evaluated.labels("dc1", "dc2").set(evaluated_at)
    rpo.labels("dc2", "dc1").set(0.2)
    evaluated.labels("dc2", "dc1").set(evaluated_at)
    write_to_textfile(str(path), registry)


def _weigh(**arguments):
    return run_module("measured_rpo", {"source_datacentre": "dc1", "target_datacentre": "dc2",
                                       "objective_seconds": 10, **arguments})[0]


def test_a_recent_rpo_within_the_objective_lets_the_failover_go_ahead(tmp_path):
    textfile = tmp_path / "continuity_artemis.prom"
    _publish(textfile, 4.5, time.time() - 30)
    result = _weigh(textfile=str(textfile))
    assert result["within_objective"] is True and not result.get("failed"), result
    assert result["rpo_seconds"] == 4.5 and 29 <= result["age_seconds"] <= 60
    assert result["origin"] == f"textfile:{textfile}"


@pytest.mark.parametrize("rpo, age, words", [
    (42.0, 30, "measured RPO 42.0 s (evaluated 3"),  # above the objective
    (4.5, 2000, "is older than 900"),  # the measurement stopped
])
def test_an_rpo_above_the_objective_or_too_old_is_refused_naming_it_and_its_age(tmp_path, rpo, age, words):
    textfile = tmp_path / "continuity_artemis.prom"
    _publish(textfile, rpo, time.time() - age)
    result = _weigh(textfile=str(textfile))
    assert result["within_objective"] is False and not result.get("failed"), result
    assert words in result["reason"], result["reason"]


def test_no_figure_is_refused_and_says_where_it_looked(tmp_path):
    result = _weigh(textfile=str(tmp_path / "absent.prom"))
    assert result["within_objective"] is False and "no textfile at" in result["reason"]
    textfile = tmp_path / "continuity_artemis.prom"
    _publish(textfile, 1.0, time.time())
    result = _weigh(textfile=str(textfile), target_datacentre="dc3")
    assert result["within_objective"] is False and "no RPO is published for dc1 -> dc3" in result["reason"]


def test_the_operators_figure_is_weighed_instead_and_bad_input_is_refused_by_name(tmp_path):
    result = _weigh(last_known_lag_seconds="12", textfile=str(tmp_path / "absent.prom"))
    assert result["within_objective"] is False and result["origin"] == "operator"
    assert "last known lag 12.0 s is above" in result["reason"]
    result = _weigh(last_known_lag_seconds="soon")
    assert result.get("failed") and "last_known_lag_seconds" in result["msg"]
    result = _weigh(objective_seconds=0)
    assert result.get("failed") and "objective_seconds" in result["msg"]


@pytest.fixture
def prometheus(tmp_path):
    """Prometheus scraping the directory the textfile is written to."""
    served = tmp_path / "metrics"
    served.mkdir()

    class Textfile(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(served), **kwargs)

        def guess_type(self, path):
            return "text/plain; version=0.0.4"

        def log_message(self, *args):
            pass

    exporter = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Textfile)
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    try:
        with prometheus_server.server(tmp_path, [{
                "job_name": "continuity_rpo", "metrics_path": "/continuity_artemis.prom",
                "static_configs": [{"targets": [f"127.0.0.1:{exporter.server_address[1]}"]}]}]) as url:
            yield url, served / "continuity_artemis.prom"
    finally:
        exporter.shutdown()


def test_the_same_figure_is_read_from_prometheus(prometheus):
    url, textfile = prometheus
    evaluated_at = time.time() - 20
    _publish(textfile, 3.25, evaluated_at)
    deadline = time.monotonic() + 30
    while True:  # until Prometheus has scraped it
        result = _weigh(prometheus_url=url)
        if result.get("rpo_seconds") is not None or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert result["within_objective"] is True, result
    assert result["rpo_seconds"] == 3.25 and result["evaluated_at"] == pytest.approx(evaluated_at, abs=1e-3)
    assert result["origin"] == f"prometheus:{url}"


def test_a_prometheus_that_does_not_answer_leaves_the_figure_unknown():
    url = f"http://127.0.0.1:{prometheus_server.free_port()}"
    result = _weigh(prometheus_url=url, request_timeout=2)
    assert result["within_objective"] is False and not result.get("failed"), result
    assert f"Prometheus at {url} did not answer" in result["reason"]
