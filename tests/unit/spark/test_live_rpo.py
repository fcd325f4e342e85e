"""The prober's live RPO: the age of the oldest probe not yet covered at each target, from the moment a stall starts,
by the job's own definition; served over HTTPS to the monitoring user only. The routes here talk to no broker (what
each target shows is scripted); the prober against real brokers is in the integration tests."""

import socket
import ssl
import urllib.error
import urllib.request

import pytest
from continuity_rpo import endpoint, metrics, prober, telemetry
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from support.tls import private_ca, signed_certificate

T0 = 1_800_000_000.0
CONFIG = {"brokers": [{"name": "dc1-node1", "datacentre": "dc1", "management_url": "https://dc1:8443"},
                      {"name": "dc2-node1", "datacentre": "dc2", "management_url": "https://dc2:8443"}]}


class Clock:
    def __init__(self):
        self.now = T0

    def time(self):
        return self.now


class ScriptedRoute(prober.Route):
    """A route whose source takes every probe and whose target shows what ``shows`` lets through."""

    def __init__(self, shows):
        super().__init__({"address": "continuity.probe", "source": "dc1", "targets": ["dc2"]}, CONFIG)
        self.shows = shows  # probe id -> shown at the target (True) or not
        self.removed = []

    def _sender(self, probes):
        return type("Sender", (), {"send": lambda _self, message, timeout: None})()

    def _visible(self, datacentre, management, waiting):
        if self.shows is None:
            return None
        return {probe for probe, shown in self.shows.items() if shown} & set(waiting[-prober.LISTED_PROBES:])

    def _remove(self, probes, management):
        self.removed += probes
        return True


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(prober.time, "time", clock.time)
    return clock


def _live(live):
    return {tuple(sample.labels.values()): sample.value
            for family in live.collect() if family.name == "continuity_artemis_live_rpo_seconds"
            for sample in family.samples}


def _round(route, clock, rows, seconds=1.0):
    sent = route.send({"ttl": 600})
    rows += [dict(sent, target_datacentre=target) for target in route.targets]
    rows += route.observe({})
    clock.now += seconds
    return sent["probe_id"]


def test_the_live_rpo_rises_through_a_stall_and_falls_once_a_later_probe_arrives(clock):
    shows = {}
    route = ScriptedRoute(shows)
    live = prober.LiveRpo([route], objective_seconds=5.0, target_ratio=0.999)
    rows = []
    assert _live(live) == {("dc1", "dc2"): 0.0}  # nothing sent, nothing at risk

    first = _round(route, clock, rows)  # sent at T0; the target does not show it yet
    assert _live(live) == {("dc1", "dc2"): pytest.approx(1.0)}
    shows[first] = True
    stalled = [_round(route, clock, rows) for _probe in range(10)]  # seen; then ten probes the target never shows
    assert _live(live) == {("dc1", "dc2"): pytest.approx(10.0)}  # the oldest unseen was sent 10 s ago
    clock.now += 20
    assert _live(live) == {("dc1", "dc2"): pytest.approx(30.0)}  # rising at scrape time, with no round in between

    # The mirror delivers in order: the newest one shown covers the earlier ones (expired, say), as the job counts.
    latest = _round(route, clock, rows)
    shows[latest] = True
    route.observe({})
    assert _live(live) == {("dc1", "dc2"): 0.0}
    assert set(stalled) <= set(route.removed)  # covered at every target: removed at the source
    assert route.outstanding == {} and route.sent_at == {}


def test_a_target_that_cannot_be_read_counts_as_showing_nothing(clock):
    route = ScriptedRoute(None)
    live = prober.LiveRpo([route], objective_seconds=5.0, target_ratio=0.999)
    for _probe in range(5):
        _round(route, clock, [])
    assert _live(live) == {("dc1", "dc2"): pytest.approx(5.0)}


def test_the_live_figure_and_the_jobs_agree_at_the_same_instant(spark, clock):
    shows = {}
    route = ScriptedRoute(shows)
    live = prober.LiveRpo([route], objective_seconds=5.0, target_ratio=0.999)
    rows = []
    for second in range(60):
        probe = _round(route, clock, rows)
        # Delivered within the second, except during a stall from 20 s to 45 s (then all at once).
        if not 20 <= second < 45:
            shows.update(dict.fromkeys([probe] + list(route.outstanding), True))
            rows += route.observe({})
        if second in (30, 44, 59):
            latencies, _rejected = metrics.probe_latencies(
                telemetry.from_rows(spark, {"probes": rows}, now=clock.now).frames["probes"])
            (job,) = metrics.current_rpo(latencies, clock.now).collect()
            assert _live(live)[("dc1", "dc2")] == pytest.approx(job["rpo_seconds"], abs=1.0), second


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    directory = tmp_path_factory.mktemp("endpoint")
    ca_cert, ca_key = private_ca(directory, "estate-ca")
    certificate, key = signed_certificate(directory, "measurement", "measurement", ["127.0.0.1"], ca_cert, ca_key)
    with socket.socket() as probe_port:
        probe_port.bind(("127.0.0.1", 0))
        port = probe_port.getsockname()[1]
    route = ScriptedRoute({})
    route.at_risk_since = {"dc2": 0.0}
    registry = CollectorRegistry()
    registry.register(prober.LiveRpo([route], objective_seconds=5.0, target_ratio=0.999))
    server = endpoint.serve(registry, {"address": "127.0.0.1", "port": port, "certificate": certificate, "key": key},
                            "monitor", "s3cret-monitor")
    yield f"https://127.0.0.1:{port}/metrics", ca_cert
    server.shutdown()
    server.server_close()


def _scrape(url, ca_cert, user=None, password=None):
    request = urllib.request.Request(url)
    if user is not None:
        manager = urllib.request.HTTPPasswordMgrWithDefaultRealm()
        manager.add_password(None, url, user, password)
        opener = urllib.request.build_opener(urllib.request.HTTPBasicAuthHandler(manager),
                                             urllib.request.HTTPSHandler(context=ssl.create_default_context(
                                                 cafile=ca_cert)))
        return opener.open(request, timeout=10).read().decode()
    return urllib.request.urlopen(request, timeout=10, context=ssl.create_default_context(cafile=ca_cert)).read()


def test_the_endpoint_serves_the_monitoring_user_over_tls_and_nobody_else(served):
    url, ca_cert = served
    text = _scrape(url, ca_cert, "monitor", "s3cret-monitor")
    families = {family.name: family for family in text_string_to_metric_families(text)}
    (sample,) = families["continuity_artemis_live_rpo_seconds"].samples
    assert sample.labels == {"source_datacentre": "dc1", "target_datacentre": "dc2"} and sample.value > 0
    # The objective and the budget beside it, on the same labels, for the rules to compare and divide by.
    link = sample.labels
    beside = ("continuity_artemis_live_rpo_objective_seconds", "continuity_artemis_live_rpo_target_ratio")
    assert [(other.labels, other.value) for name in beside for other in families[name].samples] == \
        [(link, 5.0), (link, 0.999)]
    for user, password in ((None, None), ("monitor", "wrong"), ("admin", "s3cret-monitor")):
        with pytest.raises(urllib.error.HTTPError) as refused:
            _scrape(url, ca_cert, user, password)
        assert refused.value.code == 401
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(url, timeout=10, context=ssl.create_default_context())  # the system's CAs only
    with pytest.raises((ConnectionError, ssl.SSLError, urllib.error.URLError)):
        urllib.request.urlopen(url.replace("https:", "http:"), timeout=10)  # no plain text


def test_a_client_that_connects_and_says_nothing_does_not_stop_the_scrapes(served):
    url, ca_cert = served
    host, port = url.split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port))):
        assert "continuity_artemis_live_rpo_seconds" in _scrape(url, ca_cert, "monitor", "s3cret-monitor")
