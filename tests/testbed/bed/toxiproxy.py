"""Toxiproxy in the router: one proxy per remote node and WAN port, started from a config file, and the latency
toxics that make `wan --delay-ms` (restarting Toxiproxy when its API hangs).
"""
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from .config import LOG_DIR, REPO, ROUTER_IP, ROUTER_NS, STATE_DIR, TOXI_PORT, WAN_PORTS, TestbedError
from .helpers import nodes_of, write_file
from .processes import kill_and_wait, spawn
from .topology import proxy_name, proxy_port


def toxiproxy_binary():
    path = Path(os.environ.get("TOXIPROXY_SERVER") or REPO / ".tools" / "bin" / "toxiproxy-server")
    if not os.access(path, os.X_OK):
        raise TestbedError(f"Toxiproxy server not found at {path} (set TOXIPROXY_SERVER or install it there)")
    return path


def toxi(method, path, body=None):
    # No proxy handler: an http_proxy in the environment must not see test bed traffic.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(f"http://{ROUTER_IP}:{TOXI_PORT}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    with opener.open(req, timeout=10) as resp:
        data = resp.read()
    return json.loads(data) if data.strip() else None


def start_toxiproxy(state):
    proxies = [{"name": proxy_name(n, port), "listen": f"{ROUTER_IP}:{proxy_port(n, j)}",
                "upstream": f"{n.address}:{port}", "enabled": True}
               for n in nodes_of(state) for j, port in enumerate(WAN_PORTS)]
    config = STATE_DIR / "toxiproxy.json"
    write_file(config, json.dumps(proxies, indent=2) + "\n")
    spawn(["ip", "netns", "exec", ROUTER_NS, toxiproxy_binary(), "-host", ROUTER_IP, "-port", TOXI_PORT,
           "-config", config], "toxiproxy.log", env={**os.environ, "LOG_LEVEL": "warn"})
    deadline = time.time() + 20
    while True:
        try:
            if len(toxi("GET", "/proxies")) == len(proxies):
                return
        except (OSError, urllib.error.URLError, ValueError):
            pass
        if time.time() > deadline:
            raise TestbedError(f"Toxiproxy did not start (see {LOG_DIR / 'toxiproxy.log'})")
        time.sleep(0.2)


def apply_latency(state):
    try:
        set_latency_toxics(state)
    except (TimeoutError, urllib.error.URLError) as exc:
        # Toxiproxy's control API can hang for good while it removes a toxic from a connection whose destination no
        # longer reads (a partitioned or stopped broker: Shopify/toxiproxy#558, open), and every new WAN connection
        # hangs with it. A restart cuts the WAN connections, as a short WAN outage would; the brokers reconnect.
        print(f"testbed: Toxiproxy's API did not answer ({exc}); restarting it, which cuts every WAN connection",
              file=sys.stderr)
        restart_toxiproxy(state)
        set_latency_toxics(state)


def restart_toxiproxy(state):
    found = subprocess.run(["pgrep", "-f", f"toxiproxy-server -host {ROUTER_IP} "], capture_output=True, text=True,
                           check=False)
    kill_and_wait([int(pid) for pid in found.stdout.split()])
    start_toxiproxy(state)


def set_latency_toxics(state):
    toxi("POST", "/reset")  # removes every toxic, also from established connections
    wan = state["wan"]
    if wan["delay_ms"] <= 0:
        return
    for node in nodes_of(state):
        for port in WAN_PORTS:
            for stream in ("upstream", "downstream"):
                toxi("POST", f"/proxies/{proxy_name(node, port)}/toxics",
                     {"name": f"wan-{stream}", "type": "latency", "stream": stream, "toxicity": 1.0,
                      "attributes": {"latency": wan["delay_ms"], "jitter": wan["jitter_ms"]}})
