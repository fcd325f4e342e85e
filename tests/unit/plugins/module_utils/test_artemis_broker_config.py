"""The broker's own routing (broker_queues, broker_diverts, broker_connectors, broker_bridges): what broker.xml makes of
it, and the rules between entries that argument specs cannot check."""

import json
import os
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.continuity.artemis.plugins.module_utils import artemis_broker_config as config, artemis_estate

ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "roles", "broker")
BUILTIN = [{"name": "DLQ"}, {"name": "ExpiryQueue"}]
CONNECTORS = ({"name": "dc2-primary", "host": "10.0.2.1"}, {"name": "dc2-backup", "host": "10.0.2.2"})
QUEUES = ({"name": "outbound.dc2", "filter": "origin IS NULL"},)
DIVERTS = ({"name": "orders-to-dc2", "address": "orders", "forwarding_address": "outbound.dc2"},)
BRIDGES = ({"name": "to-dc2", "queue": "outbound.dc2", "connectors": ["dc2-primary", "dc2-backup"], "user": "repl",
            "password": "secret"},)


def _errors(addresses=(), queues=QUEUES, connectors=CONNECTORS, diverts=DIVERTS, bridges=BRIDGES, has_ca=True):
    return config.config_errors(BUILTIN, list(addresses), list(queues), list(connectors), list(diverts),
                                list(bridges), has_ca)


def test_a_consistent_configuration_has_no_errors():
    assert _errors() == []


@pytest.mark.parametrize("change, words", [
    ({"bridges": [dict(BRIDGES[0], connectors=["dc3"])]}, ["broker_bridges", "'to-dc2'", "'dc3'", "broker_connectors"]),
    ({"bridges": [dict(BRIDGES[0], queue="nowhere")]}, ["broker_bridges", "'nowhere'", "declares"]),
    ({"bridges": [dict(BRIDGES[0], connectors=[])]}, ["broker_bridges", "'to-dc2'", "no connectors"]),
    ({"diverts": [dict(DIVERTS[0], address="")]}, ["broker_diverts", "'orders-to-dc2'", "no address"]),
    ({"diverts": [dict(DIVERTS[0], forwarding_address="orders")]}, ["broker_diverts", "to itself"]),
    ({"diverts": [dict(DIVERTS[0], name="outbound.dc2")]}, ["broker_diverts", "'outbound.dc2'", "queue"]),
    ({"diverts": [dict(DIVERTS[0], name="to-dc2")]}, ["broker_diverts/broker_bridges", "'to-dc2'"]),
    ({"diverts": [dict(DIVERTS[0], name="9lives")]}, ["broker_diverts", "'9lives'", "not a valid name"]),
    ({"connectors": CONNECTORS + ({"name": "dc2-primary", "host": "x"},)}, ["broker_connectors", "'dc2-primary'"]),
    ({"connectors": CONNECTORS + ({"name": "peer-1", "host": "x"},)}, ["broker_connectors", "'peer-1'", "HA pair"]),
    ({"has_ca": False}, ["broker_connectors", "'dc2-primary'", "ca.pem"]),
    ({"addresses": [{"name": "outbound.dc2"}]}, ["broker_queues", "'outbound.dc2'", "twice"]),
])
def test_each_inconsistency_is_named_with_its_variable_and_entry(change, words):
    errors = _errors(**change)
    assert errors, change
    assert any(all(word in error for word in words) for error in errors), errors


def test_a_connector_without_tls_or_with_its_own_ca_needs_no_estate_ca():
    connectors = [{"name": "outside", "host": "127.0.0.1", "tls": False},
                  {"name": "other-ca", "host": "10.9.0.1", "trust_store_path": "/etc/pki/other.pem"}]
    bridges = [dict(BRIDGES[0], connectors=["outside", "other-ca"])]
    assert _errors(connectors=connectors, bridges=bridges, has_ca=False) == []


def test_queues_merge_into_their_addresses_once_per_routing_type():
    addresses = [{"name": "orders"}, {"name": "events", "routing_type": "multicast", "queues": ["audit"]}]
    queues = [{"name": "orders.copy", "address": "orders", "routing_type": "multicast", "exclusive": True},
              {"name": "outbound.dc2", "filter": "origin IS NULL"}]
    elements = config.address_elements(BUILTIN, addresses, queues)
    assert [element["name"] for element in elements] == ["DLQ", "ExpiryQueue", "orders", "events", "outbound.dc2"]
    orders = elements[2]
    assert [queue["name"] for queue in orders["anycast"]] == ["orders"]
    assert orders["multicast"][0]["name"] == "orders.copy" and orders["multicast"][0]["exclusive"] is True
    assert orders["multicast"][0]["filter"] is None  # every option present, unset ones None
    assert elements[3]["anycast"] == [] and [queue["name"] for queue in elements[3]["multicast"]] == ["audit"]
    assert elements[4]["anycast"][0]["filter"] == "origin IS NULL"


def test_a_connector_url_verifies_the_remote_broker_unless_told_otherwise():
    assert config.connector_url({"name": "a", "host": "dr1"}, "/i/etc/tls") == (
        "tcp://dr1:61616?sslEnabled=true;trustStorePath=/i/etc/tls/ca.pem;trustStoreType=PEMCA;verifyHost=true")
    assert config.connector_url({"name": "a", "host": "dr1", "port": 61617, "tls": False,
                                 "parameters": {"callTimeout": 5000, "useEpoll": False}}, "/i/etc/tls") == (
        "tcp://dr1:61617?callTimeout=5000;useEpoll=false")


def test_unset_options_take_the_defaults_the_argument_specs_document():
    with open(os.path.join(ROLE, "meta", "argument_specs.yml")) as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    for variable, defaults in [("broker_connectors", config.CONNECTOR_DEFAULTS),
                               ("broker_queues", config.QUEUE_DEFAULTS),
                               ("broker_diverts", config.DIVERT_DEFAULTS),
                               ("broker_bridges", config.BRIDGE_DEFAULTS)]:
        suboptions = options[variable]["options"]
        documented = dict((name, spec.get("default")) for name, spec in suboptions.items() if not spec.get("required"))
        assert documented == defaults, variable
    bridge = config.bridges([{"name": "b", "queue": "q", "connectors": ["c"], "user": "u", "password": "p",
                              "retry_interval": None, "concurrency": 4}])[0]
    assert bridge["retry_interval"] == 2000 and bridge["concurrency"] == 4


# broker.xml's acceptors as the role of 0.2 wrote them (plain text), and an estate's mirror acceptor.
OLD_ACCEPTORS = """
      <acceptors>
         <acceptor name="artemis">tcp://0.0.0.0:61616?amqpCredits=1000;protocols=CORE,AMQP,OPENWIRE;useEpoll=true</acceptor>
         <acceptor name="amqp">tcp://0.0.0.0:5672?protocols=AMQP;useEpoll=true</acceptor>
         <acceptor name="replication">tcp://0.0.0.0:5673?keyStorePath=/i/etc/tls/broker.pem;needClientAuth=true;\
protocols=AMQP;securityDomain=certificate;sslEnabled=true</acceptor>
      </acceptors>"""
TLS = {"sslEnabled": True, "keyStoreType": "PEM", "keyStorePath": "/i/etc/tls/broker.pem"}
REPLICATION = {"name": "replication", "port": 5673, "parameters": dict(TLS, needClientAuth=True)}


def test_the_acceptors_clients_use_now_are_named_when_they_change():
    new = [{"name": "artemis", "port": 61616, "parameters": TLS}, {"name": "amqps", "port": 5671, "parameters": TLS},
           REPLICATION]
    assert config.acceptor_changes(OLD_ACCEPTORS, new) == [
        "acceptor amqp (5672 in plain text) removed",
        "acceptor artemis: 61616 in plain text, then 61616 over TLS"]


def test_acceptors_kept_as_they_are_change_nothing():
    kept = [{"name": "artemis", "port": 61616, "parameters": {"protocols": "CORE", "useEpoll": True}},
            {"name": "amqp", "port": 5672, "parameters": {}}, REPLICATION,
            {"name": "amqps", "port": 5671, "parameters": TLS}]  # an acceptor added disturbs no client
    assert config.acceptor_changes(OLD_ACCEPTORS, kept) == []
    assert config.acceptor_changes("", kept) == []  # before the first installation


def test_a_port_change_is_named():
    moved = [{"name": "artemis", "port": 61617, "parameters": {}}, {"name": "amqp", "port": 5672}, REPLICATION]
    assert config.acceptor_changes(OLD_ACCEPTORS, moved) == [
        "acceptor artemis: 61616 in plain text, then 61617 in plain text"]


TLS = {"sslEnabled": True, "keyStorePath": "/etc/tls/broker.pem"}


def test_acceptors_are_tls_unless_they_say_otherwise_and_plain_text_takes_no_password_unless_it_says_so():
    written = config.client_acceptors([
        {"name": "artemis", "port": 61616, "protocols": ["CORE", "AMQP"]},
        {"name": "inside", "port": 5672, "protocols": ["AMQP"], "tls": False},
        {"name": "legacy", "port": 61610, "protocols": ["CORE"], "tls": False, "plain_text_passwords": True},
        {"name": "own", "port": 5671, "protocols": ["AMQP"], "parameters": {"keyStorePath": "/own.pem"}},
    ], TLS, "certificate")
    assert [acceptor["parameters"] for acceptor in written] == [
        TLS, {"securityDomain": "certificate", "saslMechanisms": "EXTERNAL"}, {},
        {"sslEnabled": True, "keyStorePath": "/own.pem"}]
    assert written[0]["protocols"] == ["CORE", "AMQP"]


@pytest.mark.parametrize("acceptor, words", [
    ({"tls": "no"}, ["broker_acceptors ['a']", "true or false"]),
    ({"plain_text_passwords": True}, ["broker_acceptors ['a']", "only goes with tls: false"]),
    ({"tls": True, "plain_text_passwords": True}, ["broker_acceptors ['a']", "only goes with tls: false"]),
    ({"tls": False, "protocols": ["CORE", "AMQP"]}, ["broker_acceptors ['a']", "only AMQP", "seen"]),
    ({"tls": False, "protocols": ["MQTT"]}, ["broker_acceptors ['a']", "only AMQP"]),
])
def test_unclear_or_unsafe_acceptors_are_named(acceptor, words):
    [error] = config.acceptor_errors([dict({"name": "a", "port": 1, "protocols": ["AMQP"]}, **acceptor)])
    for word in words:
        assert word in error, error


def test_safe_acceptors_have_no_errors():
    assert config.acceptor_errors([
        {"name": "artemis", "port": 61616, "protocols": ["CORE", "AMQP", "OPENWIRE"]},
        {"name": "inside", "port": 5672, "protocols": ["AMQP"], "tls": False},
        {"name": "legacy", "port": 61610, "protocols": ["CORE"], "tls": False, "plain_text_passwords": True},
    ]) == []


# broker_properties: what etc/broker.properties says, and the keys the collection keeps for itself.

PROPERTY_READER = """
import java.io.FileInputStream;
import java.util.Properties;
import java.util.TreeMap;

public class ReadProperties {
    public static void main(String[] arguments) throws Exception {
        Properties properties = new Properties();
        try (FileInputStream in = new FileInputStream(arguments[0])) {
            properties.load(in);  // an InputStream, as Artemis reads broker.properties: ISO-8859-1
        }
        for (var entry : new TreeMap<Object, Object>(properties).entrySet()) {
            System.out.print(entry.getKey() + "\\u0000" + entry.getValue() + "\\u0000");
        }
    }
}
"""


def _stores(**paths):
    placed = {"journal": "/var/opt/artemis/b/data/journal", "bindings": "/var/opt/artemis/b/data/bindings",
              "paging": "/var/opt/artemis/b/data/paging", "large_messages": "/var/opt/artemis/b/data/large-messages"}
    placed.update(paths)
    elements = {"large_messages": "large-messages-directory"}
    return [{"variable": f"broker_{name}_dir", "element": elements.get(name, f"{name}-directory"), "path": path}
            for name, path in placed.items()]


def test_stores_in_directories_of_their_own_have_no_errors():
    assert config.store_errors(_stores()) == []
    assert config.store_errors(_stores(paging="/srv/paging", large_messages="/srv/large")) == []
    # A prefix of another's name is not a parent directory.
    assert config.store_errors(_stores(paging="/srv/data", large_messages="/srv/data-large")) == []


@pytest.mark.parametrize("paths, words", [
    ({"paging": "srv/paging"}, ["broker_paging_dir", "absolute", "'srv/paging'"]),
    ({"paging": "/srv/paging/"}, ["broker_paging_dir", "trailing slash"]),
    ({"paging": "/srv/../paging"}, ["broker_paging_dir", ". or .."]),
    ({"paging": "/srv/${user}"}, ["broker_paging_dir", "$"]),
    ({"paging": "/srv/pa\nging"}, ["broker_paging_dir"]),
    ({"paging": 5}, ["broker_paging_dir"]),
    ({"paging": "/srv/one", "large_messages": "/srv/one"},
     ["broker_paging_dir and broker_large_messages_dir are the same directory (/srv/one)"]),
    ({"paging": "/var/opt/artemis/b/data/journal/paging"},
     ["broker_paging_dir (/var/opt/artemis/b/data/journal/paging) is inside broker_journal_dir"]),
    ({"journal": "/var/opt/artemis/b/data/paging/j"}, ["broker_journal_dir", "is inside broker_paging_dir"]),
])
def test_a_store_without_a_plain_directory_of_its_own_is_named(paths, words):
    errors = config.store_errors(_stores(**paths))
    assert len(errors) == 1 and all(word in errors[0] for word in words), errors


RUNNING_XML = """<configuration><core>
      <paging-directory>/var/opt/artemis/b/data/paging</paging-directory>
      <bindings-directory>/var/opt/artemis/b/data/bindings</bindings-directory>
      <journal-directory>/var/opt/artemis/b/data/journal</journal-directory>
      <large-messages-directory>/srv/a&amp;b/large</large-messages-directory>
</core></configuration>"""


def test_the_stores_new_settings_move_are_read_from_the_running_broker_xml():
    assert config.moved_stores(RUNNING_XML, _stores(large_messages="/srv/a&b/large")) == []
    assert config.moved_stores(RUNNING_XML, _stores(paging="/srv/paging", large_messages="/srv/a&b/large")) == [
        {"variable": "broker_paging_dir", "from": "/var/opt/artemis/b/data/paging", "to": "/srv/paging"}]
    assert [store["variable"] for store in config.moved_stores(RUNNING_XML, _stores(journal="/srv/j"))] == [
        "broker_journal_dir", "broker_large_messages_dir"]
    assert config.moved_stores("", _stores(paging="/srv/paging")) == []  # no instance yet


def test_broker_properties_read_back_by_java_as_written(tmp_path):
    """The file is read by java.util.Properties the way Artemis reads it: every key and value comes back whole."""
    java = shutil.which("java")
    if java is None:
        pytest.fail("java is needed (make setup installs it for the brokers)")
    properties = {"criticalAnalyzerTimeout": 120000, 'addressSettings."orders.eu".maxSizeBytes': "10MB",
                  "a key=with:separators #and blanks": " a value\\with\nnewline, é and 😀", "!bang": "#hash",
                  "flag": True}
    (tmp_path / "broker.properties").write_text("# a comment\n" + config.broker_properties_text(properties) + "\n",
                                                encoding="ascii")
    (tmp_path / "ReadProperties.java").write_text(PROPERTY_READER)
    read = subprocess.run([java, str(tmp_path / "ReadProperties.java"), str(tmp_path / "broker.properties")],
                          capture_output=True, check=True).stdout.decode("utf-8").split("\0")[:-1]
    assert dict(zip(read[::2], read[1::2])) == dict(
        (key, ("true" if value is True else str(value))) for key, value in properties.items())


def test_broker_properties_are_sorted_one_per_line():
    assert config.broker_properties_text({"b": 2, "a": False}) == "a=false\nb=2"


@pytest.mark.parametrize("properties, words", [
    ({"AMQPConnections.dc2.uri": "tcp://x:5672"}, ["AMQPConnections", "replication role"]),
    ({"securityEnabled": False}, ["securityEnabled", "broker_roles"]),
    ({"acceptorConfigurations.tcp.params.port": 61617}, ["acceptorConfigurations", "broker_acceptors"]),
    ({"HAPolicyConfiguration": "PRIMARY_ONLY"}, ["HAPolicyConfiguration", "broker_ha"]),
    ({"globalMaxSize": "1G"}, ["globalMaxSize", "broker_global_max_size"]),
    ({"journalDirectory": "/tmp"}, ["journalDirectory", "broker_journal_dir"]),
    ({"pagingDirectory": "/tmp"}, ["pagingDirectory", "broker_paging_dir"]),
    ({"brokerPlugins": "x"}, ["brokerPlugins"]),
    ({"addressSettings.#.autoDeleteQueues": True}, ["addressSettings", "broker_address_settings"]),
    ({"criticalAnalyzerTimeout": [1, 2]}, ["criticalAnalyzerTimeout", "string, number or boolean"]),
    ({"": 1}, ["non-empty string"]),
    # What Artemis rewrites before applying a key, or what changes how it reads the others.
    ({'"securityEnabled"': False}, ["securityEnabled", "broker_roles"]),
    ({"${x:AMQPConnections}.dc2.uri": "tcp://x:5672"}, ["${...}", "refused"]),
    ({"AMQPConnections[0].uri": "tcp://x:5672"}, ["[index]", "refused"]),
    ({"securityRoles(#).app.send": True}, ["(key)", "refused"]),
    ({"key.surround": "'"}, ["key.surround", "refused"]),
    ({"criticalAnalyzerPolicy": "LOG"}, ["criticalAnalyzerPolicy", "HA takeover"]),
    ({"minDiskFree": "1G"}, ["minDiskFree", "broker_max_disk_usage"]),
])
def test_broker_properties_refused_name_the_key_and_what_to_use(properties, words):
    errors = config.broker_property_errors(properties)
    assert len(errors) == 1, errors
    for word in words:
        assert word in errors[0]


def test_broker_properties_of_settings_the_collection_leaves_alone_are_accepted():
    assert config.broker_property_errors({"criticalAnalyzerTimeout": 120000, "transactionTimeout": 60000,
                                          "mirrorAckManagerQueueAttempts": 16}) == []


def test_the_properties_artemis_could_not_apply_are_read_from_its_status():
    status = json.dumps({"server": {"state": "STARTED"}, "configuration": {"properties": {
        "/var/opt/artemis/b/etc/broker.properties": {"alder32": "1", "errors": [
            {"value": "noSuchSetting=1", "reason": "java.lang.NoSuchMethodException: noSuchSetting"},
            {"value": "someSecret=s3cret=x", "reason": "java.lang.IllegalArgumentException: cannot convert s3cret"}]}}}})
    # Only the key and the exception's class: a value (unmasked by Artemis) may be a password.
    assert config.unapplied_broker_properties(status) == [
        "noSuchSetting: java.lang.NoSuchMethodException", "someSecret: java.lang.IllegalArgumentException"]
    assert config.unapplied_broker_properties(json.dumps({"server": {}})) == []
    assert config.unapplied_broker_properties(json.dumps({"configuration": {"properties": {"f": {"alder32": "2"}}}})) \
        == []


BROKER_XML_WITH_MIRRORS = """<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core"><broker-connections>
  <amqp-connection name="dc2_all" uri="tcp://10.0.2.1:61617" user="replication" password="ENC(1a2b)"
    retry-interval="2000" reconnect-attempts="-1" auto-start="true">
    <mirror message-acknowledgements="true" queue-creation="true" queue-removal="true" sync="false"
      address-filter="!inflow."/></amqp-connection>
  <amqp-connection name="dc3_all" uri="tcp://10.0.3.1:61617" retry-interval="2000">
    <mirror message-acknowledgements="true" address-filter="%s"/></amqp-connection>
</broker-connections></core></configuration>""" % config.RETIRED_MIRROR_FILTER


def test_a_mirror_connection_the_settings_drop_stays_routing_nothing_until_it_was_retired_and_its_queue_is_empty():
    wanted = [{"name": "dc3_all"}]
    kept = config.retired_mirrors(BROKER_XML_WITH_MIRRORS, wanted, [{"name": "$ACTIVEMQ_ARTEMIS_MIRROR_dc2_all", "messageCount": "0"}])
    # In use with its own filter: it may hold events routed a moment ago, so it is retired first, whatever it holds.
    assert kept == [{"name": "dc2_all", "uri": "tcp://10.0.2.1:61617", "retry_interval": 2000, "user": "replication",
                     "masked_password": "ENC(1a2b)", "backlog": 0, "stops_routing": True,
                     "mirror": {"message_acknowledgements": True, "queue_creation": True, "queue_removal": True,
                                "address_filter": config.RETIRED_MIRROR_FILTER}}]
    # Retired in use: it goes once its queue is empty (a queue the broker does not list holds nothing) ...
    assert config.retired_mirrors(BROKER_XML_WITH_MIRRORS, [], [{"name": "$ACTIVEMQ_ARTEMIS_MIRROR_dc3_all", "messageCount": "0"}])[0]["name"] \
        == "dc2_all"
    assert [c["name"] for c in config.retired_mirrors(BROKER_XML_WITH_MIRRORS, [{"name": "dc2_all"}], [])] == []
    # ... and stays while it holds events, or while the broker could not be read.
    assert [(c["name"], c["backlog"]) for c in config.retired_mirrors(
        BROKER_XML_WITH_MIRRORS, [{"name": "dc2_all"}], [{"name": "$ACTIVEMQ_ARTEMIS_MIRROR_dc3_all", "messageCount": "757"}])] == [("dc3_all", 757)]
    assert [(c["name"], c["backlog"]) for c in config.retired_mirrors(
        BROKER_XML_WITH_MIRRORS, [{"name": "dc2_all"}], None)] == [("dc3_all", None)]
    # Only a connection that routes in use is one these settings stop routing (the rolling restart's order).
    assert [(c["name"], c["stops_routing"]) for c in config.retired_mirrors(BROKER_XML_WITH_MIRRORS, [], None)] \
        == [("dc2_all", True), ("dc3_all", False)]
    # ... which the broker's pending restart says, for that order.
    assert config.stops_routing_reasons(config.retired_mirrors(BROKER_XML_WITH_MIRRORS, [], None)) == [
        artemis_estate.STOPS_ROUTING_REASON + "dc2_all"]
    assert config.stops_routing_reasons(config.retired_mirrors(BROKER_XML_WITH_MIRRORS, [{"name": "dc2_all"}], None)) \
        == []
    # Nothing in use (no instance yet), or everything still wanted: nothing kept.
    assert config.retired_mirrors("", wanted, None) == []
    assert config.retired_mirrors(BROKER_XML_WITH_MIRRORS, [{"name": "dc2_all"}, {"name": "dc3_all"}], None) == []
