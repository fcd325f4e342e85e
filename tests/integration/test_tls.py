"""Cross-site links are TLS: message bodies cannot be read on the WAN, and a peer whose certificate the CA did
not sign is refused."""

import re
import shutil
import subprocess
import time
import uuid

import yaml

from support import amqp
from support.estate import TESTBED_INVENTORY, run_playbook

WAN_ROUTER = "ctb-wan"  # the test bed's router namespace; br-dc2 is its leg towards dc2


def test_message_bodies_are_not_readable_on_the_wan(estate, tmp_path):
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue, marker = f"tls.{uuid.uuid4().hex[:8]}", f"readable-on-the-wan-{uuid.uuid4().hex}"
    capture = tmp_path / "wan.pcap"
    tcpdump = subprocess.Popen(["ip", "netns", "exec", WAN_ROUTER, "tcpdump", "-i", "br-dc2", "-U", "-w",
                                str(capture), "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, [marker] * 20)
        amqp.wait_for(lambda: amqp.queue_message_count(dc2.management_url, dc2.user, dc2.password, dc2.name,
                                                       queue), lambda count: count == 20, timeout=60)
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


def test_a_peer_with_a_certificate_from_another_ca_is_refused(converged_back, tmp_path):
    estate = converged_back
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    inventory = tmp_path / "inventory"
    shutil.copytree(TESTBED_INVENTORY, inventory)
    (inventory / "host_vars").mkdir()
    with open(inventory / "host_vars" / f"{dc2.name}.yml", "w") as handle:
        yaml.safe_dump({"replication_tls_pki_dir": str(tmp_path / "rogue-pki")}, handle)
    result = run_playbook("site.yml", inventory=str(inventory))
    assert result.rc == 0, result.output[-4000:]

    queue = f"tls.{uuid.uuid4().hex[:8]}"
    amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 10)
    time.sleep(15)
    assert not amqp.broker_connection_connected(dc1.management_url, dc1.user, dc1.password, dc1.name, "dc2_all")
    assert queue not in amqp.queue_names(dc2.management_url, dc2.user, dc2.password, dc2.name)
    assert amqp.mirror_backlog(dc1.management_url, dc1.user, dc1.password, dc1.name, "dc2_all") > 0
