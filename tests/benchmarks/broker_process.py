"""A test bed broker's JVM seen from inside its node (`testbed exec`): its CPU time and a Flight Recorder recording of
it, for B1. The JDK's own tools (jcmd) run as the broker's service user, in the node's namespaces, as an operator
would on the host."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time

from benchmarks import jfr_profile
from support.estate import TESTBED

BROKER_MAIN = "org.apache.activemq.artemis.boot.Artemis"
SERVICE_USER = "artemis"  # broker_service_user's default, which the benchmark's inventory keeps


def in_node(node, *command: str, text: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([TESTBED, "exec", node.name, "--", *command], capture_output=True, text=text, timeout=300,
                          check=False)
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


class FlightRecording:
    """One Java Flight Recorder recording of the broker (the JDK's `profile` settings: a stack sample every 10 ms)
    across several runs, each summarised over its own time window when the recording stops.

    Starting a recording makes the JVM compile its hot paths again (the recorder instruments the JDK's I/O classes):
    a run recorded from a fresh start profiles that recompilation, not the broker (B1 at 021ae90: the JIT compiler
    took 42-46 % of dc1's CPU in each mirrored run profiled so, 1-2 % in the same runs unprofiled, at five times the
    CPU per message). Runs within one recording, after a warm-up under it, do not."""

    def __init__(self, node, name: str, settings: str = "profile"):
        self.node, self.name, self.settings = node, name, settings
        self.windows: list[tuple[float, float, dict]] = []
        self._jcmd: list[str] = []

    def __enter__(self) -> FlightRecording:
        self._jcmd = ["runuser", "-u", SERVICE_USER, "--", "jcmd", str(broker_pid(self.node))]
        in_node(self.node, *self._jcmd, "JFR.start", f"name={self.name}", f"settings={self.settings}")
        return self

    @contextlib.contextmanager
    def window(self, summary: dict):
        """The block's time span, whose jfr_profile summary fills ``summary`` when the recording stops."""
        begin = time.time()
        try:
            yield summary
        finally:
            self.windows.append((begin, time.time(), summary))

    def __exit__(self, *_exc) -> None:
        remote = f"/tmp/continuity-bench-{self.name}.jfr"
        in_node(self.node, *self._jcmd, "JFR.stop", f"name={self.name}", f"filename={remote}")
        recording = in_node(self.node, "cat", remote, text=False).stdout
        in_node(self.node, "rm", "-f", remote)
        with tempfile.TemporaryDirectory() as work:
            local = os.path.join(work, f"{self.name}.jfr")
            with open(local, "wb") as handle:
                handle.write(recording)
            events = jfr_profile.read(local)
        for begin, end, summary in self.windows:
            summary.update(jfr_profile.summarise(jfr_profile.between(events, begin, end)))
