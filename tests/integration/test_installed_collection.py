"""The collection as its users get it: built by ansible-galaxy, installed into an empty collections path, and its
playbooks run by FQCN from outside the checkout with a plain ansible.cfg, against the test bed."""

import os
import subprocess
import uuid

import pytest

from support import amqp
from support.collection import build_and_install
from support.estate import TESTBED_INVENTORY, PlaybookResult

# What a user's own ansible.cfg would hold for this inventory; nothing points back to the checkout.
USER_CONFIG = """[defaults]
interpreter_python = auto_silent
callback_result_format = yaml

[inventory]
# The replication role keeps the estate's generated certificates in <inventory>/pki.
ignore_patterns = pki
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    work = tmp_path_factory.mktemp("installed")
    build_and_install(work)
    (work / "ansible.cfg").write_text(USER_CONFIG)
    return work


def _run(installed, playbook, *extra_args):
    env = dict(os.environ, ANSIBLE_CONFIG=str(installed / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(installed / "collections"))
    proc = subprocess.run(["ansible-playbook", "-i", TESTBED_INVENTORY, f"continuity.artemis.{playbook}",
                           *extra_args], cwd=installed, env=env, capture_output=True, text=True, timeout=1500,
                          check=False)
    return PlaybookResult(proc.returncode, proc.stdout + proc.stderr)


def test_the_installed_collection_runs_site_and_swapover_by_fqcn(installed, dc1_active_at_the_end):
    copy = installed / "collections" / "ansible_collections" / "continuity" / "artemis"
    assert (copy / "playbooks" / "swapover.yml").is_file() and not copy.is_symlink()

    site = _run(installed, "site")
    assert site.rc == 0, site.output[-6000:]
    # The estate was built from the checkout: the published artifact describes exactly the same estate.
    assert all(counters["changed"] == 0 for counters in site.recap().values()), site.recap()

    # dc1_active_at_the_end gives the group back to dc1 afterwards.
    swapped = _run(installed, "swapover", "-e", "swapover_target=dc2", "-e", '{"swapover_groups": ["all"]}')
    assert swapped.rc == 0, swapped.output[-6000:]
    # dc2 now takes consumers (a passive site refuses them): the swapover really happened.
    node, queue = dc1_active_at_the_end.dc("dc2"), f"installed.{uuid.uuid4().hex[:8]}"
    sent = amqp.send(node.amqp_url, node.user, node.password, queue, 1)
    assert [m.id for m in amqp.receive(node.amqp_url, node.user, node.password, queue, 1)] == sent
