"""The broker role downloads the archive from broker_archive_url, checks its SHA-512, and refuses a mismatch; likewise
the metrics registry jars from broker_metrics_maven_url (SHA-256). The metrics plugin is the controller's build."""

import functools
import hashlib
import http.server
import json
import os
import shutil
import threading

import pytest
import yaml

from support.estate import CONTROLLER, REPO_ROOT, run_playbook

ARCHIVE_DIR = os.path.join(REPO_ROOT, ".cache", "artemis")
VERSION = "2.56.0"


@pytest.fixture(scope="module")
def archive_server(testbed):
    """An HTTP server on the controller standing in for the Apache archive or a company mirror."""
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requests.append(self.path)

    server = http.server.ThreadingHTTPServer((CONTROLLER, 0),
                                             functools.partial(Handler, directory=ARCHIVE_DIR))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://{CONTROLLER}:{server.server_address[1]}", requests
    server.shutdown()


def _install(estate, url, install_root, **extra):
    estate.exec("dc2-node1", "rm", "-rf", install_root)
    extra_vars = {"target": "dc2-node1", "broker_archive_url": url, "broker_archive_local_path": "",
                  "broker_install_root": install_root, **extra}
    return run_playbook("tests/integration/playbooks/broker_install.yml",
                        extra_args=["-e", json.dumps(extra_vars)])


def test_install_downloads_the_archive_and_verifies_it(estate, archive_server):
    base_url, requests = archive_server
    archive = f"apache-artemis-{VERSION}-bin.tar.gz"

    result = _install(estate, f"{base_url}/{archive}", "/opt/artemis-from-url")

    assert result.rc == 0, result.output[-4000:]
    assert f"/{archive}" in requests
    assert "artemis" in estate.exec("dc2-node1", "ls", f"/opt/artemis-from-url/apache-artemis-{VERSION}/bin/").split()


def test_install_refuses_an_archive_whose_checksum_does_not_match(estate, archive_server):
    base_url, _requests = archive_server

    result = _install(estate, f"{base_url}/apache-artemis-{VERSION}-bin.tar.gz", "/opt/artemis-bad-sum",
                      broker_archive_sha512="0" * 128)

    assert result.rc != 0
    assert "checksum" in result.output[result.output.find("fatal:"):].lower(), result.output[-4000:]
    assert estate.exec("dc2-node1", "sh", "-c", "ls /opt/artemis-bad-sum 2>/dev/null || true").strip() == ""


@pytest.fixture(scope="module")
def maven_mirror(testbed, tmp_path_factory):
    """The registry jars `make setup` fetched, in a Maven repository's layout, served like Maven Central."""
    root = tmp_path_factory.mktemp("maven")
    with open(os.path.join(REPO_ROOT, "roles", "broker", "vars", "main.yml")) as handle:
        jars = yaml.safe_load(handle)["_broker_metrics_registries"][VERSION]["jars"]
    for jar in jars:
        name = f"{jar['artifact']}-{jar['version']}.jar"
        folder = root.joinpath(*jar["group"].split("."), jar["artifact"], jar["version"])
        folder.mkdir(parents=True)
        shutil.copy(os.path.join(REPO_ROOT, ".cache", "metrics", name), folder / name)
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requests.append(self.path)

    server = http.server.ThreadingHTTPServer((CONTROLLER, 0), functools.partial(Handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://{CONTROLLER}:{server.server_address[1]}", jars, requests
    server.shutdown()


def _prepare_metrics(estate, url, instance, **extra):
    estate.exec("dc2-node1", "rm", "-rf", instance)
    extra_vars = {"target": "dc2-node1", "broker_metrics_enabled": True, "broker_metrics_maven_url": url,
                  "broker_metrics_jars_local_dir": "", "broker_instance_dir": instance, **extra}
    return run_playbook("tests/integration/playbooks/broker_metrics.yml", extra_args=["-e", json.dumps(extra_vars)])


def test_the_metrics_registry_is_downloaded_verified_and_the_plugin_installed_as_built_on_the_controller(
        estate, maven_mirror):
    base_url, jars, requests = maven_mirror
    instance = "/var/opt/artemis/metrics-from-url"

    result = _prepare_metrics(estate, base_url, instance)

    assert result.rc == 0, result.output[-4000:]
    for jar in jars:
        assert f"/{jar['group'].replace('.', '/')}/{jar['artifact']}/{jar['version']}/" \
               f"{jar['artifact']}-{jar['version']}.jar" in requests
    prepared = estate.exec("dc2-node1", "ls", f"{instance}/etc/next/metrics").split()
    assert sorted(prepared) == sorted([f"{jar['artifact']}.jar" for jar in jars] + ["continuity-artemis-metrics.jar"])
    installed = estate.exec("dc2-node1", "sha256sum", f"{instance}/etc/next/metrics/continuity-artemis-metrics.jar")
    with open(os.path.join(REPO_ROOT, "roles", "broker", "files", "plugins", "metrics.jar"), "rb") as built:
        assert installed.split()[0] == hashlib.sha256(built.read()).hexdigest()


def test_the_metrics_registry_is_refused_when_a_jar_does_not_match_its_pin(estate, maven_mirror):
    base_url, jars, _requests = maven_mirror
    instance = "/var/opt/artemis/metrics-bad-sum"
    wrong = {VERSION: {"micrometer": "1.17.0", "jars": [dict(jars[0], sha256="0" * 64)]}}

    result = _prepare_metrics(estate, base_url, instance, _broker_metrics_registries=wrong)

    assert result.rc != 0
    assert f"did not match {'0' * 64}" in result.output, result.output[-4000:]
    assert estate.exec("dc2-node1", "sh", "-c", f"ls {instance}/etc/next/metrics 2>/dev/null || true").strip() == ""


def test_a_local_registry_jar_that_does_not_match_its_pin_is_refused_before_any_copy(estate, tmp_path):
    with open(os.path.join(REPO_ROOT, "roles", "broker", "vars", "main.yml")) as handle:
        jars = yaml.safe_load(handle)["_broker_metrics_registries"][VERSION]["jars"]
    for jar in jars:
        shutil.copy(os.path.join(REPO_ROOT, ".cache", "metrics", f"{jar['artifact']}-{jar['version']}.jar"), tmp_path)
    tampered = tmp_path / f"{jars[0]['artifact']}-{jars[0]['version']}.jar"
    tampered.write_bytes(tampered.read_bytes() + b"\0")
    instance = "/var/opt/artemis/metrics-bad-local"

    result = _prepare_metrics(estate, "", instance, broker_metrics_jars_local_dir=str(tmp_path))

    assert result.rc != 0
    assert f"broker_metrics_jars_local_dir: {tampered} is not the pinned one" in result.output, result.output[-4000:]
    assert estate.exec("dc2-node1", "sh", "-c", f"ls {instance}/etc/next/metrics/*.jar 2>/dev/null || true").strip() == ""
