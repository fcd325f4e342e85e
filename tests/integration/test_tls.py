"""TLS everywhere it crosses a network: message bodies cannot be read on the WAN; the mirror acceptor admits only the
other datacentres' brokers, by a certificate of the estate's CA (mutual TLS), and the replication user has no login
anywhere else; the management API is HTTPS only, verified by the modules, with exact CORS origins."""

import asyncio
import base64
import json
import os
import re
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from proton.utils import BlockingConnection

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ArtemisManagement, BrokerUnreachable, ManagementError, broker_mbean)
from support import tls
from support import amqp_clients as amqp
from support.estate import CONTROLLER, TESTBED_INVENTORY, run_module
from support.plain_broker import plain_broker

WAN_ROUTER = "ctb-wan"  # the test bed's router namespace; br-dc2 is its leg towards dc2


def _pki(node):
    return os.path.dirname(node.ca_cert)


def _secrets():
    with open(os.path.join(TESTBED_INVENTORY, "group_vars", "all", "secrets.yml")) as handle:
        return yaml.safe_load(handle)


def test_message_bodies_are_not_readable_on_the_wan(estate, tmp_path):
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue, marker = f"tls.{uuid.uuid4().hex[:8]}", f"readable-on-the-wan-{uuid.uuid4().hex}"
    capture = tmp_path / "wan.pcap"
    tcpdump = subprocess.Popen(["ip", "netns", "exec", WAN_ROUTER, "tcpdump", "-i", "br-dc2", "-U", "-w",
                                str(capture), "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, [marker] * 20, ca_path=dc1.ca_cert)
        amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 20, timeout=60)
        time.sleep(1)
    finally:
        tcpdump.terminate()
        tcpdump.wait(10)

    seen = subprocess.run(["tcpdump", "-r", str(capture), "-nn", "tcp port 5673"], capture_output=True,
                          text=True, check=True).stdout
    # TCP may coalesce the 20 messages into a few segments: count bytes, not packets.
    payload_bytes = sum(int(length) for length in re.findall(r"length (\d+)", seen))
    assert payload_bytes > 20 * len(marker), "the capture saw no mirror traffic, so it proves nothing"
    assert marker.encode() not in capture.read_bytes()


def _mirror_login(node, certificate=None, **kwargs):
    """'admitted', or why dc2's mirror acceptor refused the connection."""
    try:
        tls.amqps_connection(f"amqps://{node.address}:5673", node.ca_cert, certificate, **kwargs).close()
        return "admitted"
    except Exception as exc:  # noqa: BLE001 - proton raises several types; the text says which refusal
        return str(exc)


def test_the_mirror_acceptor_admits_only_the_other_datacentres_brokers(estate, tmp_path):
    dc2 = estate.dc("dc2")
    pki = _pki(dc2)
    peer = (os.path.join(pki, "dc1-node1.pem"), os.path.join(pki, "dc1-node1.key"))
    rogue_ca = tls.rogue_ca(tmp_path)
    impostor = tls.signed_certificate(tmp_path, "impostor", "dc1-node1", ["10.201.1.11"], *rogue_ca)
    own = (os.path.join(pki, f"{dc2.name}.pem"), os.path.join(pki, f"{dc2.name}.key"))

    # The control: a broker of the other datacentre, with its estate certificate, gets in (as the mirrors do).
    assert _mirror_login(dc2, peer) == "admitted"
    assert "SSL Failure" in _mirror_login(dc2, None), "no client certificate"
    assert "SSL Failure" in _mirror_login(dc2, impostor), "a certificate of another CA with a peer's name"
    # Signed by the estate's CA but not one of the other datacentres' brokers: TLS passes, the login does not.
    assert "AMQ229031" in _mirror_login(dc2, own)
    # Nor does a certificate of the estate's CA that names the peer beside something else in its subject (the login
    # pattern is the peers' exact subjects; one that looked for CN=<peer> anywhere admitted both).
    ca = (os.path.join(pki, "ca.pem"), os.path.join(pki, "ca.key"))
    for stem, common_name, unit in (("extra-unit", "dc1-node1", "extra"), ("named-inside", "evil", "x,CN=dc1-node1,y")):
        crafted = tls.signed_certificate(tmp_path, stem, common_name, ["10.201.1.11"], *ca, unit=unit)
        assert "AMQ229031" in _mirror_login(dc2, crafted), stem
    # The replication user's password opens nothing there either (no certificate, no login).
    assert "SSL Failure" in _mirror_login(dc2, None, mechanism="PLAIN", user="replicator",
                                          password=_secrets()["replication_password"])


def test_the_replication_user_cannot_log_in_on_the_client_acceptors(estate):
    secrets = _secrets()
    for node in (estate.dc("dc1"), estate.dc("dc2")):
        for url in (node.amqp_url, f"amqps://{node.address}:61616"):
            with pytest.raises(amqp.AmqpError, match="Authentication failed"):
                amqp.browse(url, "replicator", secrets["replication_password"], "DLQ", ca_path=node.ca_cert)
            # The control: the application user logs in there.
            assert amqp.browse(url, node.user, node.password, "DLQ", ca_path=node.ca_cert) is not None


def _listening_ports(address, timeout=2.0):
    """The TCP ports of ``address`` that accept a connection: a connect scan of all of them, as nmap -sT does."""
    async def probe(port, gate):
        async with gate:
            try:
                _reader, writer = await asyncio.wait_for(asyncio.open_connection(address, port), timeout)
            except (OSError, asyncio.TimeoutError):
                return None
            writer.close()
            return port

    async def scan():
        gate = asyncio.Semaphore(512)
        return [port for port in await asyncio.gather(*(probe(port, gate) for port in range(1, 65536))) if port]
    return asyncio.run(scan())


def _what_it_speaks(address, port, ca_cert, client_certificate):
    """"ssh", the TLS version it negotiated (verifying its certificate and host name against the estate's CA, and
    presenting one of the estate's certificates where it asks for one), or "plain text: <why the handshake failed>"."""
    with socket.create_connection((address, port), timeout=5) as raw:
        raw.settimeout(2)
        try:
            first = raw.recv(8, socket.MSG_PEEK)  # a server that speaks first
        except (socket.timeout, TimeoutError):
            first = b""
        if first.startswith(b"SSH-"):
            return "ssh"
        context = ssl.create_default_context(cafile=ca_cert)
        context.load_cert_chain(*client_certificate)
        raw.settimeout(10)
        try:
            with context.wrap_socket(raw, server_hostname=address) as secured:
                return secured.version()
        except (ssl.SSLError, OSError) as error:
            return f"plain text: {error}"


def test_no_broker_host_listens_in_plain_text(estate):
    """Scanned from the controller's namespace: every port of every broker host of the test bed that takes a
    connection is TLS with the estate's certificate (or SSH): the clients', the mirrors', management and metrics."""
    pki = _pki(estate.nodes[0])
    stem = os.path.join(pki, estate.nodes[0].name)
    client_certificate = (f"{stem}.pem", f"{stem}.key")
    for node in estate.nodes:
        ports = _listening_ports(node.address)
        spoken = {port: _what_it_speaks(node.address, port, node.ca_cert, client_certificate) for port in ports}
        assert {5671, 5673, 8161, 61616} <= set(ports), (node.name, spoken)
        plain = {port: what for port, what in spoken.items() if what != "ssh" and not what.startswith("TLSv1.")}
        assert not plain, (node.name, plain)


def test_the_collections_client_sends_no_password_in_plain_text(tmp_path):
    """The prober's, the drill's and the tests' AMQP client, against an Artemis that would take a password in plain
    text: it refuses to send it there, and logs in over TLS."""
    plain = f"amqp://{CONTROLLER}:61690"
    with plain_broker(tmp_path, CONTROLLER, 61690, "someone", "secret", amqps_port=61691):
        # The broker does take it: a client that allows PLAIN without TLS logs in.
        BlockingConnection(plain, timeout=10, user="someone", password="secret", allowed_mechs="PLAIN",
                           allow_insecure_mechs=True).close()
        with pytest.raises(amqp.AmqpError):
            amqp.send(plain, "someone", "secret", "plain.text", 1, timeout=10)
        assert len(amqp.send(f"amqps://{CONTROLLER}:61691", "someone", "secret", "over.tls", 1, timeout=30,
                             ca_path=str(tmp_path / "ca.pem"))) == 1


def test_the_management_api_is_https_only_and_the_modules_verify_it(estate, tmp_path):
    dc1 = estate.dc("dc1")
    port = dc1.management_url.split(":")[2].split("/")[0]
    assert dc1.management_url.startswith("https://")
    assert dc1.management().status()["started"]

    # Plain HTTP gets nothing from the management port.
    plain = ArtemisManagement(dc1.name, f"http://{dc1.address}:{port}", dc1.admin_user, dc1.admin_password)
    with pytest.raises(ManagementError) as refused:
        plain.read(broker_mbean(dc1.name), "Started")
    assert not isinstance(refused.value, BrokerUnreachable)

    # A CA that did not sign the broker's certificate: the module refuses to talk to it.
    rogue_ca, _key = tls.rogue_ca(tmp_path)
    result, output = run_module("artemis_replication_info", dict(estate.management_args([dc1]), ca_path=rogue_ca))
    assert result.get("failed") and "certificate verify failed" in result["msg"], output[-3000:]
    assert dc1.admin_password not in output


def _serve_with(certificate, key):
    """A JSON answer over HTTPS on this machine, presenting ``certificate``."""
    class Answer(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            body = json.dumps({"status": 200, "value": True}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_certificate_of_the_estate_for_another_host_is_refused(estate, tmp_path):
    """Right CA, wrong name: a server presenting an estate certificate issued for another host is refused; the same
    CA's certificate for the address the client asked for is accepted."""
    dc1 = estate.dc("dc1")
    ca_key = os.path.join(_pki(dc1), "ca.key")
    for stem, names, accepted in (("here", ["127.0.0.1"], True), ("elsewhere", ["elsewhere.example"], False)):
        server = _serve_with(*tls.signed_certificate(tmp_path, stem, stem, names, dc1.ca_cert, ca_key))
        try:
            client = ArtemisManagement(stem, f"https://127.0.0.1:{server.server_port}", "admin", "x",
                                       ca_path=dc1.ca_cert)
            if accepted:
                assert client.read(broker_mbean(stem), "Started") is True
            else:
                with pytest.raises(ManagementError, match="certificate verify failed"):
                    client.read(broker_mbean(stem), "Started")
        finally:
            server.shutdown()


def test_jolokia_answers_only_its_own_exact_origin(estate):
    dc1 = estate.dc("dc1")
    origin = dc1.management_url.split("/console")[0]
    context = ssl.create_default_context(cafile=dc1.ca_cert)

    def status_from(claimed_origin):
        request = urllib.request.Request(dc1.management_url, method="POST", data=json.dumps(
            {"type": "read", "mbean": broker_mbean(dc1.name), "attribute": "Started"}).encode(), headers={
                "Content-Type": "application/json", "Origin": claimed_origin,
                "Authorization": "Basic " + base64.b64encode(
                    f"{dc1.admin_user}:{dc1.admin_password}".encode()).decode()})
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                return json.loads(response.read())["status"]
        except urllib.error.HTTPError as exc:
            return exc.code

    assert status_from(origin) == 200
    # A prefix pattern would have let this one in.
    assert status_from(f"{origin}.attacker.example") == 403
    assert status_from(f"https://{dc1.address}.attacker.example:8161") == 403
