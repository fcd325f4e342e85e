"""The measurement host's configuration (one YAML file for the collector and the prober; the rpo_job role writes
it from the inventory). Passwords come from files readable only by the service user, never from the command line.

    telemetry: /var/lib/continuity-rpo/telemetry
    interval: 5                                   # seconds between collector samples
    segment_seconds: 60                           # a telemetry file is published (readable) at most this old
    window_seconds: 60                            # the job's window: a queue's unchanged rows are left out within it
    links:                                        # every mirror connection and bridge: its datacentre, its name
      - {source: dc1, name: dc2_all, target: dc2} #   and the datacentre it leads to (the estate model's)
    brokers:                                      # metrics_url: where broker metrics are on (optional)
      - {name: dc1-node1, datacentre: dc1, management_url: "http://10.0.1.11:8161/console/jolokia",
         amqp_url: "amqps://10.0.1.11:5671", metrics_url: "https://10.0.1.11:9404/metrics"}
    staging_delays:                               # the groups active at every datacentre (the estate model's)
      - {group: shared, delay_ms: 20000, prefix: shared.}
    management: {user: monitor, password_file: /etc/continuity-rpo/management.password, validate_certs: true,
                 ca_path: null, request_timeout: 5}
    probes:
      interval: 1                                 # seconds between probes on each route
      user: app
      password_file: /etc/continuity-rpo/probe.password
      routes: [{address: continuity.probe, source: dc1, targets: [dc2]}]
    endpoint:                                     # optional: the prober's live figures over HTTPS, to the
      address: 0.0.0.0                            #   management user above (HTTP Basic)
      port: 9405
      certificate: /etc/continuity-rpo/tls/endpoint.pem
      key: /etc/continuity-rpo/tls/endpoint.key
      sla: /etc/continuity-rpo/sla.yml            #   the objectives file (optional; its defaults otherwise)
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

import yaml
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import ManagementError

from continuity_rpo.errors import ConfigError


def _require(mapping, key, where, kind=str):
    value = mapping.get(key) if isinstance(mapping, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool) or value in ("", [], {}):
        raise ConfigError(f"{where}{key} is missing or not a {getattr(kind, '__name__', kind)}: {value!r}")
    return value


def _secret(section, where):
    path = _require(section, "password_file", where)
    try:
        with open(path, encoding="utf-8") as handle:
            secret = handle.read().strip()
    except OSError as exc:
        raise ConfigError(f"{where}password_file {path}: {exc.strerror}") from None
    if not secret:
        raise ConfigError(f"{where}password_file {path} is empty")
    return secret


def load_config(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle) or {}
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from None
    _require(raw, "telemetry", "")
    brokers = _require(raw, "brokers", "", list)
    for index, broker in enumerate(brokers):
        for key in ("name", "datacentre", "management_url"):
            _require(broker, key, f"brokers[{index}].")
    management = _require(raw, "management", "", dict)
    config = {
        "telemetry": raw["telemetry"],
        "interval": float(raw.get("interval", 5)),
        "segment_seconds": float(raw.get("segment_seconds", 60)),
        "window_seconds": float(raw.get("window_seconds", 60)),
        "links": _require(raw, "links", "", list),
        "brokers": brokers,
        "management": {"management_user": _require(management, "user", "management."),
                       "management_password": _secret(management, "management."),
                       "validate_certs": bool(management.get("validate_certs", True)),
                       "ca_path": management.get("ca_path"),
                       "request_timeout": float(management.get("request_timeout", 5))},
    }
    if not config["window_seconds"] >= config["interval"] > 0:
        raise ConfigError(f"window_seconds ({config['window_seconds']:g}) must be at least interval "
                          f"({config['interval']:g}), and interval more than 0")
    config["staging_delays"] = {}
    for index, delay in enumerate(raw.get("staging_delays") or []):
        group = _require(delay, "group", f"staging_delays[{index}].")
        config["staging_delays"][group] = _require(delay, "delay_ms", f"staging_delays[{index}].", int) / 1000.0
    datacentres = {broker["datacentre"] for broker in brokers}
    for index, link in enumerate(config["links"]):
        for key in ("source", "name", "target"):
            _require(link, key, f"links[{index}].")
    probes = raw.get("probes")
    if probes is not None:
        routes = _require(probes, "routes", "probes.", list)
        for index, route in enumerate(routes):
            where = f"probes.routes[{index}]."
            _require(route, "address", where)
            for datacentre in [_require(route, "source", where)] + _require(route, "targets", where, list):
                if datacentre not in datacentres:
                    raise ConfigError(f"{where}: datacentre {datacentre!r} has no broker in brokers "
                                      f"(datacentres: {', '.join(sorted(datacentres))})")
        config["probes"] = {"interval": float(probes.get("interval", 1)), "routes": routes,
                            "user": _require(probes, "user", "probes."), "password": _secret(probes, "probes."),
                            "ca_path": config["management"]["ca_path"]}
    served = raw.get("endpoint")
    if served is not None:
        config["endpoint"] = {"address": _require(served, "address", "endpoint."),
                              "port": _require(served, "port", "endpoint.", int),
                              "certificate": _require(served, "certificate", "endpoint."),
                              "key": _require(served, "key", "endpoint."),
                              "sla": served.get("sla")}
        if not 0 < config["endpoint"]["port"] < 65536:
            raise ConfigError(f"endpoint.port is not a TCP port: {config['endpoint']['port']}")
    return config


def command_line(name: str, description: str, run, argv=None, needs: str | None = None) -> int:
    """The collector's and the prober's shared command line: --config FILE [--duration SECONDS]; exit status 2,
    naming what is wrong, on a bad configuration or a refused login. SIGTERM (systemd stopping the service) or
    SIGINT ends the current round and stops it, its telemetry published."""
    parse = argparse.ArgumentParser(prog=f"continuity_rpo.{name}", description=description)
    parse.add_argument("--config", required=True)
    parse.add_argument("--duration", type=float, default=0, help="stop after this many seconds (0: never)")
    arguments = parse.parse_args(argv)
    try:
        config = load_config(arguments.config)
        if needs and needs not in config:
            raise ConfigError(f"{arguments.config}: {needs} is missing")
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        run(config, arguments.duration, stop)
    except (ConfigError, ManagementError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    return 0
