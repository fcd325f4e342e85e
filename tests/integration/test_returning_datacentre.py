"""A datacentre lost in a failover comes back fenced (the broker plugin's activation check, issue 47).

Its journal still grants its clients the groups it owned, and the failover could not reach it. When its broker
starts it reads the activation record the failover left at the other datacentre, and fences those groups before its
acceptors open: its clients are refused from the first connection on, and failback.yml's fence finds nothing left to
change. Before the check, the chaos run saw the returning datacentre active for about 36 s until failback's fence.
"""

from __future__ import annotations

import json
import uuid

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import amqp_ledger as amqp
from support.estate import run_module, run_playbook


def _run(playbook, **extra_vars):
    return run_playbook(playbook, extra_args=["-e", json.dumps(extra_vars)])


def test_a_datacentre_lost_in_a_failover_comes_back_fenced(dc1_active_at_the_end):
    estate = dc1_active_at_the_end
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = f"returning.{uuid.uuid4().hex[:8]}"
    amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 1, timeout=10, ca_path=dc1.ca_cert)

    estate.testbed("kill", dc1.name)  # as a power loss leaves it: no clean stop
    failover = _run("playbooks/failover.yml", failover_target="dc2", failover_confirm=True,
                    failover_last_known_lag_s=0)
    assert failover.rc == 0, failover.output[-4000:]

    started = run_playbook("site.yml", extra_args=["--limit", dc1.name])  # starts the broker, changes nothing
    assert started.rc == 0, started.output[-4000:]
    log = estate.exec(dc1.name, "cat", f"/var/opt/artemis/{dc1.name}/log/artemis.log")
    assert "Activation check: fenced group all at dc1: dc2 was activated for it" in log, log[-3000:]
    with pytest.raises(amqp.AmqpError, match="(?i)AMQ229032|not authorized"):
        amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 1, timeout=10, ca_path=dc1.ca_cert)
    # Exactly the fence artemis_site applies: a failback's fence has nothing left to change.
    fence, output = run_module("artemis_site", dict(estate.site_args("dc1", "passive"), groups=["all", "books"]),
                               check_mode=True)
    assert not fence.get("failed") and fence["changed_settings"] == {}, output[-3000:]

    failback = _run("playbooks/failback.yml", failback_site="dc1", failback_active="dc2")
    assert failback.rc == 0, failback.output[-4000:]
    # What dc1 held when it was lost reached dc2; the fixture swaps the groups back to dc1.
    assert [message.id for message in amqp.receive(dc2.amqp_url, dc2.user, dc2.password, queue, 1, timeout=30,
                                                   ca_path=dc2.ca_cert)]
