"""The collection as ansible-galaxy publishes it: built from the checkout and installed into an empty path."""

import pathlib
import subprocess

from support.estate import REPO_ROOT


def build_and_install(work: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """(the artifact, the collections path it is installed in), both under ``work``."""
    subprocess.run(["ansible-galaxy", "collection", "build", REPO_ROOT, "--output-path", str(work / "dist")],
                   check=True, capture_output=True, text=True)
    artifact = next((work / "dist").glob("continuity-artemis-*.tar.gz"))
    # --force: without it, a copy found on the configured collections path (a checkout's link) makes this a no-op.
    subprocess.run(["ansible-galaxy", "collection", "install", "--force", "--no-deps", str(artifact),
                    "-p", str(work / "collections")], check=True, capture_output=True, text=True)
    return artifact, work / "collections"
