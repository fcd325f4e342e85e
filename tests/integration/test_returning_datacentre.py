"""A datacentre lost in a failover comes back fenced (the broker plugin's activation check, issue 47).

Its journal still grants its clients the groups it owned, and the failover could not reach it. When its broker
starts it reads the activation record the failover left at the other datacentre, and fences those groups before its
acceptors open: its clients are refused from the first connection on, on every match of those groups, so that a
swapover back finds no other datacentre active. One that starts while the WAN is cut holds its groups until the
other datacentre answers. Before the check, the chaos run saw the returning datacentre active for about 36 s until failback's fence
(the failback itself, under load: tests/integration/test_failover.py and the chaos regression, make drills).
"""

from __future__ import annotations

import json
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


def _start_broker_during_a_partition(estate, node, log_file):
    """Cut dc1 off from dc2, start dc1's broker as the host's init does at boot, and return what it logged since."""
    logged_before = int(estate.exec(node.name, "sh", "-c", f"cat {log_file} 2>/dev/null | wc -c"))
    estate.testbed("partition", "dc1", "dc2")
    estate.exec(node.name, "sh", "-c", f"rm -f /var/opt/artemis/{node.name}/data/artemis.pid && runuser -u artemis "
                f"-- /var/opt/artemis/{node.name}/bin/artemis-service start >/dev/null 2>&1")
    amqp.wait_for(lambda: node.management(timeout=5).status()["live"], lambda live: live, timeout=120,
                  description="dc1's broker live again")
    return logged_before


def _logged_since(estate, node, log_file, logged_before):
    return estate.exec(node.name, "tail", "-c", f"+{logged_before + 1}", log_file)


def test_a_datacentre_that_returns_during_a_partition_holds_its_groups_and_is_fenced_when_the_partition_heals(
        dc1_active_at_the_end):
    """Its broker hears no other datacentre when it starts cold, so it holds its groups (fenced in memory: a failover
    may have activated another datacentre meanwhile) and its clients are refused; once the WAN heals its next question
    is answered, and it fences the groups for good. Before the hold (2 x 2 chaos seed 5) its clients acted there until
    the partition healed, beside dc2's; before the re-check (seed 3, fourth run) until failback."""
    estate = dc1_active_at_the_end
    dc1 = estate.dc("dc1")
    log_file = f"/var/opt/artemis/{dc1.name}/log/artemis.log"
    estate.testbed("kill", dc1.name)
    failover = _run("playbooks/failover.yml", failover_target="dc2", failover_confirm=True,
                    failover_last_known_lag_s=0)
    assert failover.rc == 0, failover.output[-4000:]

    try:
        logged_before = _start_broker_during_a_partition(estate, dc1, log_file)
        log = _logged_since(estate, dc1, log_file, logged_before)
        assert "started cold: groups [all, books] held at dc1" in log, log[-3000:]
        queue = f"returning.{uuid.uuid4().hex[:8]}"
        with pytest.raises(amqp.AmqpError, match="(?i)AMQ229032|not authorized"):
            amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 1, timeout=10, ca_path=dc1.ca_cert)
        estate.testbed("heal")
        amqp.wait_for(lambda: _logged_since(estate, dc1, log_file, logged_before),
                      lambda log: "fenced group all at dc1: dc2 was activated for it" in log, timeout=60,
                      description="dc1's held group `all` fenced for good once the WAN healed")
    finally:
        estate.testbed("heal")

    with pytest.raises(amqp.AmqpError, match="(?i)AMQ229032|not authorized"):
        amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 1, timeout=10, ca_path=dc1.ca_cert)
    back = _run("playbooks/swapover.yml", swapover_source="dc2", swapover_target="dc1", swapover_groups=GROUPS)
    assert back.rc == 0, back.output[-4000:]


def test_a_datacentre_that_restarts_during_a_partition_holds_its_groups_until_it_heals_and_gets_them_back(
        dc1_active_at_the_end):
    """The same cold start with no failover meanwhile: held while the WAN is cut, then released (its clients act there
    again) once dc2 answers that nothing was activated after dc1."""
    estate = dc1_active_at_the_end
    dc1 = estate.dc("dc1")
    log_file = f"/var/opt/artemis/{dc1.name}/log/artemis.log"
    estate.testbed("kill", dc1.name)
    queue = f"returning.{uuid.uuid4().hex[:8]}"
    try:
        logged_before = _start_broker_during_a_partition(estate, dc1, log_file)
        with pytest.raises(amqp.AmqpError, match="(?i)AMQ229032|not authorized"):
            amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 1, timeout=10, ca_path=dc1.ca_cert)
        estate.testbed("heal")
        amqp.wait_for(lambda: _logged_since(estate, dc1, log_file, logged_before),
                      lambda log: "released group all at dc1" in log and "released group books at dc1" in log,
                      timeout=60, description="dc1's held groups released once the WAN healed")
    finally:
        estate.testbed("heal")

    amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 1, timeout=10, ca_path=dc1.ca_cert)
    assert len(amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, 1, timeout=30, ca_path=dc1.ca_cert)) == 1


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


def test_a_failover_from_a_datacentre_that_answers_is_refused_saying_only_that(dc1_active_at_the_end):
    # 2 x 2 seed 5 at 7d8827d: the refusal said "dc1 still answers ([])" and "Or dc2 has no live broker" whichever
    # stood in the way.
    estate = dc1_active_at_the_end
    refused = _run("playbooks/failover.yml", failover_target="dc2", failover_confirm=True)
    said = " ".join(refused.output.split())
    assert refused.rc != 0 and f"Refused, nothing changed: dc1 still answers ({estate.dc('dc1').name}): use " \
        "swapover.yml, which loses nothing." in said, refused.output[-4000:]
    assert "has no live broker" not in said
