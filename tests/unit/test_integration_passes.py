"""Every integration test runs in one of make integration's passes: a test marked `systemd` is left out of the first
(plain nodes) and runs only if the second names its file."""

import os
import re

from support.estate import REPO_ROOT


def _integration_recipe():
    with open(os.path.join(REPO_ROOT, "Makefile")) as handle:
        makefile = handle.read()
    return re.search(r"^integration:.*?\n((?:\t.*\n)+)", makefile, re.MULTILINE).group(1)


def test_every_file_with_a_systemd_test_is_named_by_the_systemd_pass():
    recipe = _integration_recipe()
    directory = os.path.join(REPO_ROOT, "tests", "integration")
    marked = sorted(name for name in os.listdir(directory) if name.endswith(".py")
                    and "@pytest.mark.systemd" in open(os.path.join(directory, name)).read())
    assert marked, "no test is marked systemd"
    assert [name for name in marked if f"tests/integration/{name}" not in recipe] == []
