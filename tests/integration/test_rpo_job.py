"""The measurement end to end on the test bed: the rpo_job role deploys collector, prober and job on the
controller (a third site, outside both datacentres); under load the published lag follows a WAN delay and the RPO
rises through a partition and falls after it."""

import os
import shutil
import subprocess
import time
import uuid

import pytest
import yaml

from support import amqp
from support.estate import TESTBED_INVENTORY, run_playbook
from support.measurement import published

DATA_DIR = "/var/lib/continuity-rpo"
COMMAND = "/opt/continuity-rpo/bin/continuity-rpo"
DELAY_MS = 400
PHASE_SECONDS = 40
LINK = (("source_datacentre", "dc1"), ("target_datacentre", "dc2"))


def _inventory(tmp_path, estate):
    """The test bed's inventory plus the controller as the measurement host (cron: no systemd here)."""
    target = tmp_path / "inventory"
    shutil.copytree(TESTBED_INVENTORY, target)
    node = estate.dc("dc1")
    with open(target / "rpo.yml", "w") as handle:
        yaml.safe_dump({"rpo_job": {"hosts": {"localhost": {
            "ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3",
            "rpo_job_probe_user": node.user, "rpo_job_probe_password": node.password,
            "rpo_job_schedule_minutes": 1, "rpo_job_collector_interval": 2,
            "rpo_job_sla": {"window_seconds": 10, "objectives": {"rpo_seconds": 5, "target_ratio": 0.9}}}}}},
            handle)
    return str(target)


@pytest.fixture
def measured(estate, tmp_path):
    inventory = _inventory(tmp_path, estate)
    yield inventory
    if os.path.exists("/etc/cron.d/continuity-rpo"):
        os.remove("/etc/cron.d/continuity-rpo")
    subprocess.run(["pkill", "-u", "continuity-rpo"], check=False)
    shutil.rmtree(DATA_DIR, ignore_errors=True)


def _job(as_of):
    """The deployed job, evaluated at ``as_of``; its published samples."""
    result = subprocess.run(["runuser", "-u", "continuity-rpo", "--", COMMAND, "job", "--as-of", str(as_of)],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return published(f"{DATA_DIR}/metrics/continuity_artemis.prom")


def test_rpo_job_deploys_and_its_numbers_follow_wan_delay_and_partition(estate, measured):
    first = run_playbook("playbooks/rpo.yml", inventory=measured)
    assert first.rc == 0, first.output[-6000:]
    second = run_playbook("playbooks/rpo.yml", inventory=measured)
    assert second.rc == 0 and second.recap()["localhost"]["changed"] == 0, second.output[-4000:]

    dc1 = estate.dc("dc1")
    queue = f"rpo.{uuid.uuid4().hex[:8]}"
    with amqp.Producer(dc1.amqp_url, dc1.user, dc1.password, queue, rate=100):
        time.sleep(PHASE_SECONDS + 30)  # cron starts collector and prober at the next minute
        baseline = time.time()
        estate.testbed("wan", "--delay-ms", str(DELAY_MS))
        time.sleep(PHASE_SECONDS)
        delayed = time.time()
        estate.testbed("wan", "--delay-ms", "0")
        estate.testbed("partition", "dc1", "dc2")
        time.sleep(PHASE_SECONDS)
        partitioned = time.time()
        estate.testbed("heal")
        time.sleep(PHASE_SECONDS)
        healed = time.time()

    at_baseline, at_delay, in_partition, after = (_job(t) for t in (baseline, delayed, partitioned, healed))
    lag = ("continuity_artemis_replication_lag_seconds", tuple(sorted(LINK + (("quantile", "0.5"),))))
    rpo = ("continuity_artemis_rpo_seconds", LINK)
    backlog = ("continuity_artemis_mirror_backlog_events", LINK)
    for name, value in (("baseline", at_baseline), ("delay", at_delay), ("partition", in_partition),
                        ("healed", after)):
        estate.record_timing(f"rpo_job.{name}.lag_p50_s", value.get(lag, -1))
        estate.record_timing(f"rpo_job.{name}.rpo_s", value[rpo])
        estate.record_timing(f"rpo_job.{name}.backlog_events", value.get(backlog, -1))
    # A probe cannot arrive before the WAN delay has passed; without it, it arrives well before.
    assert at_baseline[lag] < DELAY_MS / 1000 <= at_delay[lag]
    # Through the partition the RPO keeps rising (nothing reaches dc2) and the mirror's backlog grows.
    assert in_partition[rpo] > PHASE_SECONDS / 2
    assert in_partition[backlog] > 0
    assert after[rpo] < PHASE_SECONDS / 2 and after[backlog] < in_partition[backlog]
    # cron ran the job on its own too (it prints the RPO per link), and the report is there.
    with open(f"{DATA_DIR}/job.log") as handle:
        assert "dc1->dc2: RPO" in handle.read()
    assert os.path.exists(f"{DATA_DIR}/report.html")
