"""A real Prometheus server (the Debian package `make setup` installs) for tests, and a scrape of one broker's
metrics endpoint as Prometheus does it (HTTPS, basic authentication, the estate's CA)."""

import contextlib
import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import yaml

from continuity_rpo import broker_metrics


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def server(work, scrape_configs: list[dict], interval_s: int = 1, rule_files: list[str] = ()):
    """Prometheus with these scrape configs and rule files, its data and log under ``work``; yields its URL."""
    config = work / "prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": f"{interval_s}s",
                                                 "evaluation_interval": f"{interval_s}s"},
                                      "rule_files": list(rule_files), "scrape_configs": scrape_configs}))
    port = free_port()
    log = work / "prometheus.log"
    with open(log, "w") as handle:
        process = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={work / 'tsdb'}",
                                    f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                                   stderr=handle)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2):
                    break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def query(url: str, expression: str) -> list[dict]:
    """The instant vector of ``expression``: [{"metric": {labels}, "value": [time, "value"]}]."""
    with urllib.request.urlopen(f"{url}/api/v1/query?query={urllib.parse.quote(expression)}", timeout=10) as reply:
        answer = json.load(reply)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def scrape(url: str, ca_file: str, user: str | None, password: str | None, timeout: float = 30) -> dict:
    """One scrape of a metrics endpoint, as the RPO collector does it: {sample name: [(labels, value), ...]}. An HTTP
    error (401 for a wrong or missing password) raises urllib.error.HTTPError, a TLS failure ssl.SSLError or
    URLError."""
    return broker_metrics.scrape(url, ca_file, user, password, timeout)
