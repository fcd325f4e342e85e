"""Re-check an Artemis release for the mirror's create-queue race (docs/upstream/mirror-create-queue-race.md):
`make reproduce-mirror-race` (ARTEMIS_VERSION=... for another release the collection can install).

Builds a 2 x 2 shared_nothing test bed, sends to QUEUES queues created at runtime by AMQP producers at dc1 (one
message each, BURST to the first BURST_QUEUES), waits until the mirrors have delivered everything and prints per
queue what dc2 misses, and how many messages dc2 kept instead of dropping them. No reconciliation runs: this is the
loss Artemis causes. Exits 0 either way; it is a measurement, written to tests/drills/results/mirror_race.json.
"""

import json
import os
import sys
import tempfile
import time
import uuid

from support import amqp_clients as amqp
from support.estate import Estate, layout_inventory, run_module, run_playbook

QUEUES = int(os.environ.get("QUEUES", "500"))
BURST_QUEUES = 20
BURST = 50
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def send_to_new_queues(node, prefix):
    """{queue: accepted ids}: QUEUES queues created at runtime by AMQP producers at ``node`` (one message each,
    BURST to the first BURST_QUEUES)."""
    queues = [f"{prefix}.{index:03d}" for index in range(QUEUES)]
    return dict((queue, amqp.send(node.amqp_url, node.user, node.password, queue,
                                  BURST if index < BURST_QUEUES else 1, id_prefix=queue, ca_path=node.ca_cert))
                for index, queue in enumerate(queues))


def wait_until_delivered(estate):
    """Until every mirror's store-and-forward backlog is empty."""
    def backlog():
        return run_module("artemis_replication_info", dict(estate.management_args(), queues=False))[0].get("backlog")
    amqp.wait_for(backlog, lambda value: value == 0, timeout=300, description="the mirrors' backlog delivered")


def main():
    Estate.testbed("down")
    Estate.testbed("up", "--dcs", "2", "--nodes-per-dc", "2")
    with tempfile.TemporaryDirectory() as tmp:
        inventory = layout_inventory(tmp, "shared_nothing")
        converged = run_playbook("site.yml", inventory=inventory, timeout=3000)
        if converged.rc:
            sys.exit("site.yml failed:\n" + converged.output[-4000:])
    estate = Estate.from_testbed()
    source = next(node for node in estate.nodes if node.dc == "dc1")
    run = uuid.uuid4().hex[:6]
    sent = dict((queue, len(ids)) for queue, ids in send_to_new_queues(source, f"race.{run}").items())
    wait_until_delivered(estate)
    time.sleep(2)
    info = run_module("artemis_replication_info", dict(estate.management_args(),
                                                       include_prefixes=[f"race.{run}."]))[0]
    at_dc2 = {}
    for report in info["brokers"]:
        if report["datacentre"] == "dc2":
            for queue in report["queues"]:
                at_dc2[queue["name"]] = at_dc2.get(queue["name"], 0) + queue["message_count"]
    short = dict((queue, (count, at_dc2.get(queue, 0))) for queue, count in sent.items() if at_dc2.get(queue, 0) < count)
    kept = sum(count for report in info["brokers"] if report["datacentre"] == "dc2"
               for address, count in report["kept"].items() if address.startswith(f"race.{run}."))
    version = next(report["version"] for report in info["brokers"] if report.get("version"))
    figures = {"artemis": version, "queues": QUEUES, "sent": sum(sent.values()), "queues_short_at_dc2": len(short),
               "messages_missing_from_their_queue_at_dc2": sum(count - got for count, got in short.values()),
               "kept_at_dc2": kept}
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "mirror_race.json"), "w") as handle:
        json.dump(dict(figures, short=short), handle, indent=2, sort_keys=True)
    for queue, (count, got) in sorted(short.items()):
        print(f"{queue}: sent {count}, in its queue at dc2 {got}")
    print(json.dumps(figures, sort_keys=True))
    if os.environ.get("KEEP_TESTBED") != "1":
        Estate.testbed("down")


if __name__ == "__main__":
    main()
