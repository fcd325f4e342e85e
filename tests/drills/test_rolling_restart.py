"""Rolling restart and upgrade drills on a 2 x 2 shared_nothing estate under 500 msg/s per active address group:
a change that needs a restart on every broker (and an Artemis upgrade) is applied by site.yml while producers and
consumers with failover URLs run at each group's owner and a poller watches every broker every 0.5 s. Never both
brokers of a pair down together, no datacentre without a live broker (its client port bound) for longer than one
takeover (5 s), the two datacentres never disturbed at the same time; by ledger nothing lost and duplicates within
what was in flight. The certificate rotation with a CA rollover (playbooks/rotate_certificates.yml, three
rolling passes) is held to the same. The figures go to tests/drills/results/.

    make drills            (or: pytest tests/drills -k rolling)
"""

import contextlib
import dataclasses
import datetime
import json
import os
import shutil
import subprocess
import ssl
import time
import urllib.parse
import uuid

import pytest
from cryptography import x509

from support import amqp_clients as amqp
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report
from support.availability import Availability, overlapping
from support.priority import niceness
from support.estate import REPO_ROOT, Estate, broker_role_default, layout_inventory, run_playbook, set_layout_vars

# Each drill builds a 2 x 2 estate and runs site.yml twice under load: longer than the suite's 900 s per test.
pytestmark = pytest.mark.timeout(2400)

RATE = int(os.environ.get("DRILL_RATE", "500"))  # msg/s per group; another rate writes results named after it
PREFETCH = 100
LONGEST_GAP_S = 5.0
RESULTS = os.path.join(REPO_ROOT, "tests", "drills", "results")
PREVIOUS_RELEASE = "2.44.0"  # the newest earlier release on Maven Central here (2.45-2.55: none reachable)
# The test bed's full_state address groups (inventories/testbed/group_vars/all/estate.yml): owner and a queue in it.
GROUPS = {"all": ("dc1", "roll.{id}"), "east": ("dc2", "east.roll.{id}")}
# The role's default heap, not the test bed's 512m (sized for the suite's light load): a broker that becomes live
# loads its journal before it accepts clients, and at 2 x 500 msg/s a 512m heap made that load 5-10 s longer.
# And the role's default of broker metrics (on since 2026-11-30; the results of earlier runs had them off). In the
# upgrade drill before the drill's niceness reached the brokers' autogroups, takeovers with metrics took a mean 3.4 s
# against 1.5 s without; interleaved and under the same load they are within 10 % (test_takeover_metrics.py).
BROKER_HEAP = {"broker_java_max_heap": broker_role_default("broker_java_max_heap"),
               "broker_metrics_enabled": broker_role_default("broker_metrics_enabled")}
# The controller, the load and the pollers run at this niceness (support/priority.py); DRILL_NICE=0 shares the CPUs
# equally. Until 2026-11-29 the niceness did not reach across the kernel's autogroups: the drill's session competed
# with each broker as an equal.
CONTROLLER_NICE = int(os.environ.get("DRILL_NICE", "10"))


@pytest.fixture
def fresh_2x2():
    Estate.testbed("down")
    Estate.testbed("up", "--dcs", "2", "--nodes-per-dc", "2")
    yield Estate.from_testbed()
    if os.environ.get("KEEP_TESTBED") != "1":
        Estate.testbed("down")


def _results_name(drill):
    return f"{drill}.json" if RATE == 500 else f"{drill}_{RATE}_msg_s.json"


def _reconnect_times(worker):
    """Seconds from each loss of a worker's connection to its next connection."""
    times, lost_at = [], None
    for at, kind, _detail in list(worker.events):
        if kind in ("disconnected", "connect-failed") and lost_at is None:
            lost_at = at
        elif kind == "connected" and lost_at is not None:
            times.append(round(at - lost_at, 3))
            lost_at = None
    return times


def _assert_heap(estate, heap):
    """Every broker JVM runs with ``heap``: the drill measures the brokers it means to."""
    for node in estate.nodes:
        command = estate.exec(node.name, "ps", "-o", "args=", "-C", "java")
        assert f"-Xmx{heap} " in command, f"{node.name} does not run with -Xmx{heap}: {command[:300]}"


def _drill(name, estate, inventory, change, playbook="site.yml"):
    """Run ``playbook`` (site.yml) with ``change`` under load and a poller; return the figures (also written to
    results/)."""
    with niceness(CONTROLLER_NICE):
        return _drill_at_priority(name, estate, inventory, change, playbook)


def _drill_at_priority(name, estate, inventory, change, playbook):
    drill_id = uuid.uuid4().hex[:8]
    user, password = estate.nodes[0].user, estate.nodes[0].password
    workers = {}
    for group, (owner, queue) in GROUPS.items():
        # The failover list of the owner's pair, as the group's clients would have it.
        urls = [node.amqp_url for node in estate.nodes if node.dc == owner]
        queue = queue.format(id=drill_id)
        ca_path = estate.nodes[0].ca_cert
        workers[group] = (amqp.Producer(urls, user, password, queue, rate=RATE, reconnect_delay=0.2, ca_path=ca_path),
                          amqp.Consumer(urls, user, password, queue, prefetch=PREFETCH, reconnect_delay=0.2,
                                        ca_path=ca_path))

    with Availability(estate.nodes, interval=0.5) as seen:
        for producer, consumer in workers.values():
            consumer.start()
            producer.start()
        for producer, consumer in workers.values():
            producer.wait_connected()
            consumer.wait_connected()
        time.sleep(5)
        started = time.time()
        result = run_playbook(playbook, inventory=inventory, extra_args=["-e", json.dumps(change)], timeout=3000)
        finished = time.time()
        assert result.rc == 0, result.output[-8000:]
        time.sleep(5)
        for producer, _consumer in workers.values():
            producer.stop()
        # Not a failure yet: the figures below say what was lost, and how the workers' connections went.
        for producer, consumer in workers.values():
            accepted = set(producer.accepted_ids())
            deadline = time.monotonic() + 180
            while accepted - set(consumer.accepted_ids()) and time.monotonic() < deadline:
                time.sleep(1)
        time.sleep(2)
        stopped = {}
        for group, (_producer, consumer) in workers.items():
            try:
                consumer.stop()
            except AssertionError as error:  # it crashed: recorded, and _assert_safe fails on it
                stopped[group] = str(error)

    figures = {"drill": name, "playbook": playbook, "change": change, "rate_msg_s_per_group": RATE,
               "poll_interval_s": seen.interval, "controller_and_load_nice": CONTROLLER_NICE,
               "started": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(),
               "site_yml_s": round(finished - started, 1),
               "restarted": [broker for rolling in result.rolling_restart_passes() for broker in rolling],
               "datacentres": {}, "groups": {}}
    for dc in sorted({node.dc for node in estate.nodes}):
        gaps, live_gaps = seen.gaps(dc), seen.live_gaps(dc)
        figures["datacentres"][dc] = {
            # No broker live (client port bound): a takeover's or a restart's real gap.
            "live_gaps_at": [(round(start - started, 1), round(end - start, 2)) for start, end in live_gaps],
            "longest_live_gap_s": round(max((end - start for start, end in live_gaps), default=0.0), 2),
            # No broker took an AMQP login within a second: the above, and any moment a loaded broker answered slowly.
            "gaps_s": [round(end - start, 2) for start, end in gaps],
            # (seconds after site.yml started, length): set beside "restarted" to tell a takeover from a failback.
            "gaps_at": [(round(start - started, 1), round(end - start, 2)) for start, end in gaps],
            "longest_gap_s": round(max((end - start for start, end in gaps), default=0.0), 2),
            "pair_down_s": [round(end - start, 2) for start, end in seen.pair_down(dc)],
            "disturbed": [(round(start - started, 1), round(end - start, 1)) for start, end in seen.disturbed(dc)],
        }
    figures["datacentres_disturbed_together_s"] = [
        round(end - start, 2) for start, end in overlapping(seen.disturbed("dc1"), seen.disturbed("dc2"))]
    for group, (producer, consumer) in workers.items():
        accepted = set(producer.accepted_ids())
        consumed = consumer.accepted_ids()
        figures["groups"][group] = {
            "owner": GROUPS[group][0], "accepted": len(accepted), "consumed": len(consumed),
            "lost": len(accepted - set(consumed)), "duplicates": len(consumed) - len(set(consumed)),
            "in_flight_bound": consumer.stats()["disconnections"] * PREFETCH,
            "unknown_consumed": len(set(consumed) - accepted - set(producer.uncertain_ids())),
            "producer": {key: producer.stats()[key] for key in ("rejected", "uncertain", "disconnections")},
            "producer_reconnect_s": _reconnect_times(producer),
            "consumer_reconnect_s": _reconnect_times(consumer),
            "consumer_error": stopped.get(group),
            # When it lost something, what its connections did last (time after site.yml started, event).
            "consumer_last_events": [] if not accepted - set(consumed) else [
                (round(at - started, 1), kind, detail[:200]) for at, kind, detail in consumer.events[-12:]],
        }
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, _results_name(name)), "w") as handle:
        json.dump(figures, handle, indent=2)
    return figures


def _assert_safe(figures, restarts=4, longest_live_gap_s=LONGEST_GAP_S):
    for dc, seen in figures["datacentres"].items():
        assert seen["pair_down_s"] == [], f"both brokers of {dc} down together: {seen}"
        if longest_live_gap_s is not None:
            assert seen["longest_live_gap_s"] <= longest_live_gap_s, f"{dc} had no live broker: {seen}"
    assert figures["datacentres_disturbed_together_s"] == [], "two datacentres restarted at the same time"
    for group, ledger in figures["groups"].items():
        assert ledger["lost"] == 0, f"{group}: {ledger}"
        assert ledger["duplicates"] <= ledger["in_flight_bound"], f"{group}: {ledger}"
        assert ledger["unknown_consumed"] == 0, f"{group}: {ledger}"
        assert ledger["consumer_error"] is None, f"{group}: {ledger}"
    assert len(figures["restarted"]) == restarts, figures["restarted"]


def test_rolling_restart_of_a_2x2_estate_under_load(fresh_2x2, tmp_path):
    inventory = layout_inventory(tmp_path, "shared_nothing", extra=BROKER_HEAP)
    built = run_playbook("site.yml", inventory=inventory)
    assert built.rc == 0, built.output[-6000:]
    _assert_heap(fresh_2x2, BROKER_HEAP["broker_java_max_heap"])
    figures = _drill("rolling_restart_2x2", fresh_2x2, inventory, {"broker_java_max_heap": "2560m"})
    _assert_safe(figures)
    _assert_heap(fresh_2x2, "2560m")


def _journal_files(estate):
    """Each broker's journal files, {broker: {"data": [sizes], "attic": [sizes]}}."""
    files = {}
    for node in estate.nodes:
        journal = f"/var/opt/artemis/{node.name}/data/journal"
        listing = estate.exec(node.name, "find", journal, "-name", "*.amq", "-printf", "%s %h\\n")
        found = {"data": [], "attic": []}
        for line in listing.splitlines():
            size, directory = line.split(" ", 1)
            found["attic" if directory.endswith("/attic") else "data"].append(int(size))
        files[node.name] = found
    return files


def test_journal_file_size_changed_on_a_2x2_estate_under_load(fresh_2x2, tmp_path):
    """An estate built with Artemis's own 10M journal files moved to the role's default by a rolling restart: pairs
    run with two sizes for a while (a backup on the new size synchronises the live's old files), and nothing is lost.
    The first takeovers read old-size files, as long as before the change, so the gap is recorded, not held to the
    bound."""
    old_size, new_size = "10M", broker_role_default("broker_journal_file_size")
    inventory = layout_inventory(tmp_path, "shared_nothing", extra={**BROKER_HEAP, "broker_journal_file_size": old_size})
    built = run_playbook("site.yml", inventory=inventory)
    assert built.rc == 0, built.output[-6000:]
    set_layout_vars(inventory, "shared_nothing", BROKER_HEAP)
    figures = _drill("journal_file_size_2x2", fresh_2x2, inventory, {})
    figures["journal_file_size"] = {"from": old_size, "to": new_size}
    figures["journal_files_after"] = _journal_files(fresh_2x2)
    with open(os.path.join(RESULTS, _results_name("journal_file_size_2x2")), "w") as handle:
        json.dump(figures, handle, indent=2)
    _assert_safe(figures, longest_live_gap_s=None)
    for node in fresh_2x2.nodes:
        configured = fresh_2x2.exec(node.name, "cat", f"/var/opt/artemis/{node.name}/etc/broker.xml")
        assert f"<journal-file-size>{new_size}</journal-file-size>" in configured, node.name


def test_upgrade_of_a_2x2_estate_under_load(fresh_2x2, tmp_path):
    archive = os.path.join(REPO_ROOT, ".cache", "artemis", f"apache-artemis-{PREVIOUS_RELEASE}-bin.tar.gz")
    assert os.path.exists(archive), f"{archive} is missing: make drills fetches it"
    inventory = layout_inventory(tmp_path, "shared_nothing",
                                 extra={**BROKER_HEAP, "broker_version": PREVIOUS_RELEASE})
    built = run_playbook("site.yml", inventory=inventory)
    assert built.rc == 0, built.output[-6000:]
    assert {node.management().status()["version"] for node in fresh_2x2.nodes} == {PREVIOUS_RELEASE}
    _assert_heap(fresh_2x2, BROKER_HEAP["broker_java_max_heap"])
    # The upgrade: the inventory's broker_version is dropped for the role's default.
    set_layout_vars(inventory, "shared_nothing", BROKER_HEAP)
    figures = _drill("upgrade_2x2", fresh_2x2, inventory, {})
    versions = {node.name: node.management().status()["version"] for node in fresh_2x2.nodes}
    figures["versions_after"] = versions
    with open(os.path.join(RESULTS, _results_name("upgrade_2x2")), "w") as handle:
        json.dump(figures, handle, indent=2)
    _assert_safe(figures)
    assert set(versions.values()) == {"2.56.0"}, versions
    status = subprocess.run(["tests/testbed/testbed", "exec", "dc1-node1", "--", "ls", "/var/opt/artemis/dc1-node1"],
                            cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    assert "old-config-bkp.0" in status, "artemis upgrade left no backup of the old instance files"


def _certificates(pem_text):
    return x509.load_pem_x509_certificates(pem_text.encode())


def _deployed_certificates(estate):
    """Each broker's own certificate and the CAs it trusts, as its host has them (what it started with: every
    broker was restarted after the files changed)."""
    deployed = {}
    for node in estate.nodes:
        tls = f"/var/opt/artemis/{node.name}/etc/tls"
        own = _certificates(estate.exec(node.name, "cat", f"{tls}/broker.pem"))
        trusted = _certificates(estate.exec(node.name, "cat", f"{tls}/ca.pem"))
        deployed[node.name] = {"certificate": own[0], "trusted": trusted}
    return deployed


def _served_certificates(estate):
    """The certificate each broker that accepts clients serves on its amqps acceptor (a backup serves none)."""
    served = {}
    for node in estate.nodes:
        url = urllib.parse.urlsplit(node.amqp_url)
        try:
            served[node.name] = x509.load_pem_x509_certificate(
                ssl.get_server_certificate((url.hostname, url.port), timeout=10).encode())
        except OSError:
            continue
    return served


def _mirror_links(estate):
    """Every mirror connection of every broker that has them: (broker, link, connected)."""
    links = []
    for node in estate.nodes:
        with contextlib.suppress(Exception):
            links += [(node.name, link["name"], link["connected"])
                      for link in broker_report(node.management())["links"]]
    return links


def test_certificates_renewed_and_the_ca_rolled_over_on_a_2x2_estate_under_load(fresh_2x2, tmp_path):
    """playbooks/rotate_certificates.yml with rotate_certificates_ca: a new CA trusted, signing every broker's new
    certificate, the old one retired: three rolling passes under load, each as safe as a rolling restart."""
    # A copy of the test bed's PKI that the rotation may change: the bed's own outlives this bed.
    pki = tmp_path / "pki"
    shutil.copytree(os.path.dirname(fresh_2x2.nodes[0].ca_cert), pki)
    estate = Estate([dataclasses.replace(node, ca_cert=str(pki / "ca.pem")) for node in fresh_2x2.nodes])
    inventory = layout_inventory(tmp_path, "shared_nothing", extra={**BROKER_HEAP, "replication_tls_pki_dir": str(pki)})
    built = run_playbook("site.yml", inventory=inventory)
    assert built.rc == 0, built.output[-6000:]
    ca_file = estate.nodes[0].ca_cert
    with open(ca_file) as handle:
        (old_ca,) = _certificates(handle.read())
    before = _deployed_certificates(estate)

    figures = _drill("rotate_certificates_2x2", estate, inventory, {"rotate_certificates_ca": True},
                     playbook="playbooks/rotate_certificates.yml")

    with open(ca_file) as handle:
        (new_ca,) = _certificates(handle.read())
    after = _deployed_certificates(estate)
    served = _served_certificates(estate)
    amqp.wait_for(lambda: _mirror_links(estate), lambda found: found and all(up for _b, _l, up in found),
                  timeout=120, description="every mirror connected after the rotation")
    links = _mirror_links(estate)
    figures["ca"] = {"old": old_ca.subject.rfc4514_string(), "new": new_ca.subject.rfc4514_string()}
    figures["certificates"] = {
        name: {"serial_before": format(before[name]["certificate"].serial_number, "x"),
               "serial_after": format(after[name]["certificate"].serial_number, "x"),
               "issuer_after": after[name]["certificate"].issuer.rfc4514_string(),
               "not_after": after[name]["certificate"].not_valid_after_utc.isoformat(),
               "served_serial": format(served[name].serial_number, "x") if name in served else None}
        for name in sorted(after)}
    figures["mirrors_at_the_end"] = links
    with open(os.path.join(RESULTS, _results_name("rotate_certificates_2x2")), "w") as handle:
        json.dump(figures, handle, indent=2)

    # Three passes (trust, sign, retire), every broker restarted in each.
    _assert_safe(figures, restarts=3 * len(estate.nodes))
    assert new_ca.public_key() != old_ca.public_key()
    for name, deployed in after.items():
        certificate = deployed["certificate"]
        assert certificate.serial_number != before[name]["certificate"].serial_number, name
        certificate.verify_directly_issued_by(new_ca)
        assert [ca.public_key() for ca in deployed["trusted"]] == [new_ca.public_key()], name
    assert {node.dc for node in estate.nodes if node.name in served} == {"dc1", "dc2"}
    for name, certificate in served.items():
        assert certificate.serial_number == after[name]["certificate"].serial_number, name
