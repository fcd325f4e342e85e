"""make release: `check` refuses a release the changelog does not describe (galaxy.yml's version is not the newest
release in changelogs/changelog.yaml, a fragment waits for a release, CHANGELOG.rst is not what antsibull-changelog
generates from changelog.yaml); `inspect ARTIFACT` lists what the built artifact holds and refuses one holding what
must never ship (private keys, the test bed's inventory and secrets, caches, virtualenvs, test output, archives) or
lacking the broker plugins' jars."""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from xml.etree import ElementTree

import semantic_version
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAVEN = "{http://maven.apache.org/POM/4.0.0}"

# A PEM private-key header of any kind, spelt as tests/unit/test_no_private_keys.py spells it so that this file holds
# none (\x45 is "E", \x41 is "A").
PRIVATE_KEY = re.compile(rb"-{5}B\x45GIN ([A-Z0-9 ]+ )?PRIV\x41TE KEY-{5}")
# Paths in the artifact that must never ship (galaxy.yml's build_ignore is what keeps them out).
MUST_NOT_SHIP = re.compile(
    r"(^|/)(\.cache|\.venv|\.tools|\.collections|\.testbed|\.ansible|\.pytest_cache|__pycache__|pki|dist)(/|$)"
    r"|^tests/output(/|$)|^broker-plugins/[^/]+/target(/|$)"
    r"|^inventories/testbed/(hosts\.yml|group_vars/all/(testbed|secrets)\.yml)$"
    r"|\.(key|p12|pfx|jks|pyc|tar\.gz)$")


def plugin_jars() -> list[str]:
    """What the broker role installs on the hosts, built by make plugins: a jar per module of broker-plugins/."""
    modules = ElementTree.parse(os.path.join(REPO, "broker-plugins", "pom.xml")).getroot().iter(f"{MAVEN}module")
    return [f"roles/broker/files/plugins/{module.text}.jar" for module in modules]


def _load(path: str):
    with open(os.path.join(REPO, path)) as handle:
        return yaml.safe_load(handle)


def check() -> list[str]:
    """What stands in the way of releasing galaxy.yml's version (nothing: an empty list)."""
    problems = []
    version = _load("galaxy.yml")["version"]
    released = sorted((_load("changelogs/changelog.yaml").get("releases") or {}), key=semantic_version.Version)
    if not released or released[-1] != version:
        problems.append(f"galaxy.yml says {version}, the newest release in changelogs/changelog.yaml is "
                        f"{released[-1] if released else 'none'}: run antsibull-changelog release")
    fragments_dir = os.path.join(REPO, "changelogs", "fragments")
    waiting = sorted(name for name in (os.listdir(fragments_dir) if os.path.isdir(fragments_dir) else [])
                     if name.endswith((".yml", ".yaml")))
    if waiting:
        problems.append(f"{len(waiting)} changelog fragment(s) not in any release (changelogs/fragments/: "
                        f"{', '.join(waiting)}): raise galaxy.yml's version and run antsibull-changelog release")
    with tempfile.TemporaryDirectory() as work:
        generated = os.path.join(work, "CHANGELOG.rst")
        subprocess.run(["antsibull-changelog", "generate", "--output", generated, "--output-format", "rst"],
                       cwd=REPO, check=True, capture_output=True)
        with open(generated) as fresh, open(os.path.join(REPO, "CHANGELOG.rst")) as kept:
            if fresh.read() != kept.read():
                problems.append("CHANGELOG.rst is not what changelogs/changelog.yaml gives: run antsibull-changelog "
                                "generate")
    return problems


def inspect(artifact: str) -> list[str]:
    """Prints what the artifact holds; returns the members that must not ship, and those missing that must."""
    refused = []
    sizes = collections.Counter()
    counts = collections.Counter()
    with tarfile.open(artifact) as tar:
        names = {member.name.removeprefix("./") for member in tar.getmembers()}
        refused.extend(f"{name} (missing: make plugins builds it)" for name in plugin_jars() if name not in names)
        for member in tar.getmembers():
            name = member.name.removeprefix("./")
            if MUST_NOT_SHIP.search(name):
                refused.append(name)
            if member.isfile():
                top = name.split("/")[0] if "/" in name else "(top level)"
                counts[top] += 1
                sizes[top] += member.size
                if PRIVATE_KEY.search(tar.extractfile(member).read()):
                    refused.append(f"{name} (holds a private key)")
    print(f"{os.path.relpath(artifact, REPO)}: {sum(counts.values())} files, {sum(sizes.values()) / 1024:.0f} KiB "
          f"unpacked, {os.path.getsize(artifact) / 1024:.0f} KiB packed")
    for top in sorted(counts):
        print(f"  {top:<22} {counts[top]:>5} files {sizes[top] / 1024:>8.0f} KiB")
    return refused


if __name__ == "__main__":
    if sys.argv[1:] == ["check"]:
        found = check()
        heading = "not releasable"
    elif sys.argv[1:2] == ["inspect"] and len(sys.argv) == 3:
        found = inspect(sys.argv[2])
        heading = "not releasable as built"
    else:
        sys.exit("usage: release.py check | inspect ARTIFACT")
    if found:
        print(f"{heading}:", *found, sep="\n  ", file=sys.stderr)
        sys.exit(1)
