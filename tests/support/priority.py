"""The drills' own processes at a lower priority than the brokers'.

On an estate the brokers have hosts of their own; on the test bed the controller (ansible), the load and the pollers
share the brokers' CPUs, so the drills run them niced and the brokers keep precedence. With the kernel's autogroup
scheduling (sched_autogroup_enabled) a process's niceness weighs only against its own session: each broker, started
over its own SSH session, is a group of its own, so the session's group is niced too."""

from __future__ import annotations

import contextlib
import os

AUTOGROUP = "/proc/self/autogroup"


@contextlib.contextmanager
def niceness(nice):
    """Per thread on Linux: the load and poller threads and ansible-playbook, started inside, inherit it. Restored
    even when the drill fails, so that a next drill's test bed (its sshd, and so its brokers) is not started niced."""
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    group_nice = _autogroup_nice()
    if group_nice is not None:
        _set_autogroup_nice(nice)
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
        if group_nice is not None:
            _set_autogroup_nice(group_nice)


def _autogroup_nice():
    """The niceness of this session's scheduling group, or None where the kernel has no autogroups."""
    try:
        with open(AUTOGROUP) as handle:
            return int(handle.read().split("nice")[1])
    except FileNotFoundError:
        return None


def _set_autogroup_nice(nice):
    with open(AUTOGROUP, "w") as handle:
        handle.write(str(nice))
