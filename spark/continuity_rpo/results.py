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
    recomputed_from: float | None
    """Incremental runs: the first window end this run recomputed."""
    read_from: float | None
    """Incremental runs: the time from which this run read the telemetry."""
    latest_lag: Rows
    current_rpo: Rows
    latest_link: Rows
    latest_queue: Rows
    rto: Rows
    drills: Rows
    link_sla: Rows
    rejected: list[tuple[str, str, int]]
    """(kind, reason, rows) for every reason rows were not used."""
    probe_sources: Rows
    collector_sources: Rows
    link_windows: Rows
    queue_windows: Rows
    queue_sla: Rows = field(default_factory=list)
    drill_sla: Rows = field(default_factory=list)
    tables: dict = field(default_factory=dict, repr=False, compare=False)
    """The same results as Spark DataFrames, for the Parquet history."""
