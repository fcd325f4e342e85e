"""The broker role's own settings: what its preflight refuses before anything changes, each refusal naming the variable
and what it got (the bad-inventory integration test runs one of these cases through site.yml)."""

import os

import pytest
import yaml

from ansible_collections.continuity.artemis.plugins.module_utils import artemis_broker_settings as settings

ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "roles", "broker")
USERS = [{"name": "app", "password": "app-secret", "roles": ["app"]}]


def _defaults():
    """The role's defaults that are plain values (not templates), as a user who sets nothing gets them."""
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    return {name: value for name, value in defaults.items() if name in settings.SETTINGS and "{{" not in str(value)}


def _settings(**changes):
    values = dict(_defaults(), broker_admin_password="admin-secret", broker_monitor_password="monitor-secret",
                  broker_cluster_password="", broker_users=USERS, broker_peer_users=[],
                  broker_version="2.56.0", broker_archive_sha512="ab" * 64, broker_log_dir="/var/opt/artemis/b/log",
                  broker_metrics_role="monitor")
    values.update(changes)
    return values


def _derived(**changes):
    values = {"defined": [], "core_port": 61616, "ports": [61616, 5671, 8161, 9404],
              "acceptor_names": ["artemis", "amqps"], "ldap_options": {"connectionURL": ""},
              "password_users": USERS + [{"name": "monitor", "password": "monitor-secret", "roles": ["monitor"]}],
              "metrics_registry": {"micrometer": "1.17.0"}, "known_registries": ["2.44.0", "2.56.0"],
              "has_certificate": True, "minimum_version": "2.39.0", "known_checksums": ["2.44.0", "2.56.0"]}
    values.update(changes)
    return values


def _errors(settings_changes=None, derived_changes=None):
    return settings.settings_errors(_settings(**(settings_changes or {})), _derived(**(derived_changes or {})))


def test_the_role_defaults_with_the_required_secrets_have_no_errors():
    assert set(_defaults()) >= set(settings.SETTINGS) - {
        "broker_admin_password", "broker_monitor_password", "broker_cluster_password", "broker_users",
        "broker_peer_users", "broker_archive_sha512", "broker_log_dir", "broker_metrics_role"}
    assert _errors() == []


def test_the_preflight_passes_every_setting_and_derived_value_by_name():
    with open(os.path.join(ROLE, "tasks", "preflight.yml")) as handle:
        [task] = [task for task in yaml.safe_load(handle) if "_settings" in task.get("vars", {})]
    assert tuple(task["vars"]["_settings"]) == settings.SETTINGS
    assert all(value == "{{ %s }}" % name for name, value in task["vars"]["_settings"].items())
    assert set(task["vars"]["_derived"]) == set(settings.DERIVED)


def test_a_missing_setting_is_an_error_of_the_caller_not_a_pass():
    incomplete = _settings()
    del incomplete["broker_log_dir"]
    with pytest.raises(ValueError, match="broker_log_dir"):
        settings.settings_errors(incomplete, _derived())


SETTINGS_CASES = {
    "no admin password": ({"broker_admin_password": ""}, ["broker_admin_password", "no default passwords"]),
    "user without password": ({"broker_users": [{"name": "app", "roles": ["app"]}]}, ["broker_users", "['app']"]),
    "password that is not a string": (
        {"broker_users": [{"name": "app", "password": 12345, "roles": ["app"]}]}, ["broker_users", "password", "app"]),
    "monitor password that is not a string": ({"broker_monitor_password": None}, ["broker_monitor_password"]),
    "admin password masked": ({"broker_admin_password": "ENC(1234abcd)"}, ["broker_admin_password", "masked"]),
    "cluster password masked": ({"broker_cluster_password": " ENC(1234abcd)"}, ["broker_cluster_password", "masked"]),
    "too few hash iterations": ({"broker_user_hash_iterations": 1000}, ["broker_user_hash_iterations", "1000"]),
    "HA pair without a cluster password": (
        {"broker_ha": {"policy": "replication", "peers": ["b"]}},
        ["broker_ha.policy replication", "broker_cluster_password"]),
    "HA pair without its peer": (
        {"broker_ha": {"policy": "shared_store", "peers": []}, "broker_cluster_password": "c"}, ["broker_ha.peers"]),
    "certificate user without a subject pattern": (
        {"broker_certificate_users": [{"name": "peer", "roles": ["peer"]}]}, ["broker_certificate_users", "peer"]),
    "certificate user named like a password user": (
        {"broker_certificate_users": [{"name": "app", "subject_pattern": "CN=app", "roles": ["app"]}]},
        ["broker_certificate_users", "no password user has"]),
    "journal file size that is not a size": (
        {"broker_journal_file_size": "10 megs"}, ["broker_journal_file_size", "10 megs"]),
    "journal file size below 1M": ({"broker_journal_file_size": "512K"}, ["broker_journal_file_size", "512K"]),
    "journal file size above 1G": ({"broker_journal_file_size": "2G"}, ["broker_journal_file_size", "2G"]),
    "heap that is not a size": ({"broker_java_max_heap": "lots"}, ["broker_java_max_heap (lots)"]),
    "minimum heap above the maximum": (
        {"broker_java_min_heap": "4g", "broker_java_max_heap": "2G"}, ["broker_java_min_heap (4g)", "above"]),
    "JVM option with a blank": (
        {"broker_java_extra_args": ["-Dcontinuity.note=two words"]}, ["broker_java_extra_args", "two words"]),
    "JVM option that configures the broker": (
        {"broker_java_gc_args": ["-Dbrokerconfig.criticalAnalyzer=false"]}, ["-Dbrokerconfig.criticalAnalyzer"]),
    "Java home that is not a path": ({"broker_java_home": "java17"}, ["broker_java_home", "java17"]),
    "directory before the brokers' own users": (
        {"broker_login_modules": [{"module": "ldap", "flag": "sufficient"},
                                  {"module": "properties", "flag": "required"}],
         "broker_ldap": {"url": "ldaps://ldap:636", "bind_dn": "cn=a", "bind_password": "p", "user_base": "ou=p",
                         "role_base": "ou=g"}},
        ["broker_login_modules", "`properties` comes first"]),
    "directory in plain text": (
        {"broker_login_modules": [{"module": "properties", "flag": "sufficient"}, {"module": "ldap", "flag": "required"}],
         "broker_ldap": {"url": "ldap://ldap:389", "bind_dn": "cn=a", "bind_password": "p", "user_base": "ou=p",
                         "role_base": "ou=g"}},
        ["broker_ldap", "ldaps://"]),
    "unknown login flag": ({"broker_login_modules": [{"module": "properties", "flag": "always"}]},
                           ["broker_login_modules", "'always'"]),
    "global max size that is not a size": ({"broker_global_max_size": "1 gig"}, ["broker_global_max_size", "1 gig"]),
    "disk usage above 100 %": ({"broker_max_disk_usage": 150}, ["broker_max_disk_usage", "150"]),
    "unknown log level": ({"broker_log_levels": {"org.apache": "LOUD"}}, ["broker_log_levels", "org.apache: LOUD"]),
    "logger that is not a name": ({"broker_log_levels": {"org apache": "INFO"}}, ["broker_log_levels", "org apache"]),
    "log directory with a lookup": ({"broker_log_dir": "/var/log/${env:HOME}"}, ["broker_log_dir", "${env:HOME}"]),
    "rollover size that is not a size": ({"broker_log_rollover_size": "big"}, ["broker_log_rollover_size", "big"]),
    "negative rollover count": ({"broker_log_rollover_keep": -1}, ["broker_log_rollover_keep", "-1"]),
    "unsupported Artemis version": ({"broker_version": "2.30.0"}, ["broker_version 2.30.0", "2.39.0 or newer"]),
    "archive checksum unknown": ({"broker_archive_sha512": ""}, ["broker_archive_sha512", "2.56.0"]),
    "firewalld zone with a blank": ({"broker_firewalld_zone": "public zone"}, ["broker_firewalld_zone", "public zone"]),
    "SELinux type that is not a type": ({"broker_selinux_port_type": "http_port"}, ["broker_selinux_port_type"]),
    "wildcard in an address name": ({"broker_addresses": [{"name": "orders.#"}]}, ["broker_addresses", "orders.#"]),
    "queue under the broker's own prefix": (
        {"broker_addresses": [{"name": "orders", "queues": ["activemq.orders"]}]}, ["activemq.orders"]),
    "queue address with a blank": ({"broker_queues": [{"name": "q", "address": "or ders"}]}, ["'or ders'"]),
}


@pytest.mark.parametrize("case", sorted(SETTINGS_CASES))
def test_each_bad_setting_is_refused_naming_the_variable_and_what_it_got(case):
    changes, words = SETTINGS_CASES[case]
    errors = _errors(changes)
    assert len(errors) == 1, errors
    for word in words:
        assert word in errors[0], f"{word!r} not in {errors[0]!r}"


DERIVED_CASES = {
    "the removed client TLS switch": ({}, {"defined": ["broker_client_tls"]}, ["broker_client_tls", "no longer exist"]),
    "HA pair without a CORE acceptor": (
        {"broker_ha": {"policy": "replication", "peers": ["b"]}, "broker_cluster_password": "c"},
        {"core_port": ""}, ["an acceptor in broker_acceptors that speaks CORE"]),
    "management port clashes with an acceptor": (
        {}, {"ports": [61616, 5671, 5671, 9404]}, ["broker_management_port", "5671, 5671"]),
    "two acceptors with one name": ({}, {"acceptor_names": ["artemis", "artemis"]}, ["acceptor names"]),
    "metrics role that no user holds": ({"broker_metrics_role": "scrapers"}, {}, ["broker_metrics_role", "scrapers"]),
    "metrics without a registry for the version": ({}, {"metrics_registry": {}},
                                                   ["broker_version 2.56.0", "['2.44.0', '2.56.0']"]),
    "metrics without a certificate": ({}, {"has_certificate": False}, ["broker.pem", "HTTPS only"]),
    "directory option with a JAAS expansion": (
        {"broker_login_modules": [{"module": "properties", "flag": "sufficient"}, {"module": "ldap", "flag": "required"}],
         "broker_ldap": {"url": "ldaps://ldap:636", "bind_dn": "cn=a", "bind_password": "p", "user_base": "ou=p",
                         "role_base": "ou=g"}},
        {"ldap_options": {"userBase": "ou=${user}"}}, ["no value with a line break or ${", "['userBase']"]),
}


@pytest.mark.parametrize("case", sorted(DERIVED_CASES))
def test_each_bad_derived_value_is_refused_naming_the_variables_behind_it(case):
    settings_changes, derived_changes, words = DERIVED_CASES[case]
    errors = _errors(settings_changes, derived_changes)
    assert len(errors) == 1, errors
    for word in words:
        assert word in errors[0], f"{word!r} not in {errors[0]!r}"


def test_metrics_off_needs_neither_registry_nor_scraper():
    assert _errors({"broker_metrics_enabled": False, "broker_metrics_role": "nobody"}, {"metrics_registry": {}}) == []


def test_yaml_off_as_a_log_level_and_sizes_at_the_bounds_are_accepted():
    assert _errors({"broker_log_levels": {"root": False, "org.apache.activemq": "debug"},
                    "broker_journal_file_size": "1G", "broker_global_max_size": -1, "broker_max_disk_usage": -1,
                    "broker_log_rollover_size": "100 MB", "broker_java_home": "/opt/jdk-17.0.2+8"}) == []


def test_every_problem_is_named_at_once():
    errors = _errors({"broker_journal_file_size": "10 megs", "broker_max_disk_usage": 150,
                      "broker_firewalld_zone": "public zone"})
    assert len(errors) == 3, errors
