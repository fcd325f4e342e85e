"""Active/active with a staging delay (issue 17 item 3) under load: on a 2 x 1 bed with broker metrics, producers at
both datacentres send 250 msg/s each to one queue of a full_state bridge group with a staging delay, and a consumer
at each datacentre takes whatever it is given. By ledger: every accepted message delivered, and delivered once when
the delay (the test bed's `shared`, 20 s) is well above the time from production to the acknowledgement's arrival at
the other datacentre; with a delay below it (a group `hasty` of 5 ms that this drill adds) copies are delivered
before their notice arrives, and the brokers report each such duplicate as two late notices (the notice of each
delivery finds the other one gone).

The RPO measurement runs beside the load as it does on a measurement host: the collector, a process of its own,
samples the brokers' management and metrics endpoints (the configuration the rpo_job role writes), then the job
publishes its textfile, which must count every notice the brokers counted, with their mean and p99. Beside it, the
drill's own delta: a subscription to each datacentre's notice address, in a process of its own so that the load in
this one does not delay it, receives every notice, and the consumer where the message was produced recorded its
identity, which leads to the producer's ledger and its send time. A subscriber receives a notice only after the
target's journal commit (Artemis routes what a core bridge forwards in a transaction, with the bridge's duplicate
id), while the broker records its arrival, and removes the copy, as it is routed; the plugin also times the commit,
and the job publishes both. At 250 msg/s per datacentre this machine's two CPUs are saturated and the clients' own
delays (the send, the subscriber's receipt) swamp the comparison, so it is reported there; a third run at 50 msg/s
with a 50 ms WAN between the datacentres (the shared group again) holds the published mean to within 10 % of the
drill's own. Figures go to tests/drills/results/active_active_2x1.json.

    make drills            (or: pytest tests/drills -k active)
"""

import collections
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from support import amqp_clients as amqp
from ansible_collections.continuity.artemis.plugins.module_utils import artemis_estate
from continuity_rpo import broker_metrics
from support import prometheus
from support.estate import REPO_ROOT, Estate, layout_inventory, run_playbook

pytestmark = pytest.mark.timeout(2400)

RATE = 250  # per datacentre
LOAD_S = 60
# The comparison of the published delta with the drill's own: a WAN between the datacentres (one way) and a load
# that leaves this machine's two CPUs room, so that the clients' own delays do not swamp what is measured.
MEASURED_RATE = 50
MEASURED_WAN_DELAY_MS = 50
RESULTS = os.path.join(REPO_ROOT, "tests", "drills", "results")
HASTY = {"name": "hasty", "addresses": ["hasty."], "mode": "full_state", "engine": "bridge", "staging_delay_ms": 5}
COLLECTOR_INTERVAL_S = 2
# A message's identity across datacentres (the broker plugin's), and what a notice says and who sent it.
SOURCE_ID = "continuity_source_id"
NOTICE_PROPERTIES = ("continuity_origin", "continuity_notice_origin", "continuity_notice_source_id",
                     "continuity_notice_produced_at")


@pytest.fixture(scope="module")
def estate(tmp_path_factory):
    Estate.testbed("down")
    Estate.testbed("up", "--dcs", "2", "--nodes-per-dc", "1", "--metrics")
    inventory = layout_inventory(tmp_path_factory.mktemp("active_active"), "standalone",
                                 extra={"replication_address_groups": _groups(Estate.from_testbed())})
    converged = run_playbook("site.yml", inventory=inventory)
    assert converged.rc == 0, converged.output[-6000:]
    yield Estate.from_testbed()
    if os.environ.get("KEEP_TESTBED") != "1":
        Estate.testbed("down")


def _groups(estate):
    """The drill's address groups: the bed's, and HASTY."""
    return estate.inventory_vars()["replication_address_groups"] + [HASTY]


def _measurement(estate, work):
    """The collector's configuration file as the rpo_job role writes it for this estate (the estate model's links
    and staging delays, the monitoring user, broker metrics)."""
    nodes = estate.nodes
    groups = _groups(estate)
    password_file = work / "management.password"
    password_file.write_text(nodes[0].monitor_password)
    password_file.chmod(0o600)
    config = work / "measurement.yml"
    config.write_text(yaml.safe_dump({
        "telemetry": str(work / "telemetry"), "interval": COLLECTOR_INTERVAL_S, "segment_seconds": 10,
        # Every queue row: the job's window here is the whole run, not a multiple of the collector's.
        "window_seconds": COLLECTOR_INTERVAL_S,
        "links": artemis_estate.mirror_connections(groups, sorted({node.dc for node in nodes}), "dc1"),
        "brokers": [{"name": node.name, "datacentre": node.dc, "management_url": node.management_url,
                     "metrics_url": node.metrics_url} for node in nodes],
        "staging_delays": artemis_estate.staging_delays(groups),
        "management": {"user": nodes[0].monitor_user, "password_file": str(password_file), "ca_path": nodes[0].ca_cert,
                       "validate_certs": True}}))
    return config


def _start(name, command, work, password=None, ready=None):
    """A process of the drill's, its output in ``work``; waits for the line ``ready`` when given."""
    log = open(work / f"{name}.log", "w+", encoding="utf-8")  # pylint: disable=consider-using-with
    process = subprocess.Popen(command, stdout=subprocess.PIPE if ready else log, stderr=log, text=True,
                               env=dict(os.environ, PASSWORD=password or "",
                                        PYTHONPATH=os.path.join(REPO_ROOT, "tests")))
    if ready:
        line = process.stdout.readline().strip()
        assert line == ready, f"{name}: {line!r} ({log.name})"
    return process


def _interrupt(process, name):
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) == 0, f"{name} failed"


def _listener(node, address, work):
    """A subscription to ``address`` at ``node`` (as the administrator) in a process of its own."""
    out = work / f"notices-{node.name}.jsonl"
    return out, _start(f"notices-{node.name}", [sys.executable, "-m", "support.amqp_listener", "--url", node.amqp_url,
                                                "--ca", node.ca_cert, "--user", node.admin_user, "--address", address,
                                                "--multicast",
                                                *[f"--property={name}" for name in NOTICE_PROPERTIES],
                                                "--out", str(out)],
                       work, node.admin_password, ready="connected")


def _published(work, window_s):
    """The job's textfile for the telemetry under ``work``, its latest window ``window_s`` long:
    {(metric, group): value} of the acknowledgement notices."""
    sla = work / "sla.yml"
    sla.write_text(yaml.safe_dump({"window_seconds": window_s, "sample_interval_seconds": COLLECTOR_INTERVAL_S}))
    textfile = work / "rpo.prom"
    ran = subprocess.run([sys.executable, "-m", "continuity_rpo.job", "--telemetry", str(work / "telemetry"),
                          "--output", str(work / "history"), "--sla", str(sla), "--textfile", str(textfile)],
                         capture_output=True, text=True, timeout=900, check=False)
    assert ran.returncode == 0, ran.stderr[-4000:]
    return {(sample.name, sample.labels["group"]): sample.value
            for family in text_string_to_metric_families(textfile.read_text()) for sample in family.samples
            if "group" in sample.labels}


def _notice_meters(node, group):
    """The broker plugin's meters for ``group`` at ``node``, summed over the sending datacentres, as the RPO collector
    reads them: ({count, sum_seconds, applied, late, durable_count, durable_sum_seconds}, cumulative buckets by upper
    bound in seconds)."""
    samples = prometheus.scrape(node.metrics_url, node.ca_cert, node.monitor_user, node.monitor_password)
    figures, buckets = collections.Counter(), collections.Counter()
    for series in broker_metrics.notice_figures(samples):
        if series["group"] == group:
            figures.update({key: series[key] for key in ("count", "sum_seconds", "applied", "late", "durable_count",
                                                         "durable_sum_seconds")})
            buckets.update({float(bound): value for bound, value in series["buckets"].items()})
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


def _own_deltas(nodes, queue, consumers, notices, sent_at):
    """The drill's own production-to-notice times (seconds): for each notice a datacentre received from the other,
    its arrival (the listener's clock) minus the send time of the message it names (the producer's ledger, found
    through the identity the consumer recorded where the message was produced); and its two parts, the producer's
    send to the broker's production stamp (which the notice carries) and that stamp to the arrival."""
    ledger_id = {}
    for node, consumer in zip(nodes, consumers):
        for record in consumer.ledger():
            if record.id and record.id.startswith(f"{queue}-{node.name}-") and SOURCE_ID in record.properties:
                ledger_id[(node.dc, record.properties[SOURCE_ID])] = record.id
    deltas, sending, crossing = [], [], []
    for node, path in zip(nodes, notices):
        with open(path, encoding="utf-8") as handle:
            for record in map(json.loads, handle):
                properties = record["properties"]
                sender = properties.get("continuity_origin")
                if sender is None or sender == node.dc:  # one of this datacentre's own notices
                    continue
                message = ledger_id.get((properties.get("continuity_notice_origin"),
                                         properties.get("continuity_notice_source_id")))
                if message in sent_at:
                    stamped = properties["continuity_notice_produced_at"] / 1000
                    deltas.append(record["received_at"] - sent_at[message])
                    sending.append(stamped - sent_at[message])
                    crossing.append(record["received_at"] - stamped)
    return deltas, sending, crossing


def _under_load(estate, group, prefix, staging_delay_s, work, rate=RATE):
    nodes = [estate.dc("dc1"), estate.dc("dc2")]
    queue = f"{prefix}load.{uuid.uuid4().hex[:8]}"
    before = {node.name: _notice_meters(node, group) for node in nodes}
    started = time.time()
    sampler = _start("collector", [sys.executable, "-m", "continuity_rpo.collector", "--config",
                                   str(_measurement(estate, work))], work)
    # Its first sample before any notice: the series that appear later are counted from 0.
    amqp.wait_for(lambda: any(os.path.getsize(os.path.join(where, name))
                              for where, _dirs, names in os.walk(work / "telemetry" / "queue_samples")
                              for name in names), timeout=60, description="the collector's first sample")
    notices, listeners = zip(*(_listener(node, artemis_estate.notice_address(group), work) for node in nodes))
    consumers = [amqp.Consumer(node.amqp_url, node.user, node.password, queue, name=f"consumer-{node.name}",
                               record_properties=(SOURCE_ID,), ca_path=node.ca_cert) for node in nodes]
    producers = [amqp.Producer(node.amqp_url, node.user, node.password, queue, rate=rate,
                               id_prefix=f"{queue}-{node.name}", ca_path=node.ca_cert) for node in nodes]
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
    for node, listener in zip(nodes, listeners):
        _interrupt(listener, f"the notice listener at {node.name}")
    time.sleep(2 * COLLECTOR_INTERVAL_S)  # a last sample after everything arrived
    _interrupt(sampler, "the collector")
    published = _published(work, int(time.time() - started) + 60)
    counts = delivered()
    to_ack = [record.accepted_at - sent_at[record.id] for consumer in consumers for record in consumer.ledger()
              if record.accepted_at is not None and record.id in sent_at]
    own, sending, crossing = _own_deltas(nodes, queue, consumers, notices, sent_at)
    after = {node.name: _notice_meters(node, group) for node in nodes}
    meters, buckets = collections.Counter(), collections.Counter()
    for node in nodes:
        meters.update(after[node.name][0])
        meters.subtract(before[node.name][0])
        buckets.update(after[node.name][1])
        buckets.subtract(before[node.name][1])
    counted, committed = meters["count"], meters["durable_count"]

    def job(name):
        value = published.get((f"continuity_artemis_{name}", group))
        return round(1000 * value, 1) if value is not None and name.endswith("seconds") else value
    return {
        "queue": queue, "staging_delay_s": staging_delay_s, "rate_per_datacentre": rate, "load_s": LOAD_S,
        "accepted": len(accepted),
        "lost": len(accepted - set(counts)),
        "duplicates": sum(1 for count in counts.values() if count > 1),
        "delivered_beside_accepted": len(set(counts) - accepted),
        "left_in_queues": {node.name: node.message_count(queue) for node in nodes},
        "notices_applied": meters["applied"],
        "notices_late": meters["late"],
        "brokers_delta": {"count": counted,
                          "mean_ms": round(1000 * meters["sum_seconds"] / counted, 1) if counted else None,
                          "p99_bucket_upper_ms": round(1000 * _quantile(buckets, 0.99), 1) if counted else None,
                          "committed": committed,
                          "durable_mean_ms": round(1000 * meters["durable_sum_seconds"] / committed, 1)
                          if committed else None},
        "rpo_job_published": {"notices": job("ack_notices"), "late": job("ack_notices_late"),
                              "delay_ms": job("staging_delay_seconds"),
                              "mean_ms": job("ack_notice_delta_mean_seconds"),
                              "p99_ms": job("ack_notice_delta_p99_seconds"),
                              "max_ms": job("ack_notice_delta_max_seconds"),
                              "durable_mean_ms": job("ack_notice_durable_delta_mean_seconds")},
        "drill_own_delta": {"count": len(own), "mean_ms": round(1000 * sum(own) / len(own), 1) if own else None,
                            "p99_ms": round(1000 * _percentile(own, 0.99), 1) if own else None,
                            "max_ms": round(1000 * max(own), 1) if own else None,
                            "send_to_broker_stamp_mean_ms": round(1000 * sum(sending) / len(sending), 1)
                            if sending else None,
                            "broker_stamp_to_arrival_mean_ms": round(1000 * sum(crossing) / len(crossing), 1)
                            if crossing else None},
        "ledger_production_to_acknowledgement": {
            "count": len(to_ack), "mean_ms": round(1000 * sum(to_ack) / len(to_ack), 1) if to_ack else None,
            "p99_ms": round(1000 * _percentile(to_ack, 0.99), 1) if to_ack else None,
            "max_ms": round(1000 * max(to_ack), 1) if to_ack else None},
    }


def _within(published, own, tolerance=0.10):
    return published is not None and own is not None and abs(published - own) <= tolerance * own


def test_a_delay_above_the_acknowledgements_delivers_once_and_a_delay_below_them_reports_its_duplicates(
        estate, tmp_path):
    for case in ("above", "below", "measured"):
        (tmp_path / case).mkdir()
    figures = {"above": _under_load(estate, "shared", "shared.", 20, tmp_path / "above"),
               "below": _under_load(estate, "hasty", "hasty.", 0.005, tmp_path / "below")}
    Estate.testbed("wan", "--delay-ms", str(MEASURED_WAN_DELAY_MS))
    try:
        figures["measured"] = dict(_under_load(estate, "shared", "shared.", 20, tmp_path / "measured",
                                               rate=MEASURED_RATE), wan_delay_ms=MEASURED_WAN_DELAY_MS)
    finally:
        Estate.testbed("wan", "--delay-ms", "0")
    with open(os.path.join(RESULTS, "active_active_2x1.json"), "w") as handle:
        json.dump(figures, handle, indent=2, sort_keys=True)
        handle.write("\n")
    above, below, measured = figures["above"], figures["below"], figures["measured"]
    assert above["accepted"] > 0 and below["accepted"] > 0, figures
    assert (above["lost"], above["duplicates"], above["notices_late"]) == (0, 0, 0), figures
    assert above["left_in_queues"] == {"dc1-node1": 0, "dc2-node1": 0}, figures
    assert below["lost"] == 0 and below["duplicates"] > 0, figures
    # Each duplicate: the notice of either delivery arrives where the other was already delivered.
    assert below["notices_late"] == 2 * below["duplicates"], figures
    assert above["delivered_beside_accepted"] == below["delivered_beside_accepted"] == 0, figures
    # The RPO job published what the brokers counted, against the configured delay: no late notice and a p99
    # below the delay above it; below it the late notices, and a p99 above the delay (its alert's condition).
    job_above, job_below = above["rpo_job_published"], below["rpo_job_published"]
    assert (job_above["notices"], job_above["late"], job_above["delay_ms"]) == (
        above["brokers_delta"]["count"], 0, 20000.0), figures
    assert job_above["p99_ms"] < job_above["delay_ms"], figures
    assert (job_below["notices"], job_below["late"], job_below["delay_ms"]) == (
        below["brokers_delta"]["count"], below["notices_late"], 5.0), figures
    assert job_below["p99_ms"] > job_below["delay_ms"], figures
    # The job publishes exactly what the brokers recorded, to the notice's routing and to its journal commit; the
    # drill's own timestamps see the notices later (a subscriber gets one after its commit), never earlier.
    assert (measured["lost"], measured["duplicates"], measured["notices_late"]) == (0, 0, 0), figures
    for case in (above, below, measured):
        assert case["rpo_job_published"]["mean_ms"] == case["brokers_delta"]["mean_ms"], figures
        assert case["rpo_job_published"]["p99_ms"] == case["brokers_delta"]["p99_bucket_upper_ms"], figures
        assert case["drill_own_delta"]["count"] >= 0.95 * case["brokers_delta"]["count"], figures
        assert case["drill_own_delta"]["mean_ms"] >= case["rpo_job_published"]["mean_ms"], figures
        assert case["rpo_job_published"]["durable_mean_ms"] == case["brokers_delta"]["durable_mean_ms"], figures
        assert case["brokers_delta"]["committed"] == case["brokers_delta"]["count"], figures
        published, own = case["rpo_job_published"]["mean_ms"], case["drill_own_delta"]["mean_ms"]
        case["published_within_10_percent_of_own"] = _within(published, own)
        case["published_durable_within_10_percent_of_own"] = _within(case["rpo_job_published"]["durable_mean_ms"],
                                                                     own)
    with open(os.path.join(RESULTS, "active_active_2x1.json"), "w") as handle:
        json.dump(figures, handle, indent=2, sort_keys=True)
        handle.write("\n")
    # Where the machine leaves the clients room, the published delta is what the drill's own timestamps measure.
    assert measured["published_within_10_percent_of_own"], figures
