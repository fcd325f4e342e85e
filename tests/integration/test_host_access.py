"""The host's firewall: on the systemd bed firewalld runs on every node (`up --firewalld`, its default zone letting in
SSH alone) and the broker role opens exactly the ports its broker listens on; the whole systemd pass runs through it."""

import socket

import pytest

from support import amqp_clients as amqp

PROBE_PORT = 9999  # nothing of the broker's: firewalld must keep it closed


def _broker_listening_ports(estate, node):
    """The TCP ports the node's broker JVM listens on."""
    pid = estate.broker_pids(node)[0]
    lines = estate.exec(node.name, "ss", "-Hltnp").splitlines()
    return {int(line.split()[3].rsplit(":", 1)[1]) for line in lines if f"pid={pid}," in line}


@pytest.mark.systemd
def test_firewalld_opens_the_brokers_ports_and_nothing_else(estate):
    for node in estate.nodes:
        assert estate.exec(node.name, "firewall-cmd", "--state").strip() == "running", node.name
        listening = _broker_listening_ports(estate, node)
        assert len(listening) >= 3, f"{node.name}: the broker listens on {listening}"
        wanted = sorted(f"{port}/tcp" for port in listening)
        for scope in ([], ["--permanent"]):
            opened = sorted(estate.exec(node.name, "firewall-cmd", *scope, "--list-ports").split())
            assert opened == wanted, f"{node.name} {scope}: opened {opened}, the broker listens on {wanted}"

    node = estate.nodes[0]
    estate.exec(node.name, "sh", "-c", f"setsid python3 -m http.server {PROBE_PORT} >/dev/null 2>&1 < /dev/null &")
    try:
        amqp.wait_for(lambda: estate.exec(node.name, "ss", "-Hltn", f"sport = :{PROBE_PORT}").strip(), timeout=30,
                      description=f"a listener on {node.name}:{PROBE_PORT}")
        with pytest.raises(OSError):
            socket.create_connection((node.address, PROBE_PORT), timeout=3).close()
    finally:
        estate.exec(node.name, "pkill", "-f", f"http.server {PROBE_PORT}")
