"""Bad inventories fail before any host is changed, with a message that names the variable.

One case for each check site.yml makes on the way (each task of the preflights, the argument specs, the estate model,
the hosts' own state); the values each check refuses are unit tests of the code behind it
(tests/unit/plugins/module_utils/test_artemis_broker_settings.py, test_artemis_broker_config.py,
tests/unit/plugins/filter/test_estate_errors.py, tests/unit/test_role_specs.py, test_security_settings.py)."""

import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from support.estate import REPO_ROOT, TESTBED_INVENTORY, TESTBED_STATE_DIR, generated_secrets, run_playbook


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def _write(path, data):
    with open(path, "w") as handle:
        yaml.safe_dump(data, handle)


def _fresh_pki_dir(inventory):
    return os.path.join(os.path.dirname(inventory), "pki")


def _inventory(tmp_path, edit):
    """A copy of the test bed's inventory with `edit(hosts, all_vars)` applied, its PKI a directory that does not
    exist yet (as in a new estate: a refused run must not generate one)."""
    target = tmp_path / "inventory"
    shutil.copytree(TESTBED_INVENTORY, target)
    hosts = _load(target / "hosts.yml")
    all_vars = {}
    for name in sorted(os.listdir(target / "group_vars" / "all")):
        all_vars.update(_load(target / "group_vars" / "all" / name))
        os.remove(target / "group_vars" / "all" / name)
    all_vars["replication_tls_pki_dir"] = _fresh_pki_dir(str(target))
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


def _idle_timeout_too_short(hosts, all_vars):
    all_vars["replication_idle_timeout"] = 50


def _empty_replication_password_without_tls(hosts, all_vars):
    all_vars["replication_tls"] = False
    all_vars["replication_password"] = ""


def _no_pki(hosts, all_vars):
    del all_vars["replication_tls_pki_dir"]


def _pki_inside_the_collection(hosts, all_vars):
    all_vars["replication_tls_pki_dir"] = os.path.join(REPO_ROOT, "inventories", "testbed", "pki")


def _downgrade(hosts, all_vars):
    all_vars["broker_version"] = "2.44.0"


def _duplicate_broker_name(hosts, all_vars):
    for dc in ("dc1", "dc2"):
        for host in _dc_hosts(hosts, dc).values():
            host["broker_name"] = "same-name"


def _pair_layout_on_one_host(hosts, all_vars):
    all_vars["replication_layout"] = "shared_nothing"


def _port_clash(hosts, all_vars):
    all_vars["broker_management_port"] = 5671  # the amqps acceptor's


def _export_of_a_mirrored_address(hosts, all_vars):
    # An address of the mirrored group inflow to the broker outside the estate: only a bridged group's can go.
    [outside] = all_vars["replication_external_brokers"]
    all_vars["replication_external_brokers"] = [dict(outside, addresses=["inflow.orders"])]


def _bridge_engine_without_tls(hosts, all_vars):
    all_vars["replication_tls"] = False
    all_vars["replication_password"] = "long-enough-for-a-test"


def _mirrors_without_tls_and_no_plain_text_acceptor(hosts, all_vars):
    all_vars["replication_tls"] = False
    all_vars["replication_password"] = "long-enough-for-a-test"
    all_vars["replication_address_groups"] = [{"name": "all"}]  # no bridged group, which needs TLS
    all_vars["replication_external_brokers"] = []


def _core_on_a_plain_acceptor_without_passwords(hosts, all_vars):
    all_vars["broker_acceptors"] = [{"name": "artemis", "port": 61616, "protocols": ["CORE", "AMQP", "OPENWIRE"]},
                                    {"name": "inside", "port": 61610, "protocols": ["CORE", "AMQP"], "tls": False}]


def _two_active_datacentres(hosts, all_vars):
    all_vars["replication_active_datacentre"] = ["dc1", "dc2"]


def _numeric_user_password(hosts, all_vars):
    all_vars["broker_users"] = [dict(user, password=12345) for user in all_vars["broker_users"]]


def _host_in_two_datacentres(hosts, all_vars):
    dc1_host = next(iter(_dc_hosts(hosts, "dc1")))
    _dc_hosts(hosts, "dc2")[dc1_host] = None


def _malformed_zookeeper(hosts, all_vars):
    all_vars["replication_zookeeper"] = {"connect-string": "zk1 zk2"}


def _failback_with_zookeeper(hosts, all_vars):
    all_vars["replication_zookeeper"] = {"connect-string": "zk1:2181"}
    all_vars["replication_ha_failback"] = True


def _failure_detection_too_short(hosts, all_vars):
    all_vars["replication_ha_failure_detection_ms"] = 500


def _missing_tls_certificate(hosts, all_vars):
    all_vars["replication_tls_cert"] = "/nonexistent/broker.pem"
    all_vars["replication_tls_key"] = "/nonexistent/broker.key"


def _journal_moved_away_from_its_data(hosts, all_vars):
    all_vars["broker_journal_dir"] = "/srv/continuity-moved/journal"


def _paging_store_inside_the_journal(hosts, all_vars):
    all_vars["broker_paging_dir"] = "{{ broker_journal_dir }}/paging"


def _broker_property_the_collection_owns(hosts, all_vars):
    all_vars["broker_properties"] = {"criticalAnalyzerTimeout": 120000, "AMQPConnections.dc2.uri": "tcp://x:5672"}


def _user_password_masked_by_no_artemis(hosts, all_vars):
    all_vars["broker_users"] = all_vars["broker_users"] + [{"name": "batch", "password": "ENC(1234abcd)",
                                                            "roles": ["app"]}]


def _bridge_to_an_undefined_connector(hosts, all_vars):
    all_vars["broker_queues"] = [{"name": "orders.out"}]
    all_vars["broker_bridges"] = [{"name": "orders-to-dr", "queue": "orders.out", "connectors": ["dr-site"],
                                   "user": "bridge", "password": "not-used-here"}]


def _client_role_on_an_internal_prefix(hosts, all_vars):
    all_vars["broker_roles"] = all_vars["broker_roles"] + [{"name": "app", "match": "continuity.out.#",
                                                            "permissions": ["consume"]}]


def _bundle_with_the_compromised_ca(hosts, all_vars):
    """The estate's CA file a bundle of a CA of its own and the one whose key version 0.1.0 published."""
    bundle = os.path.join(tempfile.mkdtemp(prefix="bundle-"), "ca-bundle.pem")
    with open(os.path.join(REPO_ROOT, "tests", "support", "pki", "compromised-ca-0.1.0.pem")) as leaked, \
            open(os.path.join(TESTBED_STATE_DIR, "pki", "ca.pem")) as own, open(bundle, "w") as handle:
        handle.write(own.read() + leaked.read().replace("\n", "\r\n"))
    all_vars["replication_tls_ca_cert"] = bundle


def _ten_year_broker_certificates(hosts, all_vars):
    all_vars["replication_tls_certificate_days"] = 3650


def _unreachable_host(hosts, all_vars):
    host = next(iter(_dc_hosts(hosts, "dc2")))
    _dc_hosts(hosts, "dc2")[host] = dict(_dc_hosts(hosts, "dc2")[host] or {}, ansible_port=1)


CASES = {
    "no passive datacentre": (_no_passive_dc, ["replication_datacentres"]),
    "unknown datacentre name": (_unknown_dc, ["replication_datacentres", "dc9"]),
    "active datacentre not listed": (_active_dc_unknown, ["replication_active_datacentre", "dc7"]),
    "missing admin password": (_missing_admin_password, ["broker_admin_password"]),
    "empty replication password without TLS": (_empty_replication_password_without_tls, ["replication_password"]),
    "mirror idle timeout too short": (_idle_timeout_too_short, ["replication_idle_timeout", "50"]),
    "no PKI named": (_no_pki, ["replication_tls_pki_dir", "replication_tls_ca_cert"]),
    "PKI inside the collection": (_pki_inside_the_collection, ["replication_tls_pki_dir", "inside the collection"]),
    "Artemis downgrade": (_downgrade, ["broker_version 2.44.0", "Artemis 2.56.0", "downgrade"]),
    "duplicate broker name": (_duplicate_broker_name, ["broker_name", "same-name"]),
    "HA layout on a one-host datacentre": (_pair_layout_on_one_host, ["replication_layout", "shared_nothing"]),
    "management port clashes with an acceptor": (_port_clash, ["broker_management_port", "5671"]),
    "bridge engine without TLS": (_bridge_engine_without_tls, ["replication_tls", "relay", "engine bridge"]),
    "mirrors without TLS and no acceptor for their password": (
        _mirrors_without_tls_and_no_plain_text_acceptor, ["replication_port 5672", "plain_text_passwords: true"]),
    "CORE on a plain-text acceptor without passwords": (
        _core_on_a_plain_acceptor_without_passwords, ["broker_acceptors ['inside']", "only AMQP"]),
    "export of a mirrored address": (
        _export_of_a_mirrored_address, ["external broker outside", "inflow.orders", "address group inflow"]),
    "two active datacentres": (_two_active_datacentres, ["replication_active_datacentre"]),
    "password that is not a string": (_numeric_user_password, ["broker_users", "password"]),
    "host in two datacentres": (_host_in_two_datacentres, ["dc1-node1", "exactly one datacentre"]),
    "malformed ZooKeeper connect string": (_malformed_zookeeper, ["replication_zookeeper", "connect-string"]),
    "failback asked of ZooKeeper peers": (
        _failback_with_zookeeper, ["replication_ha_failback cannot be true with replication_zookeeper"]),
    "pair failure detection too short": (
        _failure_detection_too_short, ["replication_ha_failure_detection_ms", "2000 or more", "got 500"]),
    "user-provided TLS certificate missing": (
        _missing_tls_certificate, ["replication_tls_cert", "/nonexistent/broker.pem"]),
    "client role on an internal prefix": (_client_role_on_an_internal_prefix,
                                          ["broker_roles", "role app", "continuity.out.#"]),
    "CA bundle with a CA whose key was published": (
        _bundle_with_the_compromised_ca, ["replication_tls_ca_cert", "private key was published"]),
    "ten-year broker certificates": (_ten_year_broker_certificates, ["replication_tls_certificate_days", "3650"]),
    "unreachable host": (_unreachable_host, ["dc2-node1", "UNREACHABLE"]),
    "journal moved away from its data": (
        _journal_moved_away_from_its_data, ["broker_journal_dir moves a store from", "/srv/continuity-moved/journal",
                                            "docs/broker-configuration.md"]),
    "paging store inside the journal": (_paging_store_inside_the_journal,
                                        ["broker_paging_dir", "is inside broker_journal_dir"]),
    "broker property the collection owns": (
        _broker_property_the_collection_owns, ["broker_properties", "AMQPConnections", "replication role"]),
    "user password masked by no Artemis": (
        _user_password_masked_by_no_artemis, ["broker_users entry batch", "artemis mask"]),
    "bridge to an undefined connector": (
        _bridge_to_an_undefined_connector, ["broker_bridges", "orders-to-dr", "dr-site", "broker_connectors"]),
}


def _fingerprint(estate):
    """What a run would change on the hosts: the broker configuration, in use and prepared."""
    return {node.name: estate.exec(node.name, "sh", "-c",
                                   "find /var/opt/artemis/*/etc -type f | sort | xargs sha256sum")
            for node in estate.nodes}


@pytest.fixture(scope="module")
def refused(estate, tmp_path_factory):
    """site.yml on every bad inventory, four at a time (each must stop before changing anything, so they cannot
    disturb one another), with the hosts' configuration before and after the lot."""
    cases = sorted(CASES)
    inventories = [_inventory(tmp_path_factory.mktemp("bad"), CASES[case][0]) for case in cases]
    before = _fingerprint(estate)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(cases, pool.map(lambda inventory: run_playbook("site.yml", inventory=inventory),
                                           inventories)))
    return before, dict(zip(cases, inventories)), results, _fingerprint(estate)


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_inventory_fails_before_changing_any_host(estate, refused, case):
    before, inventories, results, after = refused
    result = results[case]
    _edit, expected_words = CASES[case]

    assert result.rc != 0, result.output[-4000:]
    # A failed task says "fatal:", a failed loop item "failed:".
    starts = [at for at in (result.output.find("fatal:"), result.output.find("failed: [")) if at >= 0]
    assert starts, result.output[-4000:]
    failure = result.output[min(starts):]
    for word in expected_words:
        assert word in failure, f"{word!r} not named in the failure:\n{failure[-4000:]}"
    assert all(counters["changed"] == 0 for counters in result.recap().values()), result.recap()
    changed = {node: sorted(set(after[node].splitlines()) ^ set(before[node].splitlines())) for node in before
               if after[node] != before[node]}
    assert not changed, f"a bad inventory changed a broker's configuration (sha256 before and after): {changed}"
    assert not os.path.exists(_fresh_pki_dir(inventories[case])), "a bad inventory had a PKI generated"
    assert not [secret for secret in generated_secrets() if secret in result.output], "a password was logged"
