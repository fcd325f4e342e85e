"""The security-settings filter: who may do what on which match, with staging for passive sites."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.filter.artemis_security_settings import (
    artemis_security_settings)

PERMISSIONS = ["send", "consume", "browse", "createDurableQueue"]
APP = {"name": "app", "permissions": ["send", "consume", "browse", "createDurableQueue"]}
MIRROR = {"name": "replication", "match": "$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all", "permissions": ["send"]}


def _by_match(settings):
    return {setting["match"]: setting["permissions"] for setting in settings}


def test_without_staging_roles_on_hash_are_granted_and_admin_everywhere():
    settings = _by_match(artemis_security_settings([APP], "amq", PERMISSIONS))
    assert settings == {"#": {permission: ["amq", "app"] for permission in PERMISSIONS}}


def test_a_staged_catch_all_withholds_send_and_consume_but_not_what_else_the_role_has():
    settings = _by_match(artemis_security_settings(
        [APP], "amq", PERMISSIONS, staging=[{"prefix": "", "staged": True}]))
    assert settings["#"] == {"send": ["amq"], "consume": ["amq"], "browse": ["amq", "app"],
                             "createDurableQueue": ["amq", "app"]}


def test_each_group_prefix_gets_its_own_match_with_the_hash_roles():
    staging = [{"prefix": "", "staged": True}, {"prefix": "east.", "staged": False},
               {"prefix": "inflow.", "staged": False}]
    settings = _by_match(artemis_security_settings([APP], "amq", PERMISSIONS, staging=staging))
    assert sorted(settings) == ["#", "activemq.management.#", "east.#", "inflow.#"]
    assert settings["east.#"]["consume"] == ["amq", "app"]
    assert settings["inflow.#"]["send"] == ["amq", "app"]
    assert settings["#"]["consume"] == ["amq"]


def test_a_user_match_inside_a_staged_group_is_staged_too():
    orders = dict(APP, match="orders.#")
    settings = _by_match(artemis_security_settings(
        [APP, orders], "amq", PERMISSIONS, staging=[{"prefix": "", "staged": True}]))
    assert settings["orders.#"]["consume"] == ["amq"]


def test_the_longest_covering_prefix_decides():
    orders = dict(APP, match="east.orders.#")
    staging = [{"prefix": "", "staged": False}, {"prefix": "east.", "staged": True}]
    settings = _by_match(artemis_security_settings([APP, orders], "amq", PERMISSIONS, staging=staging))
    assert settings["east.orders.#"]["send"] == ["amq"]
    assert settings["#"]["send"] == ["amq", "app"]


def test_peer_roles_keep_their_grants_on_a_staged_site():
    settings = _by_match(artemis_security_settings(
        [APP], "amq", PERMISSIONS, staging=[{"prefix": "", "staged": True}], peer_roles=[MIRROR]))
    assert settings["$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all"]["send"] == ["amq", "replication"]
    assert settings["$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all"]["consume"] == ["amq"]


def test_clients_are_staged_on_a_match_a_peer_also_holds_and_the_peer_keeps_its_grant():
    """The bridge engine's peer role sends copies to the group's own addresses (match ``P#``): at a passive site the
    clients lose send and consume there, the replication user does not."""
    bridge_peer = {"name": "replication", "match": "relay.#", "permissions": ["send", "createDurableQueue"]}
    staging = [{"prefix": "", "staged": False}, {"prefix": "relay.", "staged": True}]
    settings = _by_match(artemis_security_settings([APP], "amq", PERMISSIONS, staging=staging,
                                                   peer_roles=[bridge_peer]))
    assert settings["relay.#"] == {"send": ["amq", "replication"], "consume": ["amq"], "browse": ["amq", "app"],
                                   "createDurableQueue": ["amq", "app", "replication"]}
    assert settings["#"]["consume"] == ["amq", "app"]


def test_a_peer_keeps_its_grant_on_a_more_specific_match_inside_its_own():
    """Artemis applies only the most specific match: the prober's match on a full_state bridge group's probe address
    must carry the bridge peer's grant too, or the copy of a probe is refused and Artemis stops every bridge of the
    sending broker (AMQ224058)."""
    bridge_peer = {"name": "replication", "match": "books.#", "permissions": ["send", "createDurableQueue"]}
    prober = {"name": "monitor", "match": "books.continuity.probe", "permissions": ["send", "browse"]}
    settings = _by_match(artemis_security_settings([APP, prober], "amq", PERMISSIONS, peer_roles=[bridge_peer]))
    assert settings["books.continuity.probe"]["send"] == ["amq", "monitor", "replication"]
    assert settings["books.continuity.probe"]["createDurableQueue"] == ["amq", "replication"]
    assert settings["#"]["send"] == ["amq", "app"]


@pytest.mark.parametrize("entry", [{"staged": True}, {"prefix": "a."}, "a."])
def test_malformed_staging_entries_are_refused(entry):
    with pytest.raises(AnsibleFilterError, match="staging entry"):
        artemis_security_settings([APP], "amq", PERMISSIONS, staging=[entry])


def test_management_replies_are_never_staged_so_a_passive_site_can_be_monitored():
    settings = _by_match(artemis_security_settings(
        [APP], "amq", PERMISSIONS, staging=[{"prefix": "", "staged": True}]))
    assert settings["activemq.management.#"]["consume"] == ["amq", "app"]
    assert settings["#"]["consume"] == ["amq"]
