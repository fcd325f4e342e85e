# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""AMQP 1.0 clients with ledgers, for Apache Artemis.

The DR drill (module artemis_drill_load) keeps its synthetic load running across a
swapover with them; the collection's tests use them too, and build their one-shot
clients (tests/support/amqp_clients.py) on this module's connection set-up.

Everything here talks to a real broker. AMQP uses python-qpid-proton's blocking
API (``proton.utils.BlockingConnection``). Each ``Producer``/``Consumer`` thread
has its own connection (and its own proton container), so nothing is shared
between threads.

The ledgers are meant to back claims of zero loss and zero duplicates, so they
report only what the broker actually said:

* a message counts as *accepted* only when the broker settled its delivery with
  the Accepted outcome;
* a message the broker settled in any other way (rejected, released,
  modified) counts as *rejected*;
* a message written to a connection that dropped before the broker settled it
  counts as *uncertain*: it may or may not be stored.

URLs look like ``amqps://127.0.0.1:5671``, verified against ``ca_path`` (the CA
file that signed the broker's certificate) with the host name. User and
password are passed separately, never appear in error messages, and are sent
only over TLS: on an ``amqp://`` URL a login with a password is refused here.
"""

from __future__ import annotations

import collections
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

try:
    from proton import (
        Data,
        Delivery,
        Endpoint,
        Handler,
        Message,
        ProtonException,
        SSLDomain,
        Timeout,
    )
    from proton.reactor import ReceiverOption, SenderOption
    from proton.utils import BlockingConnection
except ImportError as exc:  # the modules report it with missing_required_lib('python-qpid-proton')
    PROTON_IMPORT_ERROR: ImportError | None = exc
    Data = Delivery = Endpoint = Message = ProtonException = SSLDomain = Timeout = BlockingConnection = None
    Handler = ReceiverOption = SenderOption = object
else:
    PROTON_IMPORT_ERROR = None

__all__ = [
    "AmqpError",
    "ProducerRecord",
    "ConsumerRecord",
    "connect",
    "Producer",
    "Consumer",
]


# --------------------------------------------------------------------------
# errors and records
# --------------------------------------------------------------------------


class AmqpError(Exception):
    """An AMQP operation against a broker failed."""


@dataclass
class ProducerRecord:
    """One message in a :class:`Producer`'s ledger.

    ``outcome`` is ``"pending"`` (written, not yet settled), ``"accepted"``,
    ``"rejected"`` (settled by the broker with another outcome; ``detail``
    says which) or ``"uncertain"`` (the connection dropped before the broker
    settled it). Times are ``time.time()`` seconds.
    """

    id: str
    seq: int
    sent_at: float
    connection: int
    outcome: str = "pending"
    settled_at: float | None = None
    detail: str | None = None


@dataclass
class ConsumerRecord:
    """One delivery in a :class:`Consumer`'s ledger (one row per delivery, so a
    redelivered message appears twice). ``accepted_at`` is when the consumer
    sent the Accepted disposition (``None`` if it did not); ``properties``, the
    application properties the consumer was asked to record."""

    id: str | None
    seq: int | None
    received_at: float
    connection: int
    delivery_count: int
    accepted_at: float | None = None
    properties: dict = field(default_factory=dict)


# --------------------------------------------------------------------------
# low level helpers
# --------------------------------------------------------------------------

#: link capabilities that make Artemis treat an address as ANYCAST (a queue)
QUEUE_CAPABILITY = "queue"


def _put_symbol_array(data: Data, values: Iterable[str]) -> None:
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for value in values:
        data.put_symbol(value)
    data.exit()


class TargetCapabilities(SenderOption):
    def __init__(self, *capabilities: str):
        self.capabilities = capabilities

    def apply(self, sender):
        _put_symbol_array(sender.target.capabilities, self.capabilities)


class SourceCapabilities(ReceiverOption):
    def __init__(self, *capabilities: str):
        self.capabilities = capabilities

    def apply(self, receiver):
        _put_symbol_array(receiver.source.capabilities, self.capabilities)


def safe_url(url: str) -> str:
    """The URL without any user:password part, for messages."""
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        parts = parts._replace(netloc=host)
    return urllib.parse.urlunsplit(parts)


def connect(url: str, user: str | None, password: str | None, *, timeout: float = 30.0,
            heartbeat: float | None = None, role: str = "client", ca_path: str | None = None) -> BlockingConnection:
    """A connection opened as this module's clients open theirs (for a caller that needs links of its own, too)."""
    # A password only crosses TLS: proton offers PLAIN on a plain-text connection only with allow_insecure_mechs.
    kwargs: dict[str, Any] = {
        "timeout": timeout,
        "container_id": f"continuity-{role}-{uuid.uuid4().hex[:8]}",
        "allow_insecure_mechs": False,
    }
    if url.startswith("amqps:"):
        # The broker's certificate and host name are verified, against ca_path when given (else the system's CAs).
        domain = SSLDomain(SSLDomain.MODE_CLIENT)
        if ca_path:
            domain.set_trusted_ca_db(ca_path)
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
        kwargs["ssl_domain"] = domain
    if heartbeat:
        kwargs["heartbeat"] = heartbeat
    if user is not None:
        kwargs.update(user=user, password=password or "", allowed_mechs="PLAIN")
    else:
        kwargs["allowed_mechs"] = "ANONYMOUS"
    try:
        return BlockingConnection(url, **kwargs)
    except (ProtonException, OSError) as exc:
        raise AmqpError(f"cannot connect to {safe_url(url)} as {user!r}: {exc}") from exc


def close_quietly(conn: BlockingConnection | None, timeout: float = 2.0) -> None:
    if conn is None:
        return
    try:
        conn.timeout = timeout
        conn.close()
    except Exception:  # noqa: BLE001 - best effort cleanup of a maybe-dead connection
        pass


def wait_until(conn: BlockingConnection, condition: Callable[[], bool], timeout: float) -> bool:
    """Process events until ``condition()`` or ``timeout``; True if the condition holds."""
    try:
        conn.wait(condition, timeout=max(timeout, 0.001))
    except Timeout:
        pass
    return bool(condition())


def id_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def plain(value: Any) -> Any:
    """Proton's symbol/ulong/etc. subclasses -> plain Python values (for comparisons)."""
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


def _outcome_name(state: Any) -> str:
    names = {
        Delivery.ACCEPTED: "accepted",
        Delivery.REJECTED: "rejected",
        Delivery.RELEASED: "released",
        Delivery.MODIFIED: "modified",
        Delivery.RECEIVED: "received",
    }
    return names.get(state, f"state {state!r}")


def describe_rejection(delivery: Delivery) -> str:
    text = _outcome_name(delivery.remote_state)
    condition = getattr(delivery.remote, "condition", None)
    if condition is not None:
        text += f": {condition.name}: {condition.description}"
    return text


def make_message(msg_id: str, seq: int, body: Any, properties: Mapping[str, Any] | None,
                 durable: bool, address: str | None = None) -> Message:
    props = dict(properties or {})
    props["seq"] = seq
    msg = Message(id=msg_id, body=body, durable=durable, properties=props)
    if address is not None:
        msg.address = address
    return msg


class SettlementHandler(Handler):
    """Link handler for a sender: reports each delivery once, when the broker settles it."""

    def __init__(self, on_settled: Callable[[Delivery], None]):
        self._on_settled = on_settled

    def on_delivery(self, event):
        delivery = event.delivery
        if delivery.settled and not getattr(delivery, "_ct_reported", False):
            delivery._ct_reported = True
            try:
                self._on_settled(delivery)
            finally:
                delivery.settle()


class ReceiveHandler(Handler):
    """Link handler for a receiver: decodes complete deliveries, hands them on."""

    def __init__(self, on_message: Callable[[Message, Delivery], None]):
        self._on_message = on_message

    def on_delivery(self, event):
        delivery = event.delivery
        link = event.link
        if not delivery.readable or delivery.partial:
            return
        if getattr(delivery, "_ct_seen", False):
            return
        delivery._ct_seen = True
        data = link.recv(delivery.pending)
        link.advance()
        msg = Message()
        msg.decode(data)
        self._on_message(msg, delivery)


# --------------------------------------------------------------------------
# long-running load
# --------------------------------------------------------------------------


class _Worker(threading.Thread):
    """Common parts of Producer and Consumer: reconnect loop, event log."""

    def __init__(self, url: str | Sequence[str], user: str | None, password: str | None, *,
                 name: str, heartbeat: float, connect_timeout: float,
                 reconnect_delay: float, ca_path: str | None = None):
        super().__init__(name=name, daemon=True)
        self.ca_path = ca_path
        # A list of URLs is a failover list (an HA pair): each new connection tries the next one.
        self.urls = [url] if isinstance(url, str) else list(url)
        self.url = self.urls[0]
        self.user = user
        self.password = password
        self.heartbeat = heartbeat
        self.connect_timeout = connect_timeout
        self.reconnect_delay = reconnect_delay
        self._lock = threading.RLock()
        self._stop_event = threading.Event()
        self._connected = threading.Event()
        #: (time.time(), kind, detail) with kind in connected/disconnected/connect-failed/stopped
        self.events: list[tuple[float, str, str]] = []
        self.connection_count = 0
        self.connection_failures = 0
        self.started_at: float | None = None
        self.stopped_at: float | None = None
        self.error: BaseException | None = None

    def _event(self, kind: str, detail: str = "") -> None:
        with self._lock:
            self.events.append((time.time(), kind, detail))

    def wait_connected(self, timeout: float = 30.0) -> None:
        """Block until the first connection is up (AssertionError otherwise)."""
        if not self._connected.wait(timeout):
            with self._lock:
                last = self.events[-1] if self.events else None
            raise AssertionError(f"{self.name} not connected to {safe_url(self.url)} after "
                                 f"{timeout}s; last event: {last}")

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the thread to finish and wait for it; a thread that crashed makes this raise, so that the test that
        ran it fails instead of comparing what little it recorded."""
        self._stop_event.set()
        self.join(timeout)
        if self.is_alive():
            raise AssertionError(f"{self.name} did not stop within {timeout}s")
        if self.error is not None:
            raise AssertionError(f"{self.name} crashed: {self.error!r}") from self.error

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def run(self) -> None:
        with self._lock:
            self.started_at = time.time()
        try:
            while not self._stop_event.is_set():
                conn = None
                with self._lock:
                    self.connection_count += 1
                    number = self.connection_count
                try:
                    conn = connect(self.urls[(number - 1) % len(self.urls)], self.user, self.password,
                                   timeout=self.connect_timeout, heartbeat=self.heartbeat,
                                   role=self.name, ca_path=self.ca_path)
                    self._session(conn, number)
                    # _session returns only when asked to stop
                except (AmqpError, ProtonException, OSError) as exc:
                    with self._lock:
                        self.connection_failures += 1
                    self._event("disconnected" if conn is not None else "connect-failed", str(exc))
                    self._connection_lost(number, str(exc))
                    self._stop_event.wait(self.reconnect_delay)
                finally:
                    close_quietly(conn)
        except BaseException as exc:  # noqa: BLE001 - recorded for the test to see
            self.error = exc
            self._event("crashed", repr(exc))
            raise
        finally:
            with self._lock:
                self.stopped_at = time.time()
            self._event("stopped")

    # subclass hooks
    def _session(self, conn: BlockingConnection, number: int) -> None:
        raise NotImplementedError

    def _connection_lost(self, number: int, reason: str) -> None:
        pass

    def _disconnections(self) -> int:
        """How often an established connection was lost (failed connection
        attempts are counted in ``connection_failures`` as well)."""
        with self._lock:
            return sum(1 for _when, kind, _detail in self.events if kind == "disconnected")

    def _elapsed(self) -> float:
        with self._lock:
            if self.started_at is None:
                return 0.0
            end = self.stopped_at or time.time()
            return max(end - self.started_at, 1e-9)


class Producer(_Worker):
    """A thread that sends messages to ``address`` at ``rate`` messages/s until stopped.

    Every message has a unique id ``"<id_prefix>-<seq>"`` and application
    properties ``seq`` and ``producer`` (plus ``properties``); it is durable
    unless ``durable=False``. The broker's answer to each message is kept in
    the ledger (see :class:`ProducerRecord`). When the connection drops, every
    unsettled message becomes *uncertain*, the failure is counted, and the
    thread reconnects every ``reconnect_delay`` seconds until it gets through
    or is stopped. After a reconnect it carries on at ``rate`` from then (no
    catch-up burst). ``rate=None`` sends as fast as credit and ``max_in_flight``
    allow. ``max_messages`` stops sending after that many.

    :meth:`stop` stops sending, waits up to ``drain_timeout`` seconds for the
    outstanding settlements, and marks what is still unsettled as uncertain.

    Use as ``with Producer(...) as p: ...`` or ``p.start(); ...; p.stop()``.
    """

    def __init__(self, url: str | Sequence[str], user: str | None, password: str | None, address: str,
                 rate: float | None = 500.0, *, id_prefix: str | None = None,
                 properties: Mapping[str, Any] | None = None, durable: bool = True,
                 body_size: int = 0, anycast: bool = True, max_in_flight: int = 1000,
                 max_messages: int | None = None, heartbeat: float = 4.0,
                 connect_timeout: float = 5.0, reconnect_delay: float = 0.5,
                 drain_timeout: float = 10.0, name: str | None = None, ca_path: str | None = None):
        self.id_prefix = id_prefix or f"p-{uuid.uuid4().hex[:8]}"
        super().__init__(url, user, password, name=name or f"producer-{self.id_prefix}",
                         heartbeat=heartbeat, connect_timeout=connect_timeout,
                         reconnect_delay=reconnect_delay, ca_path=ca_path)
        self.address = address
        self.rate = rate if rate and rate > 0 else None
        self.properties = dict(properties or {})
        self.durable = durable
        self.padding = "x" * body_size if body_size > 0 else ""
        self.anycast = anycast
        self.max_in_flight = max_in_flight
        self.max_messages = max_messages
        self.drain_timeout = drain_timeout
        self._records: dict[str, ProducerRecord] = {}
        self._next_seq = 0
        self._in_flight: dict[str, ProducerRecord] = {}

    # -- ledger access ------------------------------------------------------

    def ledger(self) -> list[ProducerRecord]:
        """A snapshot copy of every record, in send order."""
        with self._lock:
            return [ProducerRecord(**vars(r)) for r in self._records.values()]

    def _ids(self, outcome: str | None = None) -> list[str]:
        with self._lock:
            return [r.id for r in self._records.values() if outcome is None or r.outcome == outcome]

    def sent_ids(self) -> list[str]:
        """Every id written to a connection, in send order."""
        return self._ids()

    def accepted_ids(self) -> list[str]:
        """Ids the broker settled Accepted: these must never be lost."""
        return self._ids("accepted")

    def rejected_ids(self) -> list[str]:
        """Ids the broker settled with a non-Accepted outcome."""
        return self._ids("rejected")

    def uncertain_ids(self) -> list[str]:
        """Ids in flight when a connection dropped: stored at most once, maybe not at all."""
        return self._ids("uncertain")

    def failed_ids(self) -> list[str]:
        """Rejected plus uncertain ids."""
        with self._lock:
            return [r.id for r in self._records.values() if r.outcome in ("rejected", "uncertain")]

    def pending_ids(self) -> list[str]:
        return self._ids("pending")

    def stats(self) -> dict[str, Any]:
        """Counts and rates. ``achieved_rate`` is accepted messages per second
        of running time; ``send_rate`` is messages written per second."""
        with self._lock:
            counts = collections.Counter(r.outcome for r in self._records.values())
            sent = len(self._records)
            elapsed = self._elapsed()
            return {
                "sent": sent,
                "accepted": counts["accepted"],
                "rejected": counts["rejected"],
                "uncertain": counts["uncertain"],
                "failed": counts["rejected"] + counts["uncertain"],
                "pending": counts["pending"],
                "connections": self.connection_count,
                "connection_failures": self.connection_failures,
                "disconnections": self._disconnections(),
                "elapsed": elapsed,
                "target_rate": self.rate,
                "send_rate": sent / elapsed if elapsed else 0.0,
                "achieved_rate": counts["accepted"] / elapsed if elapsed else 0.0,
                "rate": counts["accepted"] / elapsed if elapsed else 0.0,
                "running": self.is_alive(),
            }

    # -- thread body --------------------------------------------------------

    def _settled(self, delivery: Delivery) -> None:
        record = getattr(delivery, "_ct_record", None)
        if record is None:
            return
        with self._lock:
            if self._in_flight.pop(record.id, None) is None:
                return  # already written off as uncertain
            record.settled_at = time.time()
            if delivery.remote_state == Delivery.ACCEPTED:
                record.outcome = "accepted"
            else:
                record.outcome = "rejected"
                record.detail = describe_rejection(delivery)

    def _connection_lost(self, number: int, reason: str) -> None:
        with self._lock:
            now = time.time()
            for record in self._in_flight.values():
                record.outcome = "uncertain"
                record.settled_at = now
                record.detail = f"connection {number} lost before settlement: {reason}"
            self._in_flight.clear()

    def _done_sending(self) -> bool:
        return self.max_messages is not None and self._next_seq >= self.max_messages

    def _session(self, conn: BlockingConnection, number: int) -> None:
        options = [TargetCapabilities(QUEUE_CAPABILITY)] if self.anycast else None
        sender = conn.create_sender(self.address, handler=SettlementHandler(self._settled),
                                    options=options)
        link = sender.link
        self._event("connected", f"connection {number}")
        self._connected.set()
        base_time = time.monotonic()
        base_seq = self._next_seq
        while not self._stop_event.is_set():
            now = time.monotonic()
            if self.rate:
                due = base_seq + int((now - base_time) * self.rate) + 1
                if due - self._next_seq > self.rate:  # fell > 1 s behind: don't burst
                    base_time, base_seq = now, self._next_seq
                    due = self._next_seq + 1
            else:
                due = self._next_seq + self.max_in_flight
            while (self._next_seq < due and link.credit > 0
                   and len(self._in_flight) < self.max_in_flight and not self._done_sending()):
                self._send_one(link, number)
            if self.rate:
                next_due_at = base_time + (self._next_seq - base_seq) / self.rate
                pause = min(max(next_due_at - time.monotonic(), 0.0005), 0.05)
            else:
                pause = 0.05
            in_flight_now = len(self._in_flight)
            # raises on a dropped connection; that ends the session
            wait_until(conn, lambda: self._stop_event.is_set() or len(self._in_flight) < in_flight_now,
                       pause)
            if self._done_sending() and not self._in_flight:
                self._stop_event.wait(0.05)
        # asked to stop: collect the outstanding settlements, then close
        deadline = time.monotonic() + self.drain_timeout
        while self._in_flight and time.monotonic() < deadline:
            wait_until(conn, lambda: not self._in_flight, min(0.2, deadline - time.monotonic()))
        if self._in_flight:
            self._connection_lost(number, f"still unsettled {self.drain_timeout}s after stop")
        link.close()

    def _send_one(self, link, number: int) -> None:
        seq = self._next_seq
        msg_id = f"{self.id_prefix}-{seq}"
        props = dict(self.properties)
        props["producer"] = self.id_prefix
        body = f"{msg_id}{self.padding}"
        msg = make_message(msg_id, seq, body, props, self.durable)
        record = ProducerRecord(id=msg_id, seq=seq, sent_at=time.time(), connection=number)
        with self._lock:
            self._records[msg_id] = record
            self._in_flight[msg_id] = record
            self._next_seq += 1
        delivery = link.send(msg)
        # settlement can only be seen on a later event pass, so setting this now is in time
        delivery._ct_record = record


class Consumer(_Worker):
    """A thread that consumes from ``queue`` and accepts every message until stopped.

    The ledger has one :class:`ConsumerRecord` per delivery, so a message the
    broker redelivers (for example because the acknowledgement was lost in a
    connection drop) shows up twice, the second time normally with
    ``delivery_count >= 1``. An acknowledgement sent just before a connection
    drops may or may not have reached the broker; AMQP gives the receiver no
    confirmation. Reconnects like :class:`Producer`. ``max_messages`` stops
    taking messages after that many (the thread keeps running until stopped).
    ``record_properties`` names application properties to keep in the ledger.
    """

    def __init__(self, url: str | Sequence[str], user: str | None, password: str | None, queue: str, *,
                 prefetch: int = 100, anycast: bool = True,
                 heartbeat: float = 4.0, connect_timeout: float = 5.0,
                 reconnect_delay: float = 0.5, max_messages: int | None = None,
                 name: str | None = None, ca_path: str | None = None, record_properties: Sequence[str] = ()):
        super().__init__(url, user, password, name=name or f"consumer-{uuid.uuid4().hex[:8]}",
                         heartbeat=heartbeat, connect_timeout=connect_timeout,
                         reconnect_delay=reconnect_delay, ca_path=ca_path)
        self.queue = queue
        self.prefetch = max(prefetch, 1)
        self.anycast = anycast
        self.max_messages = max_messages
        self.record_properties = tuple(record_properties)
        self._records: list[ConsumerRecord] = []
        self._taken = 0

    def ledger(self) -> list[ConsumerRecord]:
        with self._lock:
            return [ConsumerRecord(**vars(r)) for r in self._records]

    def received_ids(self) -> list[str | None]:
        """Ids of every delivery, in arrival order (duplicates included)."""
        with self._lock:
            return [r.id for r in self._records]

    def accepted_ids(self) -> list[str | None]:
        with self._lock:
            return [r.id for r in self._records if r.accepted_at is not None]

    def duplicates(self) -> dict[str, int]:
        """Ids received more than once, with how often."""
        counts = collections.Counter(i for i in self.received_ids() if i is not None)
        return {i: n for i, n in counts.items() if n > 1}

    def stats(self) -> dict[str, Any]:
        with self._lock:
            received = len(self._records)
            accepted = sum(1 for r in self._records if r.accepted_at is not None)
            elapsed = self._elapsed()
            redelivered = sum(1 for r in self._records if r.delivery_count > 0)
        return {
            "received": received,
            "accepted": accepted,
            "duplicates": len(self.duplicates()),
            "redelivered": redelivered,
            "connections": self.connection_count,
            "connection_failures": self.connection_failures,
            "disconnections": self._disconnections(),
            "elapsed": elapsed,
            "achieved_rate": accepted / elapsed if elapsed else 0.0,
            "rate": accepted / elapsed if elapsed else 0.0,
            "running": self.is_alive(),
        }

    def _session(self, conn: BlockingConnection, number: int) -> None:
        def on_message(msg: Message, delivery: Delivery) -> None:
            properties = msg.properties or {}
            record = ConsumerRecord(id=id_text(msg.id),
                                    seq=plain(properties.get("seq")),
                                    received_at=time.time(), connection=number,
                                    delivery_count=int(msg.delivery_count or 0),
                                    properties={name: plain(properties[name])
                                                for name in self.record_properties if name in properties})
            delivery.update(Delivery.ACCEPTED)
            record.accepted_at = time.time()
            delivery.settle()
            with self._lock:
                self._records.append(record)
                self._taken += 1
            if self.max_messages is None or self._taken < self.max_messages:
                delivery.link.flow(1)

        options = [SourceCapabilities(QUEUE_CAPABILITY)] if self.anycast else None
        receiver = conn.create_receiver(self.queue, credit=0, handler=ReceiveHandler(on_message),
                                        options=options)
        link = receiver.link
        self._event("connected", f"connection {number}")
        self._connected.set()
        want = self.prefetch
        if self.max_messages is not None:
            want = min(want, self.max_messages - self._taken)
        if want > 0:
            link.flow(want)
        while not self._stop_event.is_set():
            wait_until(conn, self._stop_event.is_set, 0.05)
        link.close()
        wait_until(conn, lambda: not (link.state & Endpoint.REMOTE_ACTIVE), 2.0)
