"""The broker role installs the plugins broker-plugins/ builds (make plugins), as jars from the controller: every module
of the build, and no compiler runs on a broker host."""

import glob
import os
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "support"))

import release  # noqa: E402  (tests/support is not a package)


def _installed_plugins():
    names = []
    for path in glob.glob(os.path.join(REPO, "roles", "broker", "tasks", "*.yml")):
        with open(path) as handle:
            text = handle.read()
        if "include_tasks: plugin_jar.yml" not in text:
            continue
        for task in yaml.safe_load(text):
            for inner in task.get("block", [task]):
                if inner.get("ansible.builtin.include_tasks") == "plugin_jar.yml":
                    names.append(inner["vars"]["_broker_plugin"]["name"])
    return names


def test_the_role_installs_every_plugin_the_build_makes_and_no_other():
    built = sorted(os.path.basename(jar).removesuffix(".jar") for jar in release.plugin_jars())

    assert sorted(_installed_plugins()) == built == ["directory", "metrics", "replication"]


def test_no_role_compiles_anything_on_a_host():
    compiling = []
    for path in glob.glob(os.path.join(REPO, "roles", "**", "*.yml"), recursive=True):
        with open(path) as handle:
            text = handle.read()
        compiling += [f"{os.path.relpath(path, REPO)}: {word}" for word in ("jdk.compiler", "javac", "jdk.jartool")
                      if word in text]

    assert compiling == []
