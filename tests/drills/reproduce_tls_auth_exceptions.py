"""Re-check an Artemis release for what B1's profile found (benchmarks/findings.yml, docs/upstream/tls-auth-exceptions.md):
at every message a client sends over TLS without a client certificate, the broker's authorization check builds its
cache key with the certificate's subject (CertificateUtil.getCertSubjectDN), and the TLS session throws and fills in
an SSLPeerUnverifiedException to say there is none.

    make reproduce-tls-auth-exceptions

One plain broker on the controller (`artemis create` of the distribution the tests use): its default acceptor in
plain text and an AMQP acceptor over TLS. A python-qpid-proton client logs in with a password and sends COUNT durable
messages over each, one after the other; Java Flight Recorder's exception statistics (jdk.ExceptionStatistics, the
JVM's count of throwables created) before and after each say how many exceptions the broker made per message.
Writes tests/drills/results/tls_auth_exceptions.json; exits 0 either way (a measurement).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from proton import Message, SSLDomain
from proton.utils import BlockingConnection

from ansible_collections.continuity.artemis.plugins.module_utils.amqp_ledger import (
    QUEUE_CAPABILITY, TargetCapabilities)
from support.plain_broker import plain_broker

COUNT = 2000
WARM_UP = 100  # unmeasured messages over each acceptor first: the first ones load classes and connect
USER, PASSWORD = "repro", "repro-" + os.urandom(6).hex()
HOST = "127.0.0.1"
PORT, AMQPS_PORT = 62636, 62637
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "tls_auth_exceptions.json")
# JFR writes the statistics every second: wait for a sample after the quiet start and after the last send.
SAMPLE_WAIT_S = 2.5


def broker_pid(instance: pathlib.Path) -> int:
    found = subprocess.run(["pgrep", "-o", "-f", f"artemis.instance={instance}"], capture_output=True, text=True,
                           check=True)
    return int(found.stdout.split()[0])


def throwables(pid: int, work: pathlib.Path, name: str) -> list[int]:
    """The broker's count of throwables created, as Flight Recorder sampled it over the recording ``name`` (stopped
    here), in time order."""
    recording = work / f"{name}.jfr"
    subprocess.run(["jcmd", str(pid), "JFR.stop", f"name={name}", f"filename={recording}"], check=True,
                   capture_output=True, text=True)
    printed = subprocess.run(["jfr", "print", "--json", "--events", "jdk.ExceptionStatistics", str(recording)],
                             check=True, capture_output=True, text=True).stdout
    events = sorted(json.loads(printed)["recording"]["events"], key=lambda event: event["values"]["startTime"])
    return [int(event["values"]["throwables"]) for event in events]


def send(url: str, address: str, count: int, ca_path: str | None) -> int:
    """``count`` durable messages, each settled before the next; the same client over TLS (``ca_path``) and in plain
    text, where it sends the password in the clear: the reproducer's own throwaway one, over loopback, to compare."""
    options = {"user": USER, "password": PASSWORD, "allowed_mechs": "PLAIN", "timeout": 60,
               "allow_insecure_mechs": ca_path is None}
    if ca_path:
        domain = SSLDomain(SSLDomain.MODE_CLIENT)
        domain.set_trusted_ca_db(ca_path)
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
        options["ssl_domain"] = domain
    connection = BlockingConnection(url, **options)
    try:
        sender = connection.create_sender(address, options=[TargetCapabilities(QUEUE_CAPABILITY)])
        for sequence in range(count):
            sender.send(Message(body=f"m{sequence}", durable=True))
    finally:
        connection.close()
    return count


def exceptions_per_message(pid: int, work: pathlib.Path, url: str, ca_path: str | None, name: str) -> dict:
    subprocess.run(["jcmd", str(pid), "JFR.start", f"name={name}", "settings=default"], check=True,
                   capture_output=True, text=True)
    time.sleep(SAMPLE_WAIT_S)
    sent = send(url, f"repro.{name}", COUNT, ca_path)
    time.sleep(SAMPLE_WAIT_S)
    counts = throwables(pid, work, name)
    made = counts[-1] - counts[0]
    return {"url": url, "messages": sent, "throwables": made, "per_message": round(made / sent, 2)}


def main() -> int:
    with tempfile.TemporaryDirectory() as directory:
        work = pathlib.Path(directory)
        with plain_broker(work, HOST, PORT, USER, PASSWORD, amqps_port=AMQPS_PORT):
            pid = broker_pid(work / "broker")
            send(f"amqp://{HOST}:{PORT}", "repro.warm", WARM_UP, None)
            send(f"amqps://{HOST}:{AMQPS_PORT}", "repro.warm", WARM_UP, str(work / "ca.pem"))
            plain = exceptions_per_message(pid, work, f"amqp://{HOST}:{PORT}", None, "plain")
            tls = exceptions_per_message(pid, work, f"amqps://{HOST}:{AMQPS_PORT}", str(work / "ca.pem"), "tls")
    version = os.path.basename(os.environ.get("ARTEMIS_HOME", "")).removeprefix("apache-artemis-")
    result = {"reproducer": "reproduce_tls_auth_exceptions", "artemis_version": version,
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "messages_per_client": COUNT, "warm_up_messages": WARM_UP,
              "client": "python-qpid-proton, user and password, no client certificate",
              "plain_text": plain, "tls_without_client_certificate": tls,
              "reproduced": tls["per_message"] >= 1 and plain["per_message"] < 0.1}
    with open(RESULTS, "w") as handle:
        json.dump(result, handle, indent=1)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
