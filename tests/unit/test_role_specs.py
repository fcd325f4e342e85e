"""Every role's defaults and meta/argument_specs.yml describe the same variables with the same defaults."""

import os

import pytest
import yaml

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
