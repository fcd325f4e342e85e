"""What the collector takes from a broker's metrics page: the broker plugin's acknowledgement notices per group and
sending datacentre, in the exposition format Artemis's Prometheus plugin writes (Micrometer's names)."""

from prometheus_client.parser import text_string_to_metric_families

from continuity_rpo import broker_metrics, collector

PAGE = """\
# HELP continuity_ack_notice_delta_seconds From a message's production to the arrival here of its notice
# TYPE continuity_ack_notice_delta_seconds histogram
continuity_ack_notice_delta_seconds_bucket{broker="dc2-n1",group="shared",source="dc1",le="0.001"} 0
continuity_ack_notice_delta_seconds_bucket{broker="dc2-n1",group="shared",source="dc1",le="0.1"} 40
continuity_ack_notice_delta_seconds_bucket{broker="dc2-n1",group="shared",source="dc1",le="+Inf"} 42
continuity_ack_notice_delta_seconds_count{broker="dc2-n1",group="shared",source="dc1"} 42
continuity_ack_notice_delta_seconds_sum{broker="dc2-n1",group="shared",source="dc1"} 2.75
continuity_ack_notice_delta_seconds_bucket{broker="dc2-n1",group="shared",source="dc3",le="0.1"} 1
continuity_ack_notice_delta_seconds_bucket{broker="dc2-n1",group="shared",source="dc3",le="+Inf"} 1
continuity_ack_notice_delta_seconds_count{broker="dc2-n1",group="shared",source="dc3"} 1
continuity_ack_notice_delta_seconds_sum{broker="dc2-n1",group="shared",source="dc3"} 0.01
# HELP continuity_ack_notice_delta_seconds_max From a message's production to the arrival here of its notice
# TYPE continuity_ack_notice_delta_seconds_max gauge
continuity_ack_notice_delta_seconds_max{broker="dc2-n1",group="shared",source="dc1"} 1.5
# HELP continuity_ack_notice_durable_delta_seconds From a message's production to the journal commit here of its notice
# TYPE continuity_ack_notice_durable_delta_seconds summary
continuity_ack_notice_durable_delta_seconds_count{broker="dc2-n1",group="shared",source="dc1"} 41
continuity_ack_notice_durable_delta_seconds_sum{broker="dc2-n1",group="shared",source="dc1"} 9.5
# HELP continuity_ack_notices_applied_total Notices that removed the copy they name before its delivery
# TYPE continuity_ack_notices_applied_total counter
continuity_ack_notices_applied_total{broker="dc2-n1",group="shared",source="dc1"} 40.0
# HELP continuity_ack_notices_late_total Notices that found their copy delivered already (a duplicate) or gone
# TYPE continuity_ack_notices_late_total counter
continuity_ack_notices_late_total{broker="dc2-n1",group="shared",source="dc1"} 2.0
# HELP artemis_message_count number of messages in this queue
# TYPE artemis_message_count gauge
artemis_message_count{address="shared.a",broker="dc2-n1",queue="shared.a"} 3.0
"""


def _samples(text):
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def test_notice_figures_per_group_and_sending_datacentre():
    figures = broker_metrics.notice_figures(_samples(PAGE))
    assert figures == [
        {"group": "shared", "source": "dc1", "count": 42, "sum_seconds": 2.75, "max_seconds": 1.5, "applied": 40,
         "late": 2, "buckets": {"0.001": 0, "0.1": 40, "+Inf": 42}, "durable_count": 41, "durable_sum_seconds": 9.5},
        # No notice of dc3's has been applied, late or committed yet: those meters are not registered, so 0.
        {"group": "shared", "source": "dc3", "count": 1, "sum_seconds": 0.01, "max_seconds": None, "applied": 0,
         "late": 0, "buckets": {"0.1": 1, "+Inf": 1}, "durable_count": 0, "durable_sum_seconds": 0.0}]


def test_a_broker_without_notices_gives_no_figures():
    only_artemis = PAGE[PAGE.index("# HELP artemis_message_count"):]
    assert broker_metrics.notice_figures(_samples(only_artemis)) == []


def test_the_collector_marks_a_series_new_since_the_brokers_previous_scrape(monkeypatch):
    pages = iter([PAGE[PAGE.index("# HELP artemis_message_count"):], PAGE, PAGE])
    monkeypatch.setattr(collector.broker_metrics, "scrape", lambda *args: _samples(next(pages)))
    config = {"staging_delays": {"shared": 20.0},
              "management": {"ca_path": None, "management_user": "monitor", "management_password": "secret",
                             "request_timeout": 5, "validate_certs": True}}
    broker = {"name": "dc2-n1", "metrics_url": "https://dc2-n1:9404/metrics"}
    seen = {}

    def scraped():
        return [(row["source"], row["appeared"], row["staging_delay_seconds"])
                for row in collector._notice_rows(config, broker, {"time": 1.0}, seen)]  # pylint: disable=protected-access
    assert not scraped()  # no notice yet
    # The broker registered both series since: every count in them is new.
    assert scraped() == [("dc1", True, 20.0), ("dc3", True, 20.0)]
    assert scraped() == [("dc1", False, 20.0), ("dc3", False, 20.0)]


def test_a_series_in_the_collectors_first_scrape_of_a_broker_is_not_new(monkeypatch):
    monkeypatch.setattr(collector.broker_metrics, "scrape", lambda *args: _samples(PAGE))
    config = {"staging_delays": {"other": 1.0, "shared": 20.0},
              "management": {"ca_path": None, "management_user": "monitor", "management_password": "secret",
                             "request_timeout": 5, "validate_certs": True}}
    rows = collector._notice_rows(config, {"name": "dc2-n1", "metrics_url": "https://x/metrics"}, {}, {})  # pylint: disable=protected-access
    assert [(row["source"], row["appeared"]) for row in rows] == [("dc1", False), ("dc3", False)]
