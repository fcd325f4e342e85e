"""artemis_site's computation of what a datacentre's security settings must be, on known input."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", ".collections"))
from ansible_collections.continuity.artemis.plugins.modules.artemis_site import (  # noqa: E402
    clients_may_act, desired_settings)

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
