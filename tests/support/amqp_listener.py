"""A consumer in a process of its own, for arrival times that the load in the test's process cannot delay: it
accepts everything from an address until interrupted (SIGINT), then writes one JSON line per delivery, its arrival
time and the application properties asked for.

    PASSWORD=... python -m support.amqp_listener --url amqps://... --ca CA_FILE --user U --address A [--multicast]
                                                 [--property NAME ...] --out FILE
"""

import argparse
import json
import os
import signal
import sys
import threading

from ansible_collections.continuity.artemis.plugins.module_utils import amqp_ledger as amqp


def main(argv=None) -> int:
    parse = argparse.ArgumentParser(prog="support.amqp_listener")
    parse.add_argument("--url", required=True)
    parse.add_argument("--ca", required=True, help="the CA file that signed the broker's certificate")
    parse.add_argument("--user", required=True)
    parse.add_argument("--address", required=True)
    parse.add_argument("--multicast", action="store_true", help="a subscription, not the queue of that name")
    parse.add_argument("--property", action="append", default=[])
    parse.add_argument("--out", required=True)
    arguments = parse.parse_args(argv)
    interrupted = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    consumer = amqp.Consumer(arguments.url, arguments.user, os.environ["PASSWORD"], arguments.address,
                             anycast=not arguments.multicast, record_properties=arguments.property,
                             name=f"listener-{arguments.address}", ca_path=arguments.ca)
    consumer.start()
    consumer.wait_connected()
    print("connected", flush=True)
    interrupted.wait()
    consumer.stop()
    with open(arguments.out, "w", encoding="utf-8") as handle:
        for record in consumer.ledger():
            handle.write(json.dumps({"received_at": record.received_at, "properties": record.properties}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
