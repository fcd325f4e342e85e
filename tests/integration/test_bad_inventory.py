"""Bad inventories fail before any host is changed, with a message that names the variable."""

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


def _unsupported_version(hosts, all_vars):
    all_vars["broker_version"] = "2.30.0"


def _port_clash(hosts, all_vars):
    all_vars["broker_management_port"] = 5671  # the amqps acceptor's


def _port_not_a_number(hosts, all_vars):
    all_vars["broker_management_port"] = "eighty"


def _duplicate_group(hosts, all_vars):
    all_vars["replication_address_groups"] = [{"name": "orders", "addresses": ["orders."]},
                                              {"name": "orders", "addresses": ["billing."]}]


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


def _removed_client_tls_switch(hosts, all_vars):
    all_vars["broker_client_tls"] = True


def _plain_text_passwords_over_tls(hosts, all_vars):
    all_vars["broker_acceptors"] = [{"name": "artemis", "port": 61616, "protocols": ["CORE", "AMQP"],
                                     "plain_text_passwords": True}]


def _core_on_a_plain_acceptor_without_passwords(hosts, all_vars):
    all_vars["broker_acceptors"] = [{"name": "artemis", "port": 61616, "protocols": ["CORE", "AMQP", "OPENWIRE"]},
                                    {"name": "inside", "port": 61610, "protocols": ["CORE", "AMQP"], "tls": False}]


def _two_active_datacentres(hosts, all_vars):
    all_vars["replication_active_datacentre"] = ["dc1", "dc2"]


def _wildcard_address_name(hosts, all_vars):
    all_vars["broker_addresses"] = [{"name": "orders.#"}]


def _address_under_the_broker_prefix(hosts, all_vars):
    all_vars["broker_addresses"] = [{"name": "orders", "queues": ["activemq.orders"]}]


def _unknown_routing_type(hosts, all_vars):
    all_vars["broker_addresses"] = [{"name": "orders", "routing_type": "broadcast"}]


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


def _metrics_role_nobody_holds(hosts, all_vars):
    all_vars["broker_metrics_enabled"] = True
    all_vars["broker_metrics_role"] = "scrapers"


def _metrics_port_clash(hosts, all_vars):
    all_vars["broker_metrics_enabled"] = True
    all_vars["broker_metrics_port"] = 8161


def _journal_file_size_not_a_size(hosts, all_vars):
    all_vars["broker_journal_file_size"] = "10 megs"


def _jvm_option_with_a_blank(hosts, all_vars):
    all_vars["broker_java_extra_args"] = ["-Dcontinuity.note=two words"]


def _disk_usage_above_100(hosts, all_vars):
    all_vars["broker_max_disk_usage"] = 150


def _journal_moved_away_from_its_data(hosts, all_vars):
    all_vars["broker_journal_dir"] = "/srv/continuity-moved/journal"


def _paging_store_inside_the_journal(hosts, all_vars):
    all_vars["broker_paging_dir"] = "{{ broker_journal_dir }}/paging"


def _broker_property_the_collection_owns(hosts, all_vars):
    all_vars["broker_properties"] = {"criticalAnalyzerTimeout": 120000, "AMQPConnections.dc2.uri": "tcp://x:5672"}


_DIRECTORY = {"url": "ldaps://ldap.example.com:636", "bind_dn": "cn=artemis,dc=example", "bind_password": "p4ss-word",
              "user_base": "ou=people,dc=example", "role_base": "ou=groups,dc=example"}


def _directory_before_the_brokers_own_users(hosts, all_vars):
    all_vars["broker_ldap"] = _DIRECTORY
    all_vars["broker_login_modules"] = [{"module": "ldap", "flag": "sufficient"},
                                        {"module": "properties", "flag": "required"}]


def _directory_in_plain_text(hosts, all_vars):
    all_vars["broker_ldap"] = dict(_DIRECTORY, url="ldap://ldap.example.com:389")
    all_vars["broker_login_modules"] = [{"module": "properties", "flag": "sufficient"},
                                        {"module": "ldap", "flag": "required"}]


def _user_password_masked_by_no_artemis(hosts, all_vars):
    all_vars["broker_users"] = all_vars["broker_users"] + [{"name": "batch", "password": "ENC(1234abcd)",
                                                            "roles": ["app"]}]


def _firewalld_zone_with_a_blank(hosts, all_vars):
    all_vars["broker_firewalld"] = True
    all_vars["broker_firewalld_zone"] = "public zone"


def _divert_without_an_address(hosts, all_vars):
    all_vars["broker_queues"] = [{"name": "orders.copy"}]
    all_vars["broker_diverts"] = [{"name": "orders-copy", "forwarding_address": "orders.copy"}]


def _bridge_to_an_undefined_connector(hosts, all_vars):
    all_vars["broker_queues"] = [{"name": "orders.out"}]
    all_vars["broker_bridges"] = [{"name": "orders-to-dr", "queue": "orders.out", "connectors": ["dr-site"],
                                   "user": "bridge", "password": "not-used-here"}]


def _client_role_on_an_internal_prefix(hosts, all_vars):
    all_vars["broker_roles"] = all_vars["broker_roles"] + [{"name": "app", "match": "continuity.out.#",
                                                            "permissions": ["consume"]}]


def _client_role_that_manages(hosts, all_vars):
    all_vars["broker_roles"] = [dict(role, permissions=role["permissions"] + ["manage"])
                                for role in all_vars["broker_roles"]]


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
    "user without password": (_user_without_password, ["password", "broker_users"]),
    "duplicate broker name": (_duplicate_broker_name, ["broker_name", "same-name"]),
    "HA layout on a one-host datacentre": (_pair_layout_on_one_host, ["replication_layout", "shared_nothing"]),
    "unknown layout": (_unknown_layout, ["replication_layout", "active_active"]),
    "unsupported Artemis version": (_unsupported_version, ["broker_version", "2.30.0"]),
    "management port clashes with an acceptor": (_port_clash, ["broker_management_port", "5671"]),
    "port that is not a number": (_port_not_a_number, ["broker_management_port"]),
    "two groups with one name": (_duplicate_group, ["replication_address_groups", "unique names"]),
    "bridge engine without TLS": (_bridge_engine_without_tls, ["replication_tls", "relay", "engine bridge"]),
    "mirrors without TLS and no acceptor for their password": (
        _mirrors_without_tls_and_no_plain_text_acceptor, ["replication_port 5672", "plain_text_passwords: true"]),
    "the removed client TLS switch": (_removed_client_tls_switch, ["broker_client_tls", "no longer exist"]),
    "plain-text passwords on a TLS acceptor": (
        _plain_text_passwords_over_tls, ["broker_acceptors", "['artemis']", "plain_text_passwords"]),
    "CORE on a plain-text acceptor without passwords": (
        _core_on_a_plain_acceptor_without_passwords, ["broker_acceptors ['inside']", "only AMQP"]),
    "export of a mirrored address": (
        _export_of_a_mirrored_address, ["external broker outside", "inflow.orders", "address group inflow"]),
    "two active datacentres": (_two_active_datacentres, ["replication_active_datacentre"]),
    "wildcard in an address name": (_wildcard_address_name, ["broker_addresses", "orders.#"]),
    "queue under the broker's own prefix": (
        _address_under_the_broker_prefix, ["broker_addresses", "activemq.orders"]),
    "unknown routing type": (_unknown_routing_type, ["routing_type", "broadcast"]),
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
    "client role that manages": (_client_role_that_manages, ["broker_roles", "role app grants manage"]),
    "CA bundle with a CA whose key was published": (
        _bundle_with_the_compromised_ca, ["replication_tls_ca_cert", "private key was published"]),
    "ten-year broker certificates": (_ten_year_broker_certificates, ["replication_tls_certificate_days", "3650"]),
    "unreachable host": (_unreachable_host, ["dc2-node1", "UNREACHABLE"]),
    "metrics role that no user holds": (_metrics_role_nobody_holds, ["broker_metrics_role", "scrapers"]),
    "metrics port clashes with management": (_metrics_port_clash, ["broker_metrics_port", "8161"]),
    "divert without an address": (_divert_without_an_address, ["broker_diverts", "address"]),
    "journal file size that is not a size": (_journal_file_size_not_a_size, ["broker_journal_file_size", "10 megs"]),
    "JVM option with a blank": (_jvm_option_with_a_blank, ["broker_java_extra_args", "two words"]),
    "disk usage above 100 %": (_disk_usage_above_100, ["broker_max_disk_usage", "150"]),
    "journal moved away from its data": (
        _journal_moved_away_from_its_data, ["broker_journal_dir moves a store from", "/srv/continuity-moved/journal",
                                            "docs/broker-configuration.md"]),
    "paging store inside the journal": (_paging_store_inside_the_journal,
                                        ["broker_paging_dir", "is inside broker_journal_dir"]),
    "broker property the collection owns": (
        _broker_property_the_collection_owns, ["broker_properties", "AMQPConnections", "replication role"]),
    "directory before the brokers' own users": (
        _directory_before_the_brokers_own_users, ["broker_login_modules", "`properties` comes first"]),
    "directory in plain text": (_directory_in_plain_text, ["broker_ldap", "ldaps://"]),
    "user password masked by no Artemis": (
        _user_password_masked_by_no_artemis, ["broker_users entry batch", "artemis mask"]),
    "firewalld zone with a blank": (_firewalld_zone_with_a_blank, ["broker_firewalld_zone", "public zone"]),
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
