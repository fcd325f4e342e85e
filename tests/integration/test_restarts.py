"""The broker restarts only for settings Artemis cannot reload, and then one broker at a time (site.yml's rolling
restart); everything else is reloaded in place (test_broker_routing.py: queues and diverts reloaded, the broker
running on)."""

import json
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from support import amqp_clients as amqp
from support.estate import TESTBED_INVENTORY, run_playbook


@pytest.fixture(scope="module")
def changed_inventory(estate, tmp_path_factory, bed_needed_after_module):
    """A copy of the test bed's inventory that this module's tests change one after the other; site.yml with the
    inventory's own settings runs once afterwards (each revert is a rolling restart: one for all of them), unless
    the bed goes down next (this module runs last)."""
    inventory = tmp_path_factory.mktemp("restarts") / "inventory"
    shutil.copytree(TESTBED_INVENTORY, inventory)
    (inventory / "host_vars").mkdir()
    yield estate, inventory
    if bed_needed_after_module:
        result = run_playbook("site.yml")
        assert result.rc == 0, result.output[-4000:]


# Settings that only take effect on restart: the JVM's (artemis.profile), the capacity and the large messages' store
# (broker.xml's part that is not reloaded) and a broker property (etc/broker.properties).
MOVED_LARGE_MESSAGES = "/var/opt/artemis-moved/{name}/large-messages"
RESTART_LEVEL_CHANGE = {"broker_java_max_heap": "500m", "broker_java_min_heap": "256m", "broker_java_gc": "Parallel",
                        "broker_java_gc_args": [], "broker_java_extra_args": ["-Dcontinuity.test=restarts"],
                        "broker_global_max_size": "64M", "broker_max_disk_usage": 95,
                        "broker_large_messages_dir": MOVED_LARGE_MESSAGES.format(name="{{ broker_name }}"),
                        "broker_properties": {"transactionTimeout": 120000}}
LARGE_BODY = 200_000


# Logging: Artemis's log4j reads its file again every 5 s, so a logging change restarts no broker.
LOGGING_CHANGE = {"broker_log_audit": True, "broker_log_levels": {"org.apache.activemq.artemis.core.server": "DEBUG"},
                  "broker_log_rollover_size": "20KB", "broker_log_rollover_keep": 3}


def _log_files(estate, node):
    listing = estate.exec(node.name, "ls", f"/var/opt/artemis/{node.name}/log")
    return sorted(listing.split())


def _rollovers(files, log):
    """How many times ``log`` rolled over at its size today: the highest index of its rolled files (name.DATE.N)."""
    return max([int(name.rsplit(".", 1)[1]) for name in files if name.startswith(log + ".")], default=0)


def test_a_mirror_connection_change_restarts_only_its_broker_and_a_logging_change_none(changed_inventory):
    """One run changes dc1's mirror connections (a retry interval for dc1's broker only) and every broker's logging
    (levels, the audit log, a size rollover keeping 3 files): dc1's broker restarts, dc2's takes its logging in
    place. The audit log records management calls and rolls over at 20 KB, keeping the newest 3."""
    estate, inventory = changed_inventory
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    pids = {node.name: estate.broker_pids(node) for node in (dc1, dc2)}

    (inventory / "host_vars" / f"{dc1.name}.yml").write_text("replication_retry_interval: 2500\n")
    result = run_playbook("site.yml", inventory=str(inventory), extra_args=["-e", json.dumps(LOGGING_CHANGE)])
    assert result.rc == 0, result.output[-6000:]

    assert estate.broker_pids(dc1) != pids[dc1.name]
    assert estate.broker_pids(dc2) == pids[dc2.name]
    assert [entry["broker"] for entry in result.rolling_restarts()] == [dc1.name]
    assert result.recap()[dc2.name]["failed"] == 0

    for node in (dc1, dc2):
        management = node.management()
        deadline = time.monotonic() + 120
        while _rollovers(_log_files(estate, node), "audit.log") < 5:  # then two have been deleted
            assert time.monotonic() < deadline, f"{node.name}: audit.log not rolled over: {_log_files(estate, node)}"
            for _call in range(50):
                management.queue_names()  # each a management call the audit log records
        rolled = [name for name in _log_files(estate, node) if name.startswith("audit.log.")]
        assert len(rolled) == 3, rolled
        audit = estate.exec(node.name, "cat", f"/var/opt/artemis/{node.name}/log/audit.log")
        assert f"User {node.admin_user}" in audit, audit[-2000:]
        assert "DEBUG" in estate.exec(node.name, "cat", f"/var/opt/artemis/{node.name}/log/artemis.log")


@pytest.fixture(scope="module")
def restart_level_run(changed_inventory):
    """site.yml with RESTART_LEVEL_CHANGE, while a producer sends large messages to dc1 from the moment every host
    has passed the checks (the run then creates the new store directories) to the end: (result, the brokers' pids
    before, the producer, its queue)."""
    estate, inventory = changed_inventory
    dc1 = estate.dc("dc1")
    pids = {node.name: estate.broker_pids(node) for node in estate.nodes}
    queue = f"stores.{uuid.uuid4().hex[:8]}"
    producer = amqp.Producer(dc1.amqp_url, dc1.user, dc1.password, queue, rate=4, body_size=LARGE_BODY,
                             id_prefix=queue, ca_path=dc1.ca_cert)
    moved = MOVED_LARGE_MESSAGES.format(name=dc1.name)
    with ThreadPoolExecutor(max_workers=1) as pool:
        run = pool.submit(run_playbook, "site.yml", inventory=str(inventory),
                          extra_args=["-e", json.dumps(RESTART_LEVEL_CHANGE)])
        amqp.wait_for(lambda: run.done() or estate.exec(dc1.name, "sh", "-c", f"test -d {moved} && echo yes"),
                      timeout=300, description=f"{moved} created on {dc1.name}")
        with producer:
            result = run.result()
            time.sleep(2)
    return result, pids, producer, queue


def test_a_change_that_needs_a_restart_restarts_one_broker_at_a_time_and_says_what_clients_lose(
        changed_inventory, restart_level_run):
    """Both datacentres own a group here (dc1 `all`, dc2 `east`) and have one broker each: they restart one after
    the other, in inventory order, and the play says that their clients lose them meanwhile."""
    estate, _inventory = changed_inventory
    result, pids, _producer, _queue = restart_level_run
    assert result.rc == 0, result.output[-6000:]

    assert all(estate.broker_pids(node) != pids[node.name] for node in estate.nodes)
    restarted = result.rolling_restarts()
    assert [entry["broker"] for entry in restarted] == [node.name for node in estate.nodes]
    assert all(entry["why"] == "changed artemis.profile; changed broker.properties; changed restart-required.xml"
               for entry in restarted), restarted
    first, second = restarted
    assert float(first["finished"]) <= float(second["started"]), "two datacentres restarted at the same time"
    for node in estate.nodes:
        assert f"the only broker of {node.dc}" in result.output and "its clients lose it" in result.output
    estate.record_timing("rolling_restart_2x1_s", float(second["finished"]) - float(first["started"]))


def test_the_jvm_capacity_and_broker_properties_of_the_change_are_what_each_broker_runs_with(changed_inventory):
    """Read back from the brokers the previous test restarted: their JVM's options, and through Jolokia the capacity
    settings, where the large messages are kept and a broker property."""
    estate, _inventory = changed_inventory
    for node in estate.nodes:
        command_line = estate.exec(node.name, "cat", f"/proc/{estate.broker_pids(node)[0]}/cmdline").split("\0")
        assert "-XX:+UseParallelGC" in command_line and "-XX:+UseG1GC" not in command_line
        assert "-Xms256m" in command_line and "-Dcontinuity.test=restarts" in command_line
        broker = 'org.apache.activemq.artemis:broker="%s"' % node.name
        values = node.management().read(
            broker, ["GlobalMaxSize", "MaxDiskUsage", "TransactionTimeout", "LargeMessagesDirectory"])
        assert values == {"GlobalMaxSize": 64 * 1024 * 1024, "MaxDiskUsage": 95, "TransactionTimeout": 120000,
                          "LargeMessagesDirectory": MOVED_LARGE_MESSAGES.format(name=node.name)}


def _store_files(estate, node, directory):
    return estate.exec(node.name, "find", directory, "-type", "f").split()


def test_an_empty_store_moved_by_the_rolling_restart_keeps_what_the_broker_wrote_there_meanwhile(
        changed_inventory, restart_level_run):
    """The change moves every broker's large messages to a directory of their own, the old one empty at the checks,
    while a producer keeps sending 200 kB messages through the run: what each broker wrote to the old directory after
    the checks is carried over while it is stopped, so that every accepted message is consumed whole afterwards. The
    old directories are left empty, the new ones empty again once the messages are consumed (the revert moves the
    store back)."""
    estate, _inventory = changed_inventory
    result, _pids, producer, queue = restart_level_run
    dc1 = estate.dc("dc1")
    carried = [task for task in result.changed_tasks() if "Move what a store that moves holds" in task]
    assert carried == [f"continuity.artemis.broker : Move what a store that moves holds into its new directory: "
                       f"{node.name}" for node in estate.nodes], result.changed_tasks()

    accepted, uncertain = producer.accepted_ids(), producer.uncertain_ids()
    held = dc1.message_count(queue)
    assert accepted and len(accepted) <= held <= len(accepted) + len(uncertain), (held, producer.stats())
    received = amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, held, timeout=120, ca_path=dc1.ca_cert)
    assert set(accepted) <= {message.id for message in received}
    assert all(len(message.body) >= LARGE_BODY for message in received)

    for node in estate.nodes:
        assert _store_files(estate, node, f"/var/opt/artemis/{node.name}/data/large-messages") == [], node.name
        new = MOVED_LARGE_MESSAGES.format(name=node.name)
        amqp.wait_for(lambda: _store_files(estate, node, new), lambda files: files == [], timeout=60,
                      description=f"{new} on {node.name} emptied by the consumption")


def test_a_broker_property_artemis_cannot_apply_stops_the_rolling_restart_at_the_first_broker(changed_inventory):
    estate, inventory = changed_inventory
    first, second = estate.nodes
    pids = {node.name: estate.broker_pids(node) for node in estate.nodes}

    change = dict(RESTART_LEVEL_CHANGE, broker_properties=dict(RESTART_LEVEL_CHANGE["broker_properties"],
                                                               noSuchSetting=1))
    result = run_playbook("site.yml", inventory=str(inventory), extra_args=["-e", json.dumps(change)])

    assert result.rc != 0
    assert "noSuchSetting: " in result.output and "could not apply" in result.output, result.output[-4000:]
    assert estate.broker_pids(first) != pids[first.name], "the first broker was not restarted"
    assert estate.broker_pids(first), "the first broker does not run"
    assert estate.broker_pids(second) == pids[second.name], "the rolling restart went on to the next broker"
