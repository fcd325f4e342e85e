"""Broker metrics (broker_metrics_enabled): every broker of the test bed serves Artemis's meters and its mirrors' state
over HTTPS to the monitoring role only; a real Prometheus scrapes them; the shipped dashboard uses only metrics that
exist."""

import json
import os
import re
import ssl
import urllib.error
import uuid

import pytest
from cryptography import x509

from support import amqp_clients as amqp
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    MIRROR_QUEUE_PREFIX, mirror_connections)
from support import prometheus
from support.estate import REPO_ROOT, TESTBED_STATE_DIR

# The systemd test bed turns metrics on (the main one does not).
pytestmark = pytest.mark.systemd

DASHBOARD = os.path.join(REPO_ROOT, "roles", "rpo_job", "files", "grafana", "continuity_artemis.json")
BROKER_RULES = os.path.join(REPO_ROOT, "roles", "rpo_job", "files", "prometheus", "continuity_artemis_brokers.rules.yml")


def _scrape(node, user=None, password=None, url=None, ca_file=None):
    return prometheus.scrape(url or node.metrics_url, ca_file or node.ca_cert,
                             node.monitor_user if user is None else user,
                             node.monitor_password if password is None else password)


def _values(samples, name, **labels):
    return [value for sample_labels, value in samples.get(name, [])
            if all(sample_labels.get(key) == wanted for key, wanted in labels.items())]


def _value(samples, name, **labels):
    values = _values(samples, name, **labels)
    assert len(values) == 1, f"{name}{labels}: {values} in {sorted(samples)}"
    return values[0]


@pytest.fixture(autouse=True)
def _metrics_on(estate):
    assert all(node.metrics_url for node in estate.nodes), (
        "the test bed is up without --metrics (make integration runs this test on the systemd bed, which has them)")


def test_every_broker_serves_its_figures_to_the_monitoring_role_only(estate):
    dc1 = estate.dc("dc1")
    queue = f"metrics.{uuid.uuid4().hex[:8]}"
    amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 5, ca_path=dc1.ca_cert)
    settings = estate.inventory_vars()
    datacentres = sorted({node.dc for node in estate.nodes})
    connections = mirror_connections(settings["replication_address_groups"], datacentres, "dc1")
    for node in estate.nodes:
        # The endpoint opens on a thread of its own, just after the broker has started.
        samples = amqp.wait_for(lambda: _scrape(node), timeout=30, description=f"the metrics of {node.name}")
        assert _value(samples, "artemis_active", broker=node.name) == 1, node.name
        assert sum(_values(samples, "jvm_memory_used_bytes", area="heap")) > 0, node.name
        assert _value(samples, "artemis_connection_count", broker=node.name) > 0, node.name
        assert "artemis_address_memory_usage" in samples and "process_uptime_seconds" in samples, node.name
        # dc1 holds the queue, dc2 its mirrored copy, each with the five messages.
        amqp.wait_for(lambda: _values(_scrape(node), "artemis_message_count", queue=queue), lambda count: count == [5],
                      timeout=30, description=f"{queue} on {node.name}")
        samples = _scrape(node)
        assert _value(samples, "artemis_messages_added", queue=queue) == 5, node.name
        assert _value(samples, "artemis_consumer_count", queue=queue) == 0, node.name
        assert _value(samples, "artemis_number_of_pages", address=queue) == 0, node.name
        # Each mirror connection of the broker: its store-and-forward queue (the backlog) and whether it is up.
        expected = {connection["name"] for connection in connections if connection["source"] == node.dc}
        backlogs = {labels["queue"] for labels, _count in samples["artemis_message_count"]
                    if labels["queue"].startswith(MIRROR_QUEUE_PREFIX)}
        assert backlogs == {MIRROR_QUEUE_PREFIX + name for name in expected}, node.name
        connected = {labels["connection"]: value for labels, value in samples["artemis_broker_connection_connected"]}
        assert connected == dict.fromkeys(expected, 1), node.name
        # The ends of the certificates it loaded: its own and the estate's CA, as the test bed's PKI issued them.
        ends = {(labels["broker"], labels["file"], labels["serial"]): value
                for labels, value in samples["artemis_tls_certificate_expiry_timestamp_seconds"]}
        issued = {(node.name, "broker.pem", *_end(f"{node.name}.pem")), (node.name, "ca.pem", *_end("ca.pem"))}
        assert ends == {(broker, file, serial): end for broker, file, serial, end in issued}, node.name
    dc1.management().remove_messages(queue, queue, "")

    refused = {"a wrong password": {"password": dc1.monitor_password + "x"},
               "a user without the monitoring role": {"user": dc1.user, "password": dc1.password},
               "the administrator (not in the monitoring role)": {"user": dc1.admin_user,
                                                                  "password": dc1.admin_password}}
    for what, credentials in refused.items():
        with pytest.raises(urllib.error.HTTPError) as error:
            _scrape(dc1, **credentials)
        assert error.value.code == 401, what
    with pytest.raises(urllib.error.HTTPError) as error:
        prometheus.scrape(dc1.metrics_url, dc1.ca_cert, None, None)
    assert error.value.code == 401
    # HTTPS only, with the estate's certificate.
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        _scrape(dc1, url=dc1.metrics_url.replace("https:", "http:"))
    with pytest.raises(urllib.error.URLError) as error:
        _scrape(dc1, ca_file=ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt")
    assert isinstance(error.value.reason, ssl.SSLCertVerificationError), error.value


def _end(pki_file):
    """(serial in hex, end as Unix time) of a certificate of the test bed's PKI."""
    with open(os.path.join(TESTBED_STATE_DIR, "pki", pki_file), "rb") as handle:
        certificate = x509.load_pem_x509_certificate(handle.read())
    return f"{certificate.serial_number:x}", certificate.not_valid_after_utc.timestamp()


def _broker_metric_names(text):
    return set(re.findall(r"\b((?:artemis|jvm)_\w+)", text))


def _used_by_the_dashboard():
    with open(DASHBOARD) as handle:
        expressions = [target["expr"] for panel in json.load(handle)["panels"] for target in panel.get("targets", [])]
    return {name for expression in expressions for name in _broker_metric_names(expression)}


def _per_broker_panels():
    """The panels of the dashboard's row repeated per broker (Grafana's $broker): those after it, to the next row."""
    with open(DASHBOARD) as handle:
        panels = json.load(handle)["panels"]
    start = next(index for index, panel in enumerate(panels) if panel.get("repeat") == "broker")
    following = panels[start + 1:]
    end = next((index for index, panel in enumerate(following) if panel["type"] == "row"), len(following))
    return following[:end]


def test_prometheus_scrapes_every_broker_and_the_dashboard_uses_only_metrics_that_exist(estate, tmp_path):
    node = estate.nodes[0]
    targets = [n.metrics_url.removeprefix("https://").removesuffix("/metrics") for n in estate.nodes]
    scrape_config = {"job_name": "artemis", "scheme": "https", "tls_config": {"ca_file": node.ca_cert},
                     "basic_auth": {"username": node.monitor_user, "password": node.monitor_password},
                     "static_configs": [{"targets": targets}]}
    with prometheus.server(tmp_path, [scrape_config]) as url:
        up = amqp.wait_for(lambda: prometheus.query(url, 'up{job="artemis"} == 1'),
                           lambda result: len(result) == len(targets), timeout=60,
                           description="Prometheus scraping every broker")
        assert sorted(row["metric"]["instance"] for row in up) == sorted(targets)
        live = prometheus.query(url, "artemis_active == 1")
        assert sorted(row["metric"]["broker"] for row in live) == sorted(n.name for n in estate.nodes)
        # The row per broker: every query Prometheus takes, and every panel shows each broker something.
        panels = _per_broker_panels()
        assert len(panels) >= 6, [panel["title"] for panel in panels]
        for n in estate.nodes:
            for panel in panels:
                shown = [prometheus.query(url, target["expr"].replace("$broker", n.name)) for target in panel["targets"]]
                assert any(shown), f"{panel['title']}: nothing for {n.name}"
                assert all(row["metric"].get("broker", n.name) == n.name for rows in shown for row in rows), shown

    used = _used_by_the_dashboard()
    assert {"artemis_message_count", "artemis_broker_connection_connected", "jvm_memory_used_bytes"} <= used, used
    exposed = set()
    for n in estate.nodes:
        exposed |= set(_scrape(n))
    assert used <= exposed, f"the dashboard uses metrics no broker exposes: {sorted(used - exposed)}"
    with open(BROKER_RULES) as handle:
        alerted = _broker_metric_names(handle.read())
    assert alerted and alerted <= exposed, f"the brokers' alert rules use metrics no broker exposes: {alerted - exposed}"
