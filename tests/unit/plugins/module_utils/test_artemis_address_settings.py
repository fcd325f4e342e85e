"""The address settings a datacentre's staging adds: keep unroutable mirrored messages where it is passive."""

import json

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_address_settings import (
    KEPT_ADDRESS, address_settings, as_json, differs, group_address_settings, json_name)

CONFIGURED = [{"match": "#", "settings": {"dead-letter-address": "DLQ", "address-full-policy": "PAGE"}},
              {"match": "east.#", "settings": {"max-delivery-attempts": 5}}]
GROUPS = [{"name": "all", "addresses": []}, {"name": "east", "addresses": ["east."]},
          {"name": "inflow", "addresses": ["inflow."], "mode": "messages_only"}]


def _by_match(settings):
    return dict((entry["match"], entry["settings"]) for entry in settings)


def test_a_staged_catch_all_keeps_and_the_prefixes_it_does_not_stage_say_so_explicitly():
    staging = [{"prefix": "", "staged": True}, {"prefix": "east.", "staged": False},
               {"prefix": "inflow.", "staged": False}]
    settings = _by_match(address_settings(CONFIGURED, staging))
    assert settings["#"] == {"dead-letter-address": KEPT_ADDRESS, "address-full-policy": "PAGE",
                             "send-to-dla-on-no-route": True}
    # Artemis merges the general match into the specific ones: they must say what they do themselves.
    assert settings["east.#"] == {"max-delivery-attempts": 5, "send-to-dla-on-no-route": False,
                                  "dead-letter-address": "DLQ"}
    assert settings["inflow.#"] == {"send-to-dla-on-no-route": False, "dead-letter-address": "DLQ"}
    # Artemis's notifications go nowhere when nobody listens, nor do the broker plugin's notices: never kept.
    assert settings["activemq.notifications"] == {"send-to-dla-on-no-route": False}
    assert settings["continuity.acks.#"] == {"send-to-dla-on-no-route": False}


def test_an_active_datacentre_keeps_nothing_and_adds_nothing_to_the_catch_all_but_what_is_never_kept():
    staging = [{"prefix": "", "staged": False}, {"prefix": "east.", "staged": True}]
    settings = _by_match(address_settings(CONFIGURED, staging))
    assert settings["#"] == CONFIGURED[0]["settings"]
    assert settings["east.#"]["dead-letter-address"] == KEPT_ADDRESS
    # What goes nowhere by design is never kept, also where a fence at runtime (artemis_site) stages the catch-all.
    never_kept = {"activemq.management.#": {"send-to-dla-on-no-route": False},
                  "activemq.notifications": {"send-to-dla-on-no-route": False},
                  "continuity.acks.#": {"send-to-dla-on-no-route": False}}
    assert _by_match(address_settings(CONFIGURED, [{"prefix": "", "staged": False}])) == dict(
        _by_match(CONFIGURED), **never_kept)
    assert address_settings(CONFIGURED) == CONFIGURED


def test_bad_configured_settings_are_named():
    with pytest.raises(ValueError, match="'match'"):
        address_settings([{"settings": {}}])


def test_artemis_site_applies_the_selected_groups_matches_only():
    passive = group_address_settings(CONFIGURED, GROUPS, ["all"], passive=True)
    assert sorted(passive) == ["#"] and passive["#"]["send-to-dla-on-no-route"] is True
    active = group_address_settings(CONFIGURED, GROUPS, ["all", "east"], passive=False)
    assert active["#"] == CONFIGURED[0]["settings"]
    assert active["east.#"]["send-to-dla-on-no-route"] is False


def test_json_names_and_values_are_those_addAddressSettings_takes():
    assert json_name("send-to-dla-on-no-route") == "sendToDLAOnNoRoute"
    assert json_name("address-full-policy") == "addressFullMessagePolicy"
    assert json_name("auto-create-queues") == "autoCreateQueues"
    assert json.loads(as_json({"max-delivery-attempts": "5", "auto-create-queues": "true", "expiry-address": "E"})) \
        == {"maxDeliveryAttempts": 5, "autoCreateQueues": True, "expiryAddress": "E"}


def test_what_counts_as_a_difference_is_whether_and_where_it_keeps():
    keeping = {"send-to-dla-on-no-route": True, "dead-letter-address": KEPT_ADDRESS}
    assert not differs({"sendToDLAOnNoRoute": True, "deadLetterAddress": KEPT_ADDRESS, "maxSizeBytes": 1}, keeping)
    assert differs({"deadLetterAddress": KEPT_ADDRESS}, keeping)
    assert differs({"sendToDLAOnNoRoute": True, "deadLetterAddress": "DLQ"}, keeping)
    assert not differs({}, {"auto-create-queues": True})


def test_broker_xml_deletes_removed_diverts_unless_configured_otherwise():
    settings = _by_match(address_settings(CONFIGURED, delete_removed_diverts=True))
    assert settings["#"]["config-delete-diverts"] == "FORCE"
    assert settings["east.#"] == CONFIGURED[1]["settings"]
    configured = [{"match": "#", "settings": {"config-delete-diverts": "OFF"}}]
    assert _by_match(address_settings(configured, delete_removed_diverts=True))["#"]["config-delete-diverts"] == "OFF"
    assert "config-delete-diverts" not in _by_match(address_settings(CONFIGURED))["#"]
