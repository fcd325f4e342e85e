"""Users from a directory: on the systemd bed (`up --ldap`) every broker logs users in from its own users first and
then from OpenLDAP over LDAPS (its CA not the estate's), a group's name being the role its members get."""

import os
import re
import subprocess

import pytest
import yaml

from support import amqp_clients as amqp
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import ManagementError
from support.estate import REPO_ROOT, TESTBED_INVENTORY, generated_secrets

TESTBED = os.path.join(REPO_ROOT, "tests", "testbed", "testbed")


def _secrets():
    with open(os.path.join(TESTBED_INVENTORY, "group_vars", "all", "secrets.yml")) as handle:
        return yaml.safe_load(handle)


def _passwords():
    secrets = _secrets()
    return secrets["testbed_ldap_passwords"], secrets["testbed_ldap_bind_password"]


@pytest.fixture
def directory_restarted(estate):
    yield estate
    subprocess.run([TESTBED, "ldap", "start"], check=True, capture_output=True, timeout=60)


@pytest.mark.systemd
def test_directory_users_send_consume_and_manage_by_group_and_the_brokers_own_users_outlive_the_directory(
        directory_restarted):
    estate = directory_restarted
    passwords, bind_password = _passwords()
    active = estate.dc("dc1")
    queue = "ldap.orders"

    # In group `app`: sends and consumes.
    sent = amqp.send(active.amqp_url, "ldap-app", passwords["ldap-app"], queue, 5, ca_path=active.ca_cert)
    received = amqp.receive(active.amqp_url, "ldap-app", passwords["ldap-app"], queue, 5, ca_path=active.ca_cert)
    assert sorted(message.id for message in received) == sorted(sent)
    # Known to the directory but in no group the brokers know: logged in, allowed nothing.
    with pytest.raises(amqp.AmqpError, match="not authorized"):
        amqp.send(active.amqp_url, "ldap-outsider", passwords["ldap-outsider"], queue, 1, ca_path=active.ca_cert)
    # A wrong password is refused.
    with pytest.raises(amqp.AmqpError, match="unauthorized-access"):
        amqp.send(active.amqp_url, "ldap-app", passwords["ldap-app"] + "x", queue, 1, ca_path=active.ca_cert)

    # One of the brokers' own users whose password the inventory gives masked (ENC(...) from `artemis mask`): the
    # role reads it back and stores its hash like any other.
    masked_user_password = _secrets()["testbed_masked_user_password"]
    sent = amqp.send(active.amqp_url, "masked-app", masked_user_password, queue, 2, ca_path=active.ca_cert)
    received = amqp.receive(active.amqp_url, "masked-app", masked_user_password, queue, 2, ca_path=active.ca_cert)
    assert sorted(message.id for message in received) == sorted(sent)
    users_file = estate.exec(active.name, "cat", f"/var/opt/artemis/{active.name}/etc/artemis-users.properties")
    assert re.search(r"^masked-app = ENC\(\d+:[0-9A-F]+:[0-9A-F]+\)$", users_file, re.MULTILINE), \
        "masked-app's password is not stored as a PBKDF2 hash"

    # The console's and Jolokia's realm is the same: a member of `amq` manages, a member of `app` does not.
    broker = 'org.apache.activemq.artemis:broker="%s"' % active.name
    for node in estate.nodes:
        admin = node.management("ldap-admin", passwords["ldap-admin"])
        assert admin.read('org.apache.activemq.artemis:broker="%s"' % node.name, ["Version"])["Version"]
    with pytest.raises(ManagementError):
        active.management("ldap-app", passwords["ldap-app"]).read(broker, ["Version"])

    # The directory goes down: every broker runs on and the brokers' own users still log in.
    pids = {node.name: estate.broker_pids(node) for node in estate.nodes}
    subprocess.run([TESTBED, "ldap", "stop"], check=True, capture_output=True, timeout=60)
    sent = amqp.send(active.amqp_url, active.user, active.password, queue, 3, ca_path=active.ca_cert)
    assert len(amqp.receive(active.amqp_url, active.user, active.password, queue, 3, ca_path=active.ca_cert)) == 3
    assert active.management().read(broker, ["Version"])["Version"]
    assert {node.name: estate.broker_pids(node) for node in estate.nodes} == pids

    # The inventory holds the bind password masked (ENC(...)), as the broker's login.config does; neither form is
    # in a broker's log (nor, with the other secrets, in a playbook's output: test_site).
    assert bind_password in generated_secrets()
    with open(os.path.join(TESTBED_INVENTORY, "group_vars", "all", "testbed.yml")) as handle:
        masked = yaml.safe_load(handle)["broker_ldap"]["bind_password"]
    assert masked.startswith("ENC(") and bind_password not in masked
    for node in estate.nodes:
        login_config = estate.exec(node.name, "cat", f"/var/opt/artemis/{node.name}/etc/login.config")
        assert f'connectionPassword="{masked}"' in login_config, node.name
        log = estate.exec(node.name, "cat", f"/var/opt/artemis/{node.name}/log/artemis.log")
        assert bind_password not in log and masked not in log, node.name
