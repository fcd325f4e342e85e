"""The operation playbooks refuse bad inputs (-e, or an AWX survey) by their declaration in playbooks/vars/inputs.yml,
naming the variable, before anything is read from or done to a broker. Runs on the example inventory with its hosts
pointed at a closed loopback port: a playbook that tried to reach one would fail differently."""

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from support.estate import REPO_ROOT

VAULT = {"vault_broker_admin_password": "x1", "vault_ops_password": "x2", "vault_orders_app_password": "x3",
         "vault_replication_password": "x4", "vault_broker_monitor_password": "x6", "broker_cluster_password": "x5",
         "ansible_host": "127.0.0.1", "ansible_port": "1"}

CASES = {
    "swapover without a target": ("swapover", {}, ["missing required arguments: swapover_target"]),
    "drill without a target": ("drill", {}, ["missing required arguments: drill_target"]),
    "swapover timeout not a number": ("swapover", {"swapover_target": "frankfurt", "swapover_drain_timeout": "soon"},
                                      ["swapover_drain_timeout", "soon"]),
    "swapover groups not a list": ("swapover", {"swapover_target": "frankfurt", "swapover_groups": {"a": 1}},
                                   ["swapover_groups"]),
    "failover without a target": ("failover", {"failover_confirm": "true"},
                                  ["missing required arguments: failover_target"]),
    "failover force not a boolean": ("failover", {"failover_target": "frankfurt", "failover_force": "maybe"},
                                     ["failover_force", "maybe"]),
    "failback without the active site": ("failback", {"failback_site": "london"},
                                         ["missing required arguments: failback_active"]),
    "rotation step not known": ("rotate_certificates", {"rotate_certificates_ca": True,
                                                        "rotate_certificates_ca_steps": ["trust", "expire"]},
                                ["rotate_certificates_ca_steps", "expire"]),
}


# Well-typed inputs that do not fit the estate (the example inventory: london active, frankfurt passive).
ESTATE_CASES = {
    "swapover to the active datacentre": ("swapover", {"swapover_target": "london"},
                                          ["swapover_source (london) and swapover_target (london)"]),
    "swapover of a group that does not exist": ("swapover", {"swapover_target": "frankfurt",
                                                             "swapover_groups": ["nope"]},
                                                ["swapover_groups (['nope'])"]),
    "drill to an unknown datacentre": ("drill", {"drill_target": "paris", "drill_address": "orders.drill"},
                                       ["drill_target (paris)"]),
    "drill address in a messages_only group": ("drill", {"drill_target": "frankfurt", "drill_address": "audit.drill"},
                                               ["drill_address (audit.drill)", "it is in audit, mode messages_only"]),
    "drill address outside every group": ("drill", {"drill_target": "frankfurt"},
                                          ["drill_address (drill.continuity)", "it is in none"]),
    "failover to an unknown datacentre": ("failover", {"failover_target": "paris", "failover_confirm": "true"},
                                          ["failover_target (paris)"]),
    "failover not confirmed": ("failover", {"failover_target": "frankfurt"}, ["failover_confirm must be true"]),
    "failback of the active datacentre onto itself": ("failback", {"failback_site": "london",
                                                                   "failback_active": "london"},
                                                      ["failback_site (london) and failback_active (london)"]),
}


def _run(playbook, extra_vars, workdir):
    """The estate is read from a copy of the example inventory (nothing may be written beside the checkout's)."""
    inventory = workdir / "inventory"
    shutil.copytree(os.path.join(REPO_ROOT, "inventories", "example"), inventory)
    extra_vars = {**extra_vars, "replication_tls_pki_dir": str(workdir / "pki")}
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(["ansible-playbook", "-i", str(inventory), f"playbooks/{playbook}.yml",
                           "-e", json.dumps({**VAULT, **extra_vars})], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    """Every case's run, three at a time (each reads a copy of the inventory and reaches no host): {case: (return
    code, output, its PKI directory)}."""
    cases = {**CASES, **ESTATE_CASES}
    workdirs = {case: tmp_path_factory.mktemp("refused") for case in cases}
    with ThreadPoolExecutor(max_workers=3) as pool:
        runs = dict(zip(cases, pool.map(lambda case: _run(*cases[case][:2], workdirs[case]), cases)))
    return {case: (run.returncode, run.stdout + run.stderr, workdirs[case] / "pki") for case, run in runs.items()}


def _failure(refused, case):
    returncode, output, pki = refused[case]
    assert returncode != 0, output[-3000:]
    assert "UNREACHABLE" not in output
    assert not pki.exists(), "reading the estate generated keys"
    return output[output.index("fatal:"):]


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_playbook_inputs_are_refused_by_name(refused, case):
    failure = _failure(refused, case)
    assert "argument_errors" in failure, failure[-3000:]
    for word in CASES[case][2]:
        assert word in failure, f"{word!r} not named in:\n{failure[-3000:]}"


@pytest.mark.parametrize("case", sorted(ESTATE_CASES))
def test_inputs_that_do_not_fit_the_estate_are_refused_by_name(refused, case):
    failure = _failure(refused, case)
    for word in ESTATE_CASES[case][2]:
        assert word in " ".join(failure.split()), f"{word!r} not named in:\n{failure[-3000:]}"
