"""tests/support/amqp.py against two real Artemis brokers, A mirroring to B.

The brokers come from the unpacked distribution that ``ARTEMIS_HOME`` points
at; they are created afresh under pytest's temporary directory, listen on free
loopback ports and are stopped at the end. Without ``ARTEMIS_HOME`` they fail.
Broker state is read with the collection's own management client.
"""

from __future__ import annotations

import collections
import os
import sys
import time
import uuid

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report
from support import amqp
from support import local_artemis

USER = "admin"
PASSWORD = "admin-secret"
MIRROR = "to-b"


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    home = local_artemis.find_artemis_home()
    if home is None:
        pytest.fail("ARTEMIS_HOME must point at an unpacked Apache Artemis distribution (with bin/artemis; make "
                    f"setup unpacks one); it is {os.environ.get('ARTEMIS_HOME')!r}", pytrace=False)
    a, b = local_artemis.mirrored_pair(home, tmp_path_factory.mktemp("artemis"),
                                       connection_name=MIRROR, admin_password=PASSWORD)
    try:
        b.start()
        a.start()
        b.wait_ready()
        a.wait_ready()
        amqp.wait_for(lambda: any(link["name"] == MIRROR and link["connected"]
                                  for link in broker_report(a.management())["links"]), timeout=30, interval=0.2,
                      description="mirror connection A -> B")
        yield a, b
    except BaseException:
        for broker in (a, b):
            sys.stderr.write(f"\n--- {broker.name} log tail ---\n{broker.log_tail(60)}\n")
        raise
    finally:
        a.stop()
        b.stop()


def _queue(tag: str) -> str:
    return f"unit.{tag}.{uuid.uuid4().hex[:8]}"


def _browse_until(broker, queue, condition, timeout=30):
    return amqp.wait_for(lambda: amqp.browse(broker.amqp_url, USER, PASSWORD, queue),
                         condition, timeout=timeout, interval=0.3)


# -- AMQP against real brokers ------------------------------------------------------


def test_sent_messages_are_browsable_on_a_and_mirrored_identically_to_b(brokers):
    a, b = brokers
    queue = _queue("mirror")
    n = 200
    ids = amqp.send(a.amqp_url, USER, PASSWORD, queue, n,
                    properties=lambda seq: {"origin": "A", "parity": seq % 2, "weight": 1.5},
                    id_prefix=f"{queue}-m")
    assert len(ids) == len(set(ids)) == n

    on_a = amqp.browse(a.amqp_url, USER, PASSWORD, queue)
    assert [m.id for m in on_a] == ids  # in order, each once
    again = amqp.browse(a.amqp_url, USER, PASSWORD, queue)
    assert len(again) == n, "browsing must not consume"

    on_b = _browse_until(b, queue, lambda msgs: len(msgs) >= n)
    assert len(on_b) == n, "B holds more messages than were sent"
    originals = {m.id: m for m in on_a}
    copies = {m.id: m for m in on_b}
    assert set(copies) == set(ids)
    for seq, msg_id in enumerate(ids):
        original, copy = originals[msg_id], copies[msg_id]
        assert original.body == copy.body == msg_id
        assert original.properties == copy.properties == {
            "origin": "A", "parity": seq % 2, "weight": 1.5, "seq": seq}
        assert original.durable and copy.durable
        assert copy.seq == seq


def test_bodies_given_explicitly_are_sent_as_given(brokers):
    a = brokers[0]
    queue = _queue("bodies")
    bodies = ["text", b"\x00\x01binary", {"k": "v", "n": 3}]
    ids = amqp.send(a.amqp_url, USER, PASSWORD, queue, bodies, properties={"p": "q"}, durable=False)
    got = amqp.browse(a.amqp_url, USER, PASSWORD, queue)
    assert [m.id for m in got] == ids
    assert [m.body for m in got] == bodies
    assert all(not m.durable and m.properties["p"] == "q" for m in got)


def test_consuming_on_a_removes_the_same_messages_on_b(brokers):
    a, b = brokers
    queue = _queue("acks")
    n, m = 200, 50
    ids = amqp.send(a.amqp_url, USER, PASSWORD, queue, n, properties={"kind": "ack-test"})
    _browse_until(b, queue, lambda msgs: len(msgs) >= n)

    consumed = amqp.receive(a.amqp_url, USER, PASSWORD, queue, m, timeout=20)
    assert [c.id for c in consumed] == ids[:m]  # exactly m, oldest first
    remaining = ids[m:]
    assert [x.id for x in amqp.browse(a.amqp_url, USER, PASSWORD, queue)] == remaining

    left_on_b = _browse_until(b, queue, lambda msgs: len(msgs) == n - m)
    assert sorted(x.id for x in left_on_b) == sorted(remaining)
    assert amqp.wait_for(lambda: b.queue_message_count(queue) == n - m, timeout=10)


def test_receive_without_enough_messages_fails_and_consumes_nothing(brokers):
    a = brokers[0]
    queue = _queue("short")
    ids = amqp.send(a.amqp_url, USER, PASSWORD, queue, 3)
    started = time.monotonic()
    with pytest.raises(amqp.ReceiveError) as info:
        amqp.receive(a.amqp_url, USER, PASSWORD, queue, 5, timeout=1.5)
    assert time.monotonic() - started < 10
    assert "3/5" in str(info.value)
    assert sorted(m.id for m in info.value.received) == sorted(ids)
    assert sorted(m.id for m in amqp.browse(a.amqp_url, USER, PASSWORD, queue)) == sorted(ids)


def test_send_without_permission_raises_a_clear_error(brokers):
    b = brokers[1]
    # the mirror user may only send to the mirror's own address on B
    with pytest.raises(amqp.AmqpError) as info:
        amqp.send(b.amqp_url, "mirror", "mirror-secret", _queue("forbidden"), 1, timeout=10)
    assert "forbidden" in str(info.value)
    with pytest.raises(amqp.AmqpError, match="cannot connect"):
        amqp.send(b.amqp_url, USER, "wrong-password", _queue("x"), 1, timeout=10)


def test_producer_ledger_is_exact_and_everything_accepted_is_on_the_broker(brokers):
    a, b = brokers
    queue = _queue("producer")
    producer = amqp.Producer(a.amqp_url, USER, PASSWORD, queue, rate=500,
                             properties={"run": "unit"})
    producer.start()
    producer.wait_connected(10)
    time.sleep(3)
    producer.stop()
    stats = producer.stats()

    assert stats["connection_failures"] == 0, producer.events
    assert stats["failed"] == stats["pending"] == 0, stats
    assert stats["sent"] == stats["accepted"]
    assert 0.75 * 500 * 3 <= stats["accepted"] <= 500 * 3 + 600, stats  # ~rate x time
    assert stats["achieved_rate"] > 300, stats
    accepted = producer.accepted_ids()
    assert len(accepted) == len(set(accepted))
    ledger = producer.ledger()
    assert [r.seq for r in ledger] == list(range(len(ledger)))
    assert all(r.settled_at is not None and r.settled_at >= r.sent_at for r in ledger)

    # A browse may end (its drained credit returned) before the newest accepted messages are routed to it.
    on_a = _browse_until(a, queue, lambda msgs: len(msgs) >= len(accepted))
    counts = collections.Counter(m.id for m in on_a)
    assert all(n == 1 for n in counts.values()), "duplicates on A"
    assert set(counts) == set(accepted)
    assert all(m.properties["producer"] == producer.id_prefix and m.properties["run"] == "unit"
               for m in on_a)

    on_b = _browse_until(b, queue, lambda msgs: len(msgs) >= len(accepted))
    assert sorted(m.id for m in on_b) == sorted(accepted)
    assert a.queue_message_count(queue) == len(accepted)


def test_consumer_takes_exactly_what_the_producer_got_accepted(brokers):
    a = brokers[0]
    queue = _queue("consumer")
    consumer = amqp.Consumer(a.amqp_url, USER, PASSWORD, queue, prefetch=50)
    consumer.start()
    consumer.wait_connected(10)
    with amqp.Producer(a.amqp_url, USER, PASSWORD, queue, rate=400) as producer:
        producer.wait_connected(10)
        time.sleep(1.5)
    accepted = producer.accepted_ids()
    amqp.wait_for(lambda: len(consumer.accepted_ids()) >= len(accepted), timeout=15, interval=0.1)
    consumer.stop()
    assert consumer.accepted_ids() == accepted  # same order, each once
    assert consumer.duplicates() == {}
    stats = consumer.stats()
    assert stats["received"] == stats["accepted"] == len(accepted) and stats["redelivered"] == 0
    assert a.queue_message_count(queue) == 0


# -- broker crash: the ledger stays honest --------------------------------------------


def test_producer_survives_a_broker_crash_and_its_ledger_stays_honest(brokers):
    """Runs last: kills B (-9) under load and starts it again."""
    b = brokers[1]
    queue = _queue("crash")
    producer = amqp.Producer(b.amqp_url, USER, PASSWORD, queue, rate=300, reconnect_delay=0.2,
                             connect_timeout=2)
    producer.start()
    try:
        producer.wait_connected(10)
        amqp.wait_for(lambda: producer.stats()["accepted"] >= 150, timeout=10, interval=0.1)
        b.kill()
        amqp.wait_for(lambda: producer.stats()["connection_failures"] >= 2, timeout=15,
                      interval=0.1)
        b.start()
        b.wait_ready()
        accepted_before_restart = producer.stats()["accepted"]
        amqp.wait_for(lambda: producer.stats()["accepted"] >= accepted_before_restart + 150,
                      timeout=20, interval=0.1)
    finally:
        producer.stop()
    stats = producer.stats()
    assert stats["pending"] == 0 and stats["connections"] >= 3, stats
    assert [kind for _when, kind, _detail in producer.events].count("connected") >= 2

    stored = collections.Counter(m.id for m in amqp.browse(b.amqp_url, USER, PASSWORD, queue))
    accepted, uncertain = set(producer.accepted_ids()), set(producer.uncertain_ids())
    assert not accepted & uncertain
    assert all(n == 1 for n in stored.values()), "a message is stored twice"
    assert accepted <= set(stored), f"lost: {sorted(accepted - set(stored))[:10]}"
    assert set(stored) <= accepted | uncertain, "stored a message that was not accepted"


# -- no broker needed -----------------------------------------------------------------


def test_wait_for_returns_the_value_and_reports_the_last_one_on_timeout():
    values = iter([0, [], [1], [1, 2]])
    assert amqp.wait_for(lambda: next(values), timeout=5, interval=0.01) == [1]

    values = iter(range(100))
    assert amqp.wait_for(lambda: next(values), lambda v: v >= 3, timeout=5, interval=0.01) == 3
    assert amqp.wait_for(lambda: 7, 1, 0.01) == 7  # positional timeout, interval

    with pytest.raises(AssertionError, match=r"last value: \(2 items\) \['a', 'b'\]"):
        amqp.wait_for(lambda: ["a", "b"], lambda v: len(v) > 2, timeout=0.2, interval=0.05)

    def broken():
        raise ConnectionRefusedError("nobody home")
    with pytest.raises(AssertionError, match="ConnectionRefusedError: nobody home"):
        amqp.wait_for(broken, timeout=0.2, interval=0.05)
