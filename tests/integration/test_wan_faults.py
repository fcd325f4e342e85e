"""Replication survives a WAN partition, with and without WAN delay: every message reaches dc2, none twice."""

import time
import uuid

import pytest

from support import amqp_clients as amqp

PARTITION_SECONDS = 15
RATE = 200  # messages per second while partitioned


@pytest.mark.parametrize("delay_ms", [0, 20], ids=["lan", "wan-20ms"])
def test_messages_produced_during_a_partition_reach_dc2_once_after_heal(estate, delay_ms):
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = "partition." + uuid.uuid4().hex[:12]
    estate.testbed("wan", "--delay-ms", str(delay_ms))

    producer = amqp.Producer(dc1.amqp_url, dc1.user, dc1.password, queue, rate=RATE, ca_path=dc1.ca_cert)
    producer.start()
    time.sleep(2)
    estate.testbed("partition", "dc1", "dc2")
    time.sleep(PARTITION_SECONDS)
    # The black hole leaves the mirror's connection hanging, not closed: dc1 drops it after replication_idle_timeout
    # (10 s) and retries, instead of after Artemis's default 60 s.
    amqp.wait_for(lambda: dc1.link("dc2_all")["connected"], lambda connected: not connected, timeout=20,
                  description="dc1 dropping its hung mirror connection to dc2")
    backlog = dc1.link("dc2_all")["backlog"]
    assert backlog > 0, "while partitioned, dc1 must hold the events in its store-and-forward queue"
    estate.testbed("heal")
    healed = time.monotonic()
    time.sleep(2)
    producer.stop()
    stats = producer.stats()
    accepted = producer.accepted_ids()
    assert accepted, stats
    assert not producer.uncertain_ids(), "dc1 stayed reachable, so every send must have been settled"

    started = time.monotonic()
    on_dc2 = amqp.wait_for(lambda: amqp.browse(dc2.amqp_url, dc2.user, dc2.password, queue, ca_path=dc2.ca_cert),
                           lambda messages: len(messages) >= len(accepted), timeout=180)
    estate.record_timing(f"partition_{delay_ms}ms_catch_up_s", time.monotonic() - started)
    estate.record_timing(f"partition_{delay_ms}ms_producer_rate_msg_s", stats["rate"])
    amqp.wait_for(lambda: dc1.link("dc2_all")["backlog"],
                  lambda events: events == 0, timeout=120)
    estate.record_timing(f"partition_{delay_ms}ms_backlog_at_heal_events", backlog)
    estate.record_timing(f"partition_{delay_ms}ms_backlog_drained_s", time.monotonic() - healed)

    ids = [m.id for m in on_dc2]
    assert len(ids) == len(set(ids)), "duplicates on dc2"
    assert set(ids) == set(accepted)
