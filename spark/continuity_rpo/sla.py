"""The application's objectives (a YAML file) and how measurements compare with them."""

from __future__ import annotations

import fnmatch

import yaml

from continuity_rpo.errors import ConfigError

DEFAULTS = {
    "window_seconds": 60,
    # The collector's interval (the rpo_job role writes it): a window must hold at least one sample.
    "sample_interval_seconds": 5.0,
    # Until the event log holds measured activations, the RTO estimate uses this.
    "activation_seconds": 30.0,
    # How long monitoring takes to notice a lost datacentre (not measured by the collection).
    "detection_seconds": 30.0,
    "objectives": {"rpo_seconds": 5.0, "rto_seconds": 120.0, "target_ratio": 0.999},
    "queues": {},
}
OBJECTIVE_KEYS = ("rpo_seconds", "rto_seconds", "target_ratio")


def _number(where, value, positive=True):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (positive and value <= 0):
        raise ConfigError(f"{where} must be a positive number, got {value!r}")
    return float(value)


def _objectives(where, given, inherited):
    if not isinstance(given, dict):
        raise ConfigError(f"{where} must be a mapping of {', '.join(OBJECTIVE_KEYS)}")
    unknown = sorted(set(given) - set(OBJECTIVE_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(OBJECTIVE_KEYS)})")
    merged = dict(inherited)
    merged.update({key: _number(f"{where}.{key}", value) for key, value in given.items()})
    if not merged["target_ratio"] < 1:
        raise ConfigError(f"{where}.target_ratio must be below 1 (it leaves an error budget), "
                          f"got {merged['target_ratio']}")
    return merged


def load(path: str | None) -> dict:
    """The SLA file merged over the defaults; every error names the key."""
    given = {}
    if path:
        with open(path, encoding="utf-8") as handle:
            given = yaml.safe_load(handle) or {}
        if not isinstance(given, dict):
            raise ConfigError(f"{path}: expected a mapping at the top")
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(DEFAULTS)})")
    interval = _number("sample_interval_seconds",
                       given.get("sample_interval_seconds", DEFAULTS["sample_interval_seconds"]))
    window = _number("window_seconds", given.get("window_seconds", DEFAULTS["window_seconds"]))
    if window != int(window) or window < interval:
        raise ConfigError(f"window_seconds must be a whole number of seconds, at least sample_interval_seconds "
                          f"({interval:g}), got {window:g}")
    config = {
        "window_seconds": int(window),
        "sample_interval_seconds": interval,
        "activation_seconds": _number("activation_seconds",
                                      given.get("activation_seconds", DEFAULTS["activation_seconds"])),
        "detection_seconds": _number("detection_seconds", given.get("detection_seconds",
                                                                    DEFAULTS["detection_seconds"])),
        "objectives": _objectives("objectives", given.get("objectives", {}), DEFAULTS["objectives"]),
    }
    queues = given.get("queues", {})
    if not isinstance(queues, dict):
        raise ConfigError("queues must map queue name patterns to objectives")
    config["queues"] = {pattern: _objectives(f"queues.{pattern}", objectives, config["objectives"])
                        for pattern, objectives in queues.items()}
    return config


def objectives_for(config: dict, queue: str) -> dict:
    """The objectives of the most specific (longest) matching pattern, else the defaults."""
    matching = [pattern for pattern in config["queues"] if fnmatch.fnmatchcase(queue, pattern)]
    return config["queues"][max(matching, key=len)] if matching else config["objectives"]


def link_compliance(rpo_windows: list[dict], objectives: dict, current_rows: list[dict] = ()) -> list[dict]:
    """Per link, over its windows with an RPO (``rpo_windows``, rows with the link's keys and ``rpo_seconds``): the
    share that met the objective, pass/fail against the target ratio, and the error-budget burn rate (1 = spending
    the budget exactly as fast as the target allows). Besides the complete windows, the window in progress counts
    once it is known to be bad: a link whose RPO now (``current_rows``) is above the objective has a bad window
    whatever the rest of it brings, so the verdict, the burn rate and the worst RPO move during a stall, not a window
    after it ends. A window in progress within the objective so far is not counted: it is not known to be good
    until it ends."""
    objective = objectives["rpo_seconds"]
    in_progress = [row for row in current_rows if row.get("rpo_seconds") is not None and row["rpo_seconds"] > objective]
    links = {}
    for row in [*rpo_windows, *in_progress]:
        rpo = row["rpo_seconds"]
        if rpo is None:
            continue
        key = (row["source_datacentre"], row["target_datacentre"])
        link = links.setdefault(key, {"source_datacentre": key[0], "target_datacentre": key[1], "windows": 0,
                                      "good_windows": 0, "worst_rpo_seconds": rpo})
        link["windows"] += 1
        link["good_windows"] += rpo <= objective
        link["worst_rpo_seconds"] = max(link["worst_rpo_seconds"], rpo)
    verdicts = []
    for link in links.values():
        good_ratio = link.pop("good_windows") / link["windows"]
        verdicts.append(dict(link, good_ratio=good_ratio, objective_seconds=objective,
                             passed=good_ratio >= objectives["target_ratio"],
                             burn_rate=(1 - good_ratio) / (1 - objectives["target_ratio"])))
    return verdicts


def queue_compliance(config: dict, rto_rows: list) -> list[dict]:
    """Per datacentre and queue: the RTO estimate against the queue's objective (no estimate fails)."""
    results = []
    for row in rto_rows:
        objective = objectives_for(config, row["queue"])["rto_seconds"]
        estimate = row["rto_seconds"]
        results.append({"datacentre": row["datacentre"], "queue": row["queue"], "objective_seconds": objective,
                        "estimate_seconds": estimate, "passed": estimate is not None and estimate <= objective})
    return results


def drill_compliance(config: dict, drill_rows: list) -> list[dict]:
    """Per drill: the actual RPO and RTO against the default objectives (a value not measured fails)."""
    results = []
    for row in drill_rows:
        for objective in ("rpo_seconds", "rto_seconds"):
            value, target = row[objective], config["objectives"][objective]
            results.append({"drill": row["drill"], "objective": objective.split("_", maxsplit=1)[0],
                            "objective_seconds": target, "value_seconds": value,
                            "passed": value is not None and value <= target})
    return results
