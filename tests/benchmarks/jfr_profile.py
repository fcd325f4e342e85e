"""A Java Flight Recorder recording of a broker, summarised for B1: where its CPU and allocation go.

Each execution sample (and each allocation sample, by its weight in bytes) is given to the part of the broker its
stack is working for: the nearest frame, from the top, that is not the JDK's general code (collections, locks,
threads), so a HashMap lookup in the journal counts as the journal. The parts are named by class prefix (PARTS);
TLS and the JDK's cryptography count as TLS wherever they are called from.

    python -m benchmarks.jfr_profile RECORDING.jfr [--top 15]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import subprocess
import sys

# (part, class name prefixes), the first that matches a frame wins.
PARTS = (
    ("TLS", ("sun.security.ssl.", "javax.crypto.", "com.sun.crypto.", "sun.security.provider.", "sun.security.ec.",
             "sun.security.util.", "io.netty.handler.ssl.")),
    ("continuity plugins", ("continuity.artemis.",)),
    ("metrics", ("io.micrometer.", "org.apache.activemq.artemis.core.server.metrics.")),
    ("mirror", ("org.apache.activemq.artemis.protocol.amqp.connect.mirror.",)),
    ("AMQP codec (proton)", ("org.apache.qpid.proton.",)),
    ("AMQP protocol", ("org.apache.activemq.artemis.protocol.amqp.",)),
    ("CORE protocol", ("org.apache.activemq.artemis.core.protocol.", "org.apache.activemq.artemis.core.client.")),
    ("journal", ("org.apache.activemq.artemis.core.journal.", "org.apache.activemq.artemis.core.io.",
                 "org.apache.activemq.artemis.core.persistence.", "org.apache.activemq.artemis.nativo.")),
    ("paging", ("org.apache.activemq.artemis.core.paging.",)),
    ("routing", ("org.apache.activemq.artemis.core.postoffice.",)),
    ("queues and delivery", ("org.apache.activemq.artemis.core.server.",)),
    ("remoting (netty)", ("io.netty.", "org.apache.activemq.artemis.core.remoting.")),
    ("other Artemis", ("org.apache.activemq.artemis.",)),
)
# The JDK's general code: a sample in it belongs to its caller.
GENERAL = ("java.", "javax.", "jdk.", "sun.", "com.sun.")
# The JVM's own threads by name (jdk.ThreadCPULoad): stack samples see none of their work, only Java code's.
THREAD_KINDS = (
    ("JIT compiler", ("C1 CompilerThread", "C2 CompilerThread")),
    ("garbage collector", ("G1 ", "GC Thread", "VM Thread", "Concurrent", "ZGC", "Parallel GC")),
    ("Flight Recorder", ("JFR ",)),
)


def class_name(frame: dict) -> str:
    return frame["method"]["type"]["name"].replace("/", ".")


def part_of(frames: list[dict]) -> str:
    names = [class_name(frame) for frame in frames]
    for name in names:
        if name.startswith(PARTS[0][1]):
            return PARTS[0][0]
    for name in names:
        if not name.startswith(GENERAL):
            return next((part for part, prefixes in PARTS if name.startswith(prefixes)), "other")
    return "JDK only"


def method_of(frame: dict) -> str:
    return f"{class_name(frame)}.{frame['method']['name']}"


def thread_kind(name: str) -> str:
    return next((kind for kind, prefixes in THREAD_KINDS if name.startswith(prefixes)), "Java threads")


def thread_cpu(events: list[dict]) -> dict:
    """Each kind of thread's share of the CPU of the threads Flight Recorder reports a load for (jdk.ThreadCPULoad:
    Java threads and the JIT compiler's; not the garbage collector's), from each thread's mean load, user and
    system, over the recording."""
    loads = collections.defaultdict(list)
    for event in events:
        if event["type"] == "jdk.ThreadCPULoad":
            thread = event["values"].get("eventThread") or {}
            name = thread.get("javaName") or thread.get("osName") or "?"
            loads[name].append(event["values"]["user"] + event["values"]["system"])
    by_kind = collections.Counter()
    for name, values in loads.items():
        by_kind[thread_kind(name)] += sum(values) / len(values)
    total = sum(by_kind.values())
    return {kind: round(load / total, 3) for kind, load in by_kind.most_common()} if total else {}


def summarise(events: list[dict], top: int = 15) -> dict:
    """{cpu: {samples, parts: {part: share}, top_methods: [[method, share]]}, allocation: {bytes, parts},
    threads: thread_cpu} from the events of `jfr print --json`. The parts are shares of the Java code's stack samples:
    they say nothing of the compiler's, the collector's or the kernel's time, which `threads` shows."""
    cpu_parts, methods, allocated = collections.Counter(), collections.Counter(), collections.Counter()
    samples = 0
    for event in events:
        values = event["values"]
        frames = (values.get("stackTrace") or {}).get("frames") or []
        if not frames:
            continue
        if event["type"] == "jdk.ExecutionSample":
            samples += 1
            cpu_parts[part_of(frames)] += 1
            methods[method_of(frames[0])] += 1
        elif event["type"] == "jdk.ObjectAllocationSample":
            allocated[part_of(frames)] += int(values.get("weight") or 0)
    total_bytes = sum(allocated.values())

    def shares(counter, total):
        return {part: round(count / total, 3) for part, count in counter.most_common()} if total else {}

    return {
        "cpu": {"samples": samples, "parts": shares(cpu_parts, samples),
                "top_methods": [[name, round(count / samples, 3)] for name, count in methods.most_common(top)]},
        "allocation": {"bytes": total_bytes, "parts": shares(allocated, total_bytes)},
        "threads": thread_cpu(events),
    }


def event_time(event: dict) -> float:
    """An event's start as Unix seconds (`jfr print --json` writes "2026-12-05T11:36:03.190017138Z"; fromisoformat
    keeps the microseconds)."""
    return datetime.datetime.fromisoformat(event["values"]["startTime"]).timestamp()


def between(events: list[dict], begin: float, end: float) -> list[dict]:
    """The events that started within [begin, end] (Unix seconds)."""
    return [event for event in events if begin <= event_time(event) <= end]


def read(recording: str, jfr: str = "jfr") -> list[dict]:
    printed = subprocess.run([jfr, "print", "--json", "--stack-depth", "64", "--events",
                              "jdk.ExecutionSample,jdk.ObjectAllocationSample,jdk.ThreadCPULoad",
                              recording],
                             capture_output=True, text=True, check=True)
    return json.loads(printed.stdout)["recording"]["events"]


def main(argv=None) -> int:
    parse = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parse.add_argument("recording")
    parse.add_argument("--top", type=int, default=15)
    arguments = parse.parse_args(argv)
    json.dump(summarise(read(arguments.recording), arguments.top), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
