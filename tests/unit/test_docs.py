"""Every module and role of the collection renders with ansible-doc, as users read them."""

import json
import os
import subprocess

import pytest

from support.estate import REPO_ROOT

MODULES = sorted(name.removesuffix(".py") for name in os.listdir(os.path.join(REPO_ROOT, "plugins", "modules"))
                 if name.endswith(".py") and not name.startswith("_"))
ROLES = sorted(os.listdir(os.path.join(REPO_ROOT, "roles")))


def _ansible_doc(*arguments):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    result = subprocess.run(["ansible-doc", *arguments], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    ours = [line for line in result.stderr.splitlines() if "WARNING" in line and "continuity" in line]
    assert result.returncode == 0 and not ours, result.stderr[-3000:]
    return result.stdout


@pytest.mark.parametrize("module", MODULES)
def test_a_module_renders_with_its_examples_and_return_values(module):
    text = _ansible_doc(f"continuity.artemis.{module}")
    assert "EXAMPLES:" in text and "RETURN VALUES:" in text, text[:2000]


@pytest.mark.parametrize("role", ROLES)
def test_a_role_renders_its_argument_specs(role):
    text = _ansible_doc("-t", "role", f"continuity.artemis.{role}")
    assert "ENTRY POINT:" in text and "Options" in text, text[:2000]


# Ansible gives these result keys its own meaning (a boolean, or the host's state): a module returning one as data
# breaks the task that registers it (ansible-core 2.19 on: "Values for result key 'skipped' must be of type bool").
RESERVED_RESULT_KEYS = {"skipped", "unreachable", "failed", "skip_reason", "invocation"}


@pytest.mark.parametrize("module", MODULES)
def test_a_module_returns_no_key_that_ansible_reserves(module):
    text = _ansible_doc("--json", f"continuity.artemis.{module}")
    returned = set(json.loads(text)[f"continuity.artemis.{module}"]["return"] or {})
    assert not returned & RESERVED_RESULT_KEYS, sorted(returned & RESERVED_RESULT_KEYS)
