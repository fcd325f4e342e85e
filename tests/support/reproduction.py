"""What the reproductions of Artemis's defects share (tests/drills/reproduce_*.py, make reproduce-*): each writes
its measurement to its results file and prints its summary."""

from __future__ import annotations

import json
import os


def artemis_version() -> str:
    """The release of the distribution the tests use (ARTEMIS_HOME)."""
    return os.path.basename(os.environ["ARTEMIS_HOME"]).replace("apache-artemis-", "")


def write_result(path: str, result: dict) -> None:
    """``result`` (with its ``summary``) to ``path`` as JSON, and its summary to the output."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(result, handle, indent=2)
        handle.write("\n")
    print(result["summary"])
