"""What the job computes, as DataFrame transformations (no I/O here).

Windows are tumbling, ``window`` seconds long, aligned on the Unix epoch; a window is named by its end.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from continuity_rpo.telemetry import event_time

LINK_KEYS = ["source_datacentre", "target_datacentre"]


def window_end(column, window):
    """The end of the tumbling window holding ``column`` (a time exactly on a boundary starts a window)."""
    return (F.floor(column / window) + 1) * window


def probe_latencies(probes: DataFrame, counted_from: float | None = None) -> tuple[DataFrame, DataFrame]:
    """Per probe: sent_time, seen_time (null while not visible at the target) and lag_seconds.

    Returns (probes, rejected): a probe seen before it was sent (clock skew, or a corrupt record) and a probe seen
    without a "sent" record are rejected, never clipped to a lag of zero. ``counted_from`` (an incremental run): only
    probes with a row from then on are counted, the earlier ones were when their rows arrived. The valid probes also
    have ``covered_time`` (see ``_covered``), which lag and RPO both need: computed once, here.
    """
    keys = ["probe_id"] + LINK_KEYS
    sent = probes.where(F.col("event") == "sent").groupBy(*keys).agg(F.min("time").alias("sent_time"))
    seen = probes.where(F.col("event") == "seen").groupBy(*keys).agg(F.min("time").alias("seen_time"))
    joined = sent.join(seen, keys, "full").withColumn("lag_seconds", F.col("seen_time") - F.col("sent_time"))
    reason = (F.when(F.col("sent_time").isNull(), F.lit("probe seen but never sent"))
              .when(F.col("lag_seconds") < 0, F.lit("probe seen before it was sent (clock skew)")))
    tagged = joined.withColumn("reason", reason)
    counted = F.col("reason").isNotNull()
    if counted_from is not None:
        counted &= F.greatest("sent_time", "seen_time") >= counted_from
    rejected = tagged.where(counted).groupBy("reason").count()
    return _covered(tagged.where(F.col("reason").isNull()).drop("reason")), rejected


def _with_as_of(latencies: DataFrame, as_of) -> DataFrame:
    """Adds ``as_of``, the time each link is evaluated at: one time for every link, or a frame of LINK_KEYS and
    ``as_of`` (what each route's prober has reported up to; a link missing from it is left out)."""
    if isinstance(as_of, DataFrame):
        return latencies.join(as_of.select(*LINK_KEYS, "as_of"), LINK_KEYS)
    return latencies.withColumn("as_of", F.lit(float(as_of)))


def replication_lag(latencies: DataFrame, window: int, as_of) -> DataFrame:
    """Per link and window (by the time a probe was sent): probes sent and seen, lag p50/p99/max; a probe not seen by
    ``as_of`` counts with its age then (at least that much lag), not left out, or until a later probe was seen (the
    mirror delivers in order: it was there by then, and a window's figures no longer change once all its probes
    are seen or covered)."""
    seen = F.col("seen_time").isNotNull() & (F.col("seen_time") <= F.col("as_of"))
    lag = F.when(seen, F.col("lag_seconds")).otherwise(
        F.least(F.coalesce(F.col("covered_time"), F.col("as_of")), F.col("as_of")) - F.col("sent_time"))
    return (_with_as_of(latencies, as_of).where(F.col("sent_time") <= F.col("as_of"))
            .withColumn("lag", lag)
            .withColumn("window_end", window_end(F.col("sent_time"), window))
            .groupBy(*LINK_KEYS, "window_end")
            .agg(F.count("*").alias("probes_sent"), F.count(F.when(seen, 1)).alias("probes_seen"),
                 F.percentile("lag", F.lit(0.5)).alias("lag_p50_seconds"),
                 F.percentile("lag", F.lit(0.99)).alias("lag_p99_seconds"),
                 F.max("lag").alias("lag_max_seconds")))


def _covered(latencies: DataFrame) -> DataFrame:
    """Adds ``covered_time``: when the target first showed this probe or one sent after it. The mirror delivers in
    order, so from then on the probe is no longer at risk even if it was never seen itself (it expired, or its
    prober stopped before noticing it)."""
    later_first = (Window.partitionBy(*LINK_KEYS).orderBy(F.col("sent_time").desc(), F.col("probe_id").desc())
                   .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return latencies.withColumn("covered_time", F.min("seen_time").over(later_first))


def rpo_over_time(latencies: DataFrame, window: int, as_of) -> DataFrame:
    """The worst RPO in time of every complete window up to ``as_of`` (per link, see ``_with_as_of``), and the RPO
    at its end (null when nothing was outstanding then: where an incremental run may start). RPO at an
    instant is the age of the oldest probe not yet covered at the target then; a probe sent at s and covered at c
    (or still outstanding at ``as_of``) adds t - s at every instant t in [s, c). Over a window [a, b) the worst is
    therefore the largest min(c, b) - s of the probes outstanding in it: a stall counts in full wherever it starts
    and ends, even inside one window."""
    evaluated = _with_as_of(latencies, as_of)
    outstanding_until = F.least(F.coalesce(F.col("covered_time"), F.col("as_of")), F.col("as_of"))
    k_first = F.floor(F.col("sent_time") / window) + 1
    k_last = F.least(F.ceil(outstanding_until / window), F.floor(F.col("as_of") / window))
    outstanding = (evaluated.where(F.col("sent_time") <= F.col("as_of"))
                   .withColumn("until", outstanding_until)
                   .where(k_last >= k_first)
                   .select(*LINK_KEYS, "sent_time", "until",
                           F.explode(F.sequence(k_first, k_last)).alias("k"))
                   .withColumn("window_end", (F.col("k") * window).cast("double"))
                   .groupBy(*LINK_KEYS, "window_end")
                   .agg(F.max(F.least(F.col("until"), F.col("window_end")) - F.col("sent_time"))
                        .alias("rpo_seconds"),
                        F.max(F.when(F.col("until") > F.col("window_end"), F.col("window_end") - F.col("sent_time")))
                        .alias("rpo_at_end_seconds")))
    span = (evaluated.groupBy(*LINK_KEYS).agg(F.min("sent_time").alias("first"), F.max("as_of").alias("as_of"))
            .select(*LINK_KEYS, F.explode(F.sequence(F.floor(F.col("first") / window) + 1,
                                                     F.floor(F.col("as_of") / window))).alias("k"))
            .select(*LINK_KEYS, (F.col("k") * window).cast("double").alias("window_end")))
    return (span.join(outstanding, LINK_KEYS + ["window_end"], "left")
            .withColumn("rpo_seconds", F.coalesce("rpo_seconds", F.lit(0.0))))


def current_rpo(latencies: DataFrame, as_of) -> DataFrame:
    """Per link at ``as_of`` (see ``_with_as_of``; returned as ``evaluated_at``): RPO in time and the "replicated up
    to" time (newest probe sent that was visible)."""
    sent_by_then = _with_as_of(latencies, as_of).where(F.col("sent_time") <= F.col("as_of"))
    visible = F.col("seen_time").isNotNull() & (F.col("seen_time") <= F.col("as_of"))
    covered = F.col("covered_time").isNotNull() & (F.col("covered_time") <= F.col("as_of"))
    return (sent_by_then.groupBy(*LINK_KEYS)
            .agg(F.max("as_of").alias("evaluated_at"),
                 F.max(F.when(visible, F.col("sent_time"))).alias("replicated_up_to"),
                 F.min(F.when(~covered, F.col("sent_time"))).alias("oldest_at_risk"))
            .withColumn("rpo_seconds", F.coalesce(F.col("evaluated_at") - F.col("oldest_at_risk"), F.lit(0.0)))
            .drop("oldest_at_risk"))


def probe_reported_up_to(probes: DataFrame) -> DataFrame:
    """Per link: the newest time its prober reported anything (a probe sent or seen). The route's RPO is evaluated
    as of then: beyond it the job does not know what the target shows."""
    return probes.groupBy(*LINK_KEYS).agg(F.max("time").alias("as_of"))


def collector_reported_up_to(queue_samples: DataFrame, link_samples: DataFrame) -> DataFrame:
    """Per broker: the newest sample the collector published of it."""
    keys = ["datacentre", "broker"]
    return (queue_samples.select(*keys, "time").unionByName(link_samples.select(*keys, "time"))
            .groupBy(*keys).agg(F.max("time").alias("reported_up_to")))


def link_backlog(link_samples: DataFrame, window: int) -> DataFrame:
    """Per pair of datacentres and window: store-and-forward backlog (events: messages, acknowledgements, creates)
    summed over the source datacentre's brokers and their mirror connections and bridges to the target (one per group;
    last and max of the window), and the fraction of samples connected."""
    per_broker = (link_samples.withColumn("window_end", window_end(F.col("time"), window))
                  .groupBy("datacentre", "target_datacentre", "broker", "link", "window_end")
                  .agg(F.max_by("backlog", "time").alias("last"), F.max("backlog").alias("max"),
                       F.avg(F.col("connected").cast("double")).alias("connected"),
                       F.max("time").alias("last_sample_time")))
    return (per_broker.groupBy(F.col("datacentre").alias("source_datacentre"), "target_datacentre", "window_end")
            .agg(F.sum("last").alias("backlog_events_last"), F.sum("max").alias("backlog_events_max"),
                 F.min("connected").alias("connected_ratio"), F.max("last_sample_time").alias("last_sample_time")))


def kept_messages(kept_samples: DataFrame, as_of: float, window: int) -> tuple[DataFrame, DataFrame]:
    """(per datacentre, per datacentre and original address): the mirrored messages its live brokers keep because
    they found no queue, at each broker's latest sample within the last window before ``as_of`` (a broker not
    sampled since drops out, as the other current figures do)."""
    latest = (kept_samples.where((F.col("time") > as_of - window) & (F.col("time") <= as_of))
              .groupBy("datacentre", "broker")
              .agg(F.max_by(F.struct("kept", "kept_by_address"), "time").alias("latest"))
              .select("datacentre", "latest.kept", "latest.kept_by_address"))
    per_datacentre = latest.groupBy("datacentre").agg(F.sum("kept").alias("kept_messages"))
    per_address = (latest.select("datacentre", F.explode("kept_by_address").alias("address", "kept"))
                   .groupBy("datacentre", "address").agg(F.sum("kept").alias("kept_messages")))
    return per_datacentre, per_address


def ack_notice_deltas(notice_samples: DataFrame, as_of: float, window: int) -> DataFrame:
    """Per group active at every datacentre (staging_delay_ms), over the last window before ``as_of``: the
    acknowledgement notices that arrived at its brokers (``notices``) and how long after the message's production
    (mean, 99th percentile and largest, in seconds), how many removed their copy in time (``applied``) and how many
    came too late (``late``: the copy had been delivered; with two datacentres each duplicate delivery shows as two
    late notices, one at each), the group's configured delay, and the mean time to the notice's journal commit there
    (``durable_mean_seconds``: the earliest a subscriber could see it; null from brokers whose plugin does not time it).

    Counts are each series' (broker, sending datacentre) increases up to its samples in the window, from its previous
    sample (the one before the window too, when it is no more than a window older); a counter that went down
    started again from 0 (a broker restart), and so did a series that ``appeared`` (absent from the broker's
    previous sample: the broker registers it at its first notice), so all of it is new. The 99th percentile is the upper
    bound of the histogram bucket that holds it (Micrometer's percentile buckets, about 10 % apart: never below the
    true value); the largest is the brokers' own maximum, which Micrometer keeps for about two minutes. No notice in
    the window: ``notices`` 0 and no mean, percentile or maximum."""
    series = ["broker", "group", "source"]
    recent = notice_samples.where((F.col("time") > as_of - 2 * window) & (F.col("time") <= as_of))
    in_window = F.col("time") > as_of - window

    def increase(column, order, counter="count"):
        before = F.lag(column).over(order)
        restarted = F.col(counter) < F.lag(counter).over(order)
        return (F.when(before.isNull(), F.when(F.coalesce(F.col("appeared"), F.lit(False)), F.col(column))
                       .otherwise(F.lit(0)))
                .when(restarted, F.col(column)).otherwise(F.col(column) - before))

    ordered = Window.partitionBy(*series).orderBy("time")
    totals = (recent.select("group", "time", "appeared", "max_seconds", "staging_delay_seconds",
                            *[increase(column, ordered).alias(column)
                              for column in ("count", "sum_seconds", "applied", "late", "durable_count",
                                             "durable_sum_seconds")])
              .where(in_window)
              .groupBy("group")
              .agg(F.sum("count").alias("notices"), F.sum("sum_seconds").alias("sum_seconds"),
                   F.sum("applied").alias("applied"), F.sum("late").alias("late"),
                   F.sum("durable_count").alias("durable_count"), F.sum("durable_sum_seconds").alias("durable_sum"),
                   F.max("max_seconds").alias("max_observed"), F.max("staging_delay_seconds").alias("delay_seconds"),
                   F.max("time").alias("last_sample_time")))
    per_bucket = Window.partitionBy(*series, "bound").orderBy("time")
    buckets = (recent.select(*series, "time", "appeared", F.explode("buckets").alias("bound", "cumulative"))
               .withColumn("increase", increase("cumulative", per_bucket, "cumulative"))
               .where(in_window)
               .groupBy("group", "bound").agg(F.sum("increase").alias("at_most"))
               .withColumn("upper_seconds", F.when(F.col("bound") == "+Inf", F.lit(float("inf")))
                           .otherwise(F.col("bound").cast("double"))))
    p99 = (buckets.join(totals.select("group", "notices"), "group")
           .where((F.col("notices") > 0) & (F.col("at_most") >= 0.99 * F.col("notices")))
           .groupBy("group").agg(F.min("upper_seconds").alias("p99_bound")))
    observed = F.col("notices") > 0
    return (totals.join(p99, "group", "left")
            .withColumn("mean_seconds", F.when(observed, F.col("sum_seconds") / F.col("notices")))
            .withColumn("max_seconds", F.when(observed, F.col("max_observed")))
            .withColumn("durable_mean_seconds", F.when(F.col("durable_count") > 0,
                                                       F.col("durable_sum") / F.col("durable_count")))
            .withColumn("p99_seconds", F.when(F.col("p99_bound") == float("inf"), F.col("max_seconds"))
                        .otherwise(F.col("p99_bound")))
            .select("group", "notices", "applied", "late", "mean_seconds", "p99_seconds", "max_seconds",
                    "durable_mean_seconds", "delay_seconds", "last_sample_time"))


def queue_samples_until(queue_samples: DataFrame, sampled_until: DataFrame, window: int) -> DataFrame:
    """``queue_samples`` with each broker's series carried to its newest sample (``sampled_until``: broker,
    reported_up_to), where the collector left the rows out because nothing changed (collector.QueueRows): the
    series' last row again at that time, when it is in the same window. A series that stopped within the window (a
    queue deleted) is carried too, until the window ends."""
    newest_first = Window.partitionBy("broker", "queue").orderBy(F.col("time").desc())
    tails = (queue_samples.withColumn("_rank", F.row_number().over(newest_first)).where(F.col("_rank") == 1)
             .drop("_rank").join(sampled_until.select("broker", "reported_up_to"), "broker")
             .where((F.col("reported_up_to") > F.col("time"))
                    & (window_end(F.col("reported_up_to"), window) == window_end(F.col("time"), window)))
             .withColumn("time", F.col("reported_up_to")).drop("reported_up_to"))
    return queue_samples.unionByName(tails)


def queue_flow(queue_samples: DataFrame, window: int) -> DataFrame:
    """Per datacentre, queue and window: messages in and acknowledged per second, depth (last, and min and max over
    the window's samples, summed over brokers), in-flight deliveries
    (delivered, not yet acknowledged: what an abrupt failover redelivers), consumers, the cumulative counters at the
    end of the window (summed over the datacentre's brokers) and whether a broker restarted since the first sample
    (its counters started again, so they no longer compare with another datacentre's).

    Rates are each broker's counter increases divided by the time between the samples they were measured over, so
    a window the telemetry covers only in part (the newest one, the first one, one with a gap) gives the true rate,
    not a share of it; a step across a broker restart (a counter went down) is left out, arrivals and length both.
    No step measured: no rate (null), never 0."""
    ordered = Window.partitionBy("broker", "queue").orderBy("time")
    so_far = Window.partitionBy("broker", "queue").orderBy("window_end").rowsBetween(Window.unboundedPreceding, 0)
    reset = ((F.col("messages_added") < F.lag("messages_added").over(ordered))
             | (F.col("messages_acknowledged") < F.lag("messages_acknowledged").over(ordered)))
    measured = F.lag("time").over(ordered).isNotNull() & ~F.coalesce(reset, F.lit(False))

    def step(column):
        return F.when(measured, F.col(column) - F.lag(column).over(ordered)).otherwise(F.lit(0))

    per_broker = (queue_samples
                  .withColumn("added", step("messages_added"))
                  .withColumn("acked", step("messages_acknowledged"))
                  .withColumn("step_seconds", step("time"))
                  .withColumn("reset", reset)
                  .withColumn("window_end", window_end(F.col("time"), window))
                  .groupBy("datacentre", "broker", "queue", "window_end")
                  .agg(F.sum("added").alias("added"), F.sum("acked").alias("acked"),
                       F.sum("step_seconds").alias("measured_seconds"),
                       F.max_by("message_count", "time").alias("message_count"),
                       F.min("message_count").alias("message_count_min"),
                       F.max("message_count").alias("message_count_max"),
                       F.max("time").alias("last_sample_time"),
                       F.max("delivering_count").alias("delivering_max"),
                       F.max_by("consumer_count", "time").alias("consumers"),
                       F.max_by("messages_added", "time").alias("messages_added"),
                       F.max_by("messages_acknowledged", "time").alias("messages_acknowledged"),
                       F.coalesce(F.max("reset"), F.lit(False)).alias("reset"))
                  .withColumn("counters_reset", F.max("reset").over(so_far)))
    per_second = F.col("measured_seconds") > 0
    return (per_broker.groupBy("datacentre", "queue", "window_end")
            .agg(F.sum(F.when(per_second, F.col("added") / F.col("measured_seconds"))).alias("messages_in_per_second"),
                 F.sum(F.when(per_second, F.col("acked") / F.col("measured_seconds")))
                 .alias("acknowledged_per_second"),
                 F.sum("message_count").alias("message_count"),
                 F.sum("message_count_min").alias("message_count_min"),
                 F.sum("message_count_max").alias("message_count_max"),
                 F.max("last_sample_time").alias("last_sample_time"),
                 F.sum("delivering_max").alias("delivering_max"),
                 F.sum("consumers").alias("consumers"), F.sum("messages_added").alias("messages_added"),
                 F.sum("messages_acknowledged").alias("messages_acknowledged"),
                 F.max("counters_reset").alias("counters_reset")))


def queue_backlog(flow: DataFrame) -> DataFrame:
    """RPO in messages per datacentre, queue and window: how many messages and acknowledgements the datacentre has
    not received yet, against the datacentre that has seen the most (with a mirror every copy counts them all).
    Unknown (null) once a broker of the queue restarted: the mirror's backlog in events still counts then."""
    per_queue = Window.partitionBy("queue", "window_end")
    comparable = ~F.max("counters_reset").over(per_queue)
    return (flow.withColumn("backlog_messages", F.when(comparable, F.max("messages_added").over(per_queue)
                                                       - F.col("messages_added")))
            .withColumn("backlog_acknowledgements", F.when(comparable, F.max("messages_acknowledged").over(per_queue)
                                                           - F.col("messages_acknowledged"))))


def operation_durations(events: DataFrame) -> DataFrame:
    """Per operation run: seconds from its first phase to each later phase (the event log's ISO times)."""
    timed = events.withColumn("time", event_time(F.col("at")))
    first = Window.partitionBy("name", "id")
    return (timed.withColumn("since_start_seconds", F.col("time") - F.min("time").over(first))
            .select("name", "id", "source", "target", "phase", "time", "since_start_seconds"))


RECONCILIATION_OUTCOMES = ("kept", "reconciled", "discarded", "pending")


def last_reconciliations(events: DataFrame) -> DataFrame:
    """Per operation (swapover, ...) and target datacentre, the newest reconciliation it recorded (the phase
    ``reconciled``): its time and how many kept messages it found, put into their queues, discarded and left."""
    reconciled = (events.where(F.col("phase") == "reconciled").withColumn("time", event_time(F.col("at")))
                  .where(F.col("time").isNotNull()))
    latest = (reconciled.groupBy("name", "target")
              .agg(F.max_by(F.struct("time", "details"), "time").alias("latest")))
    return latest.select(F.col("name").alias("operation"), F.col("target").alias("target_datacentre"),
                         F.col("latest.time").alias("time"),
                         *[F.col("latest.details").getItem(outcome).cast("long").alias(outcome)
                           for outcome in RECONCILIATION_OUTCOMES])


def activation_seconds(durations: DataFrame, default: float) -> float:
    """Median time an operation took from its start to the activation of the target (drills and real runs)."""
    row = (durations.where(F.col("phase") == "activated")
           .agg(F.percentile("since_start_seconds", F.lit(0.5)).alias("median")).first())
    return float(row["median"]) if row and row["median"] is not None else float(default)


def rto_estimate(backlog: DataFrame, detection: float, activation: float) -> DataFrame:
    """Per datacentre and queue at the latest window: the RTO if the datacentre had to take over now. Detection and
    activation, then draining what waits there at the speed the queue is consumed where it is active (null when no
    consumption was measured: no honest estimate)."""
    latest = backlog.groupBy("queue").agg(F.max("window_end").alias("window_end"))
    now = backlog.join(latest, ["queue", "window_end"])
    speed = now.groupBy("queue").agg(F.max("acknowledged_per_second").alias("consumption_per_second"))
    drain = F.when(F.col("consumption_per_second") > 0, F.col("message_count") / F.col("consumption_per_second"))
    return (now.join(speed, "queue")
            .select("datacentre", "queue", "window_end", "message_count", "consumption_per_second",
                    F.lit(float(detection)).alias("detection_seconds"),
                    F.lit(float(activation)).alias("activation_seconds"),
                    drain.alias("drain_seconds"),
                    (F.lit(detection + activation) + drain).alias("rto_seconds")))


def drill_outcomes(ledgers: DataFrame) -> DataFrame:
    """Per drill, from its ledger: what was accepted, lost (accepted, then neither consumed nor left anywhere),
    duplicated (deliveries beyond the first), the actual RPO in time (fault minus the oldest lost message's
    acceptance) and RTO (fault to the first message accepted or consumed at another datacentre)."""
    fault = (ledgers.where(F.col("event") == "fault").groupBy("drill")
             .agg(F.min("time").alias("fault_time"), F.first("datacentre").alias("failed_datacentre")))
    ids = (ledgers.where(F.col("event") != "fault").groupBy("drill", "id")
           .agg(F.min(F.when(F.col("event") == "accepted", F.col("time"))).alias("accepted_at"),
                F.sum((F.col("event") == "consumed").cast("long")).alias("deliveries"),
                F.max((F.col("event") == "present").cast("long")).alias("left")))
    per_drill = (ids.groupBy("drill")
                 .agg(F.count("accepted_at").alias("accepted"),
                      F.sum(F.when(F.col("accepted_at").isNotNull()
                                   & (F.col("deliveries") + F.col("left") == 0), 1).otherwise(0)).alias("lost"),
                      F.sum(F.greatest(F.col("deliveries") + F.col("left") - 1, F.lit(0))).alias("duplicates"),
                      F.min(F.when(F.col("accepted_at").isNotNull()
                                   & (F.col("deliveries") + F.col("left") == 0), F.col("accepted_at")))
                      .alias("oldest_lost_at")))
    recovered = (ledgers.join(fault, "drill")
                 .where((F.col("event").isin("accepted", "consumed")) & (F.col("time") > F.col("fault_time"))
                        & (F.col("datacentre") != F.col("failed_datacentre")))
                 .groupBy("drill").agg(F.min("time").alias("recovered_at")))
    return (per_drill.join(fault, "drill", "left").join(recovered, "drill", "left")
            .withColumn("rpo_seconds", F.when(F.col("lost") == 0, F.lit(0.0))
                        .otherwise(F.col("fault_time") - F.col("oldest_lost_at")))
            .withColumn("rto_seconds", F.col("recovered_at") - F.col("fault_time"))
            .drop("oldest_lost_at", "recovered_at"))


def in_flight_before(link_samples: DataFrame, faults: DataFrame, window: int) -> DataFrame:
    """Per drill: the events the failed datacentre's replication senders had not taken yet at a random instant of
    the window before the fault (the mean of each link's undispatched count over its samples, summed over the links
    to a datacentre; with several candidates the largest). What is sent in the last milliseconds before a power
    loss is never in a sample; by Little's law this mean is the expected number waiting at the instant it strikes.
    Events, not messages: the acknowledgements and creates among them are not lost messages."""
    recent = (link_samples.join(faults, (link_samples["datacentre"] == faults["failed_datacentre"])
                                & (link_samples["time"] <= faults["fault_time"])
                                & (link_samples["time"] > faults["fault_time"] - window))
              .groupBy("drill", "target_datacentre", "broker", "link")
              .agg(F.avg("undispatched").alias("undispatched")))
    return (recent.groupBy("drill", "target_datacentre").agg(F.sum("undispatched").alias("undispatched"))
            .groupBy("drill").agg(F.max("undispatched").alias("messages_in_flight")))


def at_risk_before(queue_samples: DataFrame, link_samples: DataFrame, drills: DataFrame, window: int) -> DataFrame:
    """Per drill: the job's estimate, from each broker's last sample before the fault, of the messages an abrupt
    failover would lose (not yet counted at the datacentre taking over, summed over queues; with several candidates
    the most behind) and redeliver (delivered but unacknowledged at the failed datacentre); and, apart, the tail
    that no sample sees (in_flight_before)."""
    faults = drills.where(F.col("fault_time").isNotNull()).select("drill", "fault_time", "failed_datacentre")
    newest_first = Window.partitionBy("drill", "broker", "queue").orderBy(F.col("time").desc())
    last = (queue_samples.join(faults, queue_samples["time"] <= faults["fault_time"])
            .withColumn("rank", F.row_number().over(newest_first)).where(F.col("rank") == 1)
            .groupBy("drill", "failed_datacentre", "datacentre", "queue")
            .agg(F.sum("messages_added").alias("added"), F.sum("delivering_count").alias("delivering"),
                 F.max("time").alias("time")))
    most = Window.partitionBy("drill", "queue")
    per_queue = (last.withColumn("behind", F.max("added").over(most) - F.col("added"))
                 .groupBy("drill", "queue")
                 .agg(F.max(F.when(F.col("datacentre") != F.col("failed_datacentre"), F.col("behind")))
                      .alias("lost"),
                      F.sum(F.when(F.col("datacentre") == F.col("failed_datacentre"), F.col("delivering")))
                      .alias("redelivered"),
                      F.max("time").alias("time")))
    return (per_queue.groupBy("drill")
            .agg(F.max("time").alias("estimated_at"), F.sum("lost").alias("messages_at_risk"),
                 F.sum("redelivered").alias("deliveries_at_risk"))
            .join(in_flight_before(link_samples, faults, window), "drill", "left"))
