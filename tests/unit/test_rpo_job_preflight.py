"""The rpo_job role's preflight refuses bad settings, naming the variable and the host, before its install tasks run.
Runs the role on localhost with its install tasks told to fail loudly if they were ever reached."""

import json
import os
import subprocess

import pytest

from support.estate import REPO_ROOT

GOOD = {
    "rpo_job_brokers": [{"name": "a1", "datacentre": "dc1", "management_url": "https://a1:8161",
                         "amqp_url": "amqps://a1:5671"},
                        {"name": "b1", "datacentre": "dc2", "management_url": "https://b1:8161",
                         "amqp_url": "amqps://b1:5671"}],
    "rpo_job_links": [{"source": "dc1", "name": "dc2_all", "target": "dc2"}],
    "rpo_job_probe_routes": [{"address": "continuity.probe", "source": "dc1", "targets": ["dc2"]}],
    "rpo_job_management_user": "ops", "rpo_job_management_password": "secret-management",
    "rpo_job_probe_user": "app", "rpo_job_probe_password": "secret-probe",
}

CASES = {
    "wheelhouse that does not exist": ({"rpo_job_wheelhouse": "/nonexistent/wheels"}, ["rpo_job_wheelhouse"]),
    "wheelhouse without the job's wheels": ({"rpo_job_wheelhouse": "EMPTY_DIR"}, ["rpo_job_wheelhouse", "pyspark"]),
    "empty probe password": ({"rpo_job_probe_password": ""}, ["rpo_job_probe_password"]),
    "zero collector interval": ({"rpo_job_collector_interval": 0}, ["rpo_job_collector_interval"]),
    "follow interval over an hour": ({"rpo_job_follow_seconds": 7200}, ["rpo_job_follow_seconds", "7200"]),
    "probe route to an unknown datacentre": (
        {"rpo_job_probe_routes": [{"address": "continuity.probe", "source": "dc1", "targets": ["dc9"]}]},
        ["rpo_job_probe_routes", "dc9"]),
}

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: continuity.artemis.rpo_job
        tasks_from: preflight.yml
    - ansible.builtin.debug:
        msg: PREFLIGHT PASSED
"""


def _preflight(tmp_path, settings):
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    result = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", str(tmp_path / "play.yml"),
                             "-e", json.dumps(settings)], env=env, capture_output=True, text=True, timeout=300,
                            check=False)
    return result.returncode, result.stdout + result.stderr


def test_good_settings_pass_the_preflight(tmp_path):
    returncode, output = _preflight(tmp_path, GOOD)
    assert returncode == 0 and "PREFLIGHT PASSED" in output, output[-3000:]


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_settings_are_refused_by_name(tmp_path, case):
    override, expected = CASES[case]
    if override.get("rpo_job_wheelhouse") == "EMPTY_DIR":
        (tmp_path / "wheels").mkdir()
        (tmp_path / "wheels" / "prometheus_client-0.26.0-py3-none-any.whl").write_text("")
        override = {"rpo_job_wheelhouse": str(tmp_path / "wheels")}
    returncode, output = _preflight(tmp_path, {**GOOD, **override})
    assert returncode != 0
    failure = output[output.index("[ERROR]"):]
    assert "localhost" in failure
    for word in expected:
        assert word in failure, f"{word!r} not named in:\n{failure[-3000:]}"
    assert "PREFLIGHT PASSED" not in output
    assert "secret-management" not in output and "secret-probe" not in output
