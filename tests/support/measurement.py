"""The RPO/RTO measurement run beside a test: the collector and prober of spark/ in threads against the test
bed, the job's command line over what they wrote, and the metrics it published."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

import yaml
from prometheus_client.parser import text_string_to_metric_families

# The test bed's systemd nodes run Debian 12, like the controller: the controller's python3 builds their wheels.
NODE_PYTHON = "/usr/bin/python3"


def build_wheelhouse(target: str, repo_root: str) -> str:
    """What an operator prepares for an air-gapped measurement host: every requirement as a wheel for the host's
    Python, in ``target``."""
    subprocess.run([NODE_PYTHON, "-m", "pip", "wheel", "-q", "-r", os.path.join(repo_root, "spark", "requirements.txt"),
                    "-w", target], check=True, timeout=1200)
    return target


def rpo_inventory(testbed_inventory: str, directory, node, host_vars: dict) -> str:
    """A copy of the test bed's inventory with ``node`` in group rpo_job (the measurement host) and ``host_vars``."""
    inventory = directory / "inventory"
    shutil.copytree(testbed_inventory, inventory)
    with open(inventory / "rpo.yml", "w") as handle:
        yaml.safe_dump({"rpo_job": {"hosts": {node.name: {"rpo_job_probe_user": node.user,
                                                          "rpo_job_probe_password": node.password, **host_vars}}}},
                       handle)
    return str(inventory)


def published(textfile: str) -> dict:
    """{(metric name, sorted label pairs): value} of a Prometheus textfile."""
    with open(textfile, encoding="utf-8") as handle:
        return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
                for family in text_string_to_metric_families(handle.read()) for sample in family.samples}


class Measurement:
    """Collector and prober threads writing to ``root`` while the ``with`` block runs."""

    def __init__(self, estate, root: str, routes: list[dict], interval: float = 1.0, window_seconds: float = 60.0):
        from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import mirror_connections
        node = estate.nodes[0]
        inventory = estate.inventory_vars()
        datacentres = sorted({n.dc for n in estate.nodes})
        links = [{key: connection[key] for key in ("source", "name", "target")} for connection in mirror_connections(
            inventory["replication_address_groups"], datacentres, inventory["replication_active_datacentre"])]
        self.config = {
            "telemetry": root, "interval": interval, "segment_seconds": 2 * interval,
            "window_seconds": window_seconds, "links": links,
            "brokers": [{"name": n.name, "datacentre": n.dc, "management_url": n.management_url,
                         "amqp_url": n.amqp_url} for n in estate.nodes],
            # As the rpo_job role deploys them: the brokers' read-only monitoring user, the estate's CA.
            "management": {"management_user": node.monitor_user, "management_password": node.monitor_password,
                           "validate_certs": True, "ca_path": node.ca_cert, "request_timeout": 2.0},
            "probes": {"interval": interval, "routes": routes, "user": node.monitor_user,
                       "password": node.monitor_password, "ca_path": node.ca_cert},
        }
        self.root = root
        self._stop = threading.Event()
        self._threads = []
        self._errors: list[tuple[str, BaseException]] = []

    def __enter__(self):
        from continuity_rpo import collector, prober
        self._threads = [threading.Thread(target=self._run, args=(part,), name=part.__name__, daemon=True)
                         for part in (collector, prober)]
        for thread in self._threads:
            thread.start()
        return self

    def _run(self, part) -> None:
        try:
            part.run(self.config, 0, self._stop)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread by __exit__
            self._errors.append((part.__name__, exc))

    def __exit__(self, *exc_info):
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        if self._errors and exc_info[0] is None:
            name, error = self._errors[0]
            raise AssertionError(f"the measurement's {name} crashed: {error!r}") from error

    def job(self, output_dir: str, *arguments: str) -> dict:
        """Run the job's command line over the telemetry; the metrics it published."""
        textfile = os.path.join(output_dir, "continuity_artemis.prom")
        result = subprocess.run([sys.executable, "-m", "continuity_rpo.job", "--telemetry", self.root, "--output",
                                 os.path.join(output_dir, "history"), "--textfile", textfile, "--report",
                                 os.path.join(output_dir, "report.html"), *arguments],
                                capture_output=True, text=True, timeout=600, check=False)
        assert result.returncode == 0, result.stderr[-4000:]
        return published(textfile)
