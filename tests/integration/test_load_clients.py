"""The AMQP clients (plugins/module_utils/amqp_ledger.py, tests/support/amqp_clients.py) against the test bed: dc1
active, mirroring to dc2.

What the drills conclude rests on these clients: their ledgers must be exact, browsing must not consume, and what
the source holds must be what the target receives. The target is passive, so no client reads there: what it
holds is read through the management API."""

from __future__ import annotations

import collections
import time
import uuid

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import broker_report
from support import amqp_clients as amqp
from support.estate import run_playbook


def _queue(tag: str) -> str:
    return f"clients.{tag}.{uuid.uuid4().hex[:8]}"


def _held(node, queue: str, count: int) -> list[dict]:
    """The messages ``node`` holds in ``queue`` once it holds ``count`` of them (management, as the admin; it
    lists at most 200, the broker's management-browse-page-size)."""
    amqp.wait_for(lambda: node.message_count(queue), lambda held: held == count, timeout=60, interval=0.3)
    listed = node.management().list_messages(queue, queue)
    assert len(listed) == count, f"{node.name} listed {len(listed)} of the {count} messages of {queue}"
    return listed


def _browse_until(node, queue, condition, timeout=30):
    return amqp.wait_for(lambda: amqp.browse(node.amqp_url, node.user, node.password, queue, ca_path=node.ca_cert),
                         condition, timeout=timeout, interval=0.3)


def test_sent_messages_are_browsable_at_the_source_and_mirrored_to_the_target(estate):
    source, target = estate.dc("dc1"), estate.dc("dc2")
    queue = _queue("mirror")
    n = 200
    ids = amqp.send(source.amqp_url, source.user, source.password, queue, n,
                    properties=lambda seq: {"origin": "dc1", "parity": seq % 2, "weight": 1.5},
                    id_prefix=f"{queue}-m", ca_path=source.ca_cert)
    assert len(ids) == len(set(ids)) == n

    on_source = amqp.browse(source.amqp_url, source.user, source.password, queue, ca_path=source.ca_cert)
    assert [m.id for m in on_source] == ids  # in order, each once
    assert len(amqp.browse(source.amqp_url, source.user, source.password, queue,
                           ca_path=source.ca_cert)) == n, "browsing must not consume"
    for seq, message in enumerate(on_source):
        assert message.body == message.id
        assert message.properties == {"origin": "dc1", "parity": seq % 2, "weight": 1.5, "seq": seq}
        assert message.durable

    copies = _held(target, queue, n)
    assert sorted(copy["seq"] for copy in copies) == list(range(n))
    assert all(copy["origin"] == "dc1" and copy["parity"] == copy["seq"] % 2 and copy["weight"] == 1.5
               and copy["durable"] for copy in copies)


def test_bodies_given_explicitly_are_sent_as_given(estate):
    source = estate.dc("dc1")
    queue = _queue("bodies")
    bodies = ["text", b"\x00\x01binary", {"k": "v", "n": 3}]
    ids = amqp.send(source.amqp_url, source.user, source.password, queue, bodies, properties={"p": "q"},
                    durable=False, ca_path=source.ca_cert)
    got = amqp.browse(source.amqp_url, source.user, source.password, queue, ca_path=source.ca_cert)
    assert [m.id for m in got] == ids
    assert [m.body for m in got] == bodies
    assert all(not m.durable and m.properties["p"] == "q" for m in got)


def test_consuming_at_the_source_removes_the_same_messages_at_the_target(estate):
    source, target = estate.dc("dc1"), estate.dc("dc2")
    queue = _queue("acks")
    n, m = 200, 50
    ids = amqp.send(source.amqp_url, source.user, source.password, queue, n, properties={"kind": "ack-test"},
                    ca_path=source.ca_cert)
    _held(target, queue, n)

    consumed = amqp.receive(source.amqp_url, source.user, source.password, queue, m, timeout=20, ca_path=source.ca_cert)
    assert [c.id for c in consumed] == ids[:m]  # exactly m, oldest first
    assert [x.id for x in amqp.browse(source.amqp_url, source.user, source.password, queue,
                                      ca_path=source.ca_cert)] == ids[m:]
    assert sorted(copy["seq"] for copy in _held(target, queue, n - m)) == list(range(m, n))


@pytest.mark.timeout(120, func_only=True)  # receive must give up after its own timeout, not wait for more messages
def test_receive_without_enough_messages_fails_and_consumes_nothing(estate):
    source = estate.dc("dc1")
    queue = _queue("short")
    ids = amqp.send(source.amqp_url, source.user, source.password, queue, 3, ca_path=source.ca_cert)
    with pytest.raises(amqp.ReceiveError) as info:
        amqp.receive(source.amqp_url, source.user, source.password, queue, 5, timeout=1.5, ca_path=source.ca_cert)
    assert "3/5" in str(info.value)
    assert sorted(m.id for m in info.value.received) == sorted(ids)
    assert sorted(m.id for m in amqp.browse(source.amqp_url, source.user, source.password, queue,
                                            ca_path=source.ca_cert)) == sorted(ids)


def test_a_refused_send_and_a_refused_login_raise_clear_errors(estate):
    target = estate.dc("dc2")
    # The passive site refuses its clients' sends (fenced): the refusal reaches the caller with its reason.
    with pytest.raises(amqp.AmqpError, match="(?i)AMQ229032|not authorized|AMQ229213"):
        amqp.send(target.amqp_url, target.user, target.password, _queue("forbidden"), 1, timeout=10,
                  ca_path=target.ca_cert)
    with pytest.raises(amqp.AmqpError, match="cannot connect"):
        amqp.send(target.amqp_url, target.user, "wrong-password", _queue("x"), 1, timeout=10, ca_path=target.ca_cert)


def test_producer_ledger_is_exact_and_everything_accepted_is_on_both_sites(estate):
    source, target = estate.dc("dc1"), estate.dc("dc2")
    queue = _queue("producer")
    producer = amqp.Producer(source.amqp_url, source.user, source.password, queue, rate=500,
                             properties={"run": "clients"}, ca_path=source.ca_cert)
    producer.start()
    producer.wait_connected(10)
    time.sleep(3)
    producer.stop()
    stats = producer.stats()

    assert stats["connection_failures"] == 0, producer.events
    assert stats["failed"] == stats["pending"] == 0, stats
    assert stats["sent"] == stats["accepted"] > 0
    accepted = producer.accepted_ids()
    assert len(accepted) == len(set(accepted))
    ledger = producer.ledger()
    assert [r.seq for r in ledger] == list(range(len(ledger)))
    assert all(r.settled_at is not None and r.settled_at >= r.sent_at for r in ledger)

    # A browse may end (its drained credit returned) before the newest accepted messages are routed to it.
    on_source = _browse_until(source, queue, lambda msgs: len(msgs) >= len(accepted))
    counts = collections.Counter(m.id for m in on_source)
    assert all(n == 1 for n in counts.values()), "duplicates at the source"
    assert set(counts) == set(accepted)
    assert all(m.properties["producer"] == producer.id_prefix and m.properties["run"] == "clients"
               for m in on_source)
    amqp.wait_for(lambda: target.message_count(queue), lambda held: held == len(accepted), timeout=60, interval=0.3)


def test_consumer_takes_exactly_what_the_producer_got_accepted(estate):
    source = estate.dc("dc1")
    queue = _queue("consumer")
    consumer = amqp.Consumer(source.amqp_url, source.user, source.password, queue, prefetch=50, ca_path=source.ca_cert)
    consumer.start()
    consumer.wait_connected(10)
    with amqp.Producer(source.amqp_url, source.user, source.password, queue, rate=400,
                       ca_path=source.ca_cert) as producer:
        producer.wait_connected(10)
        time.sleep(1.5)
    accepted = producer.accepted_ids()
    amqp.wait_for(lambda: len(consumer.accepted_ids()) >= len(accepted), timeout=15, interval=0.1)
    consumer.stop()
    assert consumer.accepted_ids() == accepted  # same order, each once
    assert consumer.duplicates() == {}
    stats = consumer.stats()
    assert stats["received"] == stats["accepted"] == len(accepted) and stats["redelivered"] == 0
    assert source.message_count(queue) == 0


def test_producer_survives_a_broker_crash_and_its_ledger_stays_honest(estate):
    """SIGKILLs dc1's broker under load; site.yml starts it again (as the estate's operator would)."""
    source = estate.dc("dc1")
    queue = _queue("crash")
    producer = amqp.Producer(source.amqp_url, source.user, source.password, queue, rate=300, reconnect_delay=0.2,
                             connect_timeout=2, ca_path=source.ca_cert)
    producer.start()
    try:
        producer.wait_connected(10)
        amqp.wait_for(lambda: producer.stats()["accepted"], lambda accepted: accepted >= 150, timeout=10,
                      interval=0.1)
        estate.testbed("kill", source.name)
        amqp.wait_for(lambda: producer.stats()["connection_failures"], lambda failures: failures >= 2, timeout=15,
                      interval=0.1)
        started = run_playbook("site.yml", extra_args=["--limit", source.name])
        assert started.rc == 0, started.output[-4000:]
        accepted_before = producer.stats()["accepted"]
        amqp.wait_for(lambda: producer.stats()["accepted"], lambda accepted: accepted >= accepted_before + 150,
                      timeout=30, interval=0.1)
    finally:
        producer.stop()
    stats = producer.stats()
    assert stats["pending"] == 0 and stats["connections"] >= 2, stats
    assert [kind for _when, kind, _detail in producer.events].count("connected") >= 2

    stored = collections.Counter(m.id for m in amqp.browse(source.amqp_url, source.user, source.password, queue,
                                                           ca_path=source.ca_cert))
    accepted, uncertain = set(producer.accepted_ids()), set(producer.uncertain_ids())
    assert not accepted & uncertain
    assert all(n == 1 for n in stored.values()), "a message is stored twice"
    assert accepted <= set(stored), f"lost: {sorted(accepted - set(stored))[:10]}"
    assert set(stored) <= accepted | uncertain, "stored a message that was not accepted"
    # The tests after this one start from an estate whose mirror links are all connected again.
    for node in estate.nodes:
        amqp.wait_for(lambda: [link["name"] for link in broker_report(node.management())["links"]
                               if not link["connected"]], lambda down: not down,
                      timeout=60, interval=0.5)
