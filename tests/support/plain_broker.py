"""A plain Artemis broker on the controller, outside the estate: for tests that need another broker to talk to the
estate's (a broker the estate exports to, a rogue one)."""

from __future__ import annotations

import contextlib
import pathlib
import subprocess

from support import amqp_clients as amqp
from support import tls
from support.estate import artemis_cli

LIVE = "AMQ221007"  # Artemis logs it once the server is active


@contextlib.contextmanager
def plain_broker(directory: pathlib.Path, host: str, port: int, user: str, password: str, core_addition: str = "",
                 amqps_port: int | None = None):
    """`artemis create` of the distribution the tests use, with one user and Artemis's defaults on one port (core,
    AMQP and the rest, no TLS, no web console), ``core_addition`` inserted into broker.xml's <core>; with
    ``amqps_port``, also AMQP over TLS there, with a certificate of a CA of its own (``directory``/ca.pem), for a
    client that sends a password. Yields the path of its log while it runs, and stops it afterwards."""
    instance = directory / "broker"
    subprocess.run([artemis_cli(), "create", str(instance), "--silent", "--no-autotune", "--host", host,
                    "--default-port", str(port), "--user", user, "--password", password, "--require-login",
                    "--no-web", "--no-amqp-acceptor", "--no-mqtt-acceptor", "--no-stomp-acceptor",
                    "--no-hornetq-acceptor"], check=True, capture_output=True, text=True, timeout=120)
    broker_xml = instance / "etc" / "broker.xml"
    text = broker_xml.read_text()
    if core_addition:
        text = text.replace("</core>", core_addition + "</core>", 1)
    if amqps_port:
        ca_cert, ca_key = tls.private_ca(directory, "ca")
        certificate, key = tls.signed_certificate(directory, "broker", host, [host], ca_cert, ca_key)
        key_store = directory / "broker-key-store.pem"
        key_store.write_text(pathlib.Path(key).read_text() + pathlib.Path(certificate).read_text())
        text = text.replace("</acceptors>", f'<acceptor name="amqps">tcp://{host}:{amqps_port}?protocols=AMQP;'
                                            f'sslEnabled=true;keyStoreType=PEM;keyStorePath={key_store}</acceptor>'
                                            "</acceptors>", 1)
    broker_xml.write_text(text)
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
