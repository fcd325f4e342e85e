"""What one run of the job found: written by job.compute, published by prometheus, rendered by report, and partly
kept by an incremental run as the state of the next one."""

from __future__ import annotations

from dataclasses import dataclass, field

Rows = list[dict]


@dataclass
class Results:
    as_of: float
    """The time the figures are for: the newest valid row, or --as-of."""
    clock: float
    """The time the sources' ages are measured against."""
    recomputed_from: float | None = None
    """Incremental runs: the first window end this run recomputed."""
    read_from: float | None = None
    """Incremental runs: the time from which this run read the telemetry."""
    latest_lag: Rows = field(default_factory=list)
    current_rpo: Rows = field(default_factory=list)
    latest_link: Rows = field(default_factory=list)
    latest_queue: Rows = field(default_factory=list)
    rto: Rows = field(default_factory=list)
    drills: Rows = field(default_factory=list)
    link_sla: Rows = field(default_factory=list)
    rejected: list[tuple[str, str, int]] = field(default_factory=list)
    """(kind, reason, rows) for every reason rows were not used."""
    probe_sources: Rows = field(default_factory=list)
    collector_sources: Rows = field(default_factory=list)
    link_windows: Rows = field(default_factory=list)
    queue_windows: Rows = field(default_factory=list)
    """The windows of the queue series the report draws (report.drawn_series), not of every queue."""
    queue_series: int | None = None
    """How many (datacentre, queue) series there are in all (None: as many as ``queue_windows`` has)."""
    queue_sla: Rows = field(default_factory=list)
    drill_sla: Rows = field(default_factory=list)
    kept: Rows = field(default_factory=list)
    """Per datacentre, the mirrored messages kept because they found no queue (artemis_reconcile settles them)."""
    kept_by_address: Rows = field(default_factory=list)
    ack_notices: Rows = field(default_factory=list)
    """Per group active at every datacentre, its acknowledgement notices in the latest window: how long after
    production they arrived (mean, p99, max), applied and late, against the configured delay."""
    reconciliations: Rows = field(default_factory=list)
    """Per operation and target datacentre, the newest reconciliation of kept messages (the event log)."""
    tables: dict = field(default_factory=dict, repr=False, compare=False)
    """The same results as Spark DataFrames, for the Parquet history."""
