"""The broker restarts only for settings Artemis cannot reload; everything else is reloaded in place."""

import json

import pytest

from support import amqp
from support.estate import run_playbook


def _broker_pid(estate, node):
    return estate.exec(node.name, "pgrep", "-f", "--", f"-Dartemis.instance=/var/opt/artemis/{node.name} ").split()


def _site(extra_vars=None):
    result = run_playbook("site.yml", extra_args=["-e", json.dumps(extra_vars)] if extra_vars else [])
    assert result.rc == 0, result.output[-6000:]
    return result


@pytest.fixture
def converged_back(estate):
    """Whatever a test changed, site.yml with the inventory's own settings runs afterwards."""
    yield estate
    _site()


def test_reloadable_change_keeps_the_broker_running_and_takes_effect(converged_back):
    estate = converged_back
    dc1 = estate.dc("dc1")
    pid = _broker_pid(estate, dc1)

    _site({"broker_addresses": [{"name": "reload.check"}]})

    assert _broker_pid(estate, dc1) == pid
    amqp.wait_for(lambda: amqp.queue_names(dc1.management_url, dc1.user, dc1.password, dc1.name),
                  lambda names: "reload.check" in names, timeout=60)


def test_mirror_connection_change_restarts_only_the_brokers_that_hold_it(converged_back):
    estate = converged_back
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    pids = {node.name: _broker_pid(estate, node) for node in (dc1, dc2)}

    # The `all` group is dc1's (the active datacentre's): only dc1's mirror connection for it changes.
    groups = [{**group, "mode": "messages_only"} if group["name"] == "all" else group
              for group in estate.inventory_vars()["replication_address_groups"]]
    result = _site({"replication_address_groups": groups})

    assert _broker_pid(estate, dc1) != pids[dc1.name]
    assert _broker_pid(estate, dc2) == pids[dc2.name]
    assert result.recap()[dc2.name]["changed"] == 0
