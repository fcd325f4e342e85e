"""The chaos runner's reading of an operation's end: a playbook's refusal is taken at its word unless the groups are
seen to have moved (3 x 1 seed 2's failback refused while the active datacentre did not answer)."""

import types

import pytest

from chaos import world

REFUSED = "'Refused, nothing changed: failback_active (dc1) must be where all, books are active, but it is not readable'"


def _failed(output):
    return types.SimpleNamespace(returncode=2, output=f"fatal: [localhost]: FAILED! => \n  msg: {output}\n")


@pytest.mark.parametrize("output, before, after, outcome", [
    (REFUSED, None, "dc1", "refused"),   # where the groups were was unknown when it began
    (REFUSED, "dc1", None, "refused"),   # unknown when it ended
    (REFUSED, "dc1", "dc1", "refused"),
    (REFUSED, "dc1", "dc2", "failed"),   # a refusal that moved them is not one
    ("'Refused, no broker restarted: dc1-node2 not read earlier in this run'", "dc1", None, "refused"),
    ("broker unreachable", None, "dc1", "failed"),
    ("broker unreachable", "dc1", "dc1", "refused"),
])
def test_an_operation_that_says_it_refused_is_refused_unless_the_groups_moved(output, before, after, outcome):
    found, message = world.World._outcome(None, "failback", _failed(output), None, before, after, {})
    assert found == outcome
    assert message


def test_an_interrupted_or_clean_end_is_read_as_such():
    done = types.SimpleNamespace(returncode=0, output="")
    assert world.World._outcome(None, "swapover", done, None, "dc1", "dc2", {}) == ("done", "")
    interrupted = world.World._outcome(None, "swapover", _failed(REFUSED), {"signal": "SIGINT", "after": 5}, "dc1",
                                       None, {})
    assert interrupted == ("interrupted", "SIGINT after 5 s")
