"""The broker restarts only for settings Artemis cannot reload, and then one broker at a time (site.yml's rolling
restart); everything else is reloaded in place (test_broker_routing.py: queues and diverts reloaded, the broker
running on)."""

import json
import shutil

import pytest

from support.estate import TESTBED_INVENTORY, run_playbook


@pytest.fixture(scope="module")
def changed_inventory(estate, tmp_path_factory, bed_needed_after_module):
    """A copy of the test bed's inventory that this module's tests change one after the other; site.yml with the
    inventory's own settings runs once afterwards (each revert is a rolling restart: one for all of them), unless
    the bed goes down next (this module runs last)."""
    inventory = tmp_path_factory.mktemp("restarts") / "inventory"
    shutil.copytree(TESTBED_INVENTORY, inventory)
    (inventory / "host_vars").mkdir()
    yield estate, inventory
    if bed_needed_after_module:
        result = run_playbook("site.yml")
        assert result.rc == 0, result.output[-4000:]


def test_mirror_connection_change_restarts_only_the_brokers_that_hold_it(changed_inventory):
    estate, inventory = changed_inventory
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    pids = {node.name: estate.broker_pids(node) for node in (dc1, dc2)}

    # A retry interval for dc1's broker only: its mirror connections change, dc2's do not.
    (inventory / "host_vars" / f"{dc1.name}.yml").write_text("replication_retry_interval: 2500\n")
    result = run_playbook("site.yml", inventory=str(inventory))
    assert result.rc == 0, result.output[-6000:]

    assert estate.broker_pids(dc1) != pids[dc1.name]
    assert estate.broker_pids(dc2) == pids[dc2.name]
    assert result.recap()[dc2.name]["changed"] == 0


def test_a_change_that_needs_a_restart_restarts_one_broker_at_a_time_and_says_what_clients_lose(changed_inventory):
    """Both datacentres own a group here (dc1 `all`, dc2 `east`) and have one broker each: they restart one after
    the other, in inventory order, and the play says that their clients lose them meanwhile."""
    estate, inventory = changed_inventory
    pids = {node.name: estate.broker_pids(node) for node in estate.nodes}

    result = run_playbook("site.yml", inventory=str(inventory),
                          extra_args=["-e", json.dumps({"broker_java_max_heap": "500m"})])
    assert result.rc == 0, result.output[-6000:]

    assert all(estate.broker_pids(node) != pids[node.name] for node in estate.nodes)
    restarted = result.rolling_restarts()
    assert [entry["broker"] for entry in restarted] == [node.name for node in estate.nodes]
    assert all(entry["why"] == "changed artemis.profile" for entry in restarted)
    first, second = restarted
    assert float(first["finished"]) <= float(second["started"]), "two datacentres restarted at the same time"
    for node in estate.nodes:
        assert f"the only broker of {node.dc}" in result.output and "its clients lose it" in result.output
    estate.record_timing("rolling_restart_2x1_s", float(second["finished"]) - float(first["started"]))
