"""The job's results in Prometheus exposition format: a textfile for node_exporter, optionally a Pushgateway."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway, write_to_textfile

from ansible_collections.continuity.artemis.plugins.module_utils.published_rpo import EVALUATED_METRIC, RPO_METRIC
from continuity_rpo.results import Results

PREFIX = "continuity_artemis_"

LINK = ["source_datacentre", "target_datacentre"]
QUEUE = ["datacentre", "queue"]


def registry_for(results: Results, finished_at: float) -> CollectorRegistry:
    """Only the latest window of each series is shown.
    Every family has one fixed set of labels (datacentres, queue, drill each their own), so series join in PromQL
    and nothing is summed twice: the RTO total and its parts are separate metrics."""
    registry = CollectorRegistry()

    def gauge(name, help_text, labels=()):
        return Gauge(PREFIX + name, help_text, list(labels), registry=registry)

    def each(rows, keys, metrics):
        """metrics: (gauge, column) pairs; a null value leaves the series out."""
        for row in rows:
            for metric, column in metrics:
                if row.get(column) is not None:
                    metric.labels(*(row[key] for key in keys)).set(row[column])

    each(results.latest_lag, LINK, [
        (gauge("replication_lag_p50_seconds", "Median probe lag through the mirror in the latest window (a probe "
                                              "not seen yet counts with its age).", LINK), "lag_p50_seconds"),
        (gauge("replication_lag_p99_seconds", "99th percentile probe lag in the latest window.", LINK),
         "lag_p99_seconds"),
        (gauge("replication_lag_max_seconds", "Largest probe lag in the latest window.", LINK), "lag_max_seconds")])
    each(results.current_rpo, LINK, [
        (gauge(RPO_METRIC[len(PREFIX):], "Age of the oldest probe not yet visible at the target (RPO in time), as "
                                         "of what the route's prober has reported.", LINK), "rpo_seconds"),
        (gauge(EVALUATED_METRIC[len(PREFIX):], "The time the RPO is evaluated at: what the route's prober has "
                                               "reported up to.", LINK), "evaluated_at"),
        (gauge("replicated_timestamp_seconds", "Send time of the newest probe visible at the target.", LINK),
         "replicated_up_to")])
    each(results.latest_link, LINK, [
        (gauge("mirror_backlog_events", "Store-and-forward events not yet sent over a mirror.", LINK),
         "backlog_events_last"),
        (gauge("mirror_connected_ratio", "Share of samples with the mirror connected.", LINK), "connected_ratio")])
    each(results.kept, ["datacentre"], [
        (gauge("kept_messages", "Mirrored messages this datacentre keeps because they found no queue (a queue "
                                "created at runtime): settled by artemis_reconcile.", ["datacentre"]),
         "kept_messages")])
    each(results.kept_by_address, ["datacentre", "address"], [
        (gauge("kept_messages_by_address", "Kept mirrored messages per original address.",
               ["datacentre", "address"]),
         "kept_messages")])
    each(results.ack_notices, ["group"], [
        (gauge("staging_delay_seconds", "The staging delay of a group active at every datacentre: a copy is "
                                        "delivered this long after production unless its acknowledgement's "
                                        "notice removed it first.", ["group"]), "delay_seconds"),
        (gauge("ack_notices", "Acknowledgement notices that arrived at another datacentre in the latest window.",
               ["group"]), "notices"),
        (gauge("ack_notices_late", "Notices in the latest window that found their copy delivered already: "
                                   "duplicates (with two datacentres, two late notices per duplicate).",
               ["group"]), "late"),
        (gauge("ack_notice_delta_mean_seconds", "Mean time from a message's production to its acknowledgement's "
                                                "notice arriving at another datacentre, in the latest window.",
               ["group"]), "mean_seconds"),
        (gauge("ack_notice_delta_p99_seconds", "99th percentile of that time (the upper bound of its histogram "
                                               "bucket); above the staging delay, copies are delivered twice.",
               ["group"]), "p99_seconds"),
        (gauge("ack_notice_delta_max_seconds", "The largest such time the brokers recorded (over about the last "
                                               "two minutes).", ["group"]), "max_seconds"),
        (gauge("ack_notice_durable_delta_mean_seconds", "Mean time from a message's production to its "
                                                        "acknowledgement's notice being committed to the other "
                                                        "datacentre's journal (the earliest a subscriber could "
                                                        "see it), in the latest window.", ["group"]),
         "durable_mean_seconds")])
    reconciled = gauge("reconciliation_messages", "The newest reconciliation of kept messages an operation ran "
                                                  "(artemis_reconcile): how many it found kept, put into their "
                                                  "queues, discarded (consumed at the source) and left pending.",
                       ["operation", "target_datacentre", "outcome"])
    reconciled_at = gauge("reconciliation_timestamp_seconds", "When that reconciliation ran.",
                          ["operation", "target_datacentre"])
    for row in results.reconciliations:
        reconciled_at.labels(row["operation"], row["target_datacentre"]).set(row["time"])
        for outcome in ("kept", "reconciled", "discarded", "pending"):
            if row.get(outcome) is not None:
                reconciled.labels(row["operation"], row["target_datacentre"], outcome).set(row[outcome])
    each(results.latest_queue, QUEUE, [
        (gauge("queue_backlog_messages", "Messages this datacentre has not received yet.", QUEUE),
         "backlog_messages"),
        (gauge("queue_backlog_acknowledgements", "Acknowledgements this datacentre has not received yet.", QUEUE),
         "backlog_acknowledgements"),
        (gauge("queue_messages", "Messages in the queue at the latest sample.", QUEUE), "message_count"),
        (gauge("queue_messages_max", "Most messages in the queue at any sample of the latest window.", QUEUE),
         "message_count_max"),
        (gauge("queue_incoming_messages_per_second", "Messages added per second.", QUEUE),
         "messages_in_per_second"),
        (gauge("queue_acknowledged_messages_per_second", "Messages acknowledged per second (consumption speed).",
               QUEUE), "acknowledged_per_second"),
        (gauge("queue_deliveries_in_flight",
               "Delivered, unacknowledged messages (redelivered after an abrupt failover).", QUEUE),
         "delivering_max")])

    each(results.rto, QUEUE, [
        (gauge("rto_estimate_seconds", "Estimated RTO if this datacentre took over now (the sum of the parts in "
                                       "continuity_artemis_rto_estimate_part_seconds).", QUEUE), "rto_seconds")])
    rto_part = gauge("rto_estimate_part_seconds", "The parts of the RTO estimate: detection, activation, drain.",
                     QUEUE + ["part"])
    for part in ("detection", "activation", "drain"):
        each([dict(row, part=part) for row in results.rto], QUEUE + ["part"], [(rto_part, f"{part}_seconds")])

    each(results.link_sla, LINK, [
        (gauge("rpo_objective_seconds", "The RPO objective of a link.", LINK), "objective_seconds"),
        (gauge("rpo_objective_met", "1 when the share of windows within the RPO objective meets the target.", LINK),
         "passed"),
        (gauge("error_budget_burn_rate", "RPO error budget burn rate over the job's horizon.", LINK), "burn_rate")])
    each(results.queue_sla, QUEUE, [
        (gauge("rto_objective_seconds", "The RTO objective of a queue.", QUEUE), "objective_seconds"),
        (gauge("rto_objective_met", "1 when the RTO estimate is within the objective.", QUEUE), "passed")])
    drill = ["drill", "objective"]
    each(results.drill_sla, drill, [
        (gauge("drill_objective_seconds", "The objective a drill's actual RPO or RTO is held to.", drill),
         "objective_seconds"),
        (gauge("drill_objective_met", "1 when the drill's actual RPO or RTO met the objective.", drill), "passed")])

    drills = results.drills
    if drills:
        latest = max(drills, key=lambda row: row["fault_time"] or 0)
        for name, column, help_text in (
                ("drill_lost_messages", "lost", "Messages lost in the latest drill (ledger)."),
                ("drill_duplicate_messages", "duplicates", "Deliveries beyond the first in the latest drill."),
                ("drill_rpo_seconds", "rpo_seconds", "Actual RPO in time of the latest drill."),
                ("drill_rto_seconds", "rto_seconds", "Actual RTO of the latest drill."),
                ("drill_messages_at_risk_estimate", "messages_at_risk",
                 "The job's estimate, before the fault, of the messages the latest drill would lose (what its last "
                 "samples saw behind)."),
                ("drill_messages_in_flight_estimate", "messages_in_flight",
                 "The tail no sample sees: the failed datacentre's replication events not yet taken by a sender, "
                 "on average over the window before the fault (lost at a power loss; add to the estimate above).")):
            each([latest], ["drill"], [(gauge(name, help_text, ["drill"]), column)])
        if latest["fault_time"] is not None:
            gauge("drill_last_timestamp_seconds", "Fault time of the latest drill.").set(latest["fault_time"])

    each(results.probe_sources, LINK, [
        (gauge("probe_reported_up_to_timestamp_seconds", "The newest probe row of the route in the telemetry.", LINK),
         "as_of"),
        (gauge("probe_telemetry_age_seconds", "How old the route's newest probe row was when the job ran.", LINK),
         "age_seconds")])
    collector = ["datacentre", "broker"]
    each(results.collector_sources, collector, [
        (gauge("collector_reported_up_to_timestamp_seconds", "The newest sample of the broker in the telemetry.",
               collector), "reported_up_to"),
        (gauge("collector_telemetry_age_seconds", "How old the broker's newest sample was when the job ran.",
               collector), "age_seconds")])

    rejected = gauge("telemetry_rejected_rows", "Telemetry rows the job could not use, by kind and reason.",
                     ["kind", "reason"])
    for kind, reason, count in results.rejected:
        rejected.labels(kind, reason).set(count)
    gauge("rpo_job_last_success_timestamp_seconds", "When the job last finished.").set(finished_at)
    return registry


def publish(registry: CollectorRegistry, textfile: str | None = None, pushgateway: str | None = None) -> None:
    if textfile:
        write_to_textfile(textfile, registry)  # written to a temporary file, then renamed
    if pushgateway:
        push_to_gateway(pushgateway, job="continuity_artemis_rpo", registry=registry)
