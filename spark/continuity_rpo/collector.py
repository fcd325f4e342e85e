"""The telemetry collector: samples every broker's management API at a fixed interval.

    python -m continuity_rpo.collector --config collector.yml [--duration SECONDS]

Per queue: messages added and acknowledged, message, delivering and consumer counts. Per mirror: connected and
the store-and-forward backlog. Per live broker: the mirrored messages it keeps because they found no queue, per
original address (module_utils/artemis_address_settings). It reads the brokers with the collection's own management client (module_utils),
so the same code answers the modules, the tests and the measurement. A broker that does not answer is skipped
for that sample (its datacentre's rows simply stop), and so is one whose answer cannot be used (named on stderr);
a refused login stops the collector with the broker named.
"""

from __future__ import annotations

import sys
import threading
import time

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ArtemisManagement, AuthenticationRefused, BrokerNotReady, BrokerUnreachable, ManagementError)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report

from continuity_rpo.config import command_line
from continuity_rpo.store import Store


def sample(config: dict, now: float) -> tuple[list[dict], list[dict], list[dict], list[str]]:
    """(queue rows, link rows, kept rows, brokers that did not answer) for one sample of every broker."""
    queue_rows, link_rows, kept_rows, silent = [], [], [], []
    # Which datacentre each mirror connection leads to, as the estate model said when the job was deployed.
    targets = {(link["source"], link["name"]): link["target"] for link in config["links"]}
    for broker in config["brokers"]:
        client = ArtemisManagement.from_params(broker, config["management"])
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
        where = {"time": now, "broker": broker["name"], "datacentre": broker["datacentre"]}
        for queue in report["queues"]:
            queue_rows.append(dict(where, queue=queue["name"], address=queue["address"],
                                   messages_added=queue["messages_added"],
                                   messages_acknowledged=queue["messages_acknowledged"],
                                   message_count=queue["message_count"], delivering_count=queue["delivering_count"],
                                   consumer_count=queue["consumer_count"]))
        for link in report["links"]:
            link_rows.append(dict(where, link=link["name"], connected=link["connected"], backlog=link["backlog"],
                                  target_datacentre=targets.get((broker["datacentre"], link["name"]))))
        if report["live"]:
            kept_rows.append(dict(where, kept=sum(report["kept"].values()), kept_by_address=report["kept"]))
    return queue_rows, link_rows, kept_rows, silent


def run(config: dict, duration: float, stop: threading.Event | None = None) -> None:
    store = Store(config["telemetry"], "collector", config["segment_seconds"])
    deadline = time.monotonic() + duration if duration else None
    try:
        while (deadline is None or time.monotonic() < deadline) and not (stop and stop.is_set()):
            started = time.monotonic()
            now = time.time()
            queue_rows, link_rows, kept_rows, silent = sample(config, now)
            store.append("queue_samples", queue_rows, now)
            store.append("link_samples", link_rows, now)
            store.append("kept_samples", kept_rows, now)
            if silent:
                print(f"collector: no answer from {', '.join(silent)}", file=sys.stderr, flush=True)
            time.sleep(max(0.0, config["interval"] - (time.monotonic() - started)))
    finally:
        store.close()


def main(argv=None) -> int:
    return command_line("collector", __doc__.split("\n", maxsplit=1)[0], run, argv)


if __name__ == "__main__":
    sys.exit(main())
