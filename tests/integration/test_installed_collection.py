"""The collection as its users get it: built by ansible-galaxy, installed into an empty collections path, and its
playbooks run by FQCN from outside the checkout with a plain ansible.cfg, against the test bed."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from support.collection import build_and_install
from support.estate import TESTBED_INVENTORY, PlaybookResult

# What a user's own ansible.cfg would hold for this inventory; nothing points back to the checkout.
USER_CONFIG = """[defaults]
interpreter_python = auto_silent
callback_result_format = yaml

[inventory]
# The replication role keeps the estate's generated certificates in <inventory>/pki.
ignore_patterns = pki
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    work = tmp_path_factory.mktemp("installed")
    build_and_install(work)
    (work / "ansible.cfg").write_text(USER_CONFIG)
    return work


def _run(installed, playbook, *extra_args, inventory=TESTBED_INVENTORY):
    env = dict(os.environ, ANSIBLE_CONFIG=str(installed / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(installed / "collections"))
    proc = subprocess.run(["ansible-playbook", "-i", inventory, f"continuity.artemis.{playbook}",
                           *extra_args], cwd=installed, env=env, capture_output=True, text=True, timeout=1500,
                          check=False)
    return PlaybookResult(proc.returncode, proc.stdout + proc.stderr)


def _with_measurement_host(tmp_path):
    """The test bed's inventory plus the controller as the RPO job's host (only its data directory is used)."""
    inventory = tmp_path / "inventory"
    shutil.copytree(TESTBED_INVENTORY, inventory)
    data = tmp_path / "measurement"
    (inventory / "rpo.yml").write_text(yaml.safe_dump({"rpo_job": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "rpo_job_data_dir": str(data), "rpo_job_user": "root"}}}}))
    return str(inventory), data


def test_the_installed_collection_runs_site_and_a_drill_by_fqcn(installed, dc1_active_at_the_end, tmp_path):
    copy = installed / "collections" / "ansible_collections" / "continuity" / "artemis"
    assert (copy / "playbooks" / "drill.yml").is_file() and not copy.is_symlink()

    site = _run(installed, "site")
    assert site.rc == 0, site.output[-6000:]
    # The estate was built from the checkout: the published artifact describes exactly the same estate.
    assert all(counters["changed"] == 0 for counters in site.recap().values()), site.recap()

    # The drill swaps the groups dc1 owns over to dc2 and back under load (dc1_active_at_the_end checks it did).
    inventory, measurement = _with_measurement_host(tmp_path)
    reports = tmp_path / "drills"
    drilled = _run(installed, "drill", "-e", "drill_target=dc2", "-e", f"drill_report_dir={reports}",
                   inventory=inventory)
    assert drilled.rc == 0, drilled.output[-6000:]
    [report] = list(reports.iterdir())
    evidence = json.loads((report / "evidence.json").read_text())
    assert (evidence["lost"], evidence["duplicates"], evidence["sla_passed"]) == (0, 0, True), evidence
    assert evidence["accepted"] > 0 and evidence["load"]["unconsumed"] == 0, evidence["load"]
    assert 0 < evidence["rto_seconds"] <= evidence["objectives"]["rto_seconds"] and evidence["rpo_seconds"] == 0
    assert [(phase["operation"], phase["phase"]) for phase in evidence["phases"] if phase["phase"] == "activated"] \
        == [("swapover dc1 to dc2", "activated"), ("swapover dc2 to dc1", "activated")]
    assert {"started", "finished", "estate", "phases"} <= set(evidence)
    ledger = [json.loads(line) for line in (report / "ledger.jsonl").read_text().splitlines()]
    # Messages were accepted and consumed at both datacentres: the load followed the swapovers.
    assert {(row["event"], row["datacentre"]) for row in ledger} == {
        ("fault", "dc1"), ("accepted", "dc1"), ("accepted", "dc2"), ("consumed", "dc1"), ("consumed", "dc2")}
    assert "PASSED" in (report / "report.html").read_text()
    # Kept on the measurement host, the ledger where the job reads ledgers; the drill's queue is gone everywhere.
    assert (measurement / "telemetry" / "ledgers" / f"{evidence['drill']}.jsonl").read_text() == \
        (report / "ledger.jsonl").read_text()
    assert json.loads((measurement / "drills" / evidence["drill"] / "evidence.json").read_text()) == evidence
    for node in dc1_active_at_the_end.nodes:
        assert not [queue for queue in node.management().queue_names() if queue.startswith("drill.")], node.name

    # A drill address in a messages_only group is refused by name before any message is sent.
    refused = _run(installed, "drill", "-e", "drill_target=dc2", "-e", "drill_address=inflow.drill",
                   "-e", f"drill_report_dir={reports}")
    assert refused.rc != 0 and "drill_address (inflow.drill)" in " ".join(refused.output.split()), \
        refused.output[-4000:]
    assert "TASK [Start the load" not in refused.output and len(list(reports.iterdir())) == 1
    for node in dc1_active_at_the_end.nodes:
        assert not [queue for queue in node.management().queue_names() if queue.startswith("inflow.drill")]
