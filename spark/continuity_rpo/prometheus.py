"""The job's results in Prometheus exposition format: a textfile for node_exporter, optionally a Pushgateway."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway, write_to_textfile

LINK = ["source_datacentre", "target_datacentre"]
QUEUE = ["datacentre", "queue"]


def registry_for(results: dict, finished_at: float) -> CollectorRegistry:
    """``results`` holds lists of plain dicts (see job.Results); only the latest window of each series is shown."""
    registry = CollectorRegistry()

    def gauge(name, help_text, labels=()):
        return Gauge(f"continuity_artemis_{name}", help_text, list(labels), registry=registry)

    lag = gauge("replication_lag_seconds", "Probe lag through a mirror in the latest window.", LINK + ["quantile"])
    for row in results["latest_lag"]:
        for quantile, column in (("0.5", "lag_p50_seconds"), ("0.99", "lag_p99_seconds"), ("1", "lag_max_seconds")):
            if row[column] is not None:
                lag.labels(row["source_datacentre"], row["target_datacentre"], quantile).set(row[column])

    rpo = gauge("rpo_seconds", "Age of the oldest probe not yet visible at the target (RPO in time).", LINK)
    replicated = gauge("replicated_timestamp_seconds", "Send time of the newest probe visible at the target.", LINK)
    for row in results["current_rpo"]:
        rpo.labels(row["source_datacentre"], row["target_datacentre"]).set(row["rpo_seconds"])
        if row["replicated_up_to"] is not None:
            replicated.labels(row["source_datacentre"], row["target_datacentre"]).set(row["replicated_up_to"])

    backlog = gauge("mirror_backlog_events", "Store-and-forward events not yet sent over a mirror.", LINK)
    connected = gauge("mirror_connected_ratio", "Share of samples with the mirror connected.", LINK)
    for row in results["latest_link"]:
        backlog.labels(row["source_datacentre"], row["target_datacentre"]).set(row["backlog_events_last"])
        connected.labels(row["source_datacentre"], row["target_datacentre"]).set(row["connected_ratio"])

    queue_metrics = {
        "backlog_messages": gauge("queue_backlog_messages", "Messages this datacentre has not received yet.", QUEUE),
        "backlog_acknowledgements": gauge("queue_backlog_acknowledgements",
                                          "Acknowledgements this datacentre has not received yet.", QUEUE),
        "messages_in_per_second": gauge("queue_incoming_messages_per_second", "Messages added per second.", QUEUE),
        "acknowledged_per_second": gauge("queue_acknowledged_messages_per_second",
                                         "Messages acknowledged per second (consumption speed).", QUEUE),
        "delivering_max": gauge("queue_deliveries_in_flight",
                                "Delivered, unacknowledged messages (redelivered after an abrupt failover).", QUEUE),
    }
    for row in results["latest_queue"]:
        for column, metric in queue_metrics.items():
            if row[column] is not None:
                metric.labels(row["datacentre"], row["queue"]).set(row[column])

    rto = gauge("rto_estimate_seconds", "Estimated RTO if this datacentre took over now, by component.",
                QUEUE + ["component"])
    for row in results["rto"]:
        for component in ("detection", "activation", "drain"):
            if row[f"{component}_seconds"] is not None:
                rto.labels(row["datacentre"], row["queue"], component).set(row[f"{component}_seconds"])
        if row["rto_seconds"] is not None:
            rto.labels(row["datacentre"], row["queue"], "total").set(row["rto_seconds"])

    rpo_objective = gauge("rpo_objective_seconds", "The RPO objective of a link (for alerting).", LINK)
    objective = gauge("objective_seconds", "The SLA objective.", ["objective", "subject"])
    passed = gauge("sla_passed", "1 when the objective is met.", ["objective", "subject"])
    burn = gauge("error_budget_burn_rate", "RPO error budget burn rate over the job's horizon.", LINK)
    for row in results["link_sla"]:
        subject = f"{row['source_datacentre']}->{row['target_datacentre']}"
        objective.labels("rpo", subject).set(row["objective_seconds"])
        rpo_objective.labels(row["source_datacentre"], row["target_datacentre"]).set(row["objective_seconds"])
        passed.labels("rpo", subject).set(int(row["passed"]))
        burn.labels(row["source_datacentre"], row["target_datacentre"]).set(row["burn_rate"])
    for row in results["queue_sla"]:
        subject = f"{row['datacentre']}/{row['queue']}"
        objective.labels("rto", subject).set(row["objective_seconds"])
        passed.labels("rto", subject).set(int(row["passed"]))
    for row in results["drill_sla"]:
        subject = f"drill {row['drill']}"
        objective.labels(row["objective"], subject).set(row["objective_seconds"])
        passed.labels(row["objective"], subject).set(int(row["passed"]))

    drills = results["drills"]
    if drills:
        latest = max(drills, key=lambda row: row["fault_time"] or 0)
        for name, column, help_text in (
                ("drill_lost_messages", "lost", "Messages lost in the latest drill (ledger)."),
                ("drill_duplicate_messages", "duplicates", "Deliveries beyond the first in the latest drill."),
                ("drill_rpo_seconds", "rpo_seconds", "Actual RPO in time of the latest drill."),
                ("drill_rto_seconds", "rto_seconds", "Actual RTO of the latest drill."),
                ("drill_messages_at_risk_estimate", "messages_at_risk",
                 "The job's estimate, before the fault, of the messages the latest drill would lose.")):
            if latest.get(column) is not None:
                gauge(name, help_text, ["drill"]).labels(latest["drill"]).set(latest[column])
        if latest["fault_time"] is not None:
            gauge("drill_last_timestamp_seconds", "Fault time of the latest drill.").set(latest["fault_time"])

    rejected = gauge("telemetry_rejected_rows", "Telemetry rows the job could not use, by kind and reason.",
                     ["kind", "reason"])
    for kind, reason, count in results["rejected"]:
        rejected.labels(kind, reason).set(count)
    gauge("rpo_job_last_success_timestamp_seconds", "When the job last finished.").set(finished_at)
    return registry


def publish(registry: CollectorRegistry, textfile: str | None = None, pushgateway: str | None = None) -> None:
    if textfile:
        write_to_textfile(textfile, registry)  # written to a temporary file, then renamed
    if pushgateway:
        push_to_gateway(pushgateway, job="continuity_artemis_rpo", registry=registry)
