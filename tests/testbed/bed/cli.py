"""The command line: one cmd_* function per subcommand (up, down, status, partition, heal, wan, kill, cpus,
stop-node, start-node, exec, ldap and the internal _node-init), the teardown that `down` and a failed `up` share, the
`status --json` entries, and main(), which parses the arguments and reports a TestbedError as `testbed: <message>`.
"""
import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from .config import (
    DEFAULT_INVENTORY, LDAP_DIR, LDAP_PORT, LOG_DIR, NODES_DIR, NODE_PATH, PKI_DIR, ROOT_VETH, ROUTER_IP, ROUTER_NS,
    SHARED_DIR, STATE_DIR, STATE_FILE, SUPERNET, ZOOKEEPER_PORT, TestbedError,
)
from .helpers import Lock, find_node, load_state, nodes_of, require_up, save_state, sh
from .inventory import load_vars, remove_inventory, write_inventory
from .network import apply_faults, build_network, check_address_plan, host_rules, leftovers
from .power import node_init, remove_cgroups, start_node, stop_node
from .processes import (
    broker_pids, kill_and_wait, netns_inode, node_leader, nspawn_pids, procs_in_netns, ssh_answers, wait_ssh,
)
from .rootfs import create_plain_disk, create_systemd_disk, ensure_base, ensure_ssh_key
from .services import ldap_pids, ldap_start, prepare_ldap, start_ldap, start_zookeeper
from .toxiproxy import apply_latency, start_toxiproxy, toxiproxy_binary


def cmd_up(args):
    mode = "systemd" if args.systemd else "plain"
    shape = {"dcs": args.dcs, "nodes_per_dc": args.nodes_per_dc, "mode": mode, "zookeeper": args.zookeeper,
             "metrics": args.metrics, "ldap": args.ldap, "firewalld": args.firewalld}
    if args.firewalld and not args.systemd:
        raise TestbedError("--firewalld needs --systemd (plain nodes share this machine's /etc and services)")
    inv = Path(args.inventory_dir).resolve() if args.inventory_dir else DEFAULT_INVENTORY
    with Lock():
        state = load_state()
        stale = state and stale_reason(state)
        if stale:
            print(f"testbed: the test bed recorded in {STATE_FILE} is unusable ({stale}); removing it and "
                  f"building a new one", file=sys.stderr)
            teardown()
            state = None
        if state:
            old = {k: state.get(k, False) for k in shape}
            if old != shape:
                raise TestbedError(f"already up with a different shape ({describe(old)}); "
                                   f"run `testbed down` first")
            write_inventory(inv, state)
            if str(inv) not in state["inventory_dirs"]:
                state["inventory_dirs"].append(str(inv))
                save_state(state)
            print(f"already up ({describe(shape)})")
            return
        if leftovers():
            raise TestbedError(f"leftovers of an earlier test bed ({', '.join(leftovers())}): run `testbed down`")
        check_address_plan()
        for tool in ["ip", "iptables", "iptables-restore", "sysctl", "unshare", "nsenter", "mount", "ssh-keygen",
                     "/usr/sbin/sshd"] + (["systemd-nspawn", "debootstrap"] if args.systemd else []):
            if not shutil.which(tool):
                raise TestbedError(f"{tool} is missing (see tests/testbed/README.md for what to install)")
        toxiproxy_binary()
        t0 = time.time()
        ensure_ssh_key()
        if args.systemd:
            built = ensure_base()
            if built:
                print(f"root file system built in {built:.1f}s")
        shutil.rmtree(LOG_DIR, ignore_errors=True)
        LOG_DIR.mkdir(parents=True)
        t1 = time.time()
        state = {**shape, "phase": "building", "inventory_dirs": [str(inv)], "partitions": [],
                 "wan": {"delay_ms": 0, "jitter_ms": 0, "loss_pct": 0}}
        save_state(state)
        try:
            build_network(state)
            start_toxiproxy(state)
            if args.zookeeper:
                start_zookeeper()
            if args.ldap:
                prepare_ldap()
            nodes = nodes_of(state)
            shutil.rmtree(NODES_DIR, ignore_errors=True)
            shutil.rmtree(SHARED_DIR, ignore_errors=True)
            for node in nodes:
                if mode == "plain":
                    create_plain_disk(node, nodes)
                else:
                    create_systemd_disk(node, nodes, firewalld=args.firewalld)
                start_node(node, mode)
            wait_ssh(nodes, 60 if mode == "plain" else 180)
            write_inventory(inv, state)
            if args.ldap:
                start_ldap(inv)
        except BaseException:
            if os.environ.get("TESTBED_KEEP_ON_FAILURE"):
                print("testbed: up failed; leaving it as it is (TESTBED_KEEP_ON_FAILURE)", file=sys.stderr)
            else:
                print("testbed: up failed; cleaning up", file=sys.stderr)
                teardown()
            raise
        state["phase"] = "up"
        save_state(state)
        print(f"up: {describe(shape)} in {time.time() - t1:.1f}s (total {time.time() - t0:.1f}s); inventory {inv}")


def stale_reason(state):
    """Why a test bed recorded as up cannot be used (an `up` cut off halfway, a machine restarted under it, nodes
    killed from outside), or None. A node stopped on purpose (`stop-node`) counts too: tests need every node."""
    if state.get("phase") != "up":
        return "an earlier `up` did not finish"
    if netns_inode(ROUTER_NS) is None:
        return "its network is gone; was the machine restarted?"
    silent = [node.name for node in nodes_of(state) if not ssh_answers(node)]
    if silent:
        return f"sshd does not answer on {', '.join(silent)}"
    return None


def describe(shape):
    return (f"{shape['dcs']} DCs x {shape['nodes_per_dc']} node(s), {shape['mode']}"
            + (", ZooKeeper" if shape.get("zookeeper") else "")
            + (", broker metrics" if shape.get("metrics") else "")
            + (", LDAP" if shape.get("ldap") else "")
            + (", firewalld" if shape.get("firewalld") else ""))


def node_mounts():
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[1].startswith(f"{NODES_DIR}/")]


def teardown():
    state = load_state() or {}
    names = sorted(n for n in os.listdir("/run/netns") if n.startswith("ctb-")) \
        if os.path.isdir("/run/netns") else []
    node_dirs = sorted(p for p in NODES_DIR.iterdir() if p.is_dir()) if NODES_DIR.is_dir() else []
    # Kill first, while the network still exists: the controller's SSH connections then see them close.
    kill_and_wait([p for ns in names for p in procs_in_netns(ns)] + nspawn_pids())
    time.sleep(0.2)  # let nspawn finish exiting and release its mounts
    for d in node_dirs:
        node = d.name
        root = d / "root"
        if os.path.ismount(root):
            if sh("umount", root, check=False).returncode:
                sh("umount", "-l", root)
        shutil.rmtree(f"/run/systemd/nspawn/propagate/{node}", ignore_errors=True)
        remove_cgroups(node)
    host_rules(add=False)
    sh("ip", "route", "del", str(SUPERNET), "via", ROUTER_IP, check=False, capture=True)
    sh("ip", "link", "del", ROOT_VETH, check=False, capture=True)
    for ns in names:
        sh("ip", "netns", "del", ns, check=False)
    deadline = time.time() + 15  # namespaces (and their veths) go away asynchronously
    while time.time() < deadline and (leftovers() or node_mounts()):
        time.sleep(0.2)
    mounts = node_mounts()
    if mounts:
        raise TestbedError(f"still mounted, not removing node disks: {mounts}")
    shutil.rmtree(NODES_DIR, ignore_errors=True)
    shutil.rmtree(SHARED_DIR, ignore_errors=True)
    for inv in state.get("inventory_dirs", [str(DEFAULT_INVENTORY)]):
        remove_inventory(inv)
    (STATE_DIR / "toxiproxy.json").unlink(missing_ok=True)
    shutil.rmtree(STATE_DIR / "zookeeper", ignore_errors=True)
    shutil.rmtree(LDAP_DIR, ignore_errors=True)
    STATE_FILE.unlink(missing_ok=True)
    if leftovers():
        raise TestbedError(f"could not remove: {', '.join(leftovers())}")


def cmd_down(args):
    with Lock():
        teardown()
        if args.purge:
            shutil.rmtree(STATE_DIR / "cache", ignore_errors=True)
            shutil.rmtree(STATE_DIR / "ssh", ignore_errors=True)
            shutil.rmtree(LOG_DIR, ignore_errors=True)
            shutil.rmtree(PKI_DIR, ignore_errors=True)
    print("down")


def status_entries(state):
    creds = {"user": "app", "password": None}
    admin = {"user": "admin", "password": None}
    monitor = {"user": "monitor", "password": None}
    secrets_file = Path(state["inventory_dirs"][0]) / "group_vars" / "all" / "secrets.yml"
    if secrets_file.exists():
        secrets = load_vars(secrets_file)
        for user in secrets.get("broker_users", []):
            if user.get("name") == "app":
                creds["password"] = user.get("password")
        admin["password"] = secrets.get("broker_admin_password")
        monitor["password"] = secrets.get("broker_monitor_password")
    out = []
    for n in nodes_of(state):
        out.append({
            "name": n.name, "dc": n.dc, "address": n.address,
            # The brokers' default client acceptors, both TLS with the estate's certificates.
            "amqp_url": f"amqps://{n.address}:5671",
            "core_url": (f"tcp://{n.address}:61616?sslEnabled=true&verifyHost=true&trustStoreType=PEMCA"
                         f"&trustStorePath={PKI_DIR / 'ca.pem'}"),
            "management_url": f"https://{n.address}:8161/console/jolokia",
            "ca_cert": str(PKI_DIR / "ca.pem"),
            "metrics_url": f"https://{n.address}:9404/metrics" if state.get("metrics") else "",
            "credentials": dict(creds), "management_credentials": dict(admin), "monitor_credentials": dict(monitor),
            "running": node_leader(n) is not None, "mode": state["mode"],
            "broker_running": bool(broker_pids(n)),
        })
    return out


def cmd_status(args):
    state = load_state()
    if not state or state.get("phase") != "up":
        print("[]" if args.json else "the test bed is not up")
        return
    entries = status_entries(state)
    if args.json:
        print(json.dumps(entries, indent=2))
        return
    print(f"{describe(state)}; wan: delay {state['wan']['delay_ms']}ms (one way) jitter "
          f"{state['wan']['jitter_ms']}ms loss {state['wan']['loss_pct']}%; partitions: "
          f"{', '.join(f'dc{a}/dc{b}' for a, b in state['partitions']) or 'none'}")
    fmt = "{:<12} {:<4} {:<13} {:<8} {:<8} {}"
    print(fmt.format("NODE", "DC", "ADDRESS", "MODE", "RUNNING", "BROKER"))
    for e in entries:
        print(fmt.format(e["name"], e["dc"], e["address"], e["mode"], "yes" if e["running"] else "no",
                         "yes" if e["broker_running"] else "no"))


def cmd_partition(args):
    with Lock():
        state = require_up()
        dcs = [f"dc{k}" for k in range(1, state["dcs"] + 1)]
        a, b = args.dc_a, args.dc_b
        if a not in dcs or b not in dcs or a == b:
            raise TestbedError(f"need two different datacentres out of {', '.join(dcs)}")
        pair = sorted([int(a[2:]), int(b[2:])])
        if pair not in state["partitions"]:
            state["partitions"].append(pair)
        apply_faults(state)
        save_state(state)
    print(f"partitioned dc{pair[0]} <-> dc{pair[1]}")


def cmd_heal(args):
    with Lock():
        state = require_up()
        state["partitions"] = []
        apply_faults(state)
        save_state(state)
    print("healed")


def cmd_wan(args):
    if min(args.delay_ms, args.jitter_ms) < 0 or not 0 <= args.loss_pct <= 100:
        raise TestbedError("delay and jitter must be >= 0, loss between 0 and 100")
    with Lock():
        state = require_up()
        state["wan"] = {"delay_ms": args.delay_ms, "jitter_ms": args.jitter_ms if args.delay_ms else 0,
                        "loss_pct": args.loss_pct}
        apply_latency(state)
        apply_faults(state)
        save_state(state)
    w = state["wan"]
    print(f"wan: delay {w['delay_ms']}ms each way, jitter {w['jitter_ms']}ms, loss {w['loss_pct']}%")


def cmd_kill(args):
    state = require_up()
    node = find_node(state, args.node)
    pids = broker_pids(node)
    if not pids:
        raise TestbedError(f"no Artemis broker is running on {node.name}")
    kill_and_wait(pids)
    print(f"killed broker on {node.name}: pid {' '.join(map(str, pids))}")


def cmd_cpus(args):
    """Pins every process of a node (its broker's threads included; threads it starts later inherit the set) to the
    given CPUs, as if each datacentre had its own machine. `all` undoes it. A process started afterwards (a broker
    restarted) is not pinned: run it again."""
    state = require_up()
    node = find_node(state, args.node)
    cpus = f"0-{os.cpu_count() - 1}" if args.cpus == "all" else args.cpus
    pids = procs_in_netns(node.ns)
    if not pids:
        raise TestbedError(f"{node.name} runs no process (is it off?)")
    pinned = [pid for pid in pids  # a process that just exited is not an error
              if sh("taskset", "-a", "-cp", cpus, str(pid), check=False, capture=True).returncode == 0]
    print(f"{node.name}: {len(pinned)} processes on CPUs {cpus}")


def cmd_stop_node(args):
    with Lock():
        state = require_up()
        node = find_node(state, args.node)
        if netns_inode(node.ns) is None and not nspawn_pids(node):
            print(f"{node.name} is already off")
            return
        stop_node(node, state["mode"])
    print(f"{node.name} powered off")


def cmd_start_node(args):
    with Lock():
        state = require_up()
        node = find_node(state, args.node)
        if node_leader(node) is not None:
            print(f"{node.name} is already running")
            return
        t0 = time.time()
        start_node(node, state["mode"])
        wait_ssh([node], 60 if state["mode"] == "plain" else 180)
    print(f"{node.name} started in {time.time() - t0:.1f}s")


def cmd_exec(args):
    state = require_up()
    node = find_node(state, args.node)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise TestbedError("nothing to run: testbed exec NODE -- COMMAND...")
    leader = node_leader(node)
    if leader is None:
        raise TestbedError(f"{node.name} is not running")
    env = ["env", "-i", f"PATH={NODE_PATH}", "HOME=/root", "LANG=C.UTF-8", f"TERM={os.environ.get('TERM', 'dumb')}"]
    os.execvp("nsenter", ["nsenter", "-t", str(leader), "-m", "-u", "-i", "-n", "-p", "-r", "-w", "--",
                          *env, *command])


def cmd_ldap(args):
    state = require_up()
    if not state.get("ldap"):
        raise TestbedError("this test bed has no directory (up --ldap)")
    if args.action == "stop":
        kill_and_wait(ldap_pids())
    elif not ldap_pids():
        ldap_start()
    print(f"slapd {'running' if ldap_pids() else 'stopped'}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="testbed", description="Simulated datacentres for continuity.artemis.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("up", help="build the datacentres (idempotent)")
    s.add_argument("--dcs", type=int, default=2, choices=range(1, 10), metavar="N")
    s.add_argument("--nodes-per-dc", type=int, default=1, choices=range(1, 5), metavar="N")
    s.add_argument("--systemd", action="store_true", help="systemd-nspawn nodes booting systemd")
    s.add_argument("--zookeeper", action="store_true",
                   help=f"run ZooKeeper on the router ({ROUTER_IP}:{ZOOKEEPER_PORT}) for lock managers")
    s.add_argument("--metrics", action="store_true",
                   help="brokers serve their metrics (broker_metrics_enabled; compiled on every fresh node)")
    s.add_argument("--ldap", action="store_true",
                   help=f"run OpenLDAP on the router (ldaps://{ROUTER_IP}:{LDAP_PORT}) and log the brokers in from it")
    s.add_argument("--firewalld", action="store_true",
                   help="firewalld runs on the nodes (with --systemd) and the brokers open their ports in it")
    s.add_argument("--inventory-dir", help=f"default {DEFAULT_INVENTORY}")
    s.set_defaults(func=cmd_up)
    s = sub.add_parser("ldap", help="stop or start the directory of `up --ldap`")
    s.add_argument("action", choices=["stop", "start"])
    s.set_defaults(func=cmd_ldap)
    s = sub.add_parser("down", help="remove everything `up` made")
    s.add_argument("--purge", action="store_true", help="also remove the cached root file system and SSH key")
    s.set_defaults(func=cmd_down)
    s = sub.add_parser("status", help="nodes and their state")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_status)
    s = sub.add_parser("partition", help="black-hole all traffic between two datacentres")
    s.add_argument("dc_a")
    s.add_argument("dc_b")
    s.set_defaults(func=cmd_partition)
    sub.add_parser("heal", help="remove all partitions").set_defaults(func=cmd_heal)
    s = sub.add_parser("wan", help="delay/jitter/loss between datacentres (replaces the previous setting)")
    s.add_argument("--delay-ms", type=int, required=True, help="one-way delay, added in each direction")
    s.add_argument("--jitter-ms", type=int, default=0)
    s.add_argument("--loss-pct", type=float, default=0.0, help="packet loss per direction, in percent")
    s.set_defaults(func=cmd_wan)
    for name, func, text in (("kill", cmd_kill, "SIGKILL the Artemis broker JVM of a node"),
                             ("stop-node", cmd_stop_node, "power a node off abruptly (SIGKILL everything)"),
                             ("start-node", cmd_start_node, "boot a node again, its disk intact")):
        s = sub.add_parser(name, help=text)
        s.add_argument("node")
        s.set_defaults(func=func)
    s = sub.add_parser("cpus", help="pin a node's processes to CPUs: cpus NODE 0-1 (or all)")
    s.add_argument("node")
    s.add_argument("cpus")
    s.set_defaults(func=cmd_cpus)
    s = sub.add_parser("exec", help="run a command inside a node: exec NODE -- CMD...")
    s.add_argument("node")
    s.add_argument("command", nargs=argparse.REMAINDER)
    s.set_defaults(func=cmd_exec)
    s = sub.add_parser("_node-init")  # internal: PID 1 of a plain node
    s.add_argument("node_dir")
    s.add_argument("hostname")
    s.add_argument("shared_dir")
    s.set_defaults(func=lambda a: node_init(a.node_dir, a.hostname, a.shared_dir))
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("testbed: must run as root")
    try:
        args.func(args)
    except TestbedError as e:
        sys.exit(f"testbed: {e}")
