"""The security-settings filter: who may do what on which match, with staging for passive sites and the internal
addresses kept from clients; and the checks of the client roles."""

import re
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.filter.artemis_security_settings import (
    artemis_role_errors, artemis_security_settings)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import peer_roles, prefix_entries
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_security import INTERNAL_MATCHES

PERMISSIONS = ["send", "consume", "browse", "createDurableQueue"]
APP = {"name": "app", "permissions": ["send", "consume", "browse", "createDurableQueue"]}
MIRROR = {"name": "replication", "match": "$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all", "permissions": ["send"]}


def _by_match(settings):
    return {setting["match"]: setting["permissions"] for setting in settings}


def test_without_staging_roles_on_hash_are_granted_and_admin_everywhere():
    settings = _by_match(artemis_security_settings([APP], "amq", PERMISSIONS))
    assert settings["#"] == {permission: ["amq", "app"] for permission in PERMISSIONS}
    assert sorted(settings) == sorted(("#",) + INTERNAL_MATCHES)


def test_a_staged_catch_all_withholds_send_and_consume_but_not_what_else_the_role_has():
    settings = _by_match(artemis_security_settings(
        [APP], "amq", PERMISSIONS, staging=[{"prefix": "", "staged": True}]))
    assert settings["#"] == {"send": ["amq"], "consume": ["amq"], "browse": ["amq", "app"],
                             "createDurableQueue": ["amq", "app"]}


def test_each_group_prefix_gets_its_own_match_with_the_hash_roles():
    staging = [{"prefix": "", "staged": True}, {"prefix": "east.", "staged": False},
               {"prefix": "inflow.", "staged": False}]
    settings = _by_match(artemis_security_settings([APP], "amq", PERMISSIONS, staging=staging))
    assert sorted(settings) == sorted(["#", "east.#", "inflow.#", *INTERNAL_MATCHES])
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


ALL = ["send", "consume", "createDurableQueue", "deleteDurableQueue", "createNonDurableQueue", "deleteNonDurableQueue",
       "browse", "createAddress", "deleteAddress"]


@pytest.mark.parametrize("staged", [True, False])
def test_a_client_role_on_hash_with_every_permission_has_nothing_on_the_internal_addresses(staged):
    """The mirrors' store-and-forward queues and whatever address a mirror attaches to, the bridge engine's addresses,
    Artemis's notifications and management address: the administrator only, staged or not."""
    everything = {"name": "app", "permissions": ALL}
    settings = _by_match(artemis_security_settings([everything], "amq", ALL,
                                                   staging=[{"prefix": "", "staged": staged}]))
    for match in INTERNAL_MATCHES:
        assert settings[match] == {permission: ["amq"] for permission in ALL}, match
    assert settings["#"]["createAddress"] == ["amq", "app"]


def test_the_internal_matches_cover_what_artemis_takes_as_a_mirror_and_the_estate_s_addresses():
    """Artemis's own matching (settings/impl/Match.java: "#" after a delimiter is any number of words, "*" is one word,
    without the delimiter), so that no address a sender link could claim as a mirror, and none of the estate's, falls
    to a client's "#"."""
    def pattern(match):
        regex = match.replace(".#", "#").replace(".", "\\.").replace("$", "\\$").replace("*", "[^.]+")
        return re.compile(regex.replace("#", "(\\..+)*") + "$")
    internal = [pattern(match) for match in INTERNAL_MATCHES]
    for address in ["$ACTIVEMQ_ARTEMIS_MIRROR", "$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all", "$ACTIVEMQ_ARTEMIS_MIRRORx",
                    "$ACTIVEMQ_ARTEMIS_MIRROR_a.b", "$ACTIVEMQ_ARTEMIS_MIRROR.x", "continuity.in.relay",
                    "continuity.out.relay.dc2", "continuity.kept", "activemq.management", "activemq.notifications"]:
        assert any(regex.match(address) for regex in internal), address
    for address in ["orders.in", "continuityx", "ACTIVEMQ_ARTEMIS_MIRROR_dc2_all"]:
        assert not any(regex.match(address) for regex in internal), address


def test_the_other_datacentres_brokers_keep_exactly_their_grants_on_internal_addresses():
    """A mirror sends to its store-and-forward address here, a bridge to its group's inbound and notice addresses."""
    groups = [{"name": "all", "addresses": []}, {"name": "relay", "addresses": ["relay."], "engine": "bridge",
                                                 "mode": "messages_only"}]
    settings = _by_match(artemis_security_settings([{"name": "app", "permissions": ALL}], "amq", ALL,
                                                   staging=prefix_entries(groups, []),
                                                   peer_roles=peer_roles(groups, "dc1")))
    for match in ["$ACTIVEMQ_ARTEMIS_MIRROR_dc1_all", "$ACTIVEMQ_ARTEMIS_MIRROR_dc1_relay", "continuity.in.relay"]:
        assert settings[match]["send"] == ["amq", "replication"], match
        assert settings[match]["consume"] == ["amq"], match
    assert settings["relay.#"]["send"] == ["amq", "app", "replication"]


def _errors(roles, **kwargs):
    return artemis_role_errors(roles, **kwargs)


@pytest.mark.parametrize("match", ["#", "orders.#", "orders.*", "orders.in", "continuityx.#", "$sys.mqtt.#"])
def test_client_matches_that_cannot_reach_an_internal_address_are_accepted(match):
    assert _errors([{"name": "app", "match": match, "permissions": ["send"]}]) == []


@pytest.mark.parametrize("match, reason", [
    ("continuity.#", "under 'continuity.'"), ("continuity.in.relay", "under 'continuity.'"),
    ("activemq.management.#", "under 'activemq.'"), ("$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all", "under '$ACTIVEMQ_ARTEMIS'"),
    ("*", "starts with a wildcard"), ("*.#", "starts with a wildcard"), ("c*.#", "starts with a wildcard"),
    ("*.out.#", "starts with a wildcard")])
def test_a_client_match_that_could_outrank_an_internal_match_is_refused_by_name(match, reason):
    errors = _errors([{"name": "app", "match": match, "permissions": ["send"]}])
    assert len(errors) == 1 and errors[0].startswith("broker_roles: role app: match") and reason in errors[0]


def test_manage_a_management_role_or_the_peers_role_make_a_client_role_refused():
    roles = [{"name": "app", "permissions": ["send", "manage"]}, {"name": "ops", "permissions": ["browse"]},
             {"name": "replication", "match": "orders.#", "permissions": ["send"]}]
    users = [{"name": "mallory", "roles": ["app", "replication"]}, {"name": "alice", "roles": ["app"]}]
    errors = _errors(roles, users=users, management_roles=["amq", "ops"],
                     peer_roles=[{"name": "replication", "match": "continuity.in.relay", "permissions": ["send"]}])
    assert [error.split(" ")[:3] for error in errors] == [
        ["broker_roles:", "role", "app"], ["broker_roles:", "role", "ops"], ["broker_roles:", "role", "replication"],
        ["broker_users:", "user", "mallory"]]
    assert "grants manage" in errors[0] and "broker_management_roles" in errors[1]
