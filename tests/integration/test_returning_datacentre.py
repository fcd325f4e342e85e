"""A datacentre lost in a failover comes back fenced (the broker plugin's activation check, issue 47).

Its journal still grants its clients the groups it owned, and the failover could not reach it. When its broker
starts it reads the activation record the failover left at the other datacentre, and fences those groups before its
acceptors open: its clients are refused from the first connection on, on every match of those groups, so that a
swapover back finds no other datacentre active. Before the check, the chaos run saw the returning datacentre active for about 36 s until failback's fence
(the failback itself, under load: tests/integration/test_failover.py and the chaos regression, make drills).
"""

from __future__ import annotations

import concurrent.futures
import json
import time
import uuid

import pytest

from support import amqp_clients as amqp
from support.estate import run_playbook

GROUPS = ["all", "books"]


def _run(playbook, **extra_vars):
    return run_playbook(playbook, extra_args=["-e", json.dumps(extra_vars)])


def test_a_datacentre_lost_in_a_failover_comes_back_fenced(dc1_active_at_the_end):
    estate = dc1_active_at_the_end
    dc1 = estate.dc("dc1")
    estate.testbed("kill", dc1.name)  # as a power loss leaves it: no clean stop
    failover = _run("playbooks/failover.yml", failover_target="dc2", failover_confirm=True,
                    failover_last_known_lag_s=0)
    assert failover.rc == 0, failover.output[-4000:]

    # As the host's init starts it at boot.
    estate.exec(dc1.name, "sh", "-c", f"rm -f /var/opt/artemis/{dc1.name}/data/artemis.pid && runuser -u artemis -- "
                f"/var/opt/artemis/{dc1.name}/bin/artemis-service start >/dev/null 2>&1")
    amqp.wait_for(lambda: dc1.management(timeout=5).status()["live"], lambda live: live, timeout=120,
                  description="dc1's broker live again")
    log = estate.exec(dc1.name, "cat", f"/var/opt/artemis/{dc1.name}/log/artemis.log")
    assert "Activation check: fenced group all at dc1: dc2 was activated for it" in log, log[-3000:]
    with pytest.raises(amqp.AmqpError, match="(?i)AMQ229032|not authorized"):
        amqp.send(dc1.amqp_url, dc1.user, dc1.password, f"returning.{uuid.uuid4().hex[:8]}", 1, timeout=10,
                  ca_path=dc1.ca_cert)
    # The swap back first checks, with artemis_site and the roles the operations use (the monitoring user's probe
    # addresses among them), that clients may act on the groups nowhere but at dc2: it refuses otherwise.
    back = _run("playbooks/swapover.yml", swapover_source="dc2", swapover_target="dc1", swapover_groups=GROUPS)
    assert back.rc == 0, back.output[-4000:]


def test_a_datacentre_that_returns_during_a_partition_is_fenced_when_the_partition_heals(dc1_active_at_the_end):
    """Its broker hears no other datacentre when it starts, so it keeps its settings (it may be the only datacentre
    left) and its clients act there; once the WAN heals its next question is answered, and it fences the groups and
    closes their clients' connections. Before this (2 x 2 chaos seed 3, fourth run) it stayed active until failback."""
    estate = dc1_active_at_the_end
    dc1 = estate.dc("dc1")
    log_file = f"/var/opt/artemis/{dc1.name}/log/artemis.log"
    estate.testbed("kill", dc1.name)
    failover = _run("playbooks/failover.yml", failover_target="dc2", failover_confirm=True,
                    failover_last_known_lag_s=0)
    assert failover.rc == 0, failover.output[-4000:]

    logged_before = int(estate.exec(dc1.name, "sh", "-c", f"cat {log_file} 2>/dev/null | wc -c"))
    estate.testbed("partition", "dc1", "dc2")
    try:
        estate.exec(dc1.name, "sh", "-c", f"rm -f /var/opt/artemis/{dc1.name}/data/artemis.pid && runuser -u artemis "
                    f"-- /var/opt/artemis/{dc1.name}/bin/artemis-service start >/dev/null 2>&1")
        amqp.wait_for(lambda: dc1.management(timeout=5).status()["live"], lambda live: live, timeout=120,
                      description="dc1's broker live again")
        log = estate.exec(dc1.name, "tail", "-c", f"+{logged_before + 1}", log_file)
        assert "none of the other datacentres' brokers answered" in log, log[-3000:]
        queue = f"returning.{uuid.uuid4().hex[:8]}"
        amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 1, timeout=10, ca_path=dc1.ca_cert)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            receiving = pool.submit(amqp.receive, dc1.amqp_url, dc1.user, dc1.password, queue, 2, timeout=120,
                                    ca_path=dc1.ca_cert)
            time.sleep(2)  # the receiver is attached before the WAN heals
            estate.testbed("heal")
            with pytest.raises(amqp.AmqpError, match="failed while receiving"):
                receiving.result(timeout=150)
    finally:
        estate.testbed("heal")

    log = estate.exec(dc1.name, "tail", "-c", f"+{logged_before + 1}", log_file)
    assert "Activation check: fenced group all at dc1 while active: dc2 was activated for it" in log, log[-3000:]
    with pytest.raises(amqp.AmqpError, match="(?i)AMQ229032|not authorized"):
        amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 1, timeout=10, ca_path=dc1.ca_cert)
    back = _run("playbooks/swapover.yml", swapover_source="dc2", swapover_target="dc1", swapover_groups=GROUPS)
    assert back.rc == 0, back.output[-4000:]


def test_a_failback_to_where_the_groups_are_not_active_is_refused_and_changes_nothing(estate):
    """A failback fences the returning datacentre: with the groups active there and not at failback_active (a
    swapover since the failover moved them back, as a drill did in the 2 x 2 chaos run, seed 3) that fence left them
    active nowhere. It must refuse first."""
    dc1 = estate.dc("dc1")
    refused = _run("playbooks/failback.yml", failback_site="dc1", failback_active="dc2", failback_groups=GROUPS)
    said = " ".join(refused.output.split())  # the callback folds long messages
    assert refused.rc != 0
    assert "Refused, nothing changed: failback_active (dc2) must be where all, books are active" in said, said[-4000:]
    # dc1 still serves its clients.
    accepted = amqp.send(dc1.amqp_url, dc1.user, dc1.password, f"failback.{uuid.uuid4().hex[:8]}", 1, timeout=30,
                         ca_path=dc1.ca_cert)
    assert len(accepted) == 1
