"""The tests' one-shot AMQP clients: put messages on a broker (send), look at them (browse), take them off (receive),
and poll until something holds (wait_for). Built on the collection's AMQP set-up (module_utils/amqp_ledger.py), whose
ledgered Producer and Consumer are re-exported here so that a test imports one module: as there, a message counts
as accepted only when the broker settled it Accepted, and a password crosses TLS only."""

from __future__ import annotations

import itertools
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from proton import Delivery, Endpoint, Message, ProtonException
from proton.reactor import Copy
from proton.utils import BlockingConnection

from ansible_collections.continuity.artemis.plugins.module_utils.amqp_ledger import (
    QUEUE_CAPABILITY, AmqpError, Consumer, Producer, ReceiveHandler, SettlementHandler, SourceCapabilities,
    TargetCapabilities, close_quietly, connect, describe_rejection, id_text, make_message, plain, safe_url, wait_until)

__all__ = ["AmqpError", "SendError", "ReceiveError", "ReceivedMessage", "Producer", "Consumer", "connect", "send",
           "browse", "receive", "wait_for"]


def properties_for(properties: Mapping[str, Any] | Callable[[int], Mapping[str, Any]] | None,
                   seq: int) -> Mapping[str, Any] | None:
    if callable(properties):
        return properties(seq)
    return properties


class SendError(AmqpError):
    """Not every message of a :func:`send` call was accepted by the broker.

    ``accepted`` holds the ids the broker did accept (in send order);
    ``not_accepted`` maps every other id to what happened to it
    (``"rejected: ..."``, ``"released"``, ``"uncertain: ..."``, ``"not sent"``).
    """

    def __init__(self, message: str, accepted: list[str], not_accepted: dict[str, str]):
        super().__init__(message)
        self.accepted = accepted
        self.not_accepted = not_accepted


class ReceiveError(AmqpError):
    """:func:`receive` did not get the requested number of messages in time.

    Nothing was consumed: the messages that did arrive were released back to
    the queue. ``received`` holds them, for the error report.
    """

    def __init__(self, message: str, received: list["ReceivedMessage"]):
        super().__init__(message)
        self.received = received


@dataclass(frozen=True)
class ReceivedMessage:
    """A message as received (or browsed) from a broker.

    ``delivery_count`` is the AMQP header's value. Artemis 2.56 reports
    4294967295 (-1 as uint) when *browsing* a mirrored copy on a mirror target;
    consumers there see 0. Don't read much into it for browsed messages.
    """

    id: str | None
    body: Any
    properties: dict
    durable: bool
    delivery_count: int
    annotations: dict
    address: str | None

    @property
    def seq(self) -> int | None:
        value = self.properties.get("seq")
        return int(value) if value is not None else None


def _to_received(msg: Message, delivery: Delivery | None = None) -> ReceivedMessage:
    count = msg.delivery_count or 0
    return ReceivedMessage(
        id=id_text(msg.id),
        body=plain(msg.body),
        properties=plain(dict(msg.properties or {})),
        durable=bool(msg.durable),
        delivery_count=int(count),
        annotations=plain(dict(msg.annotations or {})),
        address=msg.address,
    )


def send(url: str, user: str | None, password: str | None, address: str,
         bodies_or_count: int | Sequence[Any],
         properties: Mapping[str, Any] | Callable[[int], Mapping[str, Any]] | None = None,
         durable: bool = True, id_prefix: str | None = None, *,
         anycast: bool = True, timeout: float = 30.0, window: int = 200, ca_path: str | None = None) -> list[str]:
    """Send messages to ``address`` and return the ids the broker accepted.

    ``bodies_or_count`` is either a sequence of bodies (str, bytes, dict,
    list, ...) or a number of messages, whose bodies are then
    ``"<id_prefix>-<seq>"``. Each message gets a unique message id
    ``"<id_prefix>-<seq>"`` (``seq`` counts from 0), ``durable`` in its header,
    the caller's application ``properties`` (a mapping, or a callable taking
    ``seq`` and returning one) and a ``seq`` property.

    With ``anycast`` (the default) the sender link asks for the ``queue``
    capability, so an auto-created address is ANYCAST with a queue of the same
    name. (Without it Artemis auto-creates a MULTICAST address with no queue,
    accepts the messages and drops them.) Up to ``window`` messages are in
    flight at once.

    Raises :class:`SendError` (with the accepted ids attached) unless every
    message was settled Accepted within ``timeout`` seconds, and
    :class:`AmqpError` if no connection or link could be opened.
    """
    if isinstance(bodies_or_count, int):
        count = bodies_or_count
        bodies: Sequence[Any] | None = None
    else:
        bodies = list(bodies_or_count)
        count = len(bodies)
    prefix = id_prefix or f"msg-{uuid.uuid4().hex[:12]}"
    ids = [f"{prefix}-{seq}" for seq in range(count)]
    outcome: dict[str, str] = {}

    def settled(delivery: Delivery) -> None:
        # proton keeps attributes set on a Delivery wrapper in the C object's
        # record, so the event's wrapper sees what was set at send time
        msg_id = getattr(delivery, "_ct_id", None)
        if msg_id is None:
            return
        if delivery.remote_state == Delivery.ACCEPTED:
            outcome[msg_id] = "accepted"
        else:
            outcome[msg_id] = describe_rejection(delivery)

    conn = connect(url, user, password, timeout=timeout, role="send", ca_path=ca_path)
    deadline = time.monotonic() + timeout
    failure: str | None = None
    try:
        options = [TargetCapabilities(QUEUE_CAPABILITY)] if anycast else None
        try:
            sender = conn.create_sender(address, handler=SettlementHandler(settled), options=options)
        except ProtonException as exc:
            raise AmqpError(f"cannot open sender to {address!r} on {safe_url(url)}: {exc}") from exc
        link = sender.link
        next_seq = 0
        try:
            while len(outcome) < count:
                while (next_seq < count and link.credit > 0
                       and next_seq - len(outcome) < window):
                    seq = next_seq
                    body = bodies[seq] if bodies is not None else ids[seq]
                    msg = make_message(ids[seq], seq, body, properties_for(properties, seq), durable)
                    delivery = link.send(msg)
                    delivery._ct_id = ids[seq]
                    next_seq += 1
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    failure = "timed out waiting for settlement"
                    break
                done = len(outcome)
                sent = next_seq
                wait_until(conn, lambda: len(outcome) > done or (
                    link.credit > 0 and sent < count and sent - len(outcome) < window), min(remaining, 1.0))
        except ProtonException as exc:
            failure = f"connection failed: {exc}"
        accepted = [i for i in ids if outcome.get(i) == "accepted"]
        if len(accepted) == count:
            return accepted
        not_accepted = {}
        for seq, msg_id in enumerate(ids):
            state = outcome.get(msg_id)
            if state == "accepted":
                continue
            if state is not None:
                not_accepted[msg_id] = state
            elif seq < next_seq:
                not_accepted[msg_id] = f"uncertain: {failure or 'not settled'}"
            else:
                not_accepted[msg_id] = "not sent"
        sample = dict(itertools.islice(not_accepted.items(), 5))
        raise SendError(
            f"{len(accepted)}/{count} messages accepted by {safe_url(url)} address {address!r}"
            f"{'; ' + failure if failure else ''}; not accepted e.g. {sample}",
            accepted, not_accepted)
    finally:
        close_quietly(conn)


def _open_receiver(conn: BlockingConnection, url: str, queue: str,
                   on_message: Callable[[Message, Delivery], None], options: Any, verb: str):
    """A receiver on ``queue`` with no credit yet; ``verb`` names the action in the error.

    Callers must keep the returned receiver referenced while they use its link: a collected receiver closes it.
    """
    try:
        return conn.create_receiver(queue, credit=0, handler=ReceiveHandler(on_message), options=options)
    except ProtonException as exc:
        raise AmqpError(f"cannot {verb} {queue!r} on {safe_url(url)}: {exc}") from exc


def browse(url: str, user: str | None, password: str | None, queue: str,
           timeout: float = 30.0, idle: float = 3.0, *, anycast: bool = True,
           batch: int = 500, ca_path: str | None = None) -> list[ReceivedMessage]:
    """Return every message currently in ``queue`` without consuming any.

    Opens a receiver with distribution-mode ``copy`` (an Artemis queue
    browser) and asks the broker to drain its credit in rounds of ``batch``:
    the broker sends what it has and then hands the rest of the credit back,
    which tells us when we have seen everything. As a safety net it also stops
    when nothing arrives for ``idle`` seconds. Raises :class:`AmqpError` if the
    whole browse takes longer than ``timeout`` seconds.

    ``queue`` may be a queue name or a fully-qualified ``address::queue``.
    Messages a consumer holds unacknowledged are not shown (Jolokia's
    MessageCount does count them). Beware: with Artemis's default
    address-settings, browsing a queue that does not exist *creates* it
    (empty), exactly as a consumer would.
    """
    received: list[ReceivedMessage] = []
    last_arrival = [time.monotonic()]

    def on_message(msg: Message, delivery: Delivery) -> None:
        received.append(_to_received(msg, delivery))
        last_arrival[0] = time.monotonic()
        # A browser's acknowledgement is a no-op for Artemis; settle so proton
        # can forget the delivery.
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()

    conn = connect(url, user, password, timeout=timeout, role="browse", ca_path=ca_path)
    deadline = time.monotonic() + timeout
    try:
        options: list = [Copy()]
        if anycast:
            options.append(SourceCapabilities(QUEUE_CAPABILITY))
        receiver = _open_receiver(conn, url, queue, on_message, options, "browse")
        link = receiver.link
        last_arrival[0] = time.monotonic()
        while True:
            before = len(received)
            link.drain(batch)
            while True:
                if not link.draining():
                    break
                now = time.monotonic()
                if now >= deadline:
                    raise AmqpError(
                        f"browsing {queue!r} on {safe_url(url)} took longer than {timeout}s "
                        f"({len(received)} messages so far)")
                if now - last_arrival[0] >= idle and len(received) == before:
                    break
                wait_until(conn, lambda: not link.draining(), min(0.2, deadline - now))
            got = len(received) - before
            if got < batch:
                break
        return received
    finally:
        close_quietly(conn)


def receive(url: str, user: str | None, password: str | None, queue: str, count: int,
            timeout: float = 30.0, *, anycast: bool = True, ca_path: str | None = None) -> list[ReceivedMessage]:
    """Consume exactly ``count`` messages from ``queue`` and accept them.

    The receiver is given exactly ``count`` credits. Messages are accepted only
    once all ``count`` have arrived; then the connection is closed cleanly
    (so the acknowledgements reach the broker before this returns). If fewer
    arrive within ``timeout`` seconds, the ones that did are released back to
    the queue and :class:`ReceiveError` is raised.
    """
    if count <= 0:
        return []
    received: list[tuple[ReceivedMessage, Delivery]] = []
    giving_up = [False]

    def on_message(msg: Message, delivery: Delivery) -> None:
        if giving_up[0]:
            # a message we released came straight back on the remaining credit
            delivery.update(Delivery.RELEASED)
            delivery.settle()
            return
        received.append((_to_received(msg, delivery), delivery))

    conn = connect(url, user, password, timeout=timeout, role="receive", ca_path=ca_path)
    deadline = time.monotonic() + timeout
    try:
        options = [SourceCapabilities(QUEUE_CAPABILITY)] if anycast else None
        receiver = _open_receiver(conn, url, queue, on_message, options, "receive from")
        link = receiver.link
        link.flow(count)
        while len(received) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                wait_until(conn, lambda: len(received) >= count, min(remaining, 1.0))
            except ProtonException as exc:
                raise AmqpError(f"connection to {safe_url(url)} failed while receiving from "
                                f"{queue!r} after {len(received)}/{count} messages: {exc}") from exc
        if len(received) < count:
            giving_up[0] = True
            for _message, delivery in received:
                delivery.update(Delivery.RELEASED)
                delivery.settle()
            link.close()
            wait_until(conn, lambda: not (link.state & Endpoint.REMOTE_ACTIVE), 5.0)
            raise ReceiveError(f"only {len(received)}/{count} messages arrived from {queue!r} on "
                               f"{safe_url(url)} within {timeout}s (released them again)",
                               [m for m, _delivery in received])
        for _message, delivery in received:
            delivery.update(Delivery.ACCEPTED)
            delivery.settle()
        link.close()
        wait_until(conn, lambda: not (link.state & Endpoint.REMOTE_ACTIVE), 5.0)
        return [m for m, _delivery in received]
    finally:
        close_quietly(conn, timeout=5.0)


def wait_for(probe: Callable[[], Any], *args: Any, timeout: float | None = None,
             interval: float | None = None, condition: Callable[[Any], Any] | None = None,
             description: str | None = None) -> Any:
    """Poll until a value is good enough, and return that value.

    Two ways to call it::

        wait_for(predicate, timeout=30, interval=0.5)       # or (predicate, 30, 0.5)
        wait_for(probe, condition, timeout=30, interval=0.5)

    The first form waits for ``predicate()`` to return something truthy and
    returns it. The second calls ``probe()`` and waits for
    ``condition(value)`` to be truthy, returning ``value`` (e.g. the list of
    browsed messages once it is long enough).

    An exception from ``probe``/``condition`` counts as "not yet" (a broker
    may still be starting). On timeout raises ``AssertionError`` showing the
    last value (or exception) seen. Defaults: ``timeout=30``, ``interval=0.5``.
    """
    rest = list(args)
    if rest and callable(rest[0]):
        if condition is not None:
            raise TypeError("condition given twice")
        condition = rest.pop(0)
    if len(rest) > 2:
        raise TypeError("wait_for(probe, [condition], [timeout], [interval])")
    if rest:
        if timeout is not None:
            raise TypeError("timeout given twice")
        timeout = float(rest.pop(0))
    if rest:
        if interval is not None:
            raise TypeError("interval given twice")
        interval = float(rest.pop(0))
    timeout = 30.0 if timeout is None else timeout
    interval = 0.5 if interval is None else interval

    deadline = time.monotonic() + timeout
    last: Any = None
    last_exc: BaseException | None = None
    attempts = 0
    while True:
        attempts += 1
        try:
            last = probe()
            last_exc = None
            if (condition(last) if condition is not None else last):
                return last
        except Exception as exc:  # noqa: BLE001 - reported on timeout
            last_exc = exc
        if time.monotonic() >= deadline:
            what = description or getattr(condition or probe, "__name__", repr(condition or probe))
            if last_exc is not None:
                seen = f"last error: {type(last_exc).__name__}: {last_exc}"
            else:
                shown = repr(last)
                if isinstance(last, (list, tuple, set, dict)):
                    shown = f"({len(last)} items) {shown[:1500]}"
                seen = f"last value: {shown[:2000]}"
            raise AssertionError(f"timed out after {timeout}s ({attempts} tries) waiting for "
                                 f"{what}; {seen}") from last_exc
        time.sleep(min(interval, max(deadline - time.monotonic(), 0)))
