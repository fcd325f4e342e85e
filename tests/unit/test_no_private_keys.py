"""No private key (nor any other secret material in PEM form) in any tracked file or in the built collection artifact:
an estate whose CA key is public trusts anyone. Keys live in a PKI directory outside the tree (replication_tls_pki_dir)."""

import os
import re
import shutil
import subprocess
import tarfile

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from support.estate import REPO_ROOT

# A PEM private-key header of any kind (PKCS#8, RSA, EC, encrypted); spelt with counts so that this file holds none.
# \x45 is "E": written so, this file does not hold the marker it looks for.
PRIVATE_KEY = re.compile(rb"-{5}B\x45GIN ([A-Z0-9 ]+ )?PRIV\x41TE KEY-{5}")


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
    """A PKI that a user (or an old version) left under an inventory is left out of the artifact. Built from a copy of
    the tracked files with a freshly generated key planted in it: nothing is written into the checkout."""
    source = tmp_path / "source"
    for name in _tracked_files():
        if os.path.isfile(os.path.join(REPO_ROOT, name)):
            os.makedirs(source / os.path.dirname(name), exist_ok=True)
            shutil.copy2(os.path.join(REPO_ROOT, name), source / name)
    planted = source / "inventories" / "example" / "pki" / "planted-by-test.key"
    os.makedirs(planted.parent)
    planted.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    assert PRIVATE_KEY.search(planted.read_bytes()), "the detector does not see a real key"

    output = tmp_path / "built"
    subprocess.run(["ansible-galaxy", "collection", "build", str(source), "--output-path", str(output)],
                   check=True, capture_output=True, text=True)
    artifact = next(output.glob("continuity-artemis-*.tar.gz"))
    holding = []
    with tarfile.open(artifact) as tar:
        names = tar.getnames()
        for member in tar.getmembers():
            if member.isfile() and PRIVATE_KEY.search(tar.extractfile(member).read()):
                holding.append(member.name)
    assert "inventories/example/group_vars/all/continuity.yml" in names, "the artifact was not built as expected"
    assert holding == []
