"""The execution environment: ansible-builder finds what the installed collection needs, and the example definition
turns into a build context that installs the collection's own artifact (no container engine here: not built)."""

import os
import re
import shutil
import subprocess

import pytest
import yaml

from support.collection import build_and_install
from support.estate import REPO_ROOT

EXAMPLE = os.path.join(REPO_ROOT, "execution-environment")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_and_install(tmp_path_factory.mktemp("built"))


def test_introspection_finds_the_collection_s_python_and_system_needs(built):
    _artifact, collections = built
    result = subprocess.run(["ansible-builder", "introspect", str(collections)], capture_output=True, text=True,
                            check=True)
    needs = yaml.safe_load(result.stdout)
    assert "cryptography>=3.3  # from collection continuity.artemis" in needs["python"]
    assert "openssh-clients [platform:rpm]  # from collection continuity.artemis" in needs["system"]


def test_the_example_definition_builds_a_context_with_the_collection_s_artifact(built, tmp_path):
    artifact, _collections = built
    definition = tmp_path / "ee"
    shutil.copytree(EXAMPLE, definition)
    shutil.copy(artifact, definition)
    subprocess.run(["ansible-builder", "create", "-f", str(definition / "execution-environment.yml"),
                    "--context", str(tmp_path / "context")], capture_output=True, text=True, check=True)

    # The example names the artifact of the collection's current version (galaxy.yml): it would not build otherwise.
    assert (tmp_path / "context" / "_build" / "collections" / artifact.name).is_file()
    with open(tmp_path / "context" / "_build" / "requirements.yml") as handle:
        collections = yaml.safe_load(handle)["collections"]
    assert {"name": f"/build/collections/{artifact.name}", "type": "file"} in collections
    containerfile = (tmp_path / "context" / "Dockerfile").read_text()
    assert "COPY _build/collections/ /build/collections/" in containerfile
    assert 'ANSIBLE_INSTALL_REFS="ansible-core==' in containerfile


def test_the_base_image_is_pinned_by_digest():
    """A tag (latest, or a release tag Red Hat moves) would give a rebuild another base than the one tested."""
    with open(os.path.join(EXAMPLE, "execution-environment.yml")) as handle:
        image = yaml.safe_load(handle)["images"]["base_image"]["name"]
    assert re.fullmatch(r"[^@]+@sha256:[0-9a-f]{64}", image), image
