"""A plain Artemis broker on the controller, outside the estate: for tests that need another broker to talk to the
estate's (a broker the estate exports to, a rogue one)."""

from __future__ import annotations

import contextlib
import pathlib
import subprocess

from ansible_collections.continuity.artemis.plugins.module_utils import amqp_ledger as amqp
from support.estate import artemis_cli

LIVE = "AMQ221007"  # Artemis logs it once the server is active


@contextlib.contextmanager
def plain_broker(directory: pathlib.Path, host: str, port: int, user: str, password: str, core_addition: str = ""):
    """`artemis create` of the distribution the tests use, with one user and Artemis's defaults on one port (core,
    AMQP and the rest, no TLS, no web console), ``core_addition`` inserted into broker.xml's <core>; yields the path
    of its log while it runs, and stops it afterwards."""
    instance = directory / "broker"
    subprocess.run([artemis_cli(), "create", str(instance), "--silent", "--no-autotune", "--host", host,
                    "--default-port", str(port), "--user", user, "--password", password, "--require-login",
                    "--no-web", "--no-amqp-acceptor", "--no-mqtt-acceptor", "--no-stomp-acceptor",
                    "--no-hornetq-acceptor"], check=True, capture_output=True, text=True, timeout=120)
    if core_addition:
        broker_xml = instance / "etc" / "broker.xml"
        broker_xml.write_text(broker_xml.read_text().replace("</core>", core_addition + "</core>", 1))
    log = directory / "broker.log"
    with open(log, "w") as output:
        process = subprocess.Popen([str(instance / "bin" / "artemis"), "run"], stdout=output,
                                   stderr=subprocess.STDOUT)
    try:
        amqp.wait_for(lambda: LIVE in log.read_text(), timeout=60, description=f"the broker in {directory} is live")
        yield log
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
