"""Bad arguments to the management modules, against the test bed's real brokers: each is refused with a message that
names the argument or the broker, no password shows in the output, and the estate is left as it was (dc1 active,
dc2 passive, as the inventory says)."""

import pytest

from support.estate import generated_secrets, run_module


def _site_arguments(estate, datacentre="dc2", state="active"):
    return {**estate.site_args(datacentre, state), "groups": ["all"]}


def _unchanged(estate):
    """Whether artemis_site, in check mode, finds the `all` group as the inventory built it."""
    for datacentre, state in (("dc1", "active"), ("dc2", "passive")):
        result, output = run_module("artemis_site", _site_arguments(estate, datacentre, state), check_mode=True)
        assert not result.get("failed"), output[-3000:]
        if result["changed"]:
            return False
    return True


def _wrong_state(estate):
    return "artemis_site", dict(_site_arguments(estate), state="half")


def _unknown_datacentre(estate):
    return "artemis_site", _site_arguments(estate, datacentre="dc9")


def _unknown_group(estate):
    return "artemis_site", dict(_site_arguments(estate), groups=["nope"])


def _wrong_password(estate):
    return "artemis_site", dict(_site_arguments(estate), management_password="not-the-password")


def _unreachable_broker(estate):
    arguments = _site_arguments(estate)
    dc2 = estate.dc("dc2")
    # A port nothing listens on, on the real host: dc2's broker "is down".
    arguments["brokers"] = [dict(broker, management_url=f"https://{dc2.address}:8999")
                            if broker["name"] == dc2.name else broker for broker in arguments["brokers"]]
    return "artemis_site", dict(arguments, request_timeout=2)


def _missing_password(estate):
    arguments = _site_arguments(estate)
    del arguments["management_password"]
    return "artemis_site", arguments


def _broker_without_datacentre(estate):
    arguments = _site_arguments(estate)
    arguments["brokers"] = [{"name": b["name"], "management_url": b["management_url"]} for b in arguments["brokers"]]
    return "artemis_site", arguments


def _unknown_mode(estate):
    arguments = _site_arguments(estate)
    arguments["address_groups"] = [dict(group, mode="everything") for group in arguments["address_groups"]]
    return "artemis_site", arguments


def _tolerance_not_a_number(estate):
    return "artemis_drain_check", dict(estate.management_args(), source_datacentre="dc1", tolerance="many")


def _negative_timeout(estate):
    return "artemis_drain_check", dict(estate.management_args(), source_datacentre="dc1", timeout=-5)


def _not_a_url(estate):
    arguments = estate.management_args()
    arguments["brokers"][0]["management_url"] = "dc1-node1:8161"
    return "artemis_replication_info", arguments


CASES = {
    "unknown state": (_wrong_state, ["state", "half"]),
    "unknown datacentre": (_unknown_datacentre, ["dc9"]),
    "unknown group": (_unknown_group, ["nope"]),
    "wrong password": (_wrong_password, ["refused management_user 'admin'", "wrong user or password"]),
    "unreachable broker": (_unreachable_broker, ["dc2-node1", "unreachable"]),
    "missing password": (_missing_password, ["management_password"]),
    "broker without a datacentre": (_broker_without_datacentre, ["datacentre", "brokers"]),
    "unknown replication mode": (_unknown_mode, ["mode", "everything"]),
    "tolerance not a number": (_tolerance_not_a_number, ["tolerance"]),
    "negative timeout": (_negative_timeout, ["timeout must be at least 1 (got -5)"]),
    "management URL without a scheme": (_not_a_url, ["management_url", "dc1-node1:8161"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_module_arguments_are_refused_naming_what_is_wrong(estate, case):
    build, expected_words = CASES[case]
    module, arguments = build(estate)

    result, output = run_module(module, arguments, timeout=120)

    assert result.get("failed"), output[-3000:]
    for word in expected_words:
        assert word in result["msg"], f"{word!r} not named in: {result['msg']}"
    assert not result.get("changed")
    assert not [secret for secret in generated_secrets() + ["not-the-password"] if secret in output]
    assert _unchanged(estate)
