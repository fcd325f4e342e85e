"""Reading back what the RPO job published, and the failover's rule for it."""

import json

import pytest
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from ansible_collections.continuity.artemis.plugins.module_utils.published_rpo import (
    EVALUATED_METRIC, RPO_METRIC, PublishedRpoError, parse_exposition, rpo_from_textfile, value_from_query_response,
    weigh)

LINK = ["source_datacentre", "target_datacentre"]


def _exposition(routes):
    """Text as prometheus_client writes it (the job's exporter): {(source, target): (rpo, evaluated_at)}."""
    registry = CollectorRegistry()
    rpo = Gauge(RPO_METRIC, "RPO", LINK, registry=registry)
    evaluated = Gauge(EVALUATED_METRIC, "evaluated at", LINK, registry=registry)
    other = Gauge("continuity_artemis_kept_messages_by_address", "kept", ["datacentre", "address"], registry=registry)
    other.labels("dc2", 'odd "address", with\\ and\nnewline').set(3)
    for (source, target), (seconds, at) in routes.items():
        rpo.labels(source, target).set(seconds)
        evaluated.labels(source, target).set(at)
    return generate_latest(registry).decode()


def test_the_route_asked_for_is_read_and_the_others_are_not_mixed_in():
    text = _exposition({("dc1", "dc2"): (4.5, 1_790_000_000.25), ("dc2", "dc1"): (0.5, 1_790_000_100.0)})
    assert rpo_from_textfile(text, "dc1", "dc2") == (4.5, 1_790_000_000.25)
    assert rpo_from_textfile(text, "dc2", "dc1") == (0.5, 1_790_000_100.0)
    assert rpo_from_textfile(text, "dc1", "dc3") is None


def test_escaped_label_values_are_read_back_as_written():
    samples = parse_exposition(_exposition({}))
    labels = {dict(key[1])["address"] for key in samples if key[0] == "continuity_artemis_kept_messages_by_address"}
    assert labels == {'odd "address", with\\ and\nnewline'}


def test_a_route_with_an_rpo_but_no_evaluation_time_has_no_figure():
    assert rpo_from_textfile(f'{RPO_METRIC}{{source_datacentre="dc1",target_datacentre="dc2"}} 3\n',
                             "dc1", "dc2") is None


@pytest.mark.parametrize("text", ["continuity_artemis_rpo_seconds{source_datacentre=dc1} 3",
                                  "continuity_artemis_rpo_seconds three",
                                  "not a sample at all"])
def test_text_that_is_not_exposition_is_refused_naming_the_line(text):
    with pytest.raises(PublishedRpoError, match="line 1"):
        parse_exposition(text)


def _answer(*values, status="success"):
    return json.dumps({"status": status, "error": "bad query", "data": {"resultType": "vector", "result": [
        {"metric": {"instance": f"m{i}"}, "value": [1_790_000_000.0, str(v)]} for i, v in enumerate(values)]}})


def test_prometheus_answers_are_read():
    assert value_from_query_response(_answer(7.25), "q") == 7.25
    assert value_from_query_response(_answer(), "q") is None
    with pytest.raises(PublishedRpoError, match="refused q: bad query"):
        value_from_query_response(_answer(status="error"), "q")
    with pytest.raises(PublishedRpoError, match="2 series"):
        value_from_query_response(_answer(1, 2), "q")
    with pytest.raises(PublishedRpoError, match="JSON"):
        value_from_query_response("<html>", "q")


@pytest.mark.parametrize("rpo, age, ok, words", [
    (4.0, 30.0, True, "measured RPO 4.0 s (evaluated 30 s ago) is within the RPO objective of 60 s"),
    (75.0, 30.0, False, "measured RPO 75.0 s (evaluated 30 s ago) is above the RPO objective of 60 s"),
    (4.0, 1000.0, False, "is older than 900 s"),
    (None, None, False, "no measured RPO for the route"),
    (60.0, None, True, "measured RPO 60.0 s is within"),
])
def test_the_rule(rpo, age, ok, words):
    within, reason = weigh(rpo, age, 60, 900)
    assert within is ok and words in reason
