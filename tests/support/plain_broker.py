"""Plain Artemis brokers on the controller, outside the estate: for tests that need another broker to talk to the
estate's (a broker the estate exports to, a rogue one), and for the reproductions of Artemis's defects."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import subprocess
import time

from support import amqp_clients as amqp
from support import tls
from support.estate import REPO_ROOT, artemis_cli, cli_message_count

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


class RestartableBroker:
    """An `artemis create` instance on the controller, named ``name`` in ``directory``, that a reproduction stops, kills
    (SIGKILL) and starts again: Artemis's defaults on one port, one user, ``addresses`` (XML) added to broker.xml's
    <addresses> and ``core_addition`` to its <core>, the jars ``libraries`` in its lib/."""

    def __init__(self, directory: pathlib.Path, name: str, host: str, port: int, user: str, password: str,
                 addresses: str = "", core_addition: str = "", libraries: tuple[str, ...] = ()):
        self.name, self.host, self.port, self.user, self.password = name, host, port, user, password
        self.instance, self.log = directory / name, directory / f"{name}.log"
        subprocess.run([artemis_cli(), "create", str(self.instance), "--silent", "--no-autotune", "--host", host,
                        "--default-port", str(port), "--user", user, "--password", password, "--require-login",
                        "--no-web", "--no-amqp-acceptor", "--no-mqtt-acceptor", "--no-stomp-acceptor",
                        "--no-hornetq-acceptor", "--name", name], check=True, capture_output=True, text=True,
                       timeout=120)
        broker_xml = self.instance / "etc" / "broker.xml"
        text = broker_xml.read_text().replace("</addresses>", addresses + "</addresses>", 1)
        broker_xml.write_text(text.replace("</core>", core_addition + "</core>", 1))
        for library in libraries:
            shutil.copy(library, self.instance / "lib")
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"tcp://{self.host}:{self.port}"

    def log_count(self, code: str) -> int:
        """How often the broker logged ``code`` (an Artemis log code such as AMQ111003) since it was created."""
        return self.log.read_text().count(code) if self.log.exists() else 0

    def start(self) -> None:
        started = self.log_count(LIVE)
        with open(self.log, "a") as output:
            self.process = subprocess.Popen([str(self.instance / "bin" / "artemis"), "run"], stdout=output,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        amqp.wait_for(lambda: self.log_count(LIVE) > started, timeout=90, description=f"broker {self.name} live")

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()

    def count(self, queue: str) -> int:
        return cli_message_count(self.url, self.user, self.password, queue)

    def produce(self, queue: str, count: int) -> None:
        subprocess.run([artemis_cli(), "producer", "--url", self.url, "--user", self.user, "--password",
                        self.password, "--destination", f"queue://{queue}", "--message-count", str(count),
                        "--protocol", "core"], check=True, capture_output=True, text=True, timeout=300,
                       cwd=REPO_ROOT)


def settled_count(broker: RestartableBroker, queue: str, quiet_s: float = 15.0, timeout_s: float = 180.0) -> int:
    """The queue's message count once it has not changed for ``quiet_s`` (what a mirror sends after a start arrives
    within seconds of it)."""
    deadline, last, since = time.monotonic() + timeout_s, None, time.monotonic()
    while time.monotonic() < deadline:
        count = broker.count(queue)
        if count != last:
            last, since = count, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return count
        time.sleep(2)
    raise AssertionError(f"{queue} at {broker.name} still changing after {timeout_s} s (last {last})")
