"""Every role has a delegated Molecule scenario that `make molecule` runs, with its converge and verify."""

import os
import re

import yaml

from support.estate import REPO_ROOT

MOLECULE = os.path.join(REPO_ROOT, "extensions", "molecule")


def test_every_role_has_a_scenario_that_make_molecule_runs():
    roles = set(os.listdir(os.path.join(REPO_ROOT, "roles")))
    with open(os.path.join(REPO_ROOT, "Makefile")) as handle:
        makefile = handle.read()
    run = set()
    for variable in ("MOLECULE_OWN_BED", "MOLECULE_SHARED_BED"):
        run |= set(re.search(rf"^{variable} := (.*)$", makefile, re.MULTILINE).group(1).split())
    assert run == roles
    for scenario in run:
        with open(os.path.join(MOLECULE, scenario, "molecule.yml")) as handle:
            config = yaml.safe_load(handle)
        assert config["scenario"]["name"] == scenario
        assert "driver" not in config, f"{scenario}: the delegated driver comes from extensions/molecule/config.yml"
        for playbook in ("converge.yml", "verify.yml"):
            assert os.path.isfile(os.path.join(MOLECULE, scenario, playbook)), f"{scenario} has no {playbook}"


def test_the_docker_scenario_runs_the_replication_scenarios_playbooks():
    with open(os.path.join(MOLECULE, "docker", "molecule.yml")) as handle:
        config = yaml.safe_load(handle)
    assert config["driver"]["name"] == "docker"
    assert config["ansible"]["playbooks"]["converge"] == "../replication/converge.yml"
    assert config["ansible"]["playbooks"]["verify"] == "../replication/verify.yml"
    assert {platform["name"] for platform in config["platforms"]} == {"dc1-node1", "dc2-node1"}
    # The controller reaches each container at the address it was given on the scenario's network.
    host_vars = config["provisioner"]["inventory"]["host_vars"]
    for platform in config["platforms"]:
        assert host_vars[platform["name"]] == {"ansible_host": platform["networks"][0]["ipv4_address"],
                                               "ansible_docker_host": platform["name"]}
