"""No private key (nor any other secret material in PEM form) in any tracked file or in the built collection artifact:
an estate whose CA key is public trusts anyone. Keys live in a PKI directory outside the tree (replication_tls_pki_dir)."""

import os
import re
import subprocess
import tarfile

from support.estate import REPO_ROOT

PRIVATE_KEY = re.compile(rb"-----BEGIN ([A-Z0-9 ]+ )?PRIVATE KEY-----")


def _tracked_files():
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    return [name.decode() for name in listed.split(b"\0") if name]


def test_no_tracked_file_holds_a_private_key():
    holding = []
    for name in _tracked_files():
        path = os.path.join(REPO_ROOT, name)
        if os.path.isfile(path):
            with open(path, "rb") as handle:
                if PRIVATE_KEY.search(handle.read()):
                    holding.append(name)
    assert holding == []


def test_the_built_artifact_holds_no_private_key_even_with_a_pki_in_an_inventory(tmp_path):
    """A PKI that a user (or an old version) left under an inventory of the checkout is left out of the artifact."""
    stray = os.path.join(REPO_ROOT, "inventories", "example", "pki")
    os.makedirs(stray, exist_ok=True)
    planted = os.path.join(stray, "planted-by-test.key")
    with open(planted, "wb") as handle:
        handle.write(b"-----BEGIN " + b"PRIVATE KEY-----\nMIIplanted\n-----END " + b"PRIVATE KEY-----\n")
    try:
        subprocess.run(["ansible-galaxy", "collection", "build", REPO_ROOT, "--output-path", str(tmp_path)],
                       check=True, capture_output=True, text=True)
    finally:
        os.remove(planted)
        if not os.listdir(stray):
            os.rmdir(stray)
    artifact = next(tmp_path.glob("continuity-artemis-*.tar.gz"))
    holding = []
    with tarfile.open(artifact) as tar:
        names = tar.getnames()
        for member in tar.getmembers():
            if member.isfile() and PRIVATE_KEY.search(tar.extractfile(member).read()):
                holding.append(member.name)
    assert "inventories/example/group_vars/all/continuity.yml" in names, "the artifact was not built as expected"
    assert holding == []
