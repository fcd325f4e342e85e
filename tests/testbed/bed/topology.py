"""The shape of the simulated datacentres: a Node (datacentre k, node i) and what follows from its numbers, its name,
address, network namespace, disk and its datacentre's shared directory, the datacentres' subnets and the Toxiproxy
listener (port and proxy name) that stands for a node's broker port across the WAN.
"""
from dataclasses import dataclass

from .config import NODES_DIR, SHARED_DIR


@dataclass(frozen=True)
class Node:
    k: int  # datacentre number
    i: int  # node number inside the datacentre

    @property
    def name(self):
        return f"dc{self.k}-node{self.i}"

    @property
    def dc(self):
        return f"dc{self.k}"

    @property
    def address(self):
        return f"10.201.{self.k}.{10 + self.i}"

    @property
    def ns(self):
        return f"ctb-{self.name}"

    @property
    def dir(self):
        return NODES_DIR / self.name

    @property
    def shared_dir(self):
        """One directory per DC, mounted at /mnt on each of its nodes: the stand-in for a replicated block device
        that a shared-store HA pair keeps its journal on."""
        return SHARED_DIR / self.dc


def dc_subnet(k):
    return f"10.201.{k}.0/24"


def make_nodes(dcs, per_dc):
    return [Node(k, i) for k in range(1, dcs + 1) for i in range(1, per_dc + 1)]


def proxy_port(node, j):
    return 30000 + 100 * node.k + 10 * node.i + j


def proxy_name(node, port):
    return f"{node.name}-{port}"
