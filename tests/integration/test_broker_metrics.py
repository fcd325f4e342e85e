"""Broker metrics (broker_metrics): every broker of the test bed serves its own and its JVM's figures over HTTPS to
the metrics user only; a real Prometheus scrapes them; the shipped dashboard uses only metrics that exist."""

import json
import os
import re
import ssl
import urllib.error
import uuid

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    MIRROR_QUEUE_PREFIX, mirror_connections)
from support import amqp, prometheus
from support.estate import REPO_ROOT

DASHBOARD = os.path.join(REPO_ROOT, "roles", "rpo_job", "files", "grafana", "continuity_artemis.json")


def _scrape(node, **credentials):
    return prometheus.scrape(node.metrics_url, node.ca_cert, credentials.get("user", node.metrics_user),
                             credentials.get("password", node.metrics_password))


def _value(samples, name, **labels):
    values = [value for sample_labels, value in samples.get(name, [])
              if all(sample_labels.get(key) == wanted for key, wanted in labels.items())]
    assert len(values) == 1, f"{name}{labels}: {values} in {sorted(samples)}"
    return values[0]


def test_every_broker_serves_its_figures_to_the_metrics_user_only(estate):
    dc1 = estate.dc("dc1")
    queue = f"metrics.{uuid.uuid4().hex[:8]}"
    amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 5)
    settings = estate.inventory_vars()
    datacentres = sorted({node.dc for node in estate.nodes})
    connections = mirror_connections(settings["replication_address_groups"], datacentres, "dc1")
    for node in estate.nodes:
        samples = _scrape(node)
        assert _value(samples, "artemis_broker_active", broker=node.name) == 1, node.name
        assert _value(samples, "jvm_memory_used_bytes", area="heap") > 0, node.name
        assert "artemis_address_memory_usage_bytes" in samples and "artemis_connections" in samples, node.name
        # dc1 and dc2 hold the queue (dc2 its mirrored copy), each with the five messages.
        assert amqp.wait_for(lambda: _value(_scrape(node), "artemis_queue_messages", queue=queue),
                             lambda count: count == 5, timeout=30, description=f"{queue} on {node.name}") == 5
        samples = _scrape(node)
        assert _value(samples, "artemis_queue_messages_added_total", queue=queue) == 5, node.name
        assert _value(samples, "artemis_queue_consumers", queue=queue) == 0, node.name
        assert _value(samples, "artemis_address_paging", address=queue) == 0, node.name
        # Every mirror connection of the broker has its store-and-forward queue: its depth is the backlog.
        mirrors = {labels["queue"] for labels, _count in samples["artemis_queue_messages"]
                   if labels["queue"].startswith(MIRROR_QUEUE_PREFIX)}
        expected = {MIRROR_QUEUE_PREFIX + connection["name"] for connection in connections
                    if connection["source"] == node.dc}
        assert mirrors == expected, node.name
    dc1.management().remove_messages(queue, queue, "")

    refused = {"a wrong password": {"password": dc1.metrics_password + "x"},
               "another broker user": {"user": dc1.monitor_user, "password": dc1.monitor_password},
               "no credentials": {"user": None}}
    for what, credentials in refused.items():
        with pytest.raises(urllib.error.HTTPError) as error:
            _scrape(dc1, **credentials)
        assert error.value.code == 401, what
    # HTTPS only, with the estate's certificate.
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        prometheus.scrape(dc1.metrics_url.replace("https:", "http:"), dc1.ca_cert, dc1.metrics_user,
                          dc1.metrics_password, timeout=10)
    with pytest.raises(urllib.error.URLError) as error:
        prometheus.scrape(dc1.metrics_url, ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt",
                          dc1.metrics_user, dc1.metrics_password)
    assert isinstance(error.value.reason, ssl.SSLCertVerificationError), error.value


def _used_by_the_dashboard():
    with open(DASHBOARD) as handle:
        expressions = [target["expr"] for panel in json.load(handle)["panels"] for target in panel.get("targets", [])]
    return {name for expression in expressions for name in re.findall(r"\b((?:artemis|jvm)_\w+)", expression)}


def test_prometheus_scrapes_every_broker_and_the_dashboard_uses_only_metrics_that_exist(estate, tmp_path):
    targets = [node.metrics_url.removeprefix("https://").removesuffix("/metrics") for node in estate.nodes]
    scrape_config = {"job_name": "artemis", "scheme": "https",
                     "tls_config": {"ca_file": estate.nodes[0].ca_cert},
                     "basic_auth": {"username": estate.nodes[0].metrics_user,
                                    "password": estate.nodes[0].metrics_password},
                     "static_configs": [{"targets": targets}]}
    with prometheus.server(tmp_path, [scrape_config]) as url:
        up = amqp.wait_for(lambda: prometheus.query(url, 'up{job="artemis"} == 1'),
                           lambda result: len(result) == len(targets), timeout=60,
                           description="Prometheus scraping every broker")
        assert sorted(row["metric"]["instance"] for row in up) == sorted(targets)
        live = prometheus.query(url, "artemis_broker_active == 1")
        assert sorted(row["metric"]["broker"] for row in live) == sorted(node.name for node in estate.nodes)

    used = _used_by_the_dashboard()
    assert {"artemis_queue_messages", "jvm_memory_used_bytes"} <= used, used
    exposed = set()
    for node in estate.nodes:
        exposed |= set(_scrape(node))
    assert used <= exposed, f"the dashboard uses metrics no broker exposes: {sorted(used - exposed)}"
