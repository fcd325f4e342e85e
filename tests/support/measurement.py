"""The RPO/RTO measurement run beside a test: the collector and prober of spark/ in threads against the test
bed, the job's command line over what they wrote, and the metrics it published."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from prometheus_client.parser import text_string_to_metric_families


def published(textfile: str) -> dict:
    """{(metric name, sorted label pairs): value} of a Prometheus textfile."""
    with open(textfile, encoding="utf-8") as handle:
        return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
                for family in text_string_to_metric_families(handle.read()) for sample in family.samples}


class Measurement:
    """Collector and prober threads writing to ``root`` while the ``with`` block runs."""

    def __init__(self, estate, root: str, routes: list[dict], interval: float = 1.0):
        from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import mirror_connections
        node = estate.nodes[0]
        inventory = estate.inventory_vars()
        datacentres = sorted({n.dc for n in estate.nodes})
        links = [{key: connection[key] for key in ("source", "name", "target")} for connection in mirror_connections(
            inventory["replication_address_groups"], datacentres, inventory["replication_active_datacentre"])]
        self.config = {
            "telemetry": root, "interval": interval, "segment_seconds": 2 * interval, "links": links,
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
