"""Every role's defaults and meta/argument_specs.yml describe the same variables with the same defaults."""

import os

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from support import role_docs

ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")
ROLES = sorted(name for name in os.listdir(ROLES_DIR) if not name.startswith("_"))


def _load(role, *path):
    with open(os.path.join(ROLES_DIR, role, *path)) as handle:
        return yaml.safe_load(handle) or {}


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_argument_specs_agree(role):
    defaults = _load(role, "defaults", "main.yml")
    options = _load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]

    documented_without_default = {name for name, spec in options.items() if "default" not in spec}
    assert set(defaults) == set(options) - documented_without_default, (
        "variables in defaults/main.yml but not in the argument spec, or the other way round")
    for name, value in defaults.items():
        assert options[name]["default"] == value, f"{role}: the default of {name} differs from its argument spec"


@pytest.mark.parametrize("role", ROLES)
def test_variables_without_default_are_required_and_secrets_are_not_logged(role):
    """A variable with no default is one the user must give; every password is no_log."""
    options = _load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    for name, spec in options.items():
        if "default" not in spec:
            assert spec.get("required") is True, name
        if "password" in name:
            assert spec.get("no_log") is True, name


@pytest.mark.parametrize("role", ROLES)
def test_public_variables_carry_the_role_prefix(role):
    options = _load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert all(name.startswith(role + "_") for name in options), sorted(options)


@pytest.mark.parametrize("role", ROLES)
def test_the_role_readme_lists_the_variables_of_its_argument_specs(role):
    current, regenerated = role_docs.rendered(role)
    assert role_docs.BEGIN in current, f"roles/{role}/README.md has no generated variables table"
    assert current == regenerated, f"roles/{role}/README.md is stale: run make role-docs"


def _validate(role, entry_point, name, value):
    """What Ansible's role argument validation (validate_argument_spec) says of one variable of an entry point."""
    spec = {name: _load(role, "meta", "argument_specs.yml")["argument_specs"][entry_point]["options"][name]}
    return ArgumentSpecValidator(spec).validate({} if value is _UNSET else {name: value}).error_messages


_UNSET = object()
# The entry points site.yml validates before anything changes (test_bad_inventory runs one such case through it).
BAD_VALUES = {
    "missing admin password": ("broker", "checks", "broker_admin_password", _UNSET,
                               ["missing required arguments: broker_admin_password"]),
    "user without password": ("broker", "checks", "broker_users", [{"name": "app", "roles": ["app"]}],
                              ["password", "broker_users"]),
    "port that is not a number": ("broker", "checks", "broker_management_port", "eighty",
                                  ["broker_management_port", "eighty"]),
    "divert without an address": ("broker", "checks", "broker_diverts",
                                  [{"name": "orders-copy", "forwarding_address": "orders.copy"}],
                                  ["address", "broker_diverts"]),
    "unknown routing type": ("broker", "checks", "broker_addresses", [{"name": "orders", "routing_type": "broadcast"}],
                             ["routing_type", "broadcast", "broker_addresses"]),
    "unknown layout": ("replication", "preflight", "replication_layout", "active_active",
                       ["replication_layout", "active_active"]),
    "activation check wait that is not a number": ("replication", "preflight",
                                                   "replication_activation_check_timeout_ms", "five seconds",
                                                   ["replication_activation_check_timeout_ms", "five seconds"]),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_bad_values_are_refused_by_the_argument_specs_naming_the_variable(case):
    role, entry_point, name, value, words = BAD_VALUES[case]
    [error] = _validate(role, entry_point, name, value)
    for word in words:
        assert word in error, error
