"""A broker's metrics endpoint (the broker role's broker_metrics_enabled) as the collector reads it: one scrape, as
Prometheus does it (HTTPS, HTTP Basic as a user of broker_metrics_role, the estate's CA), and the acknowledgement
notices of the groups active at every datacentre (staging_delay_ms) that the broker plugin counts there.

The plugin records, per group and sending datacentre, the time from a message's production to the arrival of its
acknowledgement's notice here (a Micrometer timer with a percentile histogram: buckets, count, sum and its decaying
max), and counts the notices that removed their copy in time (applied) and those that found it delivered (late).
It also times production to the notice's journal commit here (durable: count and sum only), which is when a
subscriber could see the notice and when a failover no longer loses it.
"""

from __future__ import annotations

import base64
import math
import ssl
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

DELTA = "continuity_ack_notice_delta_seconds"
DURABLE = "continuity_ack_notice_durable_delta_seconds"
APPLIED = "continuity_ack_notices_applied_total"
LATE = "continuity_ack_notices_late_total"


def scrape(url: str, ca_path: str | None, user: str | None, password: str | None, timeout: float = 30,
           validate_certs: bool = True) -> dict:
    """{sample name: [(labels, value), ...]}. An HTTP error (401 for a wrong password) raises
    urllib.error.HTTPError, a TLS failure ssl.SSLError or URLError."""
    request = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context(cafile=ca_path) if validate_certs else ssl._create_unverified_context()  # pylint: disable=protected-access
    with urllib.request.urlopen(request, timeout=timeout, context=context) as reply:
        text = reply.read().decode()
    samples: dict = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def _bound(le: str) -> str:
    """A bucket's upper bound as the telemetry keeps it: seconds in the shortest exact text, or "+Inf"."""
    value = float(le)
    return "+Inf" if math.isinf(value) else repr(value)


def notice_figures(samples: dict) -> list[dict]:
    """Per (group, sending datacentre): count, sum_seconds, max_seconds, applied, late, the cumulative buckets
    {upper bound in seconds: notices}, durable_count and durable_sum_seconds; a series the broker has not registered
    yet is absent, not zero."""
    series: dict = {}

    def entry(labels):
        key = (labels.get("group"), labels.get("source"))
        return series.setdefault(key, {"group": key[0], "source": key[1], "count": 0, "sum_seconds": 0.0,
                                       "max_seconds": None, "applied": 0, "late": 0, "buckets": {},
                                       "durable_count": 0, "durable_sum_seconds": 0.0})

    for name, rows in samples.items():
        for labels, value in rows:
            if name == f"{DELTA}_bucket":
                entry(labels)["buckets"][_bound(labels["le"])] = int(value)
            elif name == f"{DELTA}_count":
                entry(labels)["count"] = int(value)
            elif name == f"{DELTA}_sum":
                entry(labels)["sum_seconds"] = value
            elif name == f"{DELTA}_max":
                entry(labels)["max_seconds"] = value
            elif name == f"{DURABLE}_count":
                entry(labels)["durable_count"] = int(value)
            elif name == f"{DURABLE}_sum":
                entry(labels)["durable_sum_seconds"] = value
            elif name == APPLIED:
                entry(labels)["applied"] = int(value)
            elif name == LATE:
                entry(labels)["late"] = int(value)
    return [row for key, row in sorted(series.items(), key=lambda item: tuple(map(str, item[0])))
            if row["group"] is not None and row["source"] is not None]
