"""Processes of the test bed, found through /proc: those in a node's network namespace, its init (PID 1 of its PID
namespace), its systemd-nspawn and its broker JVM; killing them and waiting until they are gone, starting a
long-lived process detached from the command, and waiting until the nodes' sshd answers.
"""
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from .config import BROKER_MAIN_CLASS, LOG_DIR, TestbedError


def netns_inode(ns):
    try:
        return os.stat(f"/run/netns/{ns}").st_ino
    except FileNotFoundError:
        return None


def procs_in_netns(ns):
    """PIDs (host view) of all processes whose network namespace is `ns`."""
    ino = netns_inode(ns)
    if ino is None:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}/ns/net").st_ino == ino:
                    pids.append(int(entry))
            except OSError:  # gone, or a zombie
                pass
    return pids


def cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return []


def nspid(pid):
    """The PID of `pid` in each nested PID namespace, outermost first."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return line.split()[1:]
    except OSError:
        pass
    return []


def node_leader(node):
    """Host PID of the node's init (PID 1 of its PID namespace), or None when the node is off."""
    for pid in procs_in_netns(node.ns):
        ids = nspid(pid)
        if len(ids) > 1 and ids[-1] == "1":
            return pid
    return None


def nspawn_pids(node=None):
    """systemd-nspawn processes of one node, or of all test bed nodes. They run outside the netns."""
    arg = f"--network-namespace-path=/run/netns/{node.ns if node else 'ctb-'}".encode()
    pids = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        args = cmdline(p)
        if args and args[0].endswith(b"systemd-nspawn") and \
                any(a == arg if node else a.startswith(arg) for a in args):
            pids.append(int(p))
    return pids


def broker_pids(node):
    found = []
    for pid in procs_in_netns(node.ns):
        args = cmdline(pid)
        if not args or not any(BROKER_MAIN_CLASS.encode() in a for a in args):
            continue
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            exe = ""
        argv0 = os.path.basename(args[0].split()[0].decode(errors="replace")) if args[0].split() else ""
        if "java" in (exe, argv0):
            found.append(pid)
    return found


def is_alive(pid):
    """True unless the process is gone or a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def signal_all(pids, signum):
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def kill_and_wait(pids, timeout=15):
    signal_all(pids, signal.SIGKILL)
    deadline = time.time() + timeout
    while time.time() < deadline:
        alive = [p for p in pids if is_alive(p)]
        if not alive:
            return
        time.sleep(0.1)
    raise TestbedError(f"processes did not die: {alive}")


def spawn(cmd, log_name, **kw):
    """Starts a long-lived process detached from this command (it outlives `testbed`)."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    with open(LOG_DIR / log_name, "ab") as log:
        return subprocess.Popen([str(c) for c in cmd], stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, **kw)


def ssh_answers(node):
    try:
        with socket.create_connection((node.address, 22), timeout=1) as s:
            s.settimeout(2)
            return s.recv(4) == b"SSH-"
    except OSError:
        return False


def wait_ssh(nodes, timeout):
    deadline = time.time() + timeout
    pending = list(nodes)
    while pending:
        pending = [node for node in pending if not ssh_answers(node)]
        if pending:
            if time.time() > deadline:
                raise TestbedError(f"sshd did not answer on {', '.join(n.name for n in pending)} "
                                   f"within {timeout}s (logs: {LOG_DIR})")
            time.sleep(0.2)
