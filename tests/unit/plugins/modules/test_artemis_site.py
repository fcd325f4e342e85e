"""artemis_site's computation of what a datacentre's security settings must be, on known input."""


from ansible_collections.continuity.artemis.plugins.modules.artemis_site import (
    clients_may_act, desired_settings, is_exempt)

GROUPS = [{"name": "inflow", "addresses": ["inflow."], "mode": "messages_only"},
          {"name": "all", "addresses": []},
          {"name": "east", "addresses": ["east."], "mode": "full_state"}]
APP = {"name": "app", "permissions": ["send", "consume", "browse"]}


def _params(state):
    return {"state": state, "address_groups": GROUPS, "roles": [APP], "admin_role": "amq"}


def test_passive_touches_only_the_selected_groups_and_withholds_send_and_consume():
    desired = desired_settings(_params("passive"), ["all"])
    assert sorted(desired) == ["#"]
    assert desired["#"]["consume"] == ["amq"] and desired["#"]["browse"] == ["amq", "app"]


def test_active_opens_every_selected_group():
    desired = desired_settings(_params("active"), ["all", "east"])
    assert sorted(desired) == ["#", "east.#"]
    assert all(desired[match]["send"] == ["amq", "app"] for match in desired)
    assert clients_may_act(desired, "amq") == ["#", "east.#"]


def test_the_administrator_alone_does_not_make_a_site_active():
    assert clients_may_act({"#": {"send": ["amq"], "consume": ["amq"], "browse": ["amq", "app"]}}, "amq") == []


def test_a_fence_leaves_the_brokers_own_connections_open():
    def connection(users, local="10.0.2.11:61616"):
        return {"users": users, "localAddress": local}
    exempt = (["replicator", "cluster"], [5673])
    assert is_exempt(connection(""), *exempt)  # the HA pair's own core connections carry no user
    assert is_exempt(connection("cluster"), *exempt)
    # A mirror that logged in with its certificate carries its subject, on the mutual-TLS acceptor.
    assert is_exempt(connection("CN=dc1-node1", "10.0.2.11:5673"), *exempt)
    assert not is_exempt(connection("CN=dc1-node1"), *exempt)
    assert not is_exempt(connection("app"), *exempt)
    assert not is_exempt(connection("app,replicator"), *exempt)
