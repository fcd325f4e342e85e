"""Node power: starting a node (a plain node's namespaces around its init, or systemd-nspawn in cgroups of its own),
stopping it as a power loss would, and node_init, the PID 1 of a plain node, which `testbed _node-init` runs inside
the node's namespaces (it mounts the node's private directories, starts sshd and reaps orphans).
"""
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from .config import BASE_DIR, CONTROLLER_IP, NODE_PATH, PLAIN_BINDS, ROUTER_NS, SCRIPT, SHARED_MOUNT
from .helpers import sh
from .network import plug_node, unplug_node
from .processes import kill_and_wait, netns_inode, nspawn_pids, procs_in_netns, signal_all, spawn


def cgroup_dirs(name):
    """Own cgroups for each nspawn (name=systemd v1 and/or v2), so that containers do not share one."""
    dirs = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _device, mnt, fstype, opts = line.split()[:4]
        if fstype == "cgroup2" or (fstype == "cgroup" and "name=systemd" in opts.split(",")):
            dirs.append(Path(mnt) / f"ctb.{name}")
    return dirs


def remove_cgroups(name):
    for d in cgroup_dirs(name):
        if d.is_dir():
            for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [d]:
                try:
                    sub.rmdir()
                except OSError:
                    pass


def start_node(node, mode):
    if netns_inode(node.ns) is None:  # after stop-node
        plug_node(node)
        sh("ip", "-n", ROUTER_NS, "neigh", "flush", "to", node.address, check=False)
    if mode == "plain":
        tmp = node.dir / "tmp"  # /tmp is emptied at boot, as on Debian
        shutil.rmtree(tmp)
        tmp.mkdir(mode=0o1777)
        os.chmod(tmp, 0o1777)
        spawn(["ip", "netns", "exec", node.ns, "unshare", "--mount", "--uts", "--ipc", "--pid", "--fork",
               "--mount-proc", "--kill-child", "/usr/bin/python3", SCRIPT, "_node-init", node.dir, node.name,
               node.shared_dir],
              f"{node.name}.log")
        return
    root = node.dir / "root"
    if not os.path.ismount(root):
        sh("mount", "-t", "overlay", "overlay", "-o",
           f"lowerdir={BASE_DIR},upperdir={node.dir / 'upper'},workdir={node.dir / 'work'}", root)
    remove_cgroups(node.name)
    cgroups = cgroup_dirs(node.name)
    for d in cgroups:
        d.mkdir(exist_ok=True)

    def enter_cgroups():
        for d in cgroups:
            (d / "cgroup.procs").write_text(str(os.getpid()))

    # Without a host systemd: --register=no and --keep-unit (no machined, no scope). CAP_NET_ADMIN over the node's
    # own network namespace, as a host's root has it (firewalld needs it).
    spawn(["systemd-nspawn", "--quiet", "--boot", "-D", root, "-M", node.name,
           f"--network-namespace-path=/run/netns/{node.ns}", "--register=no", "--keep-unit",
           "--capability=CAP_NET_ADMIN",
           f"--bind={node.shared_dir}:{SHARED_MOUNT}",
           "--console=read-only", "--link-journal=no", "--resolv-conf=off", "--timezone=off"],
          f"{node.name}.log", preexec_fn=enter_cgroups)


def stop_node(node, mode):
    """Abrupt power-off: every process of the node stops at once, its network goes dark, then they get SIGKILL.

    Peers see what they would see of a host that lost power: silence, not FIN or RST. Only the
    controller is told (its SSH control masters would otherwise hang on a dead connection). The processes stop
    before the network goes dark: darkening takes an iptables run, a few milliseconds in which a running broker
    would go on accepting its clients' messages on the controller with its WAN already cut (a partition, then a
    crash, not a power loss).
    """
    stopped = procs_in_netns(node.ns) + nspawn_pids(node)
    signal_all(stopped, signal.SIGSTOP)
    if netns_inode(node.ns) is not None:
        sh("iptables", "-w", "-I", "OUTPUT", "1", "!", "-d", CONTROLLER_IP, "-j", "DROP", ns=node.ns)
    kill_and_wait(sorted(set(stopped + procs_in_netns(node.ns) + nspawn_pids(node))))
    unplug_node(node)
    if mode == "systemd":
        # nspawn might still be exiting after its container died.
        deadline = time.time() + 10
        while nspawn_pids(node) and time.time() < deadline:
            time.sleep(0.1)
        root = node.dir / "root"
        if os.path.ismount(root):
            sh("umount", root)
        remove_cgroups(node.name)
        shutil.rmtree(f"/run/systemd/nspawn/propagate/{node.name}", ignore_errors=True)


def node_init(node_dir, hostname, shared_dir):
    """PID 1 of a plain node (runs inside its namespaces): private dirs, the DC's shared dir, hostname, sshd,
    reaping."""
    d = Path(node_dir)
    os.chdir("/")
    # Open the sources first: the node dir may itself live under a directory about to be covered
    # (TESTBED_STATE_DIR=/tmp/...), and /proc/self/fd/N still names it then.
    fds = {target: os.open(d / sub, os.O_PATH | os.O_DIRECTORY) for sub, target in PLAIN_BINDS.items()}
    fds[SHARED_MOUNT] = os.open(shared_dir, os.O_PATH | os.O_DIRECTORY)
    for target, fd in fds.items():
        subprocess.run(["mount", "--bind", f"/proc/self/fd/{fd}", target], check=True, pass_fds=[fd])
        os.close(fd)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,nosuid,nodev", "tmpfs", "/run"], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", "/dev/shm"], check=True)
    os.makedirs("/run/sshd", mode=0o755)
    os.makedirs("/run/lock", mode=0o1777)
    socket.sethostname(hostname)
    # /proc/1/comm is what Ansible reports as ansible_service_mgr: say what this is, not "python3".
    ctypes.CDLL(None, use_errno=True).prctl(15, b"testbed-init", 0, 0, 0)  # 15 = PR_SET_NAME
    os.environ.clear()
    os.environ.update(PATH=NODE_PATH, LANG="C.UTF-8", HOME="/root")

    def start_sshd():
        pid = os.fork()
        if pid == 0:
            os.setsid()
            out = os.open("/var/log/sshd-testbed.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.execv("/usr/sbin/sshd", ["/usr/sbin/sshd", "-D", "-e", "-f", "/etc/ssh/sshd_config_testbed"])
        return pid

    print(f"{hostname}: node init up", flush=True)
    sshd = start_sshd()
    while True:  # as PID 1 we adopt every orphan (brokers started with nohup, ...): reap them
        try:
            pid, _status = os.wait()
        except ChildProcessError:
            time.sleep(1)
            continue
        if pid == sshd:
            print(f"{hostname}: sshd exited, restarting it", flush=True)
            time.sleep(1)
            sshd = start_sshd()
