"""A test bed broker's JVM seen from inside its node (`testbed exec`): its CPU time and a Flight Recorder recording of
it, for B1. The JDK's own tools (jcmd) run as the broker's service user, in the node's namespaces, as an operator
would on the host."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile

from benchmarks import jfr_profile
from support.estate import TESTBED

BROKER_MAIN = "org.apache.activemq.artemis.boot.Artemis"
SERVICE_USER = "artemis"  # broker_service_user's default, which the benchmark's inventory keeps


def in_node(node, *command: str, text: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([TESTBED, "exec", node.name, "--", *command], capture_output=True, text=text, timeout=300)
    if done.returncode:
        error = done.stderr if text else done.stderr.decode(errors="replace")
        raise RuntimeError(f"{' '.join(command)} in {node.name} exited {done.returncode}: {error.strip()[-2000:]}")
    return done


def broker_pid(node) -> int:
    """The broker JVM's process id in its node (the oldest match: a broker is one JVM)."""
    return int(in_node(node, "pgrep", "-o", "-f", BROKER_MAIN).stdout.split()[0])


def _stat_seconds(stat_line: str) -> float:
    fields = stat_line.rsplit(")", 1)[1].split()  # after the command name: field 3 (state) is fields[0]
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(node) -> dict[str, float]:
    """User and system CPU seconds the broker's JVM has used since it started (/proc/PID/stat, `total`), and of
    them its JIT compiler's threads' (`compiler`, /proc/PID/task/*/stat): a JVM whose compiler is still busy is not
    warm yet."""
    pid = broker_pid(node)
    # A thread may end between the glob and its read: the tasks still there are read, the process's own stat must be.
    read = in_node(node, "sh", "-c", f"cat /proc/{pid}/stat && {{ cat /proc/{pid}/task/*/stat 2>/dev/null; true; }}"
                   ).stdout.splitlines()
    compiler = sum(_stat_seconds(line) for line in read[1:]
                   if line.split("(", 1)[1].startswith(("C1 CompilerThre", "C2 CompilerThre")))
    return {"total": _stat_seconds(read[0]), "compiler": compiler}


@contextlib.contextmanager
def flight_recording(node, name: str, summary: dict, settings: str = "profile"):
    """Records the broker with Java Flight Recorder (the JDK's `profile` settings: a stack sample every 10 ms) for
    the duration of the block; then fills ``summary`` with jfr_profile's summary of the recording."""
    pid = str(broker_pid(node))
    remote = f"/tmp/continuity-bench-{name}.jfr"
    jcmd = ["runuser", "-u", SERVICE_USER, "--", "jcmd", pid]
    in_node(node, *jcmd, "JFR.start", f"name={name}", f"settings={settings}")
    try:
        yield summary
    finally:
        in_node(node, *jcmd, "JFR.stop", f"name={name}", f"filename={remote}")
    recording = in_node(node, "cat", remote, text=False).stdout
    in_node(node, "rm", "-f", remote)
    with tempfile.TemporaryDirectory() as work:
        local = os.path.join(work, f"{name}.jfr")
        with open(local, "wb") as handle:
            handle.write(recording)
        summary.update(jfr_profile.summarise(jfr_profile.read(local)))
