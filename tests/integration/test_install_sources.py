"""The broker role downloads the archive from broker_archive_url, checks its SHA-512, and refuses a mismatch."""

import functools
import http.server
import json
import os
import threading

import pytest

from support.estate import REPO_ROOT, run_playbook

CONTROLLER = "10.201.0.1"  # the test bed's controller address, reachable from every node
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
