"""A broker's plan (module_utils/artemis_broker_plan.py) on a three-datacentre estate with every kind of group and an
export to a broker outside the estate. The JSON files beside this test are what roles/replication/tasks/derive.yml
computed in Jinja for the same inventory before the plan moved to Python (at c7717f7): the plan must not change."""

import json
import os

import pytest
import yaml

from ansible_collections.continuity.artemis.plugins.module_utils import artemis_estate
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_broker_plan import HA_POLICIES, broker_plan
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import EstateError

HERE = os.path.join(os.path.dirname(__file__), "broker_plan")
DATACENTRES = ["dc1", "dc2", "dc3"]
GROUPS = [
    {"name": "orders", "addresses": ["orders."]},
    {"name": "books", "addresses": ["books."], "engine": "bridge"},
    {"name": "shared", "addresses": ["shared."], "engine": "bridge", "staging_delay_ms": 2000},
    {"name": "east", "addresses": ["east."], "owner": "dc2"},
    {"name": "inflow", "addresses": ["inflow."], "mode": "messages_only"},
    {"name": "all"},
]
EXTERNAL = [{"name": "legacy", "user": "legacy-user", "password": "not-a-secret-legacy",
             "hosts": [{"host": "legacy1.example", "port": 61617}, {"host": "legacy2.example"}], "tls": "yes",
             "trust_store_path": "/etc/legacy.pem",
             "addresses": ["books.out", {"name": "books.topic", "routing_type": "multicast"}]}]
HOSTS = {"dc1": [{"name": "dc1-a", "address": "10.0.1.1"}, {"name": "dc1-b", "address": "10.0.1.2"}],
         "dc2": [{"name": "dc2-a", "address": "10.0.2.1"}, {"name": "dc2-b", "address": "10.0.2.2"}],
         "dc3": [{"name": "dc3-a", "address": "dc3-a"}]}
SETTINGS = {"layout": "shared_nothing", "tls": True, "port": 5672, "tls_port": 5673, "ha_port": 61616,
            "ha_failback": False, "ha_failure_detection_ms": 10000, "zookeeper": {"connect-string": "zk:2181"},
            "activation_unheard": "hold", "activation_check_timeout_ms": 5000, "idle_timeout": 10000, "retry_interval": 5000, "user": "replicator",
            "password": "not-a-secret-replication", "external_brokers": EXTERNAL}
PLAIN_SHARED_STORE = dict(SETTINGS, layout="shared_store", tls=False, zookeeper={}, idle_timeout=20000,
                          ha_failback=True)


def _plan(host, settings):
    model = artemis_estate.model(GROUPS, DATACENTRES, "dc1", EXTERNAL)
    plan = broker_plan(model, host, HOSTS, settings)
    assert plan.pop("tls_dir") == "${artemis.instance}/etc/tls"
    return plan


@pytest.mark.parametrize("host, settings, expected", [
    ("dc1-a", SETTINGS, "tls-pairs-dc1-primary.json"),
    ("dc3-a", dict(SETTINGS, layout="standalone"), "tls-standalone-dc3.json"),
    ("dc2-b", PLAIN_SHARED_STORE, "plain-shared-store-dc2-backup.json"),
])
def test_the_plan_is_what_the_jinja_derivation_computed(host, settings, expected):
    with open(os.path.join(HERE, expected)) as handle:
        assert _plan(host, settings) == json.load(handle)


def test_a_primary_with_tls_logs_in_by_certificate_and_checks_activation_at_its_peers():
    plan = _plan("dc1-a", SETTINGS)
    assert plan["users"] == [] and all("password" not in connection for connection in plan["connections"])
    assert plan["ha"]["peers"] == ["10.0.1.2:61616"] and not plan["ha"]["backup"]
    assert plan["routing"]["activation_check"]["connectors"] == [
        "continuity.dc2-a", "continuity.dc2-b", "continuity.dc3-a"]
    assert plan["routing"]["activation_check"]["timeout_ms"] == 5000
    assert _plan("dc1-a", dict(SETTINGS, activation_check_timeout_ms="12000"))["routing"]["activation_check"][
        "timeout_ms"] == 12000
    export = [bridge for bridge in plan["routing"]["bridges"] if bridge["name"].startswith("continuity.export.")]
    assert [(bridge["forwarding_address"], bridge["routing_type"]) for bridge in export] == [
        ("books.out", "anycast"), ("books.topic", "multicast")]


def test_an_unknown_layout_and_a_host_outside_every_datacentre_are_named():
    with pytest.raises(EstateError, match="replication_layout 'active_active' of datacentre dc1 is none of"):
        _plan("dc1-a", dict(SETTINGS, layout="active_active"))
    with pytest.raises(EstateError, match=r"stray is in \[\] of replication_datacentres"):
        _plan("stray", SETTINGS)


def test_the_layouts_the_replication_role_accepts_are_those_the_plan_knows():
    specs_path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "replication", "meta",
                              "argument_specs.yml")
    with open(specs_path) as handle:
        specs = yaml.safe_load(handle)["argument_specs"]

    for entry_point in ("main", "preflight"):
        assert specs[entry_point]["options"]["replication_layout"]["choices"] == list(HA_POLICIES)
