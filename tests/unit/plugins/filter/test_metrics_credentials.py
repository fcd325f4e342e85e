"""The filters behind the broker's metrics endpoint: the PKCS#12 key store Java reads (checked with the JRE's own
keytool) and the exporter's password hash."""

import base64
import datetime
import hashlib
import subprocess

import pytest
from ansible.errors import AnsibleFilterError
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from ansible_collections.continuity.artemis.plugins.filter.jmx_exporter_password_hash import (
    jmx_exporter_password_hash)
from ansible_collections.continuity.artemis.plugins.filter.pkcs12_keystore import pkcs12_keystore


def _broker_pem():
    """A key and a self-signed certificate, as the PKI's broker.pem holds them (key first)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dc1-node1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now)
                   .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()) + certificate.public_bytes(serialization.Encoding.PEM)
    return pem.decode(), certificate


def test_the_key_store_holds_the_key_and_certificate_and_java_reads_it(tmp_path):
    pem, certificate = _broker_pem()
    store = base64.b64decode(pkcs12_keystore(pem, "s3cret-store", "broker"))
    key, cert, _chain = pkcs12.load_key_and_certificates(store, b"s3cret-store")
    assert cert == certificate and key is not None
    with pytest.raises(ValueError):
        pkcs12.load_key_and_certificates(store, b"another")
    (tmp_path / "metrics.p12").write_bytes(store)
    listed = subprocess.run(["keytool", "-list", "-keystore", str(tmp_path / "metrics.p12"), "-storetype", "PKCS12",
                             "-storepass", "s3cret-store", "-alias", "broker"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert listed.returncode == 0 and "PrivateKeyEntry" in listed.stdout, listed.stdout + listed.stderr


@pytest.mark.parametrize("pem, password, words", [
    ("not a pem", "store", "does not hold an unencrypted private key"),
    (None, "", "password is missing or empty"),
])
def test_bad_key_store_input_is_refused(pem, password, words):
    with pytest.raises(AnsibleFilterError, match=words):
        pkcs12_keystore(pem if pem else _broker_pem()[0], password, "broker")


def test_the_password_hash_is_pbkdf2_hmac_sha256_of_the_salt_text():
    expected = hashlib.pbkdf2_hmac("sha256", b"pw", b"the-salt", 1000, 32).hex()
    assert jmx_exporter_password_hash("pw", "the-salt", 1000, 32) == expected
    assert jmx_exporter_password_hash("pw", "the-salt") != jmx_exporter_password_hash("pw", "other-salt")
    with pytest.raises(AnsibleFilterError, match="password is missing"):
        jmx_exporter_password_hash("", "the-salt")
