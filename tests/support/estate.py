"""The estate under test as the test bed describes it (`testbed status --json`), and playbook runs against it."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess

import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTBED = os.path.join(REPO_ROOT, "tests", "testbed", "testbed")
TESTBED_INVENTORY = os.path.join(REPO_ROOT, "inventories", "testbed")
TIMINGS_FILE = os.path.join(REPO_ROOT, "tests", "output", "timings.json")


@dataclasses.dataclass
class PlaybookResult:
    rc: int
    output: str

    def recap(self) -> dict[str, dict[str, int]]:
        """Per host counters of the PLAY RECAP (ok, changed, failed, ...)."""
        hosts = {}
        for line in self.output.split("PLAY RECAP")[-1].splitlines():
            match = re.match(r"^(\S+)\s+:\s+(.*)$", line.strip())
            if match:
                hosts[match.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", match.group(2))}
        return hosts


def run_playbook(playbook: str, inventory: str = TESTBED_INVENTORY, extra_args: list[str] | None = None,
                 timeout: int = 1500) -> PlaybookResult:
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run(["ansible-playbook", "-i", inventory, playbook, *(extra_args or [])], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)
    return PlaybookResult(proc.returncode, proc.stdout + proc.stderr)


def run_module(module: str, arguments: dict, timeout: int = 600, check_mode: bool = False,
               collection: str = "continuity.artemis") -> tuple[dict, str]:
    """Run a module (by default one of this collection's) on the controller, as a playbook task would; returns
    (result, output)."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    proc = subprocess.run(["ansible", "localhost", "-m", f"{collection}.{module}", "-a", json.dumps(arguments),
                           *(["--check", "--diff"] if check_mode else [])],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    output = proc.stdout + proc.stderr
    try:
        result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    except (ValueError, KeyError, IndexError):
        raise AssertionError(f"no module result in the output:\n{output[-3000:]}") from None
    return result, output


def generated_secrets() -> list[str]:
    """Every password in the test bed's generated secrets file, to check that none leaks into output."""
    with open(os.path.join(TESTBED_INVENTORY, "group_vars", "all", "secrets.yml")) as handle:
        values = yaml.safe_load(handle)
    found = []
    for value in values.values():
        found += [value] if isinstance(value, str) else [user["password"] for user in value]
    return found


@dataclasses.dataclass
class Node:
    name: str
    dc: str
    address: str
    amqp_url: str
    core_url: str
    management_url: str
    user: str
    password: str = dataclasses.field(repr=False)


@dataclasses.dataclass
class Estate:
    nodes: list[Node]

    @classmethod
    def from_testbed(cls) -> "Estate":
        status = json.loads(subprocess.run([TESTBED, "status", "--json"], check=True, capture_output=True,
                                           text=True).stdout)
        return cls([Node(n["name"], n["dc"], n["address"], n["amqp_url"], n["core_url"], n["management_url"],
                         n["credentials"]["user"], n["credentials"]["password"]) for n in status])

    def dc(self, name: str) -> Node:
        """The first node of a datacentre."""
        return next(node for node in self.nodes if node.dc == name)

    def passive(self, active: str = "dc1") -> list[Node]:
        """The first node of every datacentre but the active one (the test bed makes dc1 active)."""
        return [self.dc(name) for name in sorted({node.dc for node in self.nodes} - {active})]

    @staticmethod
    def inventory_vars() -> dict:
        """The committed variables of the test bed's inventory (group_vars/all/estate.yml)."""
        with open(os.path.join(TESTBED_INVENTORY, "group_vars", "all", "estate.yml")) as handle:
            return yaml.safe_load(handle)

    def exec(self, node: str, *command: str) -> str:
        return subprocess.run([TESTBED, "exec", node, "--", *command], check=True, capture_output=True,
                              text=True).stdout

    def management_args(self, nodes: list[Node] | None = None) -> dict:
        """The brokers and credentials arguments of the collection's management modules."""
        nodes = nodes or self.nodes
        return {"brokers": [{"name": node.name, "datacentre": node.dc, "management_url": node.management_url}
                            for node in nodes],
                "management_user": nodes[0].user, "management_password": nodes[0].password}

    def site_args(self, datacentre: str, state: str) -> dict:
        """The arguments of artemis_site for the test bed's address groups, as the operation playbooks give them."""
        inventory = self.inventory_vars()
        return dict(self.management_args(), datacentre=datacentre, state=state,
                    address_groups=inventory["replication_address_groups"], roles=inventory["broker_roles"],
                    exempt_users=["replicator", "cluster"])

    def broker_pids(self, node: Node) -> list[str]:
        """Pids of the node's broker JVM (empty when it is not running)."""
        result = subprocess.run([TESTBED, "exec", node.name, "--", "pgrep", "-f", "--",
                                 f"-Dartemis.instance=/var/opt/artemis/{node.name} "],
                                check=False, capture_output=True, text=True)
        return result.stdout.split()

    @staticmethod
    def testbed(*args: str) -> None:
        subprocess.run([TESTBED, *args], check=True, capture_output=True, text=True)

    @staticmethod
    def record_timing(name: str, value: float) -> None:
        """Timings and counts go to tests/output/timings.json for the benchmark notes; tests never assert on them."""
        os.makedirs(os.path.dirname(TIMINGS_FILE), exist_ok=True)
        timings = {}
        if os.path.exists(TIMINGS_FILE):
            with open(TIMINGS_FILE) as handle:
                timings = json.load(handle)
        mode = "systemd" if os.environ.get("TESTBED_SYSTEMD") == "1" else "plain"
        timings[f"{mode}.{name}"] = round(value, 3)
        with open(TIMINGS_FILE, "w") as handle:
            json.dump(timings, handle, indent=2, sort_keys=True)
