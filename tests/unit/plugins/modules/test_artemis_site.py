"""artemis_site: what a datacentre's security settings must be, on known input; and the module's survey, refusal,
force, fence and check mode against stub brokers."""

import json
import threading

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import BrokerUnreachable
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import fence_staging, peer_roles
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_security import PERMISSIONS, fence_settings
from ansible_collections.continuity.artemis.plugins.modules.artemis_site import (
    clients_may_act, desired_settings, is_exempt, run_module)

GROUPS = [{"name": "inflow", "addresses": ["inflow."], "mode": "messages_only"},
          {"name": "all", "addresses": []},
          {"name": "east", "addresses": ["east."], "mode": "full_state"},
          {"name": "relay", "addresses": ["relay."], "mode": "messages_only", "engine": "bridge"}]
APP = {"name": "app", "permissions": ["send", "consume", "browse"]}


def _params(state):
    return {"state": state, "address_groups": GROUPS, "roles": [APP], "admin_role": "amq", "datacentre": "dc2"}


def test_passive_touches_only_the_selected_groups_and_withholds_send_and_consume():
    desired = desired_settings(_params("passive"), ["all"])
    # Not the matches only the other datacentres' brokers hold (the mirrors' store-and-forward addresses, which the
    # catch-all group's prefix covers): their grants never change with the state.
    assert sorted(desired) == ["#"]
    assert desired["#"]["consume"] == ["amq"] and desired["#"]["browse"] == ["amq", "app"]


def test_a_staged_bridge_group_keeps_its_peers_grant_and_withholds_it_from_clients():
    """The bridge engine's peers deliver to the group's own addresses (relay.#): a fence of the group must leave
    them their grant there, or its copies would be refused until the next site.yml; clients lose send and consume."""
    desired = desired_settings(_params("passive"), ["relay"])
    assert sorted(desired) == ["relay.#"]
    assert desired["relay.#"]["send"] == ["amq", "replication"]
    assert desired["relay.#"]["createDurableQueue"] == ["amq", "replication"]
    assert desired["relay.#"]["consume"] == ["amq"] and desired["relay.#"]["browse"] == ["amq", "app"]
    # The peer's grant does not make the group look active.
    assert clients_may_act(desired, "amq") == []
    assert clients_may_act(desired_settings(_params("active"), ["relay"]), "amq") == ["relay.#"]


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


class StubBroker:
    """A broker as artemis_site sees it through the management client: its security settings, clients and queues;
    it records what the module changed."""

    def __init__(self, settings, connections=(), live=True, reachable=True, consumers=0, working_on=None):
        self.settings = {match: dict(permissions) for match, permissions in settings.items()}
        self.open_connections = list(connections)
        self.consumer_count = consumers  # on the queue "orders" (group "all")
        # remoteAddress -> the address its connection's one consumer works on (default: "orders")
        self.working_on = working_on or {}
        self.live, self.reachable = live, reachable
        self.calls = []
        self.runtime_address_settings = {}  # match -> JSON settings, as addAddressSettings took them
        self.sent = []  # (address, properties) of the messages the module sent
        self.asked = 0  # status() calls
        self.asked_together = None  # a threading.Barrier every broker's status() waits at

    def status(self):
        self.asked += 1
        if self.asked_together:
            self.asked_together.wait()
        if not self.reachable:
            raise BrokerUnreachable("broker is unreachable")
        return {"live": self.live}

    def roles(self, match):
        permissions = self.settings.get(match, {})
        names = sorted({role for roles in permissions.values() for role in roles})
        return [dict({permission: name in permissions.get(permission, []) for permission in PERMISSIONS}, name=name)
                for name in names]

    def set_roles(self, match, permissions, order):
        self.calls.append(("set_roles", match))
        self.settings[match] = {permission: list(permissions.get(permission, [])) for permission in order}

    def connections(self):
        return self.open_connections

    def consumers(self):
        return [{"remoteAddress": connection.get("remoteAddress"),
                 "address": self.working_on.get(connection.get("remoteAddress"), "orders")}
                for connection in self.open_connections if connection["users"] == "app"]

    def producers(self):
        return []

    def address_settings(self, address):
        covering = [match for match in self.runtime_address_settings if address.startswith(match[:-1])]
        return self.runtime_address_settings[max(covering, key=len)] if covering else {}

    def set_address_settings(self, match, settings_json):
        self.calls.append(("set_address_settings", match))
        self.runtime_address_settings[match] = json.loads(settings_json)

    def send_message(self, address, properties, body=""):
        self.sent.append((address, properties))

    def close_connection(self, connection_id):
        self.calls.append(("close", connection_id))

    def queues(self):
        return [{"name": "orders", "address": "orders", "routingType": "ANYCAST", "deliveringCount": "0",
                 "consumerCount": str(self.consumer_count)}]

    def pause_queue(self, queue):
        self.calls.append(("pause", queue["name"]))

    def resume_queue(self, queue):
        self.calls.append(("resume", queue["name"]))


class Exited(Exception):
    pass


class Failed(Exception):
    pass


class StubModule:
    def __init__(self, params, check_mode=False):
        self.params, self.check_mode, self.warnings = params, check_mode, []

    def warn(self, message):
        self.warnings.append(message)

    def exit_json(self, **result):
        raise Exited(result)

    def fail_json(self, **result):
        raise Failed(result)


def _site(state, brokers, check_mode=False, **options):
    """Run artemis_site for dc2 against stub brokers ({name: (datacentre, StubBroker)}); the result it exits or
    fails with."""
    params = dict(_params(state), datacentre="dc2", groups=["all"], exempt_users=["replicator"], exempt_ports=[],
                  force=False, delivery_timeout=1, address_settings=None,
                  brokers=[{"name": name, "datacentre": dc} for name, (dc, _stub) in brokers.items()])
    params.update(options)
    module = StubModule(params, check_mode)
    with pytest.raises((Exited, Failed)) as outcome:
        run_module(module, client_for=lambda broker, _params: brokers[broker["name"]][1])
    return outcome.type is Exited, outcome.value.args[0]


def _settings(state):
    return desired_settings(_params(state), ["all"])


CLIENT = {"connectionID": "c1", "users": "app", "localAddress": "10.0.2.21:61616", "remoteAddress": "10.0.0.5:40001"}
MIRROR = {"connectionID": "c2", "users": "replicator", "localAddress": "10.0.2.21:61616"}


def test_check_mode_reports_the_fence_and_changes_nothing():
    dc2 = StubBroker(_settings("active"), [CLIENT, MIRROR])
    exited, result = _site("passive", {"dc2-node1": ("dc2", dc2)}, check_mode=True)
    assert exited and result["changed"] and result["previous_state"] == "active"
    assert result["changed_settings"] == {"dc2-node1": ["#"]}
    assert result["closed_connections"] == {"dc2-node1": 1}
    assert result["diff"]["after"]["dc2-node1"]["#"] == _settings("passive")["#"]
    assert dc2.calls == []


@pytest.mark.parametrize("consumers", [1, 0])
def test_a_fence_withholds_the_group_pauses_its_queues_in_use_and_closes_only_client_connections(consumers):
    """A queue no consumer takes from has nothing in flight: it is not paused (B10: 5,000 idle queues paused and
    resumed one request each made a fence take 112 s)."""
    dc2 = StubBroker(_settings("active"), [CLIENT, MIRROR], consumers=consumers)
    exited, result = _site("passive", {"dc2-node1": ("dc2", dc2)})
    assert exited and result["changed"]
    paused = [("pause", "orders")] if consumers else []
    resumed = [("resume", "orders")] if consumers else []
    assert dc2.calls == [("set_roles", "#"), *paused, ("close", "c1"), *resumed]
    assert clients_may_act(dc2.settings, "amq") == []
    exited, again = _site("passive", {"dc2-node1": ("dc2", StubBroker(dc2.settings, [MIRROR]))})
    assert exited and not again["changed"] and again["previous_state"] == "passive"


def test_a_fence_leaves_open_the_connections_that_work_only_on_other_groups():
    """A swapover of `all` does not cut off the clients of a messages_only group at the source: closing them would
    redeliver what they had in flight (found by the chaos run, issue 47)."""
    inflow = {"connectionID": "c3", "users": "app", "localAddress": "10.0.2.21:61616", "remoteAddress": "10.0.0.5:40002"}
    dc2 = StubBroker(_settings("active"), [CLIENT, MIRROR, inflow], working_on={"10.0.0.5:40002": "inflow.orders"})
    exited, result = _site("passive", {"dc2-node1": ("dc2", dc2)})
    assert exited and result["closed_connections"] == {"dc2-node1": 1}
    assert ("close", "c1") in dc2.calls and ("close", "c3") not in dc2.calls


def test_a_fence_that_holds_leaves_the_datacentres_clients_connected():
    """site.yml stages, at every run, each group at the datacentres that do not own it: a datacentre that owns
    other groups keeps their clients; none of them may act on the fenced groups."""
    dc2 = StubBroker(_settings("passive"), [CLIENT, MIRROR])
    exited, result = _site("passive", {"dc2-node1": ("dc2", dc2)})
    assert exited and not result["changed"] and result["closed_connections"] == {}
    assert dc2.calls == []


def test_a_fence_that_holds_still_closes_a_client_consuming_from_the_group():
    """A fence cut short after its roles changed: run again, it closes the connections it had not closed."""
    dc2 = StubBroker(_settings("passive"), [CLIENT, MIRROR], consumers=1)
    exited, result = _site("passive", {"dc2-node1": ("dc2", dc2)})
    assert exited and result["changed"] and result["closed_connections"] == {"dc2-node1": 1}
    assert dc2.calls == [("pause", "orders"), ("close", "c1"), ("resume", "orders")]


def test_activation_is_refused_while_another_datacentre_is_active_and_changes_nothing():
    dc1, dc2 = StubBroker(_settings("active")), StubBroker(_settings("passive"))
    exited, result = _site("active", {"dc1-node1": ("dc1", dc1), "dc2-node1": ("dc2", dc2)})
    assert not exited
    assert result["msg"].startswith("refusing to activate dc2: already active at dc1 (broker dc1-node1: #)")
    # What the refused datacentre is says whether a swapover run again finds its work done (swapover.yml).
    assert result["active_elsewhere"] == ["dc1 (broker dc1-node1: #)"] and result["previous_state"] == "passive"
    assert dc1.calls == [] and dc2.calls == []


def test_force_activates_despite_another_active_datacentre_and_touches_only_its_own():
    dc1, dc2 = StubBroker(_settings("active")), StubBroker(_settings("passive"))
    exited, result = _site("active", {"dc1-node1": ("dc1", dc1), "dc2-node1": ("dc2", dc2)}, force=True)
    assert exited and result["changed_settings"] == {"dc2-node1": ["#"]}
    assert result["active_elsewhere"] == ["dc1 (broker dc1-node1: #)"]
    assert dc1.calls == [] and dc2.calls == [("set_roles", "#")]


def test_an_activation_leaves_its_record_at_every_live_broker_that_answers():
    """A datacentre lost in a failover reads the others' records when it returns (the broker plugin's activation
    check): the record must be where the operation could reach, and its time orders it."""
    gone, backup = StubBroker(_settings("active"), reachable=False), StubBroker(_settings("passive"), live=False)
    dc2, dc3 = StubBroker(_settings("passive")), StubBroker(_settings("passive"))
    brokers = {"dc1-node1": ("dc1", gone), "dc2-node1": ("dc2", dc2), "dc2-node2": ("dc2", backup),
               "dc3-node1": ("dc3", dc3)}
    exited, result = _site("active", brokers)
    assert exited and result["recorded_at"] == ["dc2-node1", "dc3-node1"]
    [(address, record)] = dc2.sent
    assert address == "continuity.activation" and dc3.sent == dc2.sent and backup.sent == []
    assert record["continuity_group"] == "all" and record["continuity_active_datacentre"] == "dc2"
    assert int(record["continuity_activated_at"]) > 1.7e12  # ms since the epoch


def test_a_fence_and_a_check_leave_no_record():
    dc2 = StubBroker(_settings("active"))
    exited, result = _site("passive", {"dc2-node1": ("dc2", dc2)})
    assert exited and dc2.sent == [] and result["recorded_at"] == []
    dc2 = StubBroker(_settings("passive"))
    exited, result = _site("active", {"dc2-node1": ("dc2", dc2)}, check_mode=True)
    assert exited and dc2.sent == [] and result["recorded_at"] == []


def test_the_activation_checks_fence_is_the_fence_this_module_applies():
    """The broker plugin applies fence_settings when it finds a group activated elsewhere; a failback's fence then
    finds nothing to change."""
    fences = fence_settings(fence_staging(GROUPS), [APP], "amq", peer_roles(GROUPS, "dc2"))
    assert sorted(fences) == ["all", "east"]
    for group in fences:
        passive = desired_settings(dict(_params("passive")), [group])
        assert fences[group] == dict((match, [",".join(permissions[permission]) for permission in PERMISSIONS])
                                     for match, permissions in passive.items())
    assert fences["all"]["#"][:2] == ["amq", "amq"]  # send and consume withheld from the clients


def test_a_silent_datacentre_elsewhere_is_skipped_but_its_own_must_answer():
    gone = StubBroker(_settings("active"), reachable=False)
    exited, result = _site("active", {"dc1-node1": ("dc1", gone),
                                      "dc2-node1": ("dc2", StubBroker(_settings("passive")))})
    assert exited and result["changed_settings"] == {"dc2-node1": ["#"]}
    exited, result = _site("active", {"dc2-node1": ("dc2", StubBroker(_settings("passive"), reachable=False))})
    assert not exited and "unreachable" in result["msg"]


def test_every_broker_is_asked_at_once_and_one_that_does_not_answer_only_once():
    # B4: a powered-off datacentre's broker answers nothing until the request times out (10 s); the activation
    # asked it once to look and once more to record, and one broker after another.
    stubs = {"dc1-node1": ("dc1", StubBroker(_settings("active"), reachable=False)),
             "dc2-node1": ("dc2", StubBroker(_settings("passive"))),
             "dc3-node1": ("dc3", StubBroker(_settings("passive")))}
    together = threading.Barrier(len(stubs), timeout=5)
    for _dc, stub in stubs.values():
        stub.asked_together = together
    exited, result = _site("active", stubs)
    assert exited and result["recorded_at"] == ["dc2-node1", "dc3-node1"]
    assert [stub.asked for _dc, stub in stubs.values()] == [1, 1, 1]


@pytest.mark.parametrize("state", ["active", "passive"])
def test_a_datacentre_whose_brokers_all_answer_as_backups_is_not_reported_changed_or_done(state):
    # 2 x 2 seed 3's third chaos run: a failover's activation retried while the target's pair was between its
    # brokers, found no live one, changed nothing and ended ok; the groups stayed active nowhere for 19 minutes.
    other = "passive" if state == "active" else "active"
    backups = {"dc2-node1": ("dc2", StubBroker(_settings(other), live=False)),
               "dc2-node2": ("dc2", StubBroker(_settings(other), live=False))}
    exited, result = _site(state, backups)
    assert not exited and "no broker of dc2 answers as live (dc2-node1, dc2-node2)" in result["msg"]
    assert all(not stub.calls and not stub.sent for _dc, stub in backups.values())


CONFIGURED = [{"match": "#", "settings": {"dead-letter-address": "DLQ", "auto-create-queues": True}}]


def test_with_address_settings_a_fence_keeps_unroutable_mirrored_messages_and_an_activation_stops():
    dc2 = StubBroker(_settings("active"), [MIRROR])
    exited, result = _site("passive", {"dc2-node1": ("dc2", dc2)}, address_settings=CONFIGURED)
    assert exited and result["changed_address_settings"] == {"dc2-node1": ["#"]}
    # The whole configured setting of the match, since a runtime setting replaces broker.xml's.
    assert dc2.runtime_address_settings["#"] == {"deadLetterAddress": "continuity.kept", "autoCreateQueues": True,
                                                 "sendToDLAOnNoRoute": True}
    assert dc2.calls[0] == ("set_address_settings", "#")
    exited, again = _site("passive", {"dc2-node1": ("dc2", dc2)}, address_settings=CONFIGURED)
    assert exited and not again["changed"]

    exited, result = _site("active", {"dc2-node1": ("dc2", dc2)}, address_settings=CONFIGURED)
    assert exited and result["changed_address_settings"] == {"dc2-node1": ["#"]}
    assert dc2.runtime_address_settings["#"] == {"deadLetterAddress": "DLQ", "autoCreateQueues": True}


def test_without_address_settings_the_module_leaves_them_alone():
    dc2 = StubBroker(_settings("active"), [MIRROR])
    exited, result = _site("passive", {"dc2-node1": ("dc2", dc2)})
    assert exited and result["changed_address_settings"] == {}
    assert not [call for call in dc2.calls if call[0] == "set_address_settings"]


def test_bad_address_settings_fail_naming_the_option_before_anything_changes():
    dc2 = StubBroker(_settings("active"), [MIRROR])
    exited, result = _site("passive", {"dc2-node1": ("dc2", dc2)}, address_settings=[{"settings": {}}])
    assert not exited and result["msg"].startswith("address_settings: ")
    assert dc2.calls == []


def test_an_activation_records_itself_before_it_changes_a_setting():
    """A pair's backup that takes over just after an activation reads the activation records it holds: had the
    settings reached its journal without the record, it would fence the groups again on an older activation
    elsewhere (the 2 x 2 chaos run, seed 3: dark for 311 s after a failover)."""
    happened = []

    class Ordered(StubBroker):
        def set_roles(self, match, permissions, order):
            happened.append("setting")
            super().set_roles(match, permissions, order)

        def send_message(self, address, properties, body=""):
            happened.append("record")
            super().send_message(address, properties, body)

    exited, _result = _site("active", {"dc2-node1": ("dc2", Ordered(_settings("passive")))})
    assert exited and happened[0] == "record" and "setting" in happened
