"""The management modules against the test bed's real brokers: what artemis_replication_info reports,
artemis_drain_check waiting for a partitioned WAN to drain, artemis_remove_queue refusing to drop messages."""

import json
import uuid

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import broker_mbean, queue_mbean
from support import amqp_clients as amqp
from support.estate import generated_secrets, run_module


def test_replication_info_reports_links_backlog_and_queues_per_site(estate):
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = f"info.{uuid.uuid4().hex[:8]}"
    amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 40, ca_path=dc1.ca_cert)
    amqp.wait_for(lambda: dc2.message_count(queue),
                  lambda count: count == 40, timeout=60)

    result, output = run_module("artemis_replication_info", estate.management_args(), timeout=120)
    assert not result.get("failed"), output[-3000:]
    by_name = {broker["name"]: broker for broker in result["brokers"]}
    assert {broker["reachable"] and broker["live"] for broker in by_name.values()} == {True}
    links = {link["name"]: link for link in by_name[dc1.name]["links"]}
    assert links[f"{dc2.dc}_all"]["connected"] and links[f"{dc2.dc}_all"]["backlog"] == 0
    queues = {q["name"]: q for q in by_name[dc2.name]["queues"]}
    assert queues[queue]["message_count"] == 40 and queues[queue]["consumer_count"] == 0
    comparison = {entry["queue"]: entry for entry in result["comparison"]}
    every_dc = {node.dc for node in estate.nodes}
    assert comparison[queue] == {"queue": queue, "durable_message_counts": {dc: 40 for dc in every_dc}, "in_sync": True}


def test_drain_check_fails_with_the_backlog_while_partitioned_and_passes_once_healed(estate):
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = f"drain.{uuid.uuid4().hex[:8]}"
    arguments = dict(estate.management_args([dc1, dc2]), source_datacentre=dc1.dc, include_prefixes=["drain."],
                     poll_interval=0.5)
    estate.testbed("partition", dc1.dc, dc2.dc)
    amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 200, ca_path=dc1.ca_cert)

    result, output = run_module("artemis_drain_check", dict(arguments, timeout=5))
    assert result.get("failed"), output[-3000:]
    assert result["backlog"][f"{dc1.name}/{dc2.dc}_all"] > 0
    assert f"{dc1.dc} did not drain within 5s" in result["msg"] and queue in result["msg"]
    assert len(result["progress"]) > 2

    estate.testbed("heal")
    result, output = run_module("artemis_drain_check", dict(arguments, timeout=180))
    assert not result.get("failed"), output[-3000:]
    assert result["drained"] and not any(result["backlog"].values()) and result["out_of_sync"] == []
    estate.record_timing("drain_check_after_heal_s", result["elapsed"])


def test_wrong_credentials_and_unknown_datacentre_are_named_and_secrets_stay_out(estate):
    dc1 = estate.dc("dc1")
    wrong = dict(estate.management_args([dc1]), management_password="not-the-password")
    result, output = run_module("artemis_replication_info", wrong)
    assert result.get("failed")
    assert f"broker {dc1.name} refused management_user '{dc1.admin_user}'" in result["msg"]
    assert "wrong user or password" in result["msg"]
    assert "not-the-password" not in output

    result, output = run_module("artemis_drain_check", dict(estate.management_args(), source_datacentre="dc9"))
    assert result.get("failed") and "source_datacentre 'dc9' is not the datacentre of any" in result["msg"]
    assert not [secret for secret in generated_secrets() if secret in output]


def test_an_unreachable_broker_is_reported_not_fatal_for_info(estate):
    args = estate.management_args()
    # A port nothing listens on, on a real test bed host: the broker "is down".
    args["brokers"].append({"name": "gone", "datacentre": "dc9",
                            "management_url": f"https://{estate.dc('dc1').address}:8999"})
    result, output = run_module("artemis_replication_info", dict(args, request_timeout=2))
    assert not result.get("failed"), output[-3000:]
    gone = next(broker for broker in result["brokers"] if broker["name"] == "gone")
    assert gone["reachable"] is False
    assert "broker gone is unreachable" in gone["error"]


def test_a_queue_named_with_wildcards_and_a_quote_is_addressed_exactly(estate):
    """`?` and `*` are ObjectName wildcards: unless quoted as Java quotes them, an operation on the first queue would
    address a pattern that also matches its twin on the same address. (Artemis refuses wildcards in an address a
    message is sent to, not in a queue's name.)"""
    dc1 = estate.dc("dc1")
    management = dc1.management()
    broker = management.name
    tag = uuid.uuid4().hex[:8]
    address, odd, twin = f"names.{tag}", f'odd?{tag}*"q', f'oddX{tag}YZ"q'
    create = "createQueue(java.lang.String)"
    send = "sendMessage(java.util.Map,int,java.lang.String,boolean,java.lang.String,java.lang.String)"
    destroy = "destroyQueue(java.lang.String,boolean,boolean)"
    try:
        for name in (odd, twin):
            management.execute(broker_mbean(broker), create, json.dumps(
                {"name": name, "address": address, "routing-type": "ANYCAST", "durable": True,
                 "auto-create-address": True}))
        for number in range(3):  # to this queue only, not to the address
            management.execute(queue_mbean(broker, address, odd), send, {}, 3, f"message {number}", True,
                               dc1.admin_user, dc1.admin_password)
        assert management.message_count(address, odd) == 3
        assert management.message_count(address, twin) == 0
    finally:
        for name in (odd, twin):
            management.execute(broker_mbean(broker), destroy, name, True, True)


def test_remove_queue_refuses_while_a_message_is_left_then_removes_it_from_every_broker(estate):
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = f"remove.{uuid.uuid4().hex[:8]}"
    [sent] = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 1, ca_path=dc1.ca_cert)
    amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 1, timeout=60)
    arguments = dict(estate.management_args(), queue=queue)

    refused, output = run_module("artemis_remove_queue", arguments)
    assert refused.get("failed") and refused["holding"] == {dc1.name: 1, dc2.name: 1}, output[-3000:]
    assert queue in dc1.management().queue_names() and queue in dc2.management().queue_names()

    assert [message.id for message in amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, 1,
                                                   ca_path=dc1.ca_cert)] == [sent]
    amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 0, timeout=60)
    removed, output = run_module("artemis_remove_queue", arguments)
    assert removed["changed"] and set(removed["removed"]) <= {dc1.name, dc2.name}, output[-3000:]
    amqp.wait_for(lambda: [node.name for node in (dc1, dc2) if queue in node.management().queue_names()],
                  lambda left: not left, timeout=30, description="the queue gone from both datacentres")
