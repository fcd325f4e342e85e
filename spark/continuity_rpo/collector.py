"""The telemetry collector: samples every broker's management API at a fixed interval.

    python -m continuity_rpo.collector --config collector.yml [--duration SECONDS]

Per queue: messages added and acknowledged, message, delivering and consumer counts. Per mirror: connected,
the store-and-forward backlog and what of it the mirror's sender has not taken yet. Per live broker: the mirrored
messages it keeps because they found no queue, per original address (module_utils/artemis_address_settings).
It reads the brokers with the collection's own management client (module_utils), so the same code answers the
modules, the tests and the measurement. Per broker with a metrics endpoint (metrics_url) and per group active at
every datacentre (staging_delays): the acknowledgement notices that arrived there, from each other datacentre
(broker_metrics). A broker that does not answer is skipped for that sample (its datacentre's rows simply stop),
and so is one whose answer cannot be used (named on stderr); a refused login stops the collector with the broker
named.

Queue rows are written when they change (QueueRows): an estate of idle queues costs two rows per queue and window,
not one per sample, and the job's figures are the same as from every sample.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import urllib.error

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ArtemisManagement, AuthenticationRefused, BrokerNotReady, BrokerUnreachable, ManagementError)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report

from continuity_rpo import broker_metrics
from continuity_rpo.config import command_line
from continuity_rpo.store import Store


KINDS = ("queue_samples", "link_samples", "kept_samples", "notice_samples")


def _notice_rows(config: dict, broker: dict, where: dict, seen: dict) -> list[dict]:
    """The broker's acknowledgement notices per group active everywhere and sending datacentre, with the group's
    configured delay (what the job holds the measured delta against). A series absent from the broker's previous
    scrape (``seen``: the series of each broker's last answer) has ``appeared``: the broker registers it at its first
    notice, so all of its counts are new since then."""
    management = config["management"]
    try:
        samples = broker_metrics.scrape(broker["metrics_url"], management["ca_path"], management["management_user"],
                                        management["management_password"], management["request_timeout"],
                                        management["validate_certs"])
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise AuthenticationRefused(f"{broker['name']}: the metrics endpoint {broker['metrics_url']} refused "
                                        f"{management['management_user']} (HTTP {exc.code}): it needs a user of "
                                        f"broker_metrics_role") from None
        raise
    rows = [dict(where, **figures, staging_delay_seconds=config["staging_delays"][figures["group"]])
            for figures in broker_metrics.notice_figures(samples) if figures["group"] in config["staging_delays"]]
    before = seen.get(broker["name"])
    for row in rows:
        row["appeared"] = before is not None and (row["group"], row["source"]) not in before
    seen[broker["name"]] = {(row["group"], row["source"]) for row in rows}
    return rows


class QueueRows:
    """Which queue rows the collector writes: a broker's row of a queue whose figures differ from its previous
    sample, with that previous sample's; and every row of the first sample in each of the job's windows, with each
    broker's last of the window that ended. The job's figures over a window are then those from every sample (it
    carries each queue's last row to its broker's newest sample: metrics.queue_samples_until): its sums are the last
    row of the window less the last row of the window before, a step across a restart is a sample long as before,
    its minimum, maximum and last values are among the rows written, and a row left out repeats the one before it.
    A job whose window is a multiple of ``window_seconds`` gets the same figures too."""

    FIGURES = ("messages_added", "messages_acknowledged", "message_count", "delivering_count", "consumer_count")

    def __init__(self, window_seconds: float):
        self.window_seconds = window_seconds
        self._window = None
        self._last = {}  # (broker, queue) -> (its newest row, whether written)

    def select(self, rows: list[dict], now: float) -> list[dict]:
        window = math.floor(now / self.window_seconds)  # as the job's metrics.window_end cuts windows
        new_window = window != self._window
        self._window = window
        written = [row for row, done in self._last.values() if not done] if new_window else []
        if new_window:
            self._last = {}  # what a sample does not hold any more (a queue deleted, a broker silent) is forgotten
        for row in rows:
            key = (row["broker"], row["queue"])
            before = self._last.get(key)
            changed = new_window or before is None or any(before[0][name] != row[name] for name in self.FIGURES)
            if changed and before is not None and not before[1]:
                written.append(before[0])  # the step into a change is a sample long, as the job measures a restart
            if changed:
                written.append(row)
            self._last[key] = (row, changed)
        return written


def sample(config: dict, now: float, seen: dict | None = None) -> tuple[dict[str, list[dict]], list[str]]:
    """({telemetry kind: rows}, brokers that did not answer) for one sample of every broker; ``seen``: the notice
    series of each broker's previous answer, kept from sample to sample (see _notice_rows)."""
    seen = {} if seen is None else seen
    rows, silent = {kind: [] for kind in KINDS}, []
    # Which datacentre each mirror connection and bridge leads to, as the estate model said when the job was deployed.
    targets = {(link["source"], link["name"]): link["target"] for link in config["links"]}
    for broker in config["brokers"]:
        client = ArtemisManagement.from_params(broker, config["management"])
        where = {"time": now, "broker": broker["name"], "datacentre": broker["datacentre"]}
        try:
            report = broker_report(client)
        except (BrokerUnreachable, BrokerNotReady):
            silent.append(broker["name"])
            continue
        except AuthenticationRefused:
            raise
        except ManagementError as exc:  # one broker's odd answer (a queue gone while read): skip it this sample
            silent.append(f"{broker['name']} ({exc})")
            continue
        if broker.get("metrics_url") and config["staging_delays"]:
            try:
                rows["notice_samples"] += _notice_rows(config, broker, where, seen)
            except (OSError, ValueError) as exc:  # its metrics endpoint down or its page cut short: next sample
                silent.append(f"{broker['name']} (metrics: {exc})")
        for queue in report["queues"]:
            rows["queue_samples"].append(dict(
                where, queue=queue["name"], address=queue["address"], messages_added=queue["messages_added"],
                messages_acknowledged=queue["messages_acknowledged"], message_count=queue["message_count"],
                delivering_count=queue["delivering_count"], consumer_count=queue["consumer_count"]))
        for link in report["links"]:
            rows["link_samples"].append(dict(where, link=link["name"], connected=link["connected"],
                                             backlog=link["backlog"], undispatched=link["undispatched"],
                                             target_datacentre=targets.get((broker["datacentre"], link["name"]))))
        if report["live"]:
            rows["kept_samples"].append(dict(where, kept=sum(report["kept"].values()),
                                             kept_by_address=report["kept"]))
    return rows, silent


def run(config: dict, duration: float, stop: threading.Event | None = None) -> None:
    store = Store(config["telemetry"], "collector", config["segment_seconds"])
    deadline = time.monotonic() + duration if duration else None
    seen: dict = {}
    queue_rows = QueueRows(config["window_seconds"])
    try:
        while (deadline is None or time.monotonic() < deadline) and not (stop and stop.is_set()):
            started = time.monotonic()
            now = time.time()
            rows, silent = sample(config, now, seen)
            rows["queue_samples"] = queue_rows.select(rows["queue_samples"], now)
            for kind in KINDS:
                store.append(kind, rows[kind], now)
            if silent:
                print(f"collector: no answer from {', '.join(silent)}", file=sys.stderr, flush=True)
            (stop.wait if stop else time.sleep)(max(0.0, config["interval"] - (time.monotonic() - started)))
    finally:
        store.close()


def main(argv=None) -> int:
    return command_line("collector", __doc__.split("\n", maxsplit=1)[0], run, argv)


if __name__ == "__main__":
    sys.exit(main())
