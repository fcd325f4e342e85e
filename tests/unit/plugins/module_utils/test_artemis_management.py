"""The management client's error handling against a fake Jolokia (a real HTTP server on loopback), and the
replication helpers on known data."""

import contextlib
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ArtemisManagement, AuthenticationRefused, BrokerNotReady, BrokerUnreachable, ManagementError, MBeanNotFound,
    ask_each, jolokia_endpoint, broker_mbean, queue_mbean, quote, require_at_least)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import (
    compare_sites, is_application_queue)


class FakeJolokia(BaseHTTPRequestHandler):
    """Answers with whatever the test put in ``server.answer``: (HTTP status, JSON body or raw bytes), or sleeps."""

    def do_POST(self):  # noqa: N802 - http.server's naming
        self.server.requests.append((dict(self.headers), json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
        status, body = self.server.answers.pop(0) if self.server.answers else self.server.answer
        if status == "sleep":
            time.sleep(body)
            status, body = 200, {"status": 200, "value": None}
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html" if isinstance(body, bytes) else "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def jolokia():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeJolokia)
    server.requests, server.answer, server.answers = [], (200, {"status": 200, "value": True}), []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def _client(server, timeout=5):
    return ArtemisManagement("b1", "http://127.0.0.1:%d" % server.server_port, "admin", "s3cret", timeout=timeout)


def test_an_answer_that_is_not_json_is_named_with_its_content_type_and_first_bytes(jolokia):
    jolokia.answer = (200, b"<!doctype html>\n<html>\n  <head><title>Hawtio</title>" + b"x" * 200)
    with pytest.raises(ManagementError) as raised:
        _client(jolokia).read("org.apache.activemq.artemis:broker=\"b1\"", ["Started"])
    assert str(raised.value) == (
        "broker b1: http://127.0.0.1:%d/console/jolokia did not answer JSON (is it Jolokia?): text/html, "
        "'<!doctype html> <html> <head><title>Hawtio</title>%s'" % (jolokia.server_port, "x" * 28))


def test_a_read_sends_authenticated_json_with_an_origin(jolokia):
    jolokia.answer = (200, {"status": 200, "value": {"Started": True}})
    assert _client(jolokia).read("org.apache.activemq.artemis:broker=\"b1\"", ["Started"]) == {"Started": True}
    headers, body = jolokia.requests[0]
    assert headers["Authorization"] == "Basic YWRtaW46czNjcmV0"
    assert headers["Origin"] == "http://127.0.0.1:%d" % jolokia.server_port
    assert body == {"type": "read", "mbean": "org.apache.activemq.artemis:broker=\"b1\"", "attribute": ["Started"]}


@pytest.mark.parametrize("status, expected", [
    (401, r"refused management_user 'admin' \(HTTP 401 .*\): wrong user or password, or the user has no role"),
    (403, r"refused management_user 'admin' \(HTTP 403 .*\): wrong user or password"),
    (500, "HTTP 500"),
])
def test_http_errors_say_what_to_fix(jolokia, status, expected):
    jolokia.answer = (status, {})
    with pytest.raises(ManagementError, match=expected) as error:
        _client(jolokia).read("x:y=z", "A")
    assert "s3cret" not in str(error.value)
    assert isinstance(error.value, AuthenticationRefused) == (status in (401, 403))


def test_an_unknown_mbean_is_named(jolokia):
    jolokia.answer = (200, {"status": 404, "error_type": "javax.management.InstanceNotFoundException",
                            "error": "not found"})
    with pytest.raises(MBeanNotFound, match='broker b1 has no .*queue="orders"'):
        _client(jolokia).read(queue_mbean("b1", "orders", "orders"), "MessageCount")


def test_a_broker_without_its_own_mbean_is_not_ready_rather_than_missing(jolokia):
    """What a backup answers while it gives the broker back (failback): a state to wait out, not an error."""
    jolokia.answer = (200, {"status": 404, "error_type": "javax.management.InstanceNotFoundException",
                            "error": "not found"})
    with pytest.raises(BrokerNotReady, match="broker b1 has no broker MBean yet"):
        _client(jolokia).read(broker_mbean("b1"), "Started")


def test_a_broker_that_is_not_started_is_told_apart(jolokia):
    jolokia.answer = (200, {"status": 500, "error_type": "java.lang.IllegalStateException",
                            "error": "java.lang.IllegalStateException : Broker is not started. It can not be managed yet"})
    with pytest.raises(BrokerNotReady, match="broker b1 is not started"):
        _client(jolokia).read("x:y=z", "Started")


_CONSUMER_CLOSING = (200, {"status": 500, "error_type": "java.lang.NullPointerException",
                           "error": "java.lang.NullPointerException : Cannot invoke \"org.apache.activemq.artemis.core."
                                    "server.ServerSession.getConnectionID()\" because \"this.session\" is null"})


def test_a_listing_that_met_a_consumer_closing_is_read_again(jolokia):
    # The chaos bed's build at f30cb03: activate.yml's listConsumers met a consumer closing (Artemis 2.44 and 2.56).
    listed = (200, {"status": 200, "value": json.dumps({"count": 1, "data": [{"queue": "q1"}]})})
    jolokia.answers = [_CONSUMER_CLOSING, listed]
    assert _client(jolokia).consumers() == [{"queue": "q1"}]
    assert len(jolokia.requests) == 2

    jolokia.answers, jolokia.requests = [_CONSUMER_CLOSING] * 3, []
    with pytest.raises(ManagementError, match="NullPointerException"):
        _client(jolokia).consumers()
    assert len(jolokia.requests) == 3


def test_a_listing_that_failed_otherwise_is_not_read_again(jolokia):
    jolokia.answer = (200, {"status": 500, "error_type": "java.lang.IllegalArgumentException", "error": "bad filter"})
    with pytest.raises(ManagementError, match="bad filter"):
        _client(jolokia).consumers()
    assert len(jolokia.requests) == 1


def test_an_unreachable_broker_is_named():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = ArtemisManagement("b9", "http://127.0.0.1:%d" % port, "admin", "pw")
    with pytest.raises(BrokerUnreachable, match="broker b9 is unreachable at http://127.0.0.1:%d" % port):
        client.read("x:y=z", "A")


def test_a_slow_broker_times_out(jolokia):
    jolokia.answer = ("sleep", 3)
    with pytest.raises(BrokerUnreachable, match="no answer within 1s"):
        _client(jolokia, timeout=1).read("x:y=z", "A")


def test_each_broker_is_asked_at_once_and_its_error_takes_the_place_of_its_answer():
    together = threading.Barrier(3, timeout=5)

    def question(name):
        together.wait()
        if name == "b2":
            raise BrokerUnreachable("broker b2 is unreachable")
        return name.upper()
    answers = ask_each(["b1", "b2", "b3"], question)
    assert answers[0] == "B1" and answers[2] == "B3" and isinstance(answers[1], BrokerUnreachable)
    assert ask_each([], question) == []
    with pytest.raises(ZeroDivisionError):  # not a broker's answer: a bug, raised
        ask_each(["b1"], lambda name: 1 / 0)


@contextlib.contextmanager
def _one_connection(reply=b""):
    """A loopback port that accepts one connection, reads what the client first sends, answers ``reply`` and closes
    once the client has finished sending (closing with unread bytes would reset the connection, which the client
    reports as unreachable whatever came before). Yields the port."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)

        def answer():
            connection = listener.accept()[0]
            connection.recv(4096)
            connection.sendall(reply)
            connection.shutdown(socket.SHUT_WR)
            connection.settimeout(5)
            try:
                while connection.recv(4096):
                    pass
            except OSError:
                pass
            connection.close()
        threading.Thread(target=answer, daemon=True).start()
        yield listener.getsockname()[1]


def test_a_tls_handshake_cut_short_is_a_broker_going_away_not_a_wrong_ca():
    """A broker that stops (or starts) accepts the TCP connection and closes it during the handshake."""
    with _one_connection() as port:
        client = ArtemisManagement("b1", "https://127.0.0.1:%d" % port, "admin", "pw")
        with pytest.raises(BrokerUnreachable, match="closed the connection during the TLS handshake"):
            client.read("x:y=z", "A")


def test_a_connection_closed_before_any_answer_is_a_broker_going_away():
    """A broker stopping, or its host powered off, as the request was on its way: not a configuration error."""
    with _one_connection() as port:
        client = ArtemisManagement("b1", "http://127.0.0.1:%d" % port, "admin", "pw")
        with pytest.raises(BrokerUnreachable, match="closed the connection without an answer"):
            client.read("x:y=z", "A")


def test_plain_http_on_a_tls_port_is_not_taken_for_a_broker_that_is_down():
    """An http:// URL at an https port gets TLS bytes back: a configuration error, not 'unreachable'."""
    with _one_connection(reply=b"\x15\x03\x03\x00\x02\x02\x50") as port:
        client = ArtemisManagement("b1", "http://127.0.0.1:%d" % port, "admin", "pw")
        with pytest.raises(ManagementError, match="did not answer HTTP") as error:
            client.read("x:y=z", "A")
    assert not isinstance(error.value, BrokerUnreachable)


def test_object_name_values_are_quoted_as_java_does():
    """Artemis names MBeans with ObjectName.quote: a queue 'a?b*c"d' must be addressed exactly."""
    assert quote('a?b*c"d\\e\nf') == '"a\\?b\\*c\\"d\\\\e\\nf"'
    assert queue_mbean("b1", "x?", 'q*"') == (
        'org.apache.activemq.artemis:broker="b1",component=addresses,address="x\\?",subcomponent=queues,'
        'routing-type="anycast",queue="q\\*\\""')


def test_endpoint_and_origin():
    assert jolokia_endpoint("https://mq1:8161") == ("https://mq1:8161/console/jolokia", "https://mq1:8161")
    expected = ("http://mq1:8161/console/jolokia", "http://mq1:8161")
    assert jolokia_endpoint("http://mq1:8161/console/jolokia/") == expected
    with pytest.raises(ManagementError, match="not an http"):
        jolokia_endpoint("mq1:8161")


def test_application_queues_leave_out_internal_ones_and_follow_prefixes():
    def queue(name, **extra):
        return dict({"name": name, "internalQueue": "false", "temporary": "false"}, **extra)
    assert not is_application_queue(queue("$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all", internalQueue="true"))
    assert not is_application_queue(queue("tmp", temporary="true"))
    assert not is_application_queue(queue("continuity.out.relay.dc2"))
    assert not is_application_queue(queue("continuity.in.relay"))
    assert is_application_queue(queue("orders.eu"))
    assert not is_application_queue(queue("audit.eu"), exclude_prefixes=["audit."])
    assert not is_application_queue(queue("orders.eu"), include_prefixes=["billing."])


class BridgeJolokia(FakeJolokia):
    """A broker with two core bridges: one connected with 3 messages unconfirmed, one not connected."""

    def do_POST(self):  # noqa: N802 - http.server's naming
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(request)
        if request["attribute"] == "BridgeNames":
            value = ["to-dc3", "to-dc2"]
        else:
            name = request["mbean"].rpartition("name=")[2].strip('"')
            value = {"QueueName": "out." + name, "Connected": name == "to-dc2",
                     "MessagesPendingAcknowledgement": 3 if name == "to-dc2" else 0}
        payload = json.dumps({"status": 200, "value": value}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def test_bridges_are_read_from_their_own_mbeans():
    server = ThreadingHTTPServer(("127.0.0.1", 0), BridgeJolokia)
    server.requests = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        bridges = _client(server).bridges()
    finally:
        server.shutdown()
    assert bridges == [{"name": "to-dc2", "queue": "out.to-dc2", "connected": True, "pending": 3},
                       {"name": "to-dc3", "queue": "out.to-dc3", "connected": False, "pending": 0}]
    assert server.requests[1]["mbean"] == broker_mbean("b1") + ',component=bridges,name="to-dc2"'


def test_compare_sites_counts_the_durable_messages_of_live_brokers_per_datacentre():
    reports = [
        {"datacentre": "dc1", "live": True,
         "queues": [{"name": "a", "message_count": 5, "durable_message_count": 5},
                    {"name": "b", "message_count": 1, "durable_message_count": 1},
                    # dc1 crashed: its non-durable messages are gone, dc2 keeps its copies of them
                    {"name": "c", "message_count": 0, "durable_message_count": 0}]},
        {"datacentre": "dc1", "live": False, "queues": []},
        {"datacentre": "dc2", "live": True, "queues": [{"name": "a", "message_count": 5, "durable_message_count": 5},
                                                       {"name": "c", "message_count": 3, "durable_message_count": 0}]},
    ]
    assert compare_sites(reports) == [
        {"queue": "a", "durable_message_counts": {"dc1": 5, "dc2": 5}, "in_sync": True},
        {"queue": "b", "durable_message_counts": {"dc1": 1, "dc2": 0}, "in_sync": False},
        {"queue": "c", "durable_message_counts": {"dc1": 0, "dc2": 0}, "in_sync": True},
    ]
    assert compare_sites(reports, tolerance=1)[1]["in_sync"]


class DurableCountJolokia(FakeJolokia):
    """A pattern read of DurableMessageCount, answered as Jolokia does: per MBean name, the MBean server's canonical
    form (keys sorted, values quoted)."""

    def do_POST(self):  # noqa: N802 - http.server's naming
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(request)
        value = {
            'org.apache.activemq.artemis:address="orders",broker="b1",component=addresses,'
            'queue="orders",routing-type="anycast",subcomponent=queues': {"DurableMessageCount": 4},
            'org.apache.activemq.artemis:address="odd\\"name",broker="b1",component=addresses,'
            'queue="odd\\"na,me\\*",routing-type="multicast",subcomponent=queues': {"DurableMessageCount": 0},
        }
        payload = json.dumps({"status": 200, "value": value}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def test_durable_message_counts_are_read_in_one_request_and_keyed_by_queue_name():
    server = ThreadingHTTPServer(("127.0.0.1", 0), DurableCountJolokia)
    server.requests = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        counts = _client(server).durable_message_counts()
    finally:
        server.shutdown()
    assert counts == {"orders": 4, 'odd"na,me*': 0}
    assert len(server.requests) == 1 and server.requests[0]["mbean"].endswith(",queue=*")


class FakeModule:
    def __init__(self, **params):
        self.params = params

    def fail_json(self, msg):
        raise AssertionError(msg)


def test_numbers_below_their_minimum_are_named_with_their_value():
    require_at_least(FakeModule(timeout=5, tolerance=0, poll_interval=None), timeout=1, tolerance=0, poll_interval=0.1)
    with pytest.raises(AssertionError, match=r"^timeout must be at least 1 \(got -5\); tolerance must be at least 0 "
                                             r"\(got -1\)$"):
        require_at_least(FakeModule(timeout=-5, tolerance=-1), timeout=1, tolerance=0)


def test_a_browsed_mirror_copy_gives_its_broker_properties_over_its_annotations_and_says_whether_it_is_durable(
        jolokia):
    # As Artemis 2.56 browses a copy the mirror brought (its annotations as the source sent them, then the broker
    # properties the target stored, which filters see).
    row = {"messageID": "2147512716", "userID": "ID:a-1", "durable": True,
           "LongProperties": {"messageAnnotations.x-opt-amq-mr-id": 1, "extraProperties.x-opt-amq-mr-id": 69061,
                              "applicationProperties.seq": 2872},
           "StringProperties": {"extraProperties.x-opt-amq-bkr-id": "dc1+", "applicationProperties.producer": "a"}}
    jolokia.answer = (200, {"status": 200, "value": [row, dict(row, messageID="7", durable=False)]})
    first, second = _client(jolokia).browse("q", "q")
    assert first == {"messageID": 2147512716, "userID": "ID:a-1", "durable": True,
                     "properties": {"x-opt-amq-mr-id": 69061, "seq": 2872, "x-opt-amq-bkr-id": "dc1+",
                                    "producer": "a"}}
    assert second["durable"] is False
