"""The rpo_job role on a systemd host that cannot reach any package index (a test-bed node booting systemd): it
installs from a wheelhouse built on the controller, runs the collector, the prober and the job as services (the job
keeps running, one Spark application publishing every rpo_job_follow_seconds, and starts again where it stopped),
and the job publishes the RPO of every link, and for the group active at every datacentre (the bed's `shared`,
staging delay 20 s) the time its acknowledgements take to reach the other datacentres, read from the brokers'
metrics endpoints. A drill for its length (about 12 minutes, most of it the wheelhouse, the offline install and the
job's first runs): make drills, or pytest tests/drills/test_rpo_job_systemd.py."""

import os
import subprocess
import time
import urllib.error
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support import amqp_clients as amqp
from support import prometheus
from support.estate import REPO_ROOT, TESTBED, TESTBED_INVENTORY, Estate, run_playbook
from support.measurement import NODE_PYTHON, build_wheelhouse, rpo_inventory

pytestmark = pytest.mark.timeout(1800)

UNITS = ("continuity-rpo-collector.service", "continuity-rpo-prober.service", "continuity-rpo-job.service")
FOLLOW_SECONDS = 10
TEXTFILE = "/var/lib/continuity-rpo/metrics/continuity_artemis.prom"


@pytest.fixture(scope="module")
def estate():
    """Three datacentres of nodes booting systemd, with the brokers' metrics endpoints, after site.yml."""
    Estate.testbed("down")
    Estate.testbed("up", "--dcs", "3", "--nodes-per-dc", "1", "--systemd", "--metrics")
    try:
        built = run_playbook("site.yml")
        assert built.rc == 0, built.output[-6000:]
        yield Estate.from_testbed()
    finally:
        if os.environ.get("KEEP_TESTBED") != "1":
            Estate.testbed("down")


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory):
    return build_wheelhouse(str(tmp_path_factory.mktemp("wheelhouse")), REPO_ROOT)


@pytest.fixture
def units_stopped_afterwards(estate):
    yield
    subprocess.run([TESTBED, "exec", estate.nodes[-1].name, "--", "systemctl", "disable", "--now", *UNITS],
                   capture_output=True, check=False)


def _journal(estate, node, since):
    """The job's journal since `since` (epoch seconds; the nodes share the controller's clock): a node that ran the
    job before must not pass on old lines."""
    return estate.exec(node, "journalctl", "-u", "continuity-rpo-job.service", "--no-pager", "--since", f"@{int(since)}")


def _collector_log(estate, node):
    """What the collector said (a broker it could not read, its metrics endpoint's answer), for a failure's message."""
    return estate.exec(node, "journalctl", "-u", "continuity-rpo-collector.service", "--no-pager", "-n", "40")


def _published(estate, node):
    """The node's textfile as {(metric name, sorted label pairs): value}."""
    text = estate.exec(node, "cat", TEXTFILE)
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def _runs(estate, node, since):
    """How many runs the job has published since ``since`` (each prints the RPO of dc1 -> dc2)."""
    return _journal(estate, node, since).count("dc1->dc2: RPO")


def test_rpo_job_on_an_offline_systemd_host_keeps_running_and_publishing(estate, wheelhouse, units_stopped_afterwards, tmp_path):
    node = estate.nodes[-1]
    host_python = estate.exec(node.name, "python3", "-c", "import sys; print(sys.version_info[:2])").strip()
    controller_python = subprocess.run([NODE_PYTHON, "-c", "import sys; print(sys.version_info[:2])"], check=True,
                                       capture_output=True, text=True).stdout.strip()
    assert host_python == controller_python, f"wheels of {controller_python} cannot serve {node.name}'s {host_python}"
    # Nothing outside the test bed is reachable from the node: the wheelhouse is the only source there is.
    offline = subprocess.run([TESTBED, "exec", node.name, "--", "python3", "-c",
                              "import socket; socket.create_connection(('pypi.org', 443), timeout=5)"],
                             capture_output=True, text=True, check=False)
    assert offline.returncode != 0

    inventory = rpo_inventory(TESTBED_INVENTORY, tmp_path, node, {
        "rpo_job_wheelhouse": wheelhouse,
        "rpo_job_follow_seconds": FOLLOW_SECONDS, "rpo_job_collector_interval": 2, "rpo_job_segment_seconds": 5,
        "rpo_job_sla": {"window_seconds": 10, "objectives": {"rpo_seconds": 5, "target_ratio": 0.9}}})
    # The job starts with the first deployment: its journal is read from then on, so nothing from before counts.
    deploying, deploying_since = time.monotonic(), time.time()
    # Messages of `shared` produced and consumed at dc1 all along: their notices reach dc2 and dc3.
    dc1 = estate.dc("dc1")
    queue = f"shared.rpo.{uuid.uuid4().hex[:8]}"
    with amqp.Consumer(dc1.amqp_url, dc1.user, dc1.password, queue, ca_path=dc1.ca_cert) as consumer, \
            amqp.Producer(dc1.amqp_url, dc1.user, dc1.password, queue, rate=5, ca_path=dc1.ca_cert) as producer:
        first = run_playbook("playbooks/rpo.yml", inventory=inventory)
        assert first.rc == 0, first.output[-6000:]
        second = run_playbook("playbooks/rpo.yml", inventory=inventory)
        assert second.rc == 0 and second.recap()[node.name]["changed"] == 0, second.output[-4000:]

        assert estate.exec(node.name, "systemctl", "is-enabled", *UNITS).split() == ["enabled"] * len(UNITS)
        assert estate.exec(node.name, "systemctl", "is-active", *UNITS).split() == ["active"] * len(UNITS)
        # The prober's live RPO: over HTTPS with the certificate rpo.yml issued from the estate's CA, to the
        # monitoring user only.
        live_url = f"https://{node.address}:9405/metrics"
        live = amqp.wait_for(lambda: prometheus.scrape(live_url, node.ca_cert, node.monitor_user, node.monitor_password),
                             lambda found: found.get("continuity_artemis_live_rpo_seconds"), timeout=60,
                             description=f"the live RPO of the prober on {node.name}")
        assert {labels["target_datacentre"] for labels, _value in live["continuity_artemis_live_rpo_seconds"]
                if labels["source_datacentre"] == "dc1"} == {other.dc for other in estate.passive()}
        with pytest.raises(urllib.error.HTTPError) as refused:
            prometheus.scrape(live_url, node.ca_cert, node.monitor_user, "not-the-monitoring-password")
        assert refused.value.code == 401
        # The job publishes once the first telemetry files are closed, then again every interval or so.
        amqp.wait_for(lambda: _runs(estate, node.name, deploying_since), lambda runs: runs >= 1, timeout=420,
                      description=f"the job's first publication on {node.name}")
        estate.record_timing("rpo_job.systemd_deploy_to_first_run_done_s", time.monotonic() - deploying)
        first_seen = time.monotonic()
        amqp.wait_for(lambda: _runs(estate, node.name, deploying_since), lambda runs: runs >= 4, timeout=300,
                      description=f"three more publications of the job on {node.name}")
        estate.record_timing("rpo_job.systemd_three_runs_s", time.monotonic() - first_seen)
        # Stopped (as systemd does at a shutdown or a restart), it starts again from its checkpoints and publishes.
        restarted_since = time.time()
        estate.exec(node.name, "systemctl", "restart", "continuity-rpo-job.service")
        amqp.wait_for(lambda: _runs(estate, node.name, restarted_since), lambda runs: runs >= 2, timeout=300,
                      description=f"the job publishing again after its restart on {node.name}")
        # Read while the messages flow: a later run would find none in its latest window.
        metrics = _published(estate, node.name)
    assert producer.accepted_ids() and consumer.accepted_ids()
    journal = _journal(estate, node.name, deploying_since)
    assert "Traceback" not in journal, journal[-4000:]
    assert estate.exec(node.name, "systemctl", "show", "continuity-rpo-job.service", "-p", "NRestarts",
                       "--value").strip() == "0"  # never failed: the restart above is not counted
    links = {dict(labels)["target_datacentre"] for name, labels in metrics
             if name == "continuity_artemis_rpo_seconds" and dict(labels)["source_datacentre"] == "dc1"}
    assert links == {other.dc for other in estate.passive()}
    # Every sample of the bed's mirror connections and bridges is used: each leads to a datacentre the job knows.
    rejected = {labels: value for (name, labels), value in metrics.items()
                if name == "continuity_artemis_telemetry_rejected_rows"}
    assert not rejected, rejected
    shared = {name: value for (name, labels), value in metrics.items() if dict(labels).get("group") == "shared"}
    assert shared.get("continuity_artemis_staging_delay_seconds") == 20.0, (shared, _collector_log(estate, node.name))
    assert shared["continuity_artemis_ack_notices"] > 0 and shared["continuity_artemis_ack_notices_late"] == 0, shared
    assert 0 < shared["continuity_artemis_ack_notice_delta_mean_seconds"] < 20.0, shared
    assert 0 < shared["continuity_artemis_ack_notice_durable_delta_mean_seconds"] < 20.0, shared
