"""The network: the router namespace (ctb-wan) cabled to the root namespace, one bridge per datacentre in it, each
node's namespace plugged into its datacentre's bridge, the router's iptables ruleset (inter-DC broker ports DNATed to
Toxiproxy) and the root namespace's guard chains, and the faults (partitions, loss) rewritten into the router's chains
from the state.
"""
import ipaddress
import json
import os

from .config import (
    CONTROLLER_IP, LDAP_PORT, ROOT_VETH, ROUTER_IP, ROUTER_NS, ROUTER_UPLINK, SUPERNET, TOXI_PORT, WAN_PORTS,
    ZOOKEEPER_PORT, TestbedError,
)
from .helpers import nodes_of, sh
from .topology import dc_subnet, proxy_port


def check_address_plan():
    """Refuses to start when 10.201.0.0/16 is already used on this machine."""
    routes = json.loads(sh("ip", "-j", "-4", "route", "show", "table", "all", capture=True).stdout or "[]")
    for r in routes:
        dst = r.get("dst", "default")
        if dst != "default" and ipaddress.ip_network(dst, strict=False).overlaps(SUPERNET):
            raise TestbedError(f"route {dst} ({r.get('dev')}) overlaps the test bed's {SUPERNET}")
    for link in json.loads(sh("ip", "-j", "-4", "addr", "show", capture=True).stdout or "[]"):
        for a in link.get("addr_info", []):
            net = ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}").network
            if net.overlaps(SUPERNET):
                raise TestbedError(f"address {a['local']} on {link['ifname']} overlaps {SUPERNET}")


def leftovers():
    found = [f"netns {n}" for n in sorted(os.listdir("/run/netns")) if n.startswith("ctb-")] \
        if os.path.isdir("/run/netns") else []
    if sh("ip", "link", "show", ROOT_VETH, check=False, capture=True).returncode == 0:
        found.append(f"link {ROOT_VETH}")
    return found


def build_network(state):
    nodes, dcs = nodes_of(state), range(1, state["dcs"] + 1)
    sh("ip", "netns", "add", ROUTER_NS)
    sh("ip", "-n", ROUTER_NS, "link", "set", "lo", "up")
    # The router forwards between test bed subnets only: it has no default route.
    sh("sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.disable_ipv6=1",
       "net.ipv6.conf.default.disable_ipv6=1", ns=ROUTER_NS)
    # Same-DC traffic crosses a bridge: keep it out of the router's iptables (no faults inside a DC).
    sh("sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=0", ns=ROUTER_NS, check=False)

    sh("ip", "link", "add", ROOT_VETH, "type", "veth", "peer", "name", ROUTER_UPLINK, "netns", ROUTER_NS)
    sh("sysctl", "-qw", f"net.ipv6.conf.{ROOT_VETH}.disable_ipv6=1")
    sh("ip", "addr", "add", f"{CONTROLLER_IP}/30", "dev", ROOT_VETH)
    sh("ip", "link", "set", ROOT_VETH, "up")
    sh("ip", "-n", ROUTER_NS, "addr", "add", f"{ROUTER_IP}/30", "dev", ROUTER_UPLINK)
    sh("ip", "-n", ROUTER_NS, "link", "set", ROUTER_UPLINK, "up")
    sh("ip", "route", "add", str(SUPERNET), "via", ROUTER_IP, "dev", ROOT_VETH)
    host_rules(add=True)

    for k in dcs:
        sh("ip", "-n", ROUTER_NS, "link", "add", f"br-dc{k}", "type", "bridge")
        # A fixed MAC: a bridge otherwise takes the lowest MAC of its ports, which changes when a
        # stopped node's port is re-created, and the other nodes' ARP entries for the gateway go stale.
        sh("ip", "-n", ROUTER_NS, "link", "set", f"br-dc{k}", "address", f"02:00:0a:c9:{k:02x}:01")
        sh("ip", "-n", ROUTER_NS, "addr", "add", f"10.201.{k}.1/24", "dev", f"br-dc{k}")
        sh("ip", "-n", ROUTER_NS, "link", "set", f"br-dc{k}", "up")
    for node in nodes:
        plug_node(node)
    sh("iptables-restore", ns=ROUTER_NS, input=router_ruleset(nodes, dcs))


def router_port(node):
    return f"dc{node.k}n{node.i}"


def plug_node(node):
    """Creates the node's network namespace and cables it to its DC's bridge."""
    sh("ip", "netns", "add", node.ns)
    sh("ip", "-n", ROUTER_NS, "link", "add", router_port(node), "type", "veth", "peer", "name", "eth0",
       "netns", node.ns)
    sh("ip", "-n", ROUTER_NS, "link", "set", router_port(node), "master", f"br-dc{node.k}", "up")
    sh("ip", "-n", node.ns, "link", "set", "lo", "up")
    # Same MAC after every start-node, so that neighbours' ARP caches stay right.
    sh("ip", "-n", node.ns, "link", "set", "eth0", "address", f"02:00:0a:c9:{node.k:02x}:{10 + node.i:02x}")
    sh("ip", "-n", node.ns, "addr", "add", f"{node.address}/24", "dev", "eth0")
    sh("ip", "-n", node.ns, "link", "set", "eth0", "up")
    sh("ip", "-n", node.ns, "route", "add", "default", "via", f"10.201.{node.k}.1")


def unplug_node(node):
    """Removes the node's network namespace: its kernel state (sockets, conntrack) goes with it."""
    sh("ip", "-n", ROUTER_NS, "link", "del", router_port(node), check=False, capture=True)
    sh("ip", "netns", "del", node.ns, check=False, capture=True)


def router_ruleset(nodes, dcs):
    r = ["*filter", ":INPUT DROP [0:0]", ":FORWARD DROP [0:0]", ":OUTPUT ACCEPT [0:0]",
         ":CTB-FAULTS - [0:0]", ":CTB-PART - [0:0]", ":CTB-LOSS - [0:0]",
         "-A CTB-FAULTS -j CTB-PART", "-A CTB-FAULTS -j CTB-LOSS",
         # Faults first, in all three chains: forwarded flows pass FORWARD, proxied flows pass
         # INPUT (client -> Toxiproxy) and OUTPUT (Toxiproxy -> client).
         "-A INPUT -j CTB-FAULTS", "-A FORWARD -j CTB-FAULTS", "-A OUTPUT -j CTB-FAULTS",
         "-A INPUT -i lo -j ACCEPT",
         "-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
         "-A INPUT -m conntrack --ctstate DNAT -j ACCEPT",
         f"-A INPUT -s {CONTROLLER_IP} -d {ROUTER_IP} -p tcp --dport {TOXI_PORT} -j ACCEPT",
         f"-A INPUT -s {SUPERNET} -d {ROUTER_IP} -p tcp --dport {ZOOKEEPER_PORT} -j ACCEPT",
         f"-A INPUT -s {SUPERNET} -d {ROUTER_IP} -p tcp --dport {LDAP_PORT} -j ACCEPT",
         "-A INPUT -p icmp -j ACCEPT",
         f"-A FORWARD -s {SUPERNET} -d {SUPERNET} -j ACCEPT",
         "COMMIT",
         "*nat", ":PREROUTING ACCEPT [0:0]", ":INPUT ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]",
         ":POSTROUTING ACCEPT [0:0]"]
    for node in nodes:
        for j, port in enumerate(WAN_PORTS):
            for k in dcs:
                if k != node.k:
                    r.append(f"-A PREROUTING -s {dc_subnet(k)} -d {node.address} -p tcp --dport {port} "
                             f"-j DNAT --to-destination {ROUTER_IP}:{proxy_port(node, j)}")
    r.append("COMMIT")
    return "\n".join(r) + "\n"


def host_rules(add):
    """Root-namespace guard: the host never forwards test bed traffic, nodes reach only the controller."""
    def ipt(*a, check=True):
        return sh("iptables", "-w", *a, check=check, capture=True)

    if add:
        ipt("-N", "CTB-FWD")
        ipt("-A", "CTB-FWD", "-s", SUPERNET, "-j", "DROP")
        ipt("-A", "CTB-FWD", "-d", SUPERNET, "-j", "DROP")
        ipt("-I", "FORWARD", "1", "-j", "CTB-FWD")
        ipt("-N", "CTB-IN")
        ipt("-A", "CTB-IN", "-d", CONTROLLER_IP, "-j", "RETURN")
        ipt("-A", "CTB-IN", "-j", "DROP")
        ipt("-I", "INPUT", "1", "-i", ROOT_VETH, "-j", "CTB-IN")
        return
    while ipt("-D", "FORWARD", "-j", "CTB-FWD", check=False).returncode == 0:
        pass
    while ipt("-D", "INPUT", "-i", ROOT_VETH, "-j", "CTB-IN", check=False).returncode == 0:
        pass
    for chain in ("CTB-FWD", "CTB-IN"):
        ipt("-F", chain, check=False)
        ipt("-X", chain, check=False)


def apply_faults(state):
    """Rewrites the router's partition and loss chains from the state (atomically)."""
    dcs = range(1, state["dcs"] + 1)
    r = ["*filter", "-F CTB-PART", "-F CTB-LOSS"]
    # Matching the connection's original tuple catches both directions, established connections,
    # and connections redirected to Toxiproxy (whose original destination is the remote node).
    for a, b in state["partitions"]:
        for x, y in ((a, b), (b, a)):
            r.append(f"-A CTB-PART -m conntrack --ctorigsrc {dc_subnet(x)} --ctorigdst {dc_subnet(y)} -j DROP")
    loss = state["wan"]["loss_pct"]
    if loss > 0:
        for x in dcs:
            for y in dcs:
                if x != y:
                    r.append(f"-A CTB-LOSS -m conntrack --ctorigsrc {dc_subnet(x)} --ctorigdst {dc_subnet(y)} "
                             f"-m statistic --mode random --probability {loss / 100:.6f} -j DROP")
    r.append("COMMIT")
    sh("iptables-restore", "--noflush", ns=ROUTER_NS, input="\n".join(r) + "\n")
