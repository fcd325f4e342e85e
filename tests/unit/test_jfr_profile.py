"""B1's profile summary (tests/benchmarks/jfr_profile.py): each sample goes to the part of the broker its stack works
for, the JDK's general code to its caller, TLS wherever it is called from."""

import subprocess

import pytest

from benchmarks import jfr_profile


def _frames(*classes):
    return [{"method": {"type": {"name": name.replace(".", "/")}, "name": "run"}} for name in classes]


def _sample(*classes, kind="jdk.ExecutionSample", weight=None):
    values = {"stackTrace": {"frames": _frames(*classes)}}
    if weight is not None:
        values["weight"] = weight
    return {"type": kind, "values": values}


MIRROR = "org.apache.activemq.artemis.protocol.amqp.connect.mirror.AMQPMirrorControllerSource"


def test_the_jdks_general_code_counts_for_its_caller_and_tls_for_itself():
    assert jfr_profile.part_of(_frames("java.util.HashMap", "org.apache.activemq.artemis.core.journal.impl.JournalImpl",
                                       "io.netty.channel.nio.NioEventLoop")) == "journal"
    assert jfr_profile.part_of(_frames("javax.crypto.Cipher", "sun.security.ssl.SSLEngineImpl", MIRROR)) == "TLS"
    assert jfr_profile.part_of(_frames("org.apache.qpid.proton.codec.EncoderImpl", MIRROR)) == "AMQP codec (proton)"
    assert jfr_profile.part_of(_frames("continuity.artemis.replication.CopyForwarding")) == "continuity plugins"
    assert jfr_profile.part_of(_frames("java.lang.Thread")) == "JDK only"
    assert jfr_profile.part_of(_frames("com.example.Elsewhere")) == "other"


def test_shares_of_cpu_and_of_allocated_bytes():
    journal = "org.apache.activemq.artemis.core.journal.impl.JournalImpl"
    events = [_sample(journal), _sample(journal), _sample("org.apache.qpid.proton.engine.impl.TransportImpl"),
              _sample("java.lang.Object"), _sample(journal, kind="jdk.ObjectAllocationSample", weight=300),
              _sample("io.netty.buffer.PooledByteBufAllocator", kind="jdk.ObjectAllocationSample", weight=100),
              {"type": "jdk.ExecutionSample", "values": {"stackTrace": None}}]
    summary = jfr_profile.summarise(events, top=1)
    assert summary["cpu"] == {"samples": 4, "parts": {"journal": 0.5, "AMQP codec (proton)": 0.25, "JDK only": 0.25},
                              "top_methods": [[f"{journal}.run", 0.5]]}
    assert summary["allocation"] == {"bytes": 400, "parts": {"journal": 0.75, "remoting (netty)": 0.25}}


def _load(thread, user, system=0.0):
    values = {"eventThread": {"javaName": thread}, "user": user, "system": system}
    return {"type": "jdk.ThreadCPULoad", "values": values}


def test_the_compilers_and_the_recorders_threads_are_counted_apart_from_the_brokers():
    events = [_load("C2 CompilerThread0", 0.2), _load("C2 CompilerThread0", 0.4), _load("C1 CompilerThread0", 0.1),
              _load("Thread-2 (activemq-client-remoting)", 0.3, 0.1), _load("JFR Periodic Tasks", 0.05),
              _load("Thread-0 (activemq-remoting-artemis-dc1-node1)", 0.15), _sample("java.lang.Object")]
    assert jfr_profile.summarise(events)["threads"] == {"Java threads": 0.55, "JIT compiler": 0.4,
                                                        "Flight Recorder": 0.05}
    assert jfr_profile.summarise([_sample("java.lang.Object")])["threads"] == {}


def test_a_real_recording_is_read(tmp_path):
    # The JDK make setup installs (openjdk-17-jdk-headless) has java and jfr.
    source = tmp_path / "Busy.java"
    source.write_text("public class Busy { public static void main(String[] a) { long end = System.nanoTime() + "
                      "1_500_000_000L; long x = 0; while (System.nanoTime() < end) { x += String.valueOf(x).hashCode();"
                      " } System.out.println(x); } }")
    recording = tmp_path / "busy.jfr"
    subprocess.run(["java", f"-XX:StartFlightRecording=filename={recording},settings=profile", str(source)],
                   check=True, capture_output=True, timeout=120)
    summary = jfr_profile.summarise(jfr_profile.read(str(recording)))
    # Busy's loop is no part of the broker's, and the source launcher's compiler is the JDK's.
    assert set(summary["cpu"]["parts"]) <= {"other", "JDK only"}
    assert summary["cpu"]["parts"]["other"] > 0
    assert summary["threads"]["Java threads"] > 0


def test_a_window_keeps_the_events_that_started_within_it_whatever_the_timestamps_offset():
    def event(stamp):
        return {"type": "jdk.ExecutionSample", "values": {"startTime": stamp}}

    events = [event("2026-12-05T11:36:03.190017138Z"), event("2026-12-05T12:36:04.5+01:00"),
              event("2026-12-05T11:36:06Z")]
    assert jfr_profile.event_time(events[0]) == pytest.approx(1796470563.190017, abs=1e-6)
    assert jfr_profile.event_time(events[1]) == pytest.approx(1796470564.5)
    assert jfr_profile.between(events, 1796470563.0, 1796470565.0) == events[:2]
    assert jfr_profile.between(events, 1796470565.0, 1796470570.0) == events[2:]
