"""Active/active with a staging delay on the test bed's group `shared` (full_state, engine bridge, staging_delay_ms
20000, group_vars/all/estate.yml): both datacentres take producers and consumers; a copy from the other datacentre
becomes deliverable 20 s after its original was produced, unless the notice of a consumer's acknowledgement arrived
first and removed it. Counted by management and by ledger; on the systemd bed (three datacentres, broker metrics)
also by the broker plugin's meters."""

import uuid

import pytest

from support import amqp_clients as amqp
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_address_settings import KEPT_ADDRESS
from continuity_rpo import broker_metrics
from support import prometheus

STAGING_DELAY_S = 20  # the bed's `shared` group


def _notice_figures(node, source):
    """The broker plugin's meters at ``node`` for notices of `shared` from ``source``: applied, late, and the count and
    sum of the production-to-arrival deltas (0 before the first notice)."""
    samples = prometheus.scrape(node.metrics_url, node.ca_cert, node.monitor_user, node.monitor_password)
    series = next((series for series in broker_metrics.notice_figures(samples)
                   if (series["group"], series["source"]) == ("shared", source)),
                  {"applied": 0, "late": 0, "count": 0, "sum_seconds": 0.0})
    return {"applied": series["applied"], "late": series["late"], "deltas": series["count"],
            "delta_sum_s": series["sum_seconds"]}


def test_a_message_consumed_at_one_datacentre_is_removed_from_the_other_and_an_unconsumed_one_is_delivered_there(
        estate):
    dc1, dc2 = estate.dc("dc1"), estate.dc("dc2")
    queue = f"shared.q.{uuid.uuid4().hex[:8]}"
    kept_before = {node.name: node.message_count(KEPT_ADDRESS) for node in (dc1, dc2)}

    # Consumed at dc1 within the delay: the notices remove dc2's copies before they become deliverable.
    sent_at_dc1 = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 50, id_prefix=f"{queue}-dc1",
                            ca_path=dc1.ca_cert)
    amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 50, timeout=60,
                  description=f"50 copies of {queue} at dc2")
    consumed_at_dc1 = amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, 50, timeout=30, ca_path=dc1.ca_cert)
    assert sorted(message.id for message in consumed_at_dc1) == sorted(sent_at_dc1)
    amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 0, timeout=60,
                  description=f"dc2's copies of {queue} removed by the notices of dc1's acknowledgements")

    # Not consumed where it was produced (dc2): its copies at dc1 wait out the delay, then dc1's consumer takes them,
    # and the notices of those acknowledgements remove dc2's originals.
    sent_at_dc2 = amqp.send(dc2.amqp_url, dc2.user, dc2.password, queue, 20, id_prefix=f"{queue}-dc2",
                            ca_path=dc2.ca_cert)
    amqp.wait_for(lambda: dc1.message_count(queue), lambda count: count == 20, timeout=60,
                  description=f"20 copies of {queue} at dc1")
    with pytest.raises(amqp.ReceiveError):
        amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, 1, timeout=3, ca_path=dc1.ca_cert)
    delivered_at_dc1 = amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, 20, timeout=STAGING_DELAY_S + 30,
                                    ca_path=dc1.ca_cert)
    assert sorted(message.id for message in delivered_at_dc1) == sorted(sent_at_dc2)
    amqp.wait_for(lambda: dc2.message_count(queue), lambda count: count == 0, timeout=60,
                  description=f"dc2's originals of {queue} removed by the notices of dc1's acknowledgements")
    # Nothing is left anywhere to be delivered twice, and no notice was kept (dc2 keeps what finds no queue under
    # the catch-all group it stages; a notice finds none by design).
    assert (dc1.message_count(queue), dc2.message_count(queue)) == (0, 0)
    assert {node.name: node.message_count(KEPT_ADDRESS) for node in (dc1, dc2)} == kept_before


@pytest.mark.systemd  # three datacentres, broker metrics on; the systemd pass of make test runs it by name
def test_with_three_datacentres_every_other_datacentre_removes_its_copy_and_counts_the_notice(estate):
    dc1, others = estate.dc("dc1"), [estate.dc("dc2"), estate.dc("dc3")]
    queue = f"shared.m.{uuid.uuid4().hex[:8]}"
    before = {node.name: _notice_figures(node, "dc1") for node in others}
    sent = amqp.send(dc1.amqp_url, dc1.user, dc1.password, queue, 30, id_prefix=queue, ca_path=dc1.ca_cert)
    for node in others:
        amqp.wait_for(lambda: node.message_count(queue), lambda count: count == 30, timeout=60,
                      description=f"30 copies of {queue} at {node.name}")
    consumed = amqp.receive(dc1.amqp_url, dc1.user, dc1.password, queue, 30, timeout=30, ca_path=dc1.ca_cert)
    assert sorted(message.id for message in consumed) == sorted(sent)
    for node in others:
        amqp.wait_for(lambda: node.message_count(queue), lambda count: count == 0, timeout=60,
                      description=f"{node.name}'s copies of {queue} removed by the notices")
        after = _notice_figures(node, "dc1")
        counted = {key: after[key] - before[node.name][key] for key in after}
        assert (counted["applied"], counted["late"], counted["deltas"]) == (30, 0, 30), (node.name, counted)
        assert 0 < counted["delta_sum_s"] / 30 < STAGING_DELAY_S, (node.name, counted)
