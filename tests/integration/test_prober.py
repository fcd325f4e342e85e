"""The prober against a real broker: what it sends and what it sees, by the prober's own code (no rpo_job role)."""

import uuid

from continuity_rpo import prober

# More than a page of Artemis's management listing (management-browse-page-size, 200).
PROBES = 260


def test_the_newest_probe_is_seen_behind_more_than_a_page_of_probes(estate):
    """A target may hold more probes than one page of a listing (the bridge engine's copies stay until they expire):
    the newest is seen all the same, and with it every older probe is covered."""
    dc1 = estate.dc("dc1")
    address = f"prober.page.{uuid.uuid4().hex[:8]}"
    config = {"brokers": [{"name": dc1.name, "datacentre": dc1.dc, "amqp_url": dc1.amqp_url,
                           "management_url": dc1.management_url}]}
    route = prober.Route({"address": address, "source": dc1.dc, "targets": [dc1.dc]}, config)
    probes = {"user": dc1.user, "password": dc1.password, "ca_path": dc1.ca_cert, "ttl": 600}
    management = {"management_user": dc1.admin_user, "management_password": dc1.admin_password,
                  "request_timeout": 10, "validate_certs": True, "ca_path": dc1.ca_cert}
    try:
        sent = [route.send(probes) for _probe in range(PROBES)]
        assert all(sent), [row for row in sent if not row][:3]
        assert dc1.message_count(address) == PROBES

        seen = route.observe(management)

        assert [row["probe_id"] for row in seen][-1] == sent[-1]["probe_id"]
        assert route.at_risk_since == {dc1.dc: None}
        assert route.outstanding == {}
        assert dc1.message_count(address) == 0  # seen everywhere: removed at the source
    finally:
        route._close()
