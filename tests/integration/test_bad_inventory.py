"""Bad inventories fail before any host is changed, with a message that names the variable."""

import os
import shutil

import pytest
import yaml

from support.estate import TESTBED_INVENTORY, run_playbook, generated_secrets


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def _write(path, data):
    with open(path, "w") as handle:
        yaml.safe_dump(data, handle)


def _inventory(tmp_path, edit):
    """A copy of the test bed's inventory with `edit(hosts, all_vars)` applied."""
    target = tmp_path / "inventory"
    shutil.copytree(TESTBED_INVENTORY, target)
    hosts = _load(target / "hosts.yml")
    all_vars = {}
    for name in sorted(os.listdir(target / "group_vars" / "all")):
        all_vars.update(_load(target / "group_vars" / "all" / name))
        os.remove(target / "group_vars" / "all" / name)
    edit(hosts, all_vars)
    _write(target / "hosts.yml", hosts)
    _write(target / "group_vars" / "all" / "vars.yml", all_vars)
    return str(target)


def _dc_hosts(hosts, dc):
    return hosts["all"]["children"]["artemis"]["children"][dc]["hosts"]


def _no_passive_dc(hosts, all_vars):
    all_vars["replication_datacentres"] = ["dc1"]


def _unknown_dc(hosts, all_vars):
    all_vars["replication_datacentres"] = ["dc1", "dc9"]


def _active_dc_unknown(hosts, all_vars):
    all_vars["replication_active_datacentre"] = "dc7"


def _missing_admin_password(hosts, all_vars):
    del all_vars["broker_admin_password"]


def _empty_replication_password(hosts, all_vars):
    all_vars["replication_password"] = ""


def _user_without_password(hosts, all_vars):
    all_vars["broker_users"] = [{"name": "app", "roles": ["app"]}]


def _duplicate_broker_name(hosts, all_vars):
    for dc in ("dc1", "dc2"):
        for host in _dc_hosts(hosts, dc).values():
            host["broker_name"] = "same-name"


def _pair_layout_on_one_host(hosts, all_vars):
    all_vars["replication_layout"] = "shared_nothing"


def _unknown_layout(hosts, all_vars):
    all_vars["replication_layout"] = "active_active"


def _group_owned_by_unknown_dc(hosts, all_vars):
    all_vars["replication_address_groups"] = [{"name": "all", "addresses": [], "owner": "dc8"}]


CASES = {
    "no passive datacentre": (_no_passive_dc, ["replication_datacentres"]),
    "unknown datacentre name": (_unknown_dc, ["replication_datacentres", "dc9"]),
    "active datacentre not listed": (_active_dc_unknown, ["replication_active_datacentre", "dc7"]),
    "missing admin password": (_missing_admin_password, ["broker_admin_password"]),
    "empty replication password": (_empty_replication_password, ["replication_password"]),
    "user without password": (_user_without_password, ["password", "broker_users"]),
    "duplicate broker name": (_duplicate_broker_name, ["broker_name", "same-name"]),
    "HA layout on a one-host datacentre": (_pair_layout_on_one_host, ["replication_layout", "shared_nothing"]),
    "unknown layout": (_unknown_layout, ["replication_layout", "active_active"]),
    "address group owned by an unknown datacentre": (_group_owned_by_unknown_dc, ["replication_address_groups"]),
}


def _fingerprint(estate):
    """What a run would change on the hosts: the broker configuration files."""
    return {node.name: estate.exec(node.name, "sh", "-c",
                                   "sha256sum /var/opt/artemis/*/etc/*.xml /var/opt/artemis/*/etc/*.properties")
            for node in estate.nodes}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_inventory_fails_before_changing_any_host(estate, tmp_path, case):
    edit, expected_words = CASES[case]
    before = _fingerprint(estate)

    result = run_playbook("site.yml", inventory=_inventory(tmp_path, edit))

    assert result.rc != 0, result.output[-4000:]
    assert "fatal:" in result.output, result.output[-4000:]
    failure = result.output[result.output.find("fatal:"):]
    for word in expected_words:
        assert word in failure, f"{word!r} not named in the failure:\n{failure[-4000:]}"
    assert all(counters["changed"] == 0 for counters in result.recap().values()), result.recap()
    assert _fingerprint(estate) == before
    assert not [secret for secret in generated_secrets() if secret in result.output], "a password was logged"
