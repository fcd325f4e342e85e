"""Small helpers every part of the test bed uses: running a command (in a network namespace if asked), writing a
file with its mode, loading and saving state.json, the lock that serialises commands which change the test bed, and
finding the nodes of the test bed that is up.
"""
import fcntl
import json
import os
import subprocess
from pathlib import Path

from .config import STATE_DIR, STATE_FILE, TestbedError
from .topology import make_nodes


def sh(*cmd, ns=None, check=True, capture=False, input=None, stdout=None):
    cmd = [str(c) for c in cmd]
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    r = subprocess.run(cmd, input=input, text=True, stderr=subprocess.PIPE,
                       stdout=subprocess.PIPE if capture else stdout, check=False)
    if check and r.returncode != 0:
        raise TestbedError(f"`{' '.join(cmd)}` failed ({r.returncode}): {r.stderr.strip()}")
    return r


def write_file(path, text, mode=0o644):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def load_state():
    return json.loads(STATE_FILE.read_text()) if STATE_FILE.exists() else None


def save_state(state):
    write_file(STATE_FILE, json.dumps(state, indent=2) + "\n", 0o600)


class Lock:
    """Serialises commands that change the test bed (e.g. parallel pytest workers)."""

    def __enter__(self):
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self.f = open(STATE_DIR / ".lock", "w")
        fcntl.flock(self.f, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        self.f.close()


def nodes_of(state):
    return make_nodes(state["dcs"], state["nodes_per_dc"])


def find_node(state, name):
    for node in nodes_of(state):
        if node.name == name:
            return node
    raise TestbedError(f"no node {name!r}; nodes are: {', '.join(n.name for n in nodes_of(state))}")


def require_up():
    state = load_state()
    if not state or state.get("phase") != "up":
        raise TestbedError("the test bed is not up (run `testbed up`)")
    return state
