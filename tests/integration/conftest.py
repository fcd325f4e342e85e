"""Integration fixtures: a real test bed (tests/testbed/testbed) and real playbook runs against it.

The test bed is built once per session. Set KEEP_TESTBED=1 to leave it up afterwards (and reuse it next time).
"""

import json
import os
import subprocess
import sys
import time

import pytest

from support.estate import Estate, TESTBED, run_module, run_playbook


TESTBED_FAILURES = []


def _testbed(*args, check=True):
    result = subprocess.run([TESTBED, *args], check=False, capture_output=True, text=True, timeout=1800)
    if check and result.returncode != 0:
        TESTBED_FAILURES.append(f"testbed {' '.join(args)} exited {result.returncode}:\n{result.stderr.strip()[-3000:]}")
        pytest.fail(TESTBED_FAILURES[-1], pytrace=False)
    return result


def pytest_unconfigure(config):
    """Says why the test bed failed once more after everything else: CI keeps only the end of the output."""
    for failure in TESTBED_FAILURES:
        print(f"\n{failure}", file=sys.stderr)


@pytest.fixture(scope="session")
def testbed():
    args = ["up", "--dcs", os.environ.get("TESTBED_DCS", "2"), "--nodes-per-dc", "1"]
    if os.environ.get("TESTBED_SYSTEMD") == "1":
        # test_broker_metrics, test_ldap_login and test_host_access run there (make integration)
        args += ["--systemd", "--metrics", "--ldap", "--firewalld"]
    _testbed(*args)
    yield
    if os.environ.get("KEEP_TESTBED") != "1":
        _testbed("heal", check=False)
        _testbed("down", check=False)


@pytest.fixture(scope="session")
def estate(testbed):
    """The test bed after site.yml has converged on it once."""
    started = time.monotonic()
    result = run_playbook("site.yml")
    assert result.rc == 0, result.output[-6000:]
    estate = Estate.from_testbed()
    estate.record_timing("site_converge_s", time.monotonic() - started)
    return estate


@pytest.fixture(autouse=True)
def _healthy_wan(request):
    """Every test starts and ends with a healed, undelayed WAN, whatever happened inside it."""
    yield
    if "testbed" in request.fixturenames or "estate" in request.fixturenames:
        _testbed("heal", check=False)
        _testbed("wan", "--delay-ms", "0", check=False)


# The modules whose revert is a rolling restart of every broker run last: a session that brings the bed down
# afterwards needs nothing reverted after them (bed_needed_after_module).
LAST_MODULES = ("test_restarts.py",)
FAILED = pytest.StashKey[bool]()


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.path.name in LAST_MODULES)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        item.stash[FAILED] = True
    return report


@pytest.fixture(scope="module")
def bed_needed_after_module(request):
    """Whether anything needs the test bed after this module: a later test, or the bed stays up."""
    if os.environ.get("KEEP_TESTBED") == "1":
        return True
    items = request.session.items
    last = max(index for index, item in enumerate(items) if item.path == request.path)
    return any({"estate", "testbed"} & set(item.fixturenames) for item in items[last + 1:])


@pytest.fixture
def reverted_if_failed(estate, request):
    """A test that changes settings ends on the inventory's own; one that fails halfway leaves them changed, and
    site.yml with the inventory's own settings runs after it."""
    yield estate
    if request.node.stash.get(FAILED, False):
        result = run_playbook("site.yml")
        assert result.rc == 0, result.output[-4000:]


@pytest.fixture
def dc1_active_at_the_end(estate):
    """After a test that moved dc1's groups around (swapover, failover): every node up with its broker running
    (site.yml on those whose broker is not), and `all` and `books` swapped back to dc1 unless they are active there.
    These tests change no setting; anything a swapover there and back left different from the inventory, the
    installed collection's site.yml run (which must change nothing, after the failover test) would see."""
    yield estate
    for node in estate.nodes:
        _testbed("start-node", node.name, check=False)
    stopped = [node.name for node in estate.nodes if not estate.broker_pids(node)]
    if stopped:
        started = run_playbook("site.yml", extra_args=["--limit", ",".join(stopped)])
        assert started.rc == 0, started.output[-4000:]
    # A failover takes every group dc1 owns, `books` too. A group already active at dc1 alone (a test that swapped
    # there and back) is left as it is: activating dc1 would change nothing; otherwise (active at dc2, or fenced at
    # both after a test failed halfway) it is swapped back.
    for group in ("all", "books"):
        at_dc1, _output = run_module("artemis_site", dict(estate.site_args("dc1", "active"), groups=[group]),
                                     check_mode=True)
        if at_dc1.get("failed") or at_dc1["changed"]:
            back = run_playbook("playbooks/swapover.yml", extra_args=[
                "-e", json.dumps({"swapover_source": "dc2", "swapover_target": "dc1", "swapover_groups": [group]})])
            assert back.rc == 0, back.output[-4000:]
