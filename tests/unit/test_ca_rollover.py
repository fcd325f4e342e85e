"""The CA rollover's steps (the replication role's ca_rollover entry point, which rotate_certificates.yml runs between
its site.yml passes) on a PKI directory of the controller: each step leaves the files the next one and every broker
need, a step run again changes nothing, one cut short is finished by a run again, and one out of order is refused."""

import datetime
import json
import os
import shutil
import subprocess

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from support.estate import REPO_ROOT

PLAY = """
- hosts: brokers
  gather_facts: false
  tasks:
    - ansible.builtin.include_role: {name: continuity.artemis.replication, tasks_from: ca_rollover}
      vars: {replication_ca_rollover_step: "{{ step }}"}
"""


def _make_ca(pki):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "continuity.artemis replication CA")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now)
                   .not_valid_after(now + datetime.timedelta(days=30))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    with open(pki / "ca.key", "wb") as handle:
        handle.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    with open(pki / "ca.pem", "wb") as handle:
        handle.write(certificate.public_bytes(serialization.Encoding.PEM))
    return certificate


@pytest.fixture
def pki(tmp_path):
    directory = tmp_path / "pki"
    directory.mkdir()
    with open(tmp_path / "inventory.yml", "w") as handle:
        json.dump({"brokers": {"hosts": {"b1": {}, "b2": {}},
                               "vars": {"ansible_connection": "local", "replication_tls_pki_dir": str(directory)}}},
                  handle)
    with open(tmp_path / "play.yml", "w") as handle:
        handle.write(PLAY)
    return directory


def _step(pki, step):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    run = subprocess.run(["ansible-playbook", "-i", str(pki.parent / "inventory.yml"), str(pki.parent / "play.yml"),
                          "-e", f"step={step}"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    return run.returncode, run.stdout + run.stderr


def _trusted(pki):
    return x509.load_pem_x509_certificates((pki / "ca.pem").read_bytes())


def _signing_key(pki):
    return serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None).public_key()


def _ok(pki, step):
    returncode, output = _step(pki, step)
    assert returncode == 0, output[-3000:]
    return output


def test_trust_sign_retire_leave_what_the_brokers_need_at_each_step(pki):
    old = _make_ca(pki)
    _ok(pki, "trust")
    old_then_new = _trusted(pki)
    assert [ca.public_key() for ca in old_then_new][:1] == [old.public_key()] and len(old_then_new) == 2
    assert _signing_key(pki) == old.public_key(), "the current CA keeps signing until 'sign'"
    new = old_then_new[1]
    assert new.subject != old.subject, "the two CAs of the bundle must be told apart"
    assert oct((pki / "ca-next.key").stat().st_mode & 0o777) == "0o600"

    _ok(pki, "trust")
    assert _trusted(pki) == old_then_new, "a second 'trust' makes no third CA"

    _ok(pki, "sign")
    assert _trusted(pki) == [new, old]
    assert _signing_key(pki) == new.public_key()
    assert sorted(os.listdir(pki)) == ["ca.key", "ca.pem"], "the old key is gone, the new one is ca.key"
    _ok(pki, "sign")
    _ok(pki, "trust")
    assert _trusted(pki) == [new, old], "run again after 'sign', neither step changes anything"

    _ok(pki, "retire")
    assert _trusted(pki) == [new]
    assert _signing_key(pki) == new.public_key()


def test_a_sign_cut_short_after_the_key_was_copied_is_finished_by_running_again(pki):
    _make_ca(pki)
    _ok(pki, "trust")
    shutil.copy(pki / "ca-next.key", pki / "ca.key")  # cut short: ca.pem not reordered, ca-next.* still there
    new = _trusted(pki)[1]
    _ok(pki, "trust")
    assert _trusted(pki)[1] == new, "'trust' leaves a rollover whose new key signs already alone"
    _ok(pki, "sign")
    assert _trusted(pki)[0] == new and _signing_key(pki) == new.public_key()
    assert sorted(os.listdir(pki)) == ["ca.key", "ca.pem"]


def test_steps_out_of_order_are_refused_naming_what_comes_first(pki):
    _make_ca(pki)
    returncode, output = _step(pki, "sign")
    assert returncode != 0 and "the step 'trust' makes it" in output, output[-3000:]
    _ok(pki, "trust")
    returncode, output = _step(pki, "retire")
    assert returncode != 0 and "still holds ca-next.key" in output, output[-3000:]
    assert len(_trusted(pki)) == 2, "a refused step changes nothing"


def test_a_ca_the_inventory_gives_is_not_rolled_over(pki):
    _make_ca(pki)
    inventory = json.loads((pki.parent / "inventory.yml").read_text())
    inventory["brokers"]["vars"]["replication_tls_ca_cert"] = str(pki / "ca.pem") + ".elsewhere"
    (pki.parent / "inventory.yml").write_text(json.dumps(inventory))
    returncode, output = _step(pki, "trust")
    assert returncode != 0 and "renews only the PKI the collection generates" in output, output[-3000:]
    assert sorted(os.listdir(pki)) == ["ca.key", "ca.pem"]
