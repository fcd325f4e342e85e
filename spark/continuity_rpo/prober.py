"""The canary prober: timestamped probe messages through every replication route, and when each became visible.

    python -m continuity_rpo.prober --config measurement.yml [--duration SECONDS]

Every ``probes.interval`` seconds, per route: a persistent probe message is sent with AMQP to the route's address
in its source datacentre (the first of its brokers that accepts it), like any producer; a "sent" row is written
once the broker has accepted it (a probe the source refused was never at risk). Then each target datacentre's
live broker is asked, through the management API, which probes its copy of the queue holds: a probe found there
for the first time gets a "seen" row. Both times come from this process's clock. A probe seen at every target is
removed at the source, and the mirror removes the copies. Probes expire after ``probes.ttl`` seconds (default 600)
so a stopped prober leaves nothing behind.

With an ``endpoint`` in the configuration the prober also serves, over HTTPS to the monitoring user, what it knows
now (``LiveRpo``): the age of the oldest probe not yet visible at each target, rising from the first second of a
stall, where the job's figures come a run later.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid

from ansible_collections.continuity.artemis.plugins.module_utils import amqp_ledger
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ArtemisManagement, ManagementError, MBeanNotFound)
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from proton import Message

from continuity_rpo import endpoint, sla
from continuity_rpo.config import command_line
from continuity_rpo.store import Store

PROBE_PROPERTY = "continuity_probe_id"
# The newest outstanding probes asked for at each look (a filter of that many ids): one seen there covers every
# older one.
LISTED_PROBES = 100


def _probes_filter(probes: list[str]) -> str:
    """A message filter selecting these probes (their ids are the prober's own: letters, digits and dashes)."""
    return f"{PROBE_PROPERTY} IN ({', '.join(repr(str(probe)) for probe in probes)})"


class Route:
    """One address probed from one source datacentre to its targets."""

    def __init__(self, route: dict, config: dict):
        self.address = route["address"]
        self.source = route["source"]
        self.targets = list(route["targets"])
        self.brokers = {dc: [b for b in config["brokers"] if b["datacentre"] == dc]
                        for dc in [self.source] + self.targets}
        self.outstanding: dict[str, set[str]] = {}  # probe id -> targets that have not shown it yet, in send order
        self.sent_at: dict[str, float] = {}  # probe id -> when the source accepted it (the outstanding ones)
        # Per target: when the oldest probe not yet covered there was sent (None: nothing at risk). Replaced whole
        # after each send and observation, so that the endpoint's thread reads a consistent value without a lock.
        self.at_risk_since: dict[str, float | None] = dict.fromkeys(self.targets)
        self.connection = None
        self.sender = None
        self.sequence = 0
        self.prefix = uuid.uuid4().hex[:8]

    def _sender(self, probes: dict):
        if self.sender is not None:
            return self.sender
        errors = []
        for broker in self.brokers[self.source]:
            url = broker["amqp_url"]
            try:
                # The password crosses TLS only: on an amqp:// URL proton refuses to send it.
                self.connection = amqp_ledger.connect(url, probes["user"], probes["password"], timeout=5,
                                                      role=f"prober-{self.prefix}", ca_path=probes.get("ca_path"))
                # An anycast queue: on a multicast address a probe sent before any subscription exists is dropped.
                self.sender = self.connection.create_sender(self.address, options=amqp_ledger.TargetCapabilities(
                    amqp_ledger.QUEUE_CAPABILITY))
                return self.sender
            except Exception as exc:  # proton raises several types; the next broker may accept
                errors.append(f"{broker['name']}: {exc}")
                self._close()
        raise ConnectionError("; ".join(errors))

    def _close(self):
        amqp_ledger.close_quietly(self.connection)
        self.connection = self.sender = None

    def send(self, probes: dict) -> dict | None:
        """Send one probe; its "sent" row, or None when the source did not accept it."""
        self.sequence += 1
        probe_id = f"{self.source}-{self.prefix}-{self.sequence}"
        sent_at = time.time()
        message = Message(id=probe_id, durable=True, ttl=probes.get("ttl", 600),
                          properties={PROBE_PROPERTY: probe_id}, body=sent_at)
        try:
            self._sender(probes).send(message, timeout=5)
        except Exception as exc:  # noqa: BLE001 - reported, and the next interval tries again
            self._close()
            print(f"prober: {self.address} at {self.source} did not take probe {probe_id}: {exc}", file=sys.stderr,
                  flush=True)
            return None
        self.outstanding[probe_id] = set(self.targets)
        self.sent_at[probe_id] = sent_at
        self._note_at_risk()
        return {"probe_id": probe_id, "source_datacentre": self.source, "event": "sent", "time": sent_at}

    def _note_at_risk(self):
        oldest = {}
        for probe, targets in self.outstanding.items():  # in send order: the first found per target is the oldest
            for target in targets:
                oldest.setdefault(target, self.sent_at[probe])
        self.at_risk_since = {target: oldest.get(target) for target in self.targets}

    def _visible(self, datacentre: str, management: dict, waiting: list[str]) -> set[str] | None:
        """Which of the ``waiting`` probe ids the datacentre's live broker holds; None when no broker of it answers.
        Counted by id (countMessages grouped by the probe id), never listed: Artemis lists only the first page of a
        queue (management-browse-page-size, 200) and applies the filter within it, and a target may hold more than a
        page of probes (the bridge engine's copies stay until they expire or a reconciliation). Asked for the newest
        LISTED_PROBES waiting ones: one seen covers every older one."""
        answered = False
        for broker in self.brokers[datacentre]:
            client = ArtemisManagement.from_params(broker, management)
            try:
                counts = client.count_messages(self.address, self.address, _probes_filter(waiting[-LISTED_PROBES:]),
                                               group_by=PROBE_PROPERTY)
            except MBeanNotFound:
                # No such queue: not replicated there yet, or a waiting backup (the live one may have it).
                answered = True
                continue
            except ManagementError:
                continue
            return {probe for probe, count in counts.items() if count}
        return set() if answered else None

    def observe(self, management: dict) -> list[dict]:
        """"seen" rows for probes newly visible at a target; removes at the source those seen everywhere."""
        rows = []
        for target in self.targets:
            waiting = [probe for probe, targets in self.outstanding.items() if target in targets]
            if not waiting:
                continue
            visible = self._visible(target, management, waiting)
            seen_at = time.time()
            newest_visible = max((index for index, probe in enumerate(waiting) if probe in (visible or ())),
                                 default=None)
            for index, probe in enumerate(waiting):
                if newest_visible is None or index > newest_visible:
                    break
                # A probe the target shows is seen; an older one it does not show is covered (the mirror delivers
                # in order: it was there, and is gone, expired or consumed), as the job counts it.
                self.outstanding[probe].discard(target)
                if probe in visible:
                    rows.append({"probe_id": probe, "source_datacentre": self.source, "target_datacentre": target,
                                 "event": "seen", "time": seen_at})
        done = [probe for probe, targets in self.outstanding.items() if not targets]
        if done and self._remove(done, management):
            for probe in done:
                del self.outstanding[probe]
                del self.sent_at[probe]
        self._note_at_risk()
        return rows

    def _remove(self, probes: list[str], management: dict) -> bool:
        for broker in self.brokers[self.source]:
            try:
                ArtemisManagement.from_params(broker, management).remove_messages(
                    self.address, self.address, _probes_filter(probes))
                return True
            except ManagementError:
                continue
        return False


class LiveRpo:
    """The prober's figures at the moment Prometheus asks, per link (source and target datacentre, the job's labels):
    the RPO in time by the job's definition, the age of the oldest probe not yet covered at the target (seen there,
    or a later one seen); 0 when every probe sent was. A target the prober cannot read counts as not showing
    anything. Beside it the link's objective and target ratio (the job's, from the same objectives file), so that an
    alert compares them from one scrape and the error budget's burn rate is computed where the figure is; and when
    the prober last finished a round, so that a prober that hangs is told from a healthy link."""

    def __init__(self, routes: list[Route], objective_seconds: float, target_ratio: float):
        self.routes = routes
        self.objective_seconds = objective_seconds
        self.target_ratio = target_ratio
        self.last_round: float | None = None

    def collect(self):
        now = time.time()
        rpo = GaugeMetricFamily(
            "continuity_artemis_live_rpo_seconds",
            "Age of the oldest canary probe accepted at the source and not yet visible at the target, now (the "
            "prober's figure; the job's continuity_artemis_rpo_seconds by the same definition, a run later).",
            labels=["source_datacentre", "target_datacentre"])
        worst: dict[tuple[str, str], float] = {}
        for route in self.routes:
            for target, since in route.at_risk_since.items():
                link = (route.source, target)
                worst[link] = max(worst.get(link, 0.0), 0.0 if since is None else max(0.0, now - since))
        objective = GaugeMetricFamily("continuity_artemis_live_rpo_objective_seconds",
                                      "The link's RPO objective (objectives.rpo_seconds of the objectives file).",
                                      labels=["source_datacentre", "target_datacentre"])
        target = GaugeMetricFamily("continuity_artemis_live_rpo_target_ratio",
                                   "The share of the time the link's RPO must be within its objective "
                                   "(objectives.target_ratio of the objectives file; 1 minus it is the error budget).",
                                   labels=["source_datacentre", "target_datacentre"])
        for link, seconds in sorted(worst.items()):
            rpo.add_metric(list(link), seconds)
            objective.add_metric(list(link), self.objective_seconds)
            target.add_metric(list(link), self.target_ratio)
        yield rpo
        yield objective
        yield target
        if self.last_round is not None:
            round_done = GaugeMetricFamily(
                "continuity_artemis_prober_last_round_timestamp_seconds",
                "When the prober last finished sending and looking on every route.")
            round_done.add_metric([], self.last_round)
            yield round_done


def run(config: dict, duration: float, stop: threading.Event | None = None) -> None:
    probes = config["probes"]
    routes = [Route(route, config) for route in probes["routes"]]
    store = Store(config["telemetry"], "prober", config["segment_seconds"])
    objectives = sla.load(config["endpoint"].get("sla") if config.get("endpoint") else None)["objectives"]
    live = LiveRpo(routes, objectives["rpo_seconds"], objectives["target_ratio"])
    server = None
    if config.get("endpoint"):
        registry = CollectorRegistry()
        registry.register(live)
        server = endpoint.serve(registry, config["endpoint"], config["management"]["management_user"],
                                config["management"]["management_password"])
    deadline = time.monotonic() + duration if duration else None
    try:
        while (deadline is None or time.monotonic() < deadline) and not (stop and stop.is_set()):
            started = time.monotonic()
            for route in routes:
                sent = route.send(probes)
                rows = [dict(sent, target_datacentre=target) for target in route.targets] if sent else []
                store.append("probes", rows, time.time())
                store.append("probes", route.observe(config["management"]), time.time())
            live.last_round = time.time()
            (stop.wait if stop else time.sleep)(max(0.0, probes["interval"] - (time.monotonic() - started)))
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        store.close()
        for route in routes:
            route._close()


def main(argv=None) -> int:
    return command_line("prober", __doc__.split("\n", maxsplit=1)[0], run, argv, needs="probes")


if __name__ == "__main__":
    sys.exit(main())
