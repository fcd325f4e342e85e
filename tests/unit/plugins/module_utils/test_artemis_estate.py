"""The estate model: owners, staging, mirror connections, probe routes and restart order, on known inventories."""


import re

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import artemis_estate

TESTBED_GROUPS = [{"name": "inflow", "addresses": ["inflow."], "mode": "messages_only"},
                  {"name": "all", "addresses": []},
                  {"name": "east", "addresses": ["east."], "mode": "full_state", "owner": "dc2"}]


def test_groups_get_their_defaults():
    groups = artemis_estate.normalise_groups([{"name": "all"}], "dc1")
    assert groups == [{"name": "all", "addresses": [], "mode": "full_state", "engine": "mirror", "owner": "dc1",
                       "staging_delay_ms": None}]


def test_an_unknown_mode_or_owner_is_named():
    with pytest.raises(artemis_estate.EstateError, match="orders: mode 'sync'"):
        artemis_estate.normalise_groups([{"name": "orders", "mode": "sync"}], "dc1")
    with pytest.raises(artemis_estate.EstateError, match="orders: owner 'dc9'"):
        artemis_estate.owned_groups([{"name": "orders", "owner": "dc9"}], ["dc1", "dc2"], "dc1")


def test_owned_groups_leave_out_messages_only():
    assert artemis_estate.owned_groups(TESTBED_GROUPS, ["dc1", "dc2", "dc3"], "dc1") == {
        "dc1": ["all"], "dc2": ["east"], "dc3": []}


def test_each_datacentre_stages_the_full_state_groups_it_does_not_own():
    def staged(datacentre):
        return {entry["prefix"]: entry["staged"]
                for entry in artemis_estate.staging(TESTBED_GROUPS, datacentre, "dc1")}
    assert staged("dc1") == {"inflow.": False, "": False, "east.": True}
    assert staged("dc2") == {"inflow.": False, "": True, "east.": False}
    assert staged("dc3") == {"inflow.": False, "": True, "east.": True}


def test_fencing_stages_exactly_the_groups_it_names():
    assert artemis_estate.full_state_groups(TESTBED_GROUPS) == ["all", "east"]
    entries = artemis_estate.prefix_entries(TESTBED_GROUPS, ["east"])
    assert [(entry["prefix"], entry["group"], entry["staged"]) for entry in entries] == [
        ("inflow.", "inflow", False), ("", "all", False), ("east.", "east", True)]


def test_two_datacentres_mirror_every_group_both_ways():
    connections = artemis_estate.mirror_connections(TESTBED_GROUPS, ["dc1", "dc2"], "dc1")
    assert [(c["source"], c["name"], c["target"]) for c in connections] == [
        ("dc1", "dc2_inflow", "dc2"), ("dc1", "dc2_all", "dc2"), ("dc1", "dc2_east", "dc2"),
        ("dc2", "dc1_inflow", "dc1"), ("dc2", "dc1_all", "dc1"), ("dc2", "dc1_east", "dc1")]
    by_name = {(c["source"], c["name"]): c for c in connections}
    # Each broker keeps its own activation records: mirrored, one would reach the datacentre it must tell apart.
    assert by_name[("dc1", "dc2_all")]["address_filter"] == "!inflow.,!east.,!continuity.activation"
    assert by_name[("dc1", "dc2_inflow")]["message_acknowledgements"] is False
    assert by_name[("dc1", "dc2_east")]["address_filter"] == "east."


def test_three_datacentres_form_a_star_around_each_owner():
    groups = [{"name": "orders", "addresses": ["orders."]},
              {"name": "audit", "addresses": ["audit."], "mode": "messages_only", "owner": "dc3"}]
    pairs = {(c["source"], c["target"], c["group"])
             for c in artemis_estate.mirror_connections(groups, ["dc1", "dc2", "dc3"], "dc1")}
    assert pairs == {("dc1", "dc2", "orders"), ("dc1", "dc3", "orders"), ("dc2", "dc1", "orders"),
                     ("dc3", "dc1", "orders"), ("dc3", "dc1", "audit"), ("dc3", "dc2", "audit"),
                     ("dc1", "dc3", "audit"), ("dc2", "dc3", "audit")}
    targets = artemis_estate.link_targets(groups, ["dc1", "dc2", "dc3"], "dc1")
    assert targets[("dc2", "dc1_orders")] == "dc1" and ("dc2", "dc3_orders") not in targets


def test_probe_routes_run_from_each_full_state_owner_to_every_other_datacentre():
    assert artemis_estate.probe_routes(TESTBED_GROUPS, ["dc1", "dc2", "dc3"], "dc1") == [
        {"group": "all", "address": "continuity.probe", "source": "dc1", "targets": ["dc2", "dc3"]},
        {"group": "east", "address": "east.continuity.probe", "source": "dc2", "targets": ["dc1", "dc3"]}]


def test_restart_order_puts_passive_datacentres_first_and_each_live_broker_after_its_backup():
    brokers = [{"name": "a1", "datacentre": "dc1", "live": True}, {"name": "a2", "datacentre": "dc1", "live": False},
               {"name": "b1", "datacentre": "dc2", "live": False}, {"name": "b2", "datacentre": "dc2", "live": True},
               {"name": "c1", "datacentre": "dc3", "live": True}]
    groups = [{"name": "all"}]
    assert artemis_estate.restart_order(brokers, groups, ["dc1", "dc2", "dc3"], "dc1") == [
        "b1", "b2", "c1", "a2", "a1"]
    # Partitioned active/active: both owners come after the datacentre that owns nothing, in inventory order.
    assert artemis_estate.restart_order(brokers, TESTBED_GROUPS, ["dc1", "dc2", "dc3"], "dc1") == [
        "c1", "a2", "a1", "b1", "b2"]


def test_restart_order_puts_first_the_datacentres_that_do_not_run_their_mirror_connections_yet():
    """After a swapover from dc1 to dc3 the star of mirror connections moves to dc3 (site.yml with it): dc3 gets its
    connection to dc2 first, while dc1 still relays dc3's events there; dc1, which loses its own to dc2, comes last."""
    datacentres = ["dc1", "dc2", "dc3"]
    before = artemis_estate.mirror_connections([{"name": "all"}], datacentres, "dc1")

    def running(datacentre):
        return [{"name": link["name"], "engine": "mirror"} for link in before if link["source"] == datacentre]

    brokers = [{"name": dc + "-node1", "datacentre": dc, "live": True, "links": running(dc)} for dc in datacentres]
    assert artemis_estate.restart_order(brokers, [{"name": "all"}], datacentres, "dc3") == [
        "dc2-node1", "dc3-node1", "dc1-node1"]
    # Nothing moved: the datacentres that own nothing first, as ever. A broker that runs none of its connections (a
    # datacentre added) comes first.
    assert artemis_estate.restart_order(brokers, [{"name": "all"}], datacentres, "dc1") == [
        "dc2-node1", "dc3-node1", "dc1-node1"]
    unread = [dict(broker, links=[]) if broker["datacentre"] == "dc2" else broker for broker in brokers]
    assert artemis_estate.restart_order(unread, [{"name": "all"}], datacentres, "dc1")[0] == "dc2-node1"
    assert artemis_estate.restart_order(unread, [{"name": "all"}], datacentres, "dc3") == [
        "dc2-node1", "dc3-node1", "dc1-node1"]


def test_restart_order_puts_last_the_datacentre_whose_change_stops_routing_and_early_one_that_cannot_say():
    """The star moves from dc1 to dc2 while dc2's only broker is down (3 x 1 seed 5, 2026-12-03: read from the live
    brokers alone, dc1 came before dc2 and sent dc3's events to dc2 alone). dc2, which cannot say what it runs, comes
    before dc1; dc1, whose pending restart stops its connection to dc3 routing, comes last, whether it runs or not."""
    datacentres = ["dc1", "dc2", "dc3"]
    before = artemis_estate.mirror_connections([{"name": "all"}], datacentres, "dc1")
    brokers = [{"name": dc + "-node1", "datacentre": dc, "live": dc != "dc2",
                "links": [{"name": link["name"]} for link in before if link["source"] == dc]} for dc in datacentres]
    stops = {"dc1-node1": ["changed broker.xml", artemis_estate.STOPS_ROUTING_REASON + "dc3_all"]}
    for pending in (stops, None):
        assert artemis_estate.restart_order(brokers, [{"name": "all"}], datacentres, "dc2", pending) == [
            "dc3-node1", "dc2-node1", "dc1-node1"]
    # dc1's broker down too: it cannot say either, and only its pending restart keeps it last.
    down = [dict(broker, live=False) if broker["datacentre"] == "dc1" else broker for broker in brokers]
    assert artemis_estate.restart_order(down, [{"name": "all"}], datacentres, "dc2", stops) == [
        "dc3-node1", "dc2-node1", "dc1-node1"]
    assert artemis_estate.restart_order(down, [{"name": "all"}], datacentres, "dc2")[0] == "dc1-node1"
    # dc3 stops its connection to dc1 routing too (the star no longer goes through dc1): after dc2, which only gains,
    # and before dc1, which gains nothing (the regression's order, star-move-with-the-new-centre-silent).
    both = dict(stops, **{"dc3-node1": [artemis_estate.STOPS_ROUTING_REASON + "dc1_all"]})
    assert artemis_estate.restart_order(brokers, [{"name": "all"}], datacentres, "dc2", both) == [
        "dc2-node1", "dc3-node1", "dc1-node1"]


def test_restart_order_refuses_a_broker_of_an_unknown_datacentre():
    with pytest.raises(artemis_estate.EstateError, match="dc7"):
        artemis_estate.restart_order([{"name": "x", "datacentre": "dc7", "live": True}], [{"name": "all"}],
                                     ["dc1", "dc2"], "dc1")


def test_an_address_belongs_to_the_group_of_its_longest_prefix_else_to_the_catch_all():
    groups = [{"name": "all"}, {"name": "orders", "addresses": ["orders."]},
              {"name": "eu", "addresses": ["orders.eu."], "mode": "messages_only", "owner": "dc2"}]
    assert artemis_estate.group_of_address(groups, "orders.eu.x", "dc1")["name"] == "eu"
    assert artemis_estate.group_of_address(groups, "orders.us", "dc1")["name"] == "orders"
    assert artemis_estate.group_of_address(groups, "drill.continuity", "dc1")["owner"] == "dc1"
    assert artemis_estate.group_of_address(groups[1:], "drill.continuity", "dc1") is None


BRIDGED_GROUPS = TESTBED_GROUPS + [{"name": "relay", "addresses": ["relay.", "feed."], "mode": "messages_only",
                                    "engine": "bridge"}]


def test_each_datacentre_bridges_a_group_to_each_other_through_a_divert_per_prefix():
    links = artemis_estate.bridge_links(BRIDGED_GROUPS, ["dc1", "dc2", "dc3"], "dc1")
    assert [(link["source"], link["name"], link["target"], link["inbound"]) for link in links] == [
        ("dc1", "continuity.out.relay.dc2", "dc2", "continuity.in.relay"),
        ("dc1", "continuity.out.relay.dc3", "dc3", "continuity.in.relay"),
        ("dc2", "continuity.out.relay.dc1", "dc1", "continuity.in.relay"),
        ("dc2", "continuity.out.relay.dc3", "dc3", "continuity.in.relay"),
        ("dc3", "continuity.out.relay.dc1", "dc1", "continuity.in.relay"),
        ("dc3", "continuity.out.relay.dc2", "dc2", "continuity.in.relay")]
    # One divert per remote datacentre and prefix: each has a routing name of its own, so each gets every message.
    assert links[1]["diverts"] == [{"name": "continuity.divert.relay.dc3.0", "address": "relay.#"},
                                   {"name": "continuity.divert.relay.dc3.1", "address": "feed.#"}]
    assert artemis_estate.bridge_links(TESTBED_GROUPS, ["dc1", "dc2", "dc3"], "dc1") == []


def test_a_bridged_group_has_no_mirror_and_the_catch_all_mirror_leaves_it_out():
    connections = artemis_estate.mirror_connections(BRIDGED_GROUPS, ["dc1", "dc2"], "dc1")
    assert "relay" not in set(connection["group"] for connection in connections)
    catch_all = [connection for connection in connections if connection["group"] == "all"][0]
    # The bridge engine's outbound and inbound addresses are each datacentre's own.
    assert catch_all["address_filter"] == ("!inflow.,!east.,!relay.,!feed.,!continuity.activation,!continuity.out.,"
                                           "!continuity.in.,!continuity.export.")
    targets = artemis_estate.link_targets(BRIDGED_GROUPS, ["dc1", "dc2"], "dc1")
    assert targets[("dc2", "continuity.out.relay.dc1")] == "dc1"


def test_the_links_the_rpo_job_reads_are_every_mirror_connection_and_every_bridge():
    links = artemis_estate.replication_links(BRIDGED_GROUPS, ["dc1", "dc2", "dc3"], "dc1")
    assert {"source": "dc3", "name": "continuity.out.relay.dc2", "target": "dc2"} in links
    assert {"source": "dc1", "name": "dc2_all", "target": "dc2"} in links
    assert all(set(link) == {"source", "name", "target"} for link in links)
    assert len(links) == len(artemis_estate.mirror_connections(BRIDGED_GROUPS, ["dc1", "dc2", "dc3"], "dc1")) + 6


def test_peers_may_send_to_their_mirror_address_and_a_bridged_group_s_inbound_and_own_addresses_only():
    groups = TESTBED_GROUPS + [{"name": "relay", "addresses": ["relay.", "audit."], "mode": "messages_only",
                                "engine": "bridge"}]
    roles = artemis_estate.peer_roles(groups, "dc2")
    assert {role["name"] for role in roles} == {artemis_estate.REPLICATION_ROLE}
    assert [(role["match"], role["permissions"]) for role in roles] == [
        ("$ACTIVEMQ_ARTEMIS_MIRROR_dc2_inflow", ["send"]),
        ("$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all", ["send"]),
        ("$ACTIVEMQ_ARTEMIS_MIRROR_dc2_east", ["send"]),
        ("$ACTIVEMQ_ARTEMIS_MIRROR_dc2_relay", ["send"]),
        ("continuity.in.relay", ["send"]),
        ("relay.#", ["send", "createAddress", "createDurableQueue"]),
        ("audit.#", ["send", "createAddress", "createDurableQueue"]),
        # A starting broker's activation check reads the records kept there, and nothing else.
        ("continuity.activation", ["browse"])]


def test_each_owned_group_is_fenced_alone_by_the_activation_check():
    fences = artemis_estate.fence_staging(TESTBED_GROUPS)
    assert sorted(fences) == ["all", "east"]  # inflow is messages_only: active everywhere
    assert [(entry["prefix"], entry["staged"]) for entry in fences["east"]] == [
        ("inflow.", False), ("", False), ("east.", True)]


@pytest.mark.parametrize("group, message", [
    ({"name": "relay", "engine": "bridge", "mode": "messages_only"}, "relay: engine bridge needs the group's address"),
    ({"name": "relay", "addresses": ["relay"], "engine": "bridge", "mode": "messages_only"}, 'must end with "."'),
    ({"name": "relay", "addresses": ["relay.*."], "engine": "bridge", "mode": "messages_only"}, "no wildcard"),
    ({"name": "relay", "addresses": ["relay."], "engine": "divert"}, "relay: engine 'divert' is not one of"),
])
def test_a_group_the_bridge_engine_cannot_carry_is_refused_by_name(group, message):
    with pytest.raises(artemis_estate.EstateError, match=message):
        artemis_estate.normalise_groups([group], "dc1")


def test_each_exported_address_gets_an_export_queue_a_divert_and_a_bridge_named_after_its_broker():
    external = [{"name": "legacy", "password": "not-read", "addresses": ["relay.orders", {"name": "feed.prices",
                                                                                          "routing_type": "multicast"}]},
                {"name": "archive", "addresses": [{"name": "relay.orders"}]}]
    assert artemis_estate.exports(BRIDGED_GROUPS, external, ["dc1", "dc2"], "dc1") == [
        {"name": "continuity.export.legacy.0", "divert": "continuity.divert-export.legacy.0", "broker": "legacy",
         "address": "relay.orders", "routing_type": "anycast", "group": "relay"},
        {"name": "continuity.export.legacy.1", "divert": "continuity.divert-export.legacy.1", "broker": "legacy",
         "address": "feed.prices", "routing_type": "multicast", "group": "relay"},
        {"name": "continuity.export.archive.0", "divert": "continuity.divert-export.archive.0", "broker": "archive",
         "address": "relay.orders", "routing_type": "anycast", "group": "relay"}]
    assert artemis_estate.exports(BRIDGED_GROUPS, [], ["dc1", "dc2"], "dc1") == []


@pytest.mark.parametrize("external, message", [
    ({"name": "legacy", "addresses": ["inflow.x"]}, "legacy: address inflow.x is in address group inflow \\(engine mirror"),
    ({"name": "legacy", "addresses": ["other.x"], "password": "s3cret"}, "legacy: address other.x is in address group all"),
    ({"name": "legacy", "addresses": ["relay.#"]}, "legacy: addresses\\[0\\] must be an address without wildcards"),
    ({"name": "legacy", "addresses": [{"name": "relay.x", "routing_type": "both"}]}, "legacy: address relay.x: routing_type"),
    ({"name": "legacy", "addresses": []}, "legacy: addresses is empty"),
    ({"name": "dc2", "addresses": ["relay.x"]}, "external broker dc2: its name is already a datacentre"),
    ({"name": "a.b", "password": "s3cret", "addresses": ["relay.x"]}, "got 'a.b'"),
])
def test_an_export_the_estate_cannot_make_is_refused_by_name(external, message):
    with pytest.raises(artemis_estate.EstateError, match=message) as refused:
        artemis_estate.exports(BRIDGED_GROUPS, [external], ["dc1", "dc2"], "dc1")
    assert "s3cret" not in str(refused.value)


def test_an_external_broker_named_twice_is_refused():
    external = {"name": "legacy", "addresses": ["relay.x"]}
    with pytest.raises(artemis_estate.EstateError, match="legacy: its name is already taken"):
        artemis_estate.exports(BRIDGED_GROUPS, [external, external], ["dc1", "dc2"], "dc1")


def test_full_state_bridge_groups_carry_identities_and_are_compared_by_reconciliation_not_by_count():
    groups = [{"name": "inflow", "addresses": ["inflow."], "mode": "messages_only"},
              {"name": "all", "addresses": []},
              {"name": "relay", "addresses": ["relay."], "mode": "messages_only", "engine": "bridge"},
              {"name": "books", "addresses": ["books.", "ledger."], "engine": "bridge"}]
    assert artemis_estate.identity_prefixes(groups) == ["books.", "ledger."]
    assert artemis_estate.identity_prefixes(groups, ["all"]) == []
    assert artemis_estate.identity_prefixes(groups, ["all", "books"]) == ["books.", "ledger."]
    assert artemis_estate.uncompared_prefixes(groups) == ["inflow.", "relay.", "books.", "ledger."]
    assert artemis_estate.bridge_reconciliations(groups, ["dc1", "dc2", "dc3"], "dc2") == [
        {"group": "books", "source": "dc2", "target": "dc1"}, {"group": "books", "source": "dc2", "target": "dc3"}]


ACTIVE_EVERYWHERE = [{"name": "all", "addresses": []},
                     {"name": "books", "addresses": ["books."], "engine": "bridge"},
                     {"name": "shared", "addresses": ["shared.", "common."], "engine": "bridge",
                      "staging_delay_ms": 20000}]


def test_a_group_with_a_staging_delay_is_owned_staged_fenced_probed_and_reconciled_nowhere():
    datacentres = ["dc1", "dc2", "dc3"]
    assert artemis_estate.normalise_groups(ACTIVE_EVERYWHERE, "dc1")[2]["owner"] is None
    assert artemis_estate.owned_groups(ACTIVE_EVERYWHERE, datacentres, "dc1") == {
        "dc1": ["all", "books"], "dc2": [], "dc3": []}
    assert artemis_estate.full_state_groups(ACTIVE_EVERYWHERE) == ["all", "books"]
    assert [entry for entry in artemis_estate.staging(ACTIVE_EVERYWHERE, "dc2", "dc1") if entry["staged"]] == [
        {"prefix": "", "group": "all", "staged": True}, {"prefix": "books.", "group": "books", "staged": True}]
    assert [route["group"] for route in artemis_estate.probe_routes(ACTIVE_EVERYWHERE, datacentres, "dc1")] == [
        "all", "books"]
    assert [entry["group"] for entry in artemis_estate.bridge_reconciliations(ACTIVE_EVERYWHERE, datacentres,
                                                                              "dc1")] == ["books"] * 2
    # Its messages carry their identity, which the notices name, and its queues differ between datacentres.
    assert artemis_estate.identity_prefixes(ACTIVE_EVERYWHERE) == ["books.", "shared.", "common."]
    assert artemis_estate.staging_delays(ACTIVE_EVERYWHERE) == [
        {"prefix": "shared.", "delay_ms": 20000, "group": "shared"},
        {"prefix": "common.", "delay_ms": 20000, "group": "shared"}]


def test_notices_of_acknowledgements_follow_the_copies_through_the_same_outbound_queue():
    links = artemis_estate.bridge_links(ACTIVE_EVERYWHERE, ["dc1", "dc2"], "dc1")
    shared = [link for link in links if link["group"] == "shared" and link["source"] == "dc2"]
    assert shared == [{"name": "continuity.out.shared.dc1", "source": "dc2", "target": "dc1", "group": "shared",
                       "inbound": "continuity.in.shared",
                       "diverts": [{"name": "continuity.divert.shared.dc1.0", "address": "shared.#"},
                                   {"name": "continuity.divert.shared.dc1.1", "address": "common.#"},
                                   {"name": "continuity.divert.shared.dc1.2", "address": "continuity.acks.shared"}]}]
    assert {"name": "replication", "match": "continuity.acks.shared", "permissions": ["send"]} in \
        artemis_estate.peer_roles(ACTIVE_EVERYWHERE, "dc1")
    connections = artemis_estate.mirror_connections(ACTIVE_EVERYWHERE, ["dc1", "dc2"], "dc1")
    catch_all = [connection for connection in connections if connection["group"] == "all"]
    assert all("!continuity.acks." in connection["address_filter"].split(",") for connection in catch_all)


@pytest.mark.parametrize("group, message", [
    ({"name": "s", "addresses": ["s."], "mode": "messages_only", "engine": "bridge", "staging_delay_ms": 5000},
     "s: staging_delay_ms .* needs mode full_state and engine bridge \\(this group is messages_only on the bridge"),
    ({"name": "s", "addresses": ["s."], "staging_delay_ms": 5000},
     "s: staging_delay_ms .* \\(this group is full_state on the mirror engine\\)"),
    ({"name": "s", "addresses": ["s."], "engine": "bridge", "staging_delay_ms": 0}, "s: staging_delay_ms must be"),
    ({"name": "s", "addresses": ["s."], "engine": "bridge", "staging_delay_ms": "5s"}, "got '5s'"),
    ({"name": "s", "addresses": ["s."], "engine": "bridge", "staging_delay_ms": 5000, "owner": "dc2"},
     "s: a group with staging_delay_ms is active at every datacentre, so it has no owner"),
])
def test_a_staging_delay_the_estate_cannot_have_is_refused_by_name(group, message):
    with pytest.raises(artemis_estate.EstateError, match=message):
        artemis_estate.normalise_groups([group], "dc1")


def test_after_a_swapover_the_datacentres_the_target_has_no_mirror_to_are_named_per_mirror_group():
    datacentres = ["dc1", "dc2", "dc3"]
    assert artemis_estate.relayed_after_swapover(BRIDGED_GROUPS, datacentres, "dc1", ["all"], "dc2") == {
        "all": ["dc3"]}
    # The owner's own star reaches everyone; a bridge group bridges to every datacentre; two datacentres: a dual mirror.
    assert artemis_estate.relayed_after_swapover(BRIDGED_GROUPS, datacentres, "dc1", ["all"], "dc1") == {}
    assert artemis_estate.relayed_after_swapover(BRIDGED_GROUPS, datacentres, "dc1", ["relay"], "dc2") == {}
    assert artemis_estate.relayed_after_swapover(BRIDGED_GROUPS, ["dc1", "dc2"], "dc1", ["all"], "dc2") == {}
    assert artemis_estate.relayed_after_swapover(TESTBED_GROUPS, datacentres + ["dc4"], "dc1", ["all", "east"],
                                                 "dc3") == {"all": ["dc2", "dc4"], "east": ["dc1", "dc4"]}


@pytest.mark.parametrize("prefix, reserved", [("continuity.", "continuity."), ("continuity.apps.", "continuity."),
                                              ("activemq.", "activemq."),
                                              ("$ACTIVEMQ_ARTEMIS_MIRROR_", "$ACTIVEMQ_ARTEMIS")])
def test_a_group_under_a_reserved_prefix_is_refused_by_name(prefix, reserved):
    with pytest.raises(artemis_estate.EstateError,
                       match=re.escape("address group mine: prefix %r is under %r" % (prefix, reserved))):
        artemis_estate.normalise_groups([{"name": "mine", "addresses": [prefix]}], "dc1")


def test_a_swapover_drain_compares_only_the_swapped_groups_queues():
    groups = TESTBED_GROUPS + [{"name": "books", "addresses": ["books."], "engine": "bridge"},
                               {"name": "orders", "addresses": ["orders.", "invoices."]}]
    # The catch-all swapped: everything but the other groups' prefixes (east's clients act at dc2 meanwhile).
    datacentres = ["dc1", "dc2"]
    assert artemis_estate.drain_scope(groups, ["all", "books"], datacentres) == {
        "links": ["continuity.out.books.dc1", "continuity.out.books.dc2", "dc1_all", "dc2_all"],
        "include_prefixes": [], "exclude_prefixes": ["books.", "east.", "inflow.", "invoices.", "orders."],
        "compare_queues": True}
    assert artemis_estate.drain_scope(groups, ["orders"], datacentres) == {
        "links": ["dc1_orders", "dc2_orders"], "include_prefixes": ["invoices.", "orders."],
        "exclude_prefixes": ["books.", "inflow."], "compare_queues": True}
    # A full_state bridge group alone: its counts differ by design until the swapover reconciles them.
    assert artemis_estate.drain_scope(groups, ["books"], datacentres)["compare_queues"] is False
    # The links the swapover waits for are the ones the brokers run, by the same names.
    running = {link["name"] for link in artemis_estate.replication_links(groups, datacentres, "dc1")}
    assert set(artemis_estate.drain_scope(groups, ["all", "books"], datacentres)["links"]) <= running
