"""The chaos runner's load: a queue the application creates at runtime waits, rather than ending the run, while no
broker takes its consumer."""

import types

import pytest

from chaos import runner


class _Worker:
    connects = True
    made: list = []

    def __init__(self, urls, *_args, **_kwargs):
        self.urls, self.started, self.stopped = urls, False, False
        _Worker.made.append(self)

    def start(self):
        self.started = True

    def wait_connected(self, timeout):
        if not self.connects:
            raise AssertionError(f"not connected to {self.urls[0]} after {timeout}s")

    def stop(self, timeout):
        self.stopped = True


class _World:
    active, datacentres = "dc1", ["dc1", "dc2"]

    def __init__(self):
        node = types.SimpleNamespace(dc="dc1", amqp_url="amqps://a1:5671", ca_cert="ca.pem", user="app",
                                     password="secret")
        self.estate = types.SimpleNamespace(nodes=[node])
        self.logged = []

    def log(self, line):
        self.logged.append(line)


@pytest.fixture
def load(monkeypatch):
    _Worker.made = []
    monkeypatch.setattr(runner, "amqp", types.SimpleNamespace(Producer=_Worker, Consumer=_Worker))
    return runner.Load(_World(), "r1")


def test_a_runtime_queue_no_broker_takes_is_deferred_and_its_consumer_stopped(load, monkeypatch):
    monkeypatch.setattr(_Worker, "connects", False)
    load.add_runtime_queue()
    producer, consumer = _Worker.made
    assert load.workers == [] and consumer.stopped and not producer.started
    assert load.world.logged == ["load: chaos.r1.rt1 deferred, no broker took its consumer: "
                                 "not connected to amqps://a1:5671 after 120s"]
    monkeypatch.setattr(_Worker, "connects", True)
    load.add_runtime_queue()
    assert [entry["address"] for entry in load.workers] == ["chaos.r1.rt2"] and load.workers[0]["producer"].started


def test_the_load_at_the_start_of_the_run_still_fails_when_no_broker_takes_it(load, monkeypatch):
    monkeypatch.setattr(_Worker, "connects", False)
    with pytest.raises(AssertionError, match="not connected"):
        load._add("all", "full_state", "chaos.r1.all", "dc1")  # pylint: disable=protected-access
