"""The address groups and external brokers an inventory can get wrong: the estate model names each, before anything
changes (the replication role's preflight asserts the estate_errors filter's answer is empty). test_bad_inventory
keeps one case of each kind on the test bed, through the preflight."""

import pytest

from ansible_collections.continuity.artemis.plugins.filter.estate import estate_errors

DATACENTRES = ["dc1", "dc2"]
CATCH_ALL = {"name": "all"}


@pytest.mark.parametrize("groups, external, words", [
    ("all", None, ["must be a list of at least one group", "'all'"]),
    ([], None, ["must be a list of at least one group"]),
    ([{"addresses": ["orders."]}], None, ["needs a name"]),
    ([{"name": "orders", "addresses": ["orders."]}, {"name": "orders", "addresses": ["billing."]}], None,
     ["unique names", "orders is the name of more than one"]),
    ([{"name": "orders/eu"}], None, ["'orders/eu'", "letters, digits and \"-\""]),
    ([{"name": "a", "addresses": ["orders."]}, {"name": "b", "addresses": ["orders."], "engine": "bridge"}, CATCH_ALL],
     None, ["prefix 'orders.' is in address groups a and b"]),
    ([{"name": "a"}, {"name": "b"}], None, ["catch-all", "a, b have none"]),
    ([{"name": "all", "owner": "dc8"}], None, ["all: owner 'dc8' is not one of the datacentres dc1, dc2"]),
    ([{"name": "all", "mode": "everything"}], None, ["all: mode 'everything'"]),
    ([{"name": "mine", "addresses": ["continuity.mine."]}, CATCH_ALL], None,
     ["address group mine", "'continuity.mine.'"]),
    ([{"name": "inflow", "addresses": ["inflow."], "mode": "messages_only"}, CATCH_ALL],
     [{"name": "legacy", "addresses": ["inflow.orders"], "password": "not-a-secret"}],
     ["external broker legacy", "inflow.orders", "address group inflow"]),
])
def test_what_keeps_groups_from_making_an_estate_is_named(groups, external, words):
    errors = estate_errors(groups, DATACENTRES, "dc1", external)
    assert len(errors) == 1
    for word in words:
        assert word in errors[0]
    assert "not-a-secret" not in errors[0]


def test_groups_that_make_an_estate_have_no_error():
    groups = [{"name": "orders", "addresses": ["orders."], "engine": "bridge"}, {"name": "east", "addresses": ["east."],
                                                                                 "owner": "dc2"}, CATCH_ALL]
    assert estate_errors(groups, DATACENTRES, "dc1", [{"name": "legacy", "addresses": ["orders.x"]}]) == []
