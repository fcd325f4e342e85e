"""What clients see of each broker while something happens to the estate: a poller per broker that, every
``interval`` seconds, opens an AMQP connection (does it accept clients within a second?), opens a TCP connection to
its client port (is it live? Artemis binds a broker's acceptors only once it is live, after loading its journal; a
backup binds none) and one to its management port (is its process up at all? a backup listens there too). A TCP
connection is accepted by the kernel even when a loaded JVM answers slowly, so slowness is not mistaken for absence.
From the samples: per datacentre the stretches when no broker was live, when none accepted clients within a
second, and the moments when no process of an HA pair was up."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
import urllib.parse

from ansible_collections.continuity.artemis.plugins.module_utils import amqp_ledger as amqp


@dataclasses.dataclass
class Sample:
    at: float
    accepting: bool
    live: bool
    process_up: bool


class BrokerPoller(threading.Thread):
    def __init__(self, node, interval: float = 0.5):
        super().__init__(name=f"poller-{node.name}", daemon=True)
        self.node = node
        self.interval = interval
        self.samples: list[Sample] = []
        self.error: BaseException | None = None
        self._stop_event = threading.Event()
        management = urllib.parse.urlsplit(node.management_url)
        self._management_address = (management.hostname, management.port)
        client = urllib.parse.urlsplit(node.amqp_url)
        self._client_address = (client.hostname, client.port)

    def _accepting(self) -> bool:
        try:
            connection = amqp.connect(self.node.amqp_url, self.node.user, self.node.password, timeout=1,
                                      ca_path=self.node.ca_cert)
        except Exception:  # noqa: BLE001 - any refusal or timeout means "not accepting clients now"
            return False
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - it accepted; closing a connection that drops at once does not matter
            pass
        return True

    @staticmethod
    def _listening(address) -> bool:
        try:
            socket.create_connection(address, timeout=1).close()
            return True
        except OSError:
            return False

    def run(self) -> None:
        try:
            while not self._stop_event.is_set():
                started = time.monotonic()
                at = time.time()
                self.samples.append(Sample(at, self._accepting(), self._listening(self._client_address),
                                           self._listening(self._management_address)))
                self._stop_event.wait(max(0.0, self.interval - (time.monotonic() - started)))
        except BaseException as exc:  # noqa: BLE001 - re-raised by stop()
            self.error = exc
            raise

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)
        if self.error is not None:
            raise AssertionError(f"{self.name} crashed: {self.error!r}") from self.error


class Availability:
    """Pollers for every broker of an estate; ``with Availability(nodes) as seen: ...``."""

    def __init__(self, nodes, interval: float = 0.5):
        self.pollers = [BrokerPoller(node, interval) for node in nodes]
        self.interval = interval

    def __enter__(self):
        for poller in self.pollers:
            poller.start()
        return self

    def __exit__(self, *exc_info):
        for poller in self.pollers:
            poller.stop()

    def _timeline(self, datacentre: str, condition) -> list[tuple[float, bool]]:
        """(time, condition over the datacentre's brokers' latest samples), at every sample of any of them."""
        pollers = [p for p in self.pollers if p.node.dc == datacentre]
        events = sorted((sample.at, index, sample) for index, poller in enumerate(pollers)
                        for sample in poller.samples)
        latest: dict[int, Sample] = {}
        timeline = []
        for at, index, sample in events:
            latest[index] = sample
            if len(latest) == len(pollers):
                timeline.append((at, condition(list(latest.values()))))
        return timeline

    @staticmethod
    def _stretches(timeline: list[tuple[float, bool]]) -> list[tuple[float, float]]:
        """[(start, end)] of the stretches where the condition was false, from the first sample that saw it false to
        the first that saw it true again (an upper bound of the real stretch by up to one interval)."""
        stretches, started = [], None
        for at, holds in timeline:
            if not holds and started is None:
                started = at
            elif holds and started is not None:
                stretches.append((started, at))
                started = None
        if started is not None:
            stretches.append((started, timeline[-1][0]))
        return stretches

    def live_gaps(self, datacentre: str) -> list[tuple[float, float]]:
        """When no broker of the datacentre was live (none had its client port bound)."""
        return self._stretches(self._timeline(datacentre, lambda samples: any(s.live for s in samples)))

    def gaps(self, datacentre: str) -> list[tuple[float, float]]:
        """When no broker of the datacentre accepted an AMQP client within a second."""
        return self._stretches(self._timeline(datacentre, lambda samples: any(s.accepting for s in samples)))

    def pair_down(self, datacentre: str) -> list[tuple[float, float]]:
        """When no process of the datacentre's brokers answered at all (both halves of a pair down together)."""
        return self._stretches(self._timeline(datacentre, lambda samples: any(s.process_up for s in samples)))

    def disturbed(self, datacentre: str) -> list[tuple[float, float]]:
        """When some broker of the datacentre did not answer (was being restarted)."""
        return self._stretches(self._timeline(datacentre, lambda samples: all(s.process_up for s in samples)))

    def samples(self) -> int:
        return sum(len(p.samples) for p in self.pollers)


def overlapping(first: list[tuple[float, float]], second: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The stretches during which both lists had a stretch going."""
    return [(max(a, c), min(b, d)) for a, b in first for c, d in second if max(a, c) < min(b, d)]
