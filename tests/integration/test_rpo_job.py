"""The measurement end to end on the test bed: the rpo_job role deploys collector, prober and job on the
controller (a third site, outside both datacentres); under load the published lag follows a WAN delay and the RPO
rises through a partition and falls after it."""

import json
import os
import shutil
import subprocess
import time
import urllib.request
import uuid

import pytest
import yaml

from support import amqp_clients as amqp
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
    with open(target / "rpo.yml", "w") as handle:
        yaml.safe_dump({"rpo_job": {"hosts": {"localhost": {
            "ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3",
            # The tests evaluate the job at past times (--as-of), which only a full run can.
            "rpo_job_schedule_minutes": 1, "rpo_job_collector_interval": 2, "rpo_job_incremental": False,
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


@pytest.mark.drill
def test_rpo_job_deploys_and_its_numbers_follow_wan_delay_and_partition(estate, measured):
    first = run_playbook("playbooks/rpo.yml", inventory=measured)
    assert first.rc == 0, first.output[-6000:]
    second = run_playbook("playbooks/rpo.yml", inventory=measured)
    assert second.rc == 0 and second.recap()["localhost"]["changed"] == 0, second.output[-4000:]

    dc1 = estate.dc("dc1")
    queue = f"rpo.{uuid.uuid4().hex[:8]}"
    with amqp.Producer(dc1.amqp_url, dc1.user, dc1.password, queue, rate=100, ca_path=dc1.ca_cert):
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
    lag = ("continuity_artemis_replication_lag_p50_seconds", LINK)
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


@pytest.mark.drill
def test_the_deployed_job_publishes_the_drill_its_evidence_reports(estate, measured, tmp_path):
    deployed = run_playbook("playbooks/rpo.yml", inventory=measured)
    assert deployed.rc == 0, deployed.output[-6000:]
    time.sleep(70)  # cron starts collector and prober at the next minute: samples before the drill's fence

    drilled = run_playbook("playbooks/drill.yml", inventory=measured,
                           extra_args=["-e", "drill_target=dc2", "-e", f"drill_report_dir={tmp_path / 'drills'}"])
    assert drilled.rc == 0, drilled.output[-6000:]
    [report] = list((tmp_path / "drills").iterdir())
    evidence = json.loads((report / "evidence.json").read_text())
    with open(f"{DATA_DIR}/drills/{evidence['drill']}/evidence.json") as handle:
        assert json.load(handle) == evidence

    published = _job(time.time())
    drill = (("drill", evidence["drill"]),)
    assert published[("continuity_artemis_drill_lost_messages", drill)] == evidence["lost"] == 0
    assert published[("continuity_artemis_drill_duplicate_messages", drill)] == evidence["duplicates"] == 0
    assert published[("continuity_artemis_drill_rto_seconds", drill)] == pytest.approx(evidence["rto_seconds"])
    assert published[("continuity_artemis_drill_last_timestamp_seconds", ())] == pytest.approx(evidence["fault_time"])
    estate.record_timing("drill.rto_s", evidence["rto_seconds"])
    estate.record_timing("drill.accepted_msgs", evidence["accepted"])


@pytest.fixture
def spark_cluster(measured):
    """A standalone Spark cluster (master and one worker) on the controller, from the venv the role installed: the
    "existing cluster" the job is submitted to. Started once the role has run; stopped afterwards."""
    processes = []

    def start():
        spark_class = "/opt/continuity-rpo/venv/bin/spark-class"
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_WORKER_DIR="/tmp/continuity-spark-worker",
                   PYSPARK_PYTHON="/opt/continuity-rpo/venv/bin/python")  # how spark-class finds the pip Spark
        # The worker runs as the job's user, so that what executors write into the history stays the job's.
        for command in ([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                         "--port", "7077", "--webui-port", "18080"],
                        ["runuser", "-u", "continuity-rpo", "--", spark_class,
                         "org.apache.spark.deploy.worker.Worker", "--cores", "2", "--memory", "1g",
                         "--webui-port", "18081", "spark://127.0.0.1:7077"]):
            processes.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
        amqp.wait_for(lambda: _spark_master_state().get("aliveworkers", 0), bool, timeout=120,
                      description="a Spark worker registered with the master")

    yield start
    for process in reversed(processes):
        process.terminate()
        process.wait(timeout=60)
    shutil.rmtree("/tmp/continuity-spark-worker", ignore_errors=True)


def _spark_master_state():
    try:
        with urllib.request.urlopen("http://127.0.0.1:18080/json/", timeout=5) as response:
            return json.load(response)
    except OSError:
        return {}


@pytest.mark.drill  # 7 minutes on two cores; make drills
def test_rpo_job_submits_to_an_existing_spark_cluster(estate, measured, spark_cluster):
    with open(os.path.join(measured, "rpo.yml")) as handle:
        inventory = yaml.safe_load(handle)
    inventory["rpo_job"]["hosts"]["localhost"].update({
        # The job is run below; cron's own runs would queue on the cluster's two cores ahead of it.
        "rpo_job_schedule_minutes": 30,
        "rpo_job_spark_master": "spark://127.0.0.1:7077",
        "rpo_job_spark_submit": "/opt/continuity-rpo/venv/bin/spark-submit",
        "rpo_job_spark_submit_args": ["--conf", "spark.driver.host=127.0.0.1",
                                      "--conf", "spark.pyspark.python=/opt/continuity-rpo/venv/bin/python"]})
    with open(os.path.join(measured, "rpo.yml"), "w") as handle:
        yaml.safe_dump(inventory, handle)
    deployed = run_playbook("playbooks/rpo.yml", inventory=measured)
    assert deployed.rc == 0, deployed.output[-6000:]
    spark_cluster()

    time.sleep(90)  # cron starts collector and prober at the next minute; their first segments close at its end
    metrics = _job(time.time())
    assert ("continuity_artemis_rpo_seconds", LINK) in metrics
    completed = [app["name"] for app in _spark_master_state().get("completedapps", [])]
    assert "continuity-artemis-rpo" in completed, _spark_master_state()
