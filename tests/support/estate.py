"""The estate under test as the test bed describes it (`testbed status --json`), and playbook runs against it."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import time

import yaml

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import ArtemisManagement
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTBED = os.path.join(REPO_ROOT, "tests", "testbed", "testbed")
TESTBED_INVENTORY = os.path.join(REPO_ROOT, "inventories", "testbed")
TIMINGS_FILE = os.path.join(REPO_ROOT, "tests", "output", "timings.json")
TESTBED_STATE_DIR = os.environ.get("TESTBED_STATE_DIR") or "/var/lib/continuity-testbed"
CONTROLLER = "10.201.0.1"  # the test bed's controller address, reachable from every node


def artemis_cli() -> str:
    """The Artemis command-line client of the distribution the tests use."""
    return os.path.join(os.environ["ARTEMIS_HOME"], "bin", "artemis")


def cli_message_count(url: str, user: str, password: str, queue: str) -> int:
    """MESSAGE_COUNT of a queue as `artemis queue stat` reports it (0 when the queue does not exist)."""
    stat = subprocess.run([artemis_cli(), "queue", "stat", "--url", url, "--user", user, "--password", password,
                           "--queueName", queue], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
                          check=True)
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in stat.stdout.splitlines() if line.strip().startswith("|")]
    # The header takes two rows: |MESSAGE| over | COUNT |.
    header = [" ".join(part for part in column if part) for column in zip(rows[0], rows[1])]
    counts = [int(row[header.index("MESSAGE COUNT")]) for row in rows[2:] if row[header.index("NAME")] == queue]
    return counts[0] if counts else 0


@dataclasses.dataclass
class PlaybookResult:
    rc: int
    output: str

    def changed_tasks(self) -> list[str]:
        """'task name: host' for every task that reported a change (to say what a run that should change nothing
        changed)."""
        changed, task = [], None
        for line in self.output.splitlines():
            match = re.match(r"^TASK \[(.*)\]", line)
            if match:
                task = match.group(1)
            match = re.match(r"^changed: \[([^\]]+)\]", line)
            if match and task:
                changed.append(f"{task}: {match.group(1)}")
        return changed

    def rolling_restarts(self) -> list[dict]:
        """What playbooks/rolling_restart.yml says it restarted, broker by broker, in order (its summary task's
        message); [] when nothing needed a restart. The last rolling restart of the run."""
        passes = self.rolling_restart_passes()
        assert passes, "no rolling restart in this run"
        return passes[-1]

    def rolling_restart_passes(self) -> list[list[dict]]:
        """What each rolling restart of the run restarted (a playbook that imports site.yml several times)."""
        passes = []
        for summary in self.output.split("TASK [Summarise what was restarted, in order]")[1:]:
            # This task's own output only: up to the next task or play (a pass that restarted nothing may print no
            # message at all, and another task's must not be taken for it).
            task = re.split(r"^(?:TASK|PLAY|RUNNING HANDLER) \[|^PLAY RECAP", summary, maxsplit=1, flags=re.M)[0]
            found = re.search(r"^([ \t]*)msg:", task, flags=re.M)
            if not found:
                passes.append([])
                continue
            block = [task[found.start():].splitlines()[0]]
            for line in task[found.start():].splitlines()[1:]:
                indent = len(line) - len(line.lstrip())
                if line.strip() and (indent < len(found.group(1))
                                     or indent == len(found.group(1)) and not line.lstrip().startswith("- ")):
                    break
                block.append(line)
            message = yaml.safe_load("\n".join(line[len(found.group(1)):] for line in block))["msg"]
            passes.append(message if isinstance(message, list) else [])
        return passes

    def recap(self) -> dict[str, dict[str, int]]:
        """Per host counters of the PLAY RECAP (ok, changed, failed, ...)."""
        hosts = {}
        for line in self.output.split("PLAY RECAP")[-1].splitlines():
            match = re.match(r"^(\S+)\s+:\s+(.*)$", line.strip())
            if match:
                hosts[match.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", match.group(2))}
        return hosts


SHARED_STORE_DATA = "/mnt/artemis-data"  # the test bed mounts one directory per datacentre at /mnt


def layout_inventory(directory, layout, extra: dict | None = None, per_datacentre: dict | None = None) -> str:
    """A copy of the test bed's inventory in ``directory`` with ``layout`` (one for every datacentre, or
    {datacentre: layout}; shared_store: the journal on the directory the test bed shares per datacentre), ``extra``
    variables for every host and ``per_datacentre`` ({datacentre: variables}) for some."""
    target = os.path.join(str(directory), f"inventory-{layout if isinstance(layout, str) else 'mixed'}")
    shutil.copytree(TESTBED_INVENTORY, target)
    set_layout_vars(target, layout, extra, per_datacentre)
    return target


def set_layout_vars(inventory: str, layout, extra: dict | None = None, per_datacentre: dict | None = None) -> None:
    """(Re)write the datacentres' group_vars of a layout inventory (``layout``: one for dc1 and dc2, the datacentres
    of the layout beds, or {datacentre: layout}). They are where ``extra`` goes: a datacentre's group outranks every
    file of group_vars/all, where a same-named test bed setting would win by file order."""
    layouts = layout if isinstance(layout, dict) else {"dc1": layout, "dc2": layout}
    for dc, dc_layout in layouts.items():
        dc_vars = {"replication_layout": dc_layout, **(extra or {}), **(per_datacentre or {}).get(dc, {})}
        if dc_layout == "shared_store":
            dc_vars["broker_data_dir"] = SHARED_STORE_DATA
        with open(os.path.join(inventory, "group_vars", f"{dc}.yml"), "w") as handle:
            yaml.safe_dump(dc_vars, handle)


def broker_role_default(name: str):
    """A variable's default in the broker role (roles/broker/defaults/main.yml)."""
    with open(os.path.join(REPO_ROOT, "roles", "broker", "defaults", "main.yml")) as handle:
        return yaml.safe_load(handle)[name]


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
    """Every password in the test bed's generated secrets file and every private key of its PKI (a few lines of
    each), to check that none leaks into output."""
    with open(os.path.join(TESTBED_INVENTORY, "group_vars", "all", "secrets.yml")) as handle:
        values = yaml.safe_load(handle)
    found = []
    for value in values.values():
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):  # testbed_ldap_passwords: directory user -> password
            found += list(value.values())
        else:
            found += [user["password"] for user in value]
    pki = os.path.join(TESTBED_STATE_DIR, "pki")
    for name in sorted(os.listdir(pki)) if os.path.isdir(pki) else []:
        if name.endswith(".key"):
            with open(os.path.join(pki, name)) as handle:
                found += [line for line in handle.read().splitlines()[1:-1] if len(line) > 40][:3]
    return found


@dataclasses.dataclass
class Node:
    """A test-bed host and its broker. ``user`` is the application user (AMQP); the management API is used as the
    administrator through the collection's own client, verifying the estate's CA."""
    name: str
    dc: str
    address: str
    amqp_url: str
    core_url: str
    management_url: str
    ca_cert: str
    user: str
    password: str = dataclasses.field(repr=False)
    admin_user: str = "admin"
    admin_password: str = dataclasses.field(default="", repr=False)
    monitor_user: str = "monitor"
    monitor_password: str = dataclasses.field(default="", repr=False)
    metrics_url: str = ""

    def management(self, user: str | None = None, password: str | None = None, timeout: int = 10,
                   ca_path: str | None = None) -> ArtemisManagement:
        """The collection's management client for this broker (as the administrator unless told otherwise)."""
        return ArtemisManagement(self.name, self.management_url, user or self.admin_user,
                                 password if password is not None else self.admin_password, timeout=timeout,
                                 ca_path=ca_path or self.ca_cert)

    def queue_names(self) -> list[str]:
        return self.management().queue_names()

    def message_count(self, queue: str) -> int:
        return self.management().message_count(queue, queue)

    def link(self, name: str) -> dict:
        """A mirror connection of this broker as the collection reports it: connected, backlog, ..."""
        return next(link for link in broker_report(self.management())["links"] if link["name"] == name)


def _status(node: Node) -> dict | None:
    try:
        return node.management(timeout=5).status()
    except Exception:  # noqa: BLE001 - not answering (yet)
        return None


@dataclasses.dataclass
class Estate:
    nodes: list[Node]
    inventory: str = TESTBED_INVENTORY

    @classmethod
    def from_testbed(cls, inventory: str = TESTBED_INVENTORY) -> "Estate":
        status = json.loads(subprocess.run([TESTBED, "status", "--json"], check=True, capture_output=True,
                                           text=True).stdout)
        return cls([Node(n["name"], n["dc"], n["address"], n["amqp_url"], n["core_url"], n["management_url"],
                         n["ca_cert"], n["credentials"]["user"], n["credentials"]["password"],
                         n["management_credentials"]["user"], n["management_credentials"]["password"],
                         n["monitor_credentials"]["user"], n["monitor_credentials"]["password"],
                         n["metrics_url"])
                    for n in status], inventory)

    def dc(self, name: str) -> Node:
        """The first node of a datacentre."""
        return next(node for node in self.nodes if node.dc == name)

    def passive(self, active: str = "dc1") -> list[Node]:
        """The first node of every datacentre but the active one (the test bed makes dc1 active)."""
        return [self.dc(name) for name in sorted({node.dc for node in self.nodes} - {active})]

    def inventory_vars(self) -> dict:
        """The variables of the estate's inventory for every host (group_vars/all/estate.yml and testbed.yml)."""
        merged = {}
        for name in ("estate.yml", "testbed.yml"):
            with open(os.path.join(self.inventory, "group_vars", "all", name)) as handle:
                merged.update(yaml.safe_load(handle) or {})
        return merged

    def exec(self, node: str, *command: str) -> str:
        return subprocess.run([TESTBED, "exec", node, "--", *command], check=True, capture_output=True,
                              text=True).stdout

    def management_args(self, nodes: list[Node] | None = None) -> dict:
        """The brokers and credentials arguments of the collection's management modules (as the administrator)."""
        nodes = nodes or self.nodes
        return {"brokers": [{"name": node.name, "datacentre": node.dc, "management_url": node.management_url}
                            for node in nodes],
                "management_user": nodes[0].admin_user, "management_password": nodes[0].admin_password,
                "ca_path": nodes[0].ca_cert}

    def site_args(self, datacentre: str, state: str) -> dict:
        """The arguments of artemis_site for the test bed's address groups, as the operation playbooks give them."""
        inventory = self.inventory_vars()
        return dict(self.management_args(), datacentre=datacentre, state=state,
                    address_groups=inventory["replication_address_groups"], roles=inventory["broker_roles"],
                    address_settings=inventory.get("broker_address_settings", broker_role_default(
                        "broker_address_settings")),
                    exempt_users=["replicator", "cluster"], exempt_ports=[5673])

    def pair_in_sync(self, dc: str, timeout: float = 240) -> tuple[Node, Node]:
        """(live, backup) of ``dc``'s pair once one is live and the other is its backup in sync."""
        deadline = time.monotonic() + timeout
        while True:
            pair = [node for node in self.nodes if node.dc == dc]
            statuses = [_status(node) for node in pair]
            if all(statuses) and all(status["replica_sync"] for status in statuses):
                live = [node for node, status in zip(pair, statuses) if status["live"]]
                backup = [node for node, status in zip(pair, statuses) if status["backup"]]
                if len(live) == len(backup) == 1:
                    return live[0], backup[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"{dc}'s pair not live and in sync after {timeout} s: {statuses}")
            time.sleep(1)

    def broker_pids(self, node: Node) -> list[str]:
        """Pids of the node's broker JVM (empty when it is not running)."""
        return self._broker_processes(node.name, "pgrep").stdout.split()

    def signal_broker(self, node_name: str, signal_name: str) -> subprocess.CompletedProcess:
        """Send ``signal_name`` (STOP, CONT) to the node's broker JVM; pkill's exit status 1: no broker runs there."""
        return self._broker_processes(node_name, "pkill", f"-{signal_name}")

    @staticmethod
    def _broker_processes(node_name: str, command: str, *options: str) -> subprocess.CompletedProcess:
        # "--": the pattern begins with a dash, which pgrep and pkill would otherwise take for an option.
        return subprocess.run([TESTBED, "exec", node_name, "--", command, *options, "-f", "--",
                               f"-Dartemis.instance=/var/opt/artemis/{node_name} "],
                              check=False, capture_output=True, text=True, timeout=120)

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
