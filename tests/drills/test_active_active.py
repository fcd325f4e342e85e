"""Active/active with a staging delay (issue 17 item 3) under load: on a 2 x 1 bed with broker metrics, producers at
both datacentres send 250 msg/s each to one queue of a full_state bridge group with a staging delay, and a consumer
at each datacentre takes whatever it is given. By ledger: every accepted message delivered, and delivered once when
the delay (the test bed's `shared`, 20 s) is well above the time from production to the acknowledgement's arrival at
the other datacentre; with a delay below it (a group `hasty` of 5 ms that this drill adds) copies are delivered
before their notice arrives, and the brokers report each such duplicate as two late notices (the notice of each
delivery finds the other one gone). Figures, with the brokers' delta histogram beside the ledgers' own production to
acknowledgement times, go to tests/drills/results/active_active_2x1.json.

    make drills            (or: pytest tests/drills -k active)
"""

import collections
import json
import os
import time
import uuid

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import amqp_ledger as amqp
from support import prometheus
from support.estate import REPO_ROOT, Estate, layout_inventory, run_playbook

pytestmark = pytest.mark.timeout(2400)

RATE = 250  # per datacentre
LOAD_S = 60
RESULTS = os.path.join(REPO_ROOT, "tests", "drills", "results")
HASTY = {"name": "hasty", "addresses": ["hasty."], "mode": "full_state", "engine": "bridge", "staging_delay_ms": 5}


@pytest.fixture(scope="module")
def estate(tmp_path_factory):
    Estate.testbed("down")
    Estate.testbed("up", "--dcs", "2", "--nodes-per-dc", "1", "--metrics")
    groups = Estate.from_testbed().inventory_vars()["replication_address_groups"]
    inventory = layout_inventory(tmp_path_factory.mktemp("active_active"), "standalone",
                                 extra={"replication_address_groups": groups + [HASTY]})
    converged = run_playbook("site.yml", inventory=inventory)
    assert converged.rc == 0, converged.output[-6000:]
    yield Estate.from_testbed()
    if os.environ.get("KEEP_TESTBED") != "1":
        Estate.testbed("down")


def _notice_meters(node, group):
    """{sample name without the prefix: value summed over sources; buckets by le} for ``group`` at ``node``."""
    samples = prometheus.scrape(node.metrics_url, node.ca_cert, node.monitor_user, node.monitor_password)
    figures, buckets = collections.Counter(), collections.Counter()
    for name, rows in samples.items():
        if not name.startswith("continuity_ack_notice"):
            continue
        for labels, value in rows:
            if labels.get("group") != group:
                continue
            if name.endswith("_bucket"):
                buckets[float(labels["le"])] += value
            else:
                figures[name] += value
    return figures, buckets


def _quantile(buckets, q):
    """The upper bound of the histogram bucket holding the q-quantile (seconds), as Prometheus's buckets allow."""
    total = max(buckets.values(), default=0)
    for bound in sorted(buckets):
        if total and buckets[bound] >= q * total:
            return bound
    return None


def _percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None


def _under_load(estate, group, prefix, staging_delay_s):
    nodes = [estate.dc("dc1"), estate.dc("dc2")]
    queue = f"{prefix}load.{uuid.uuid4().hex[:8]}"
    before = {node.name: _notice_meters(node, group) for node in nodes}
    consumers = [amqp.Consumer(node.amqp_url, node.user, node.password, queue, name=f"consumer-{node.name}")
                 for node in nodes]
    producers = [amqp.Producer(node.amqp_url, node.user, node.password, queue, rate=RATE,
                               id_prefix=f"{queue}-{node.name}") for node in nodes]
    for worker in consumers + producers:
        worker.start()
    for worker in consumers + producers:
        worker.wait_connected()
    time.sleep(LOAD_S)
    for producer in producers:
        producer.stop()
    accepted = set().union(*(producer.accepted_ids() for producer in producers))
    sent_at = {record.id: record.sent_at for producer in producers for record in producer.ledger()}

    def delivered():
        return collections.Counter(i for consumer in consumers for i in consumer.accepted_ids())
    amqp.wait_for(delivered, lambda counts: accepted <= set(counts), timeout=120,
                  description=f"every accepted message of {queue} delivered")
    # A copy not removed in time becomes deliverable at its delay: wait it out so that it shows.
    time.sleep(staging_delay_s + 5)
    for consumer in consumers:
        consumer.stop()
    counts = delivered()
    to_ack = [record.accepted_at - sent_at[record.id] for consumer in consumers for record in consumer.ledger()
              if record.accepted_at is not None and record.id in sent_at]
    # The ledgers' own estimate of the published delta (production to the notice's arrival at the other datacentre):
    # production to acknowledgement where the message was produced, plus the bridge's one-way time, which the copies
    # delivered at once at the other datacentre show (a delay below it only).
    at_origin, crossed = [], []
    for node, consumer in zip(nodes, consumers):
        for record in consumer.ledger():
            if record.accepted_at is not None and record.id in sent_at:
                produced_here = record.id.startswith(f"{queue}-{node.name}-")
                (at_origin if produced_here else crossed).append(
                    (record.accepted_at if produced_here else record.received_at) - sent_at[record.id])
    ledger_delta_ms = (round(1000 * (sum(at_origin) / len(at_origin) + sum(crossed) / len(crossed)), 1)
                       if at_origin and crossed and staging_delay_s < 1 else None)
    after = {node.name: _notice_meters(node, group) for node in nodes}
    meters, buckets = collections.Counter(), collections.Counter()
    for node in nodes:
        meters.update(after[node.name][0])
        meters.subtract(before[node.name][0])
        buckets.update(after[node.name][1])
        buckets.subtract(before[node.name][1])
    notices = meters["continuity_ack_notice_delta_seconds_count"]
    return {
        "queue": queue, "staging_delay_s": staging_delay_s, "rate_per_datacentre": RATE, "load_s": LOAD_S,
        "accepted": len(accepted),
        "lost": len(accepted - set(counts)),
        "duplicates": sum(1 for count in counts.values() if count > 1),
        "delivered_beside_accepted": len(set(counts) - accepted),
        "left_in_queues": {node.name: node.message_count(queue) for node in nodes},
        "notices_applied": meters["continuity_ack_notices_applied_total"],
        "notices_late": meters["continuity_ack_notices_late_total"],
        "published_delta": {"count": notices,
                            "mean_ms": round(1000 * meters["continuity_ack_notice_delta_seconds_sum"] / notices, 1)
                            if notices else None,
                            "p99_bucket_upper_ms": round(1000 * _quantile(buckets, 0.99), 1)
                            if notices else None},
        "ledger_estimate_of_delta_mean_ms": ledger_delta_ms,
        "ledger_production_to_acknowledgement": {
            "count": len(to_ack), "mean_ms": round(1000 * sum(to_ack) / len(to_ack), 1) if to_ack else None,
            "p99_ms": round(1000 * _percentile(to_ack, 0.99), 1) if to_ack else None,
            "max_ms": round(1000 * max(to_ack), 1) if to_ack else None},
    }


def test_a_delay_above_the_acknowledgements_delivers_once_and_a_delay_below_them_reports_its_duplicates(estate):
    figures = {"above": _under_load(estate, "shared", "shared.", 20),
               "below": _under_load(estate, "hasty", "hasty.", 0.005)}
    with open(os.path.join(RESULTS, "active_active_2x1.json"), "w") as handle:
        json.dump(figures, handle, indent=2, sort_keys=True)
        handle.write("\n")
    above, below = figures["above"], figures["below"]
    assert above["accepted"] > 0 and below["accepted"] > 0, figures
    assert (above["lost"], above["duplicates"], above["notices_late"]) == (0, 0, 0), figures
    assert above["left_in_queues"] == {"dc1-node1": 0, "dc2-node1": 0}, figures
    assert below["lost"] == 0 and below["duplicates"] > 0, figures
    # Each duplicate: the notice of either delivery arrives where the other was already delivered.
    assert below["notices_late"] == 2 * below["duplicates"], figures
    assert above["delivered_beside_accepted"] == below["delivered_beside_accepted"] == 0, figures
