"""Certificates for testing the estate's TLS from outside: a rogue CA, a certificate signed by the estate's own CA for
the wrong name, and AMQP connections that present a client certificate."""

from __future__ import annotations

import datetime
import ipaddress
import pathlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from proton import SSLDomain
from proton.utils import BlockingConnection


def _name(common_name: str, unit: str | None = None) -> x509.Name:
    """CN=common_name, with an OU before it when ``unit`` is given (Java writes it: CN=..., OU=...)."""
    unit_name = [x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit)] if unit is not None else []
    return x509.Name(unit_name + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(directory: pathlib.Path, stem: str, key, certificate) -> tuple[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    key_path, cert_path = directory / f"{stem}.key", directory / f"{stem}.pem"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return str(cert_path), str(key_path)


def _certificate(subject: str, issuer_name: x509.Name, issuer_key, public_key, *, ca: bool,
                 names: list[str] = (), unit: str | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject, unit)).issuer_name(issuer_name)
               .public_key(public_key).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if names:
        alternatives = []
        for name in names:
            try:
                alternatives.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                alternatives.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def private_ca(directory: pathlib.Path, stem: str) -> tuple[str, str]:
    """A CA of its own, nobody in the estate trusts it: (certificate, key) paths."""
    key = ec.generate_private_key(ec.SECP256R1())
    return _write(directory, stem, key, _certificate(f"{stem} CA", _name(f"{stem} CA"), key, key.public_key(),
                                                     ca=True))


def rogue_ca(directory: pathlib.Path) -> tuple[str, str]:
    """A CA nobody in the estate trusts: (certificate, key) paths."""
    return private_ca(directory, "rogue-ca")


def signed_certificate(directory: pathlib.Path, stem: str, common_name: str, names: list[str],
                       ca_cert: str, ca_key: str, unit: str | None = None) -> tuple[str, str]:
    """A certificate for ``common_name`` (and the organisational ``unit``, when given) and the subject alternative
    ``names``, signed by the given CA."""
    issuer = x509.load_pem_x509_certificate(pathlib.Path(ca_cert).read_bytes())
    issuer_key = serialization.load_pem_private_key(pathlib.Path(ca_key).read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    return _write(directory, stem, key, _certificate(common_name, issuer.subject, issuer_key, key.public_key(),
                                                     ca=False, names=names, unit=unit))


def amqps_connection(url: str, ca_cert: str, certificate: tuple[str, str] | None = None, *,
                     mechanism: str = "EXTERNAL", user: str | None = None, password: str | None = None,
                     timeout: float = 10) -> BlockingConnection:
    """An AMQP connection over TLS that verifies the broker against ``ca_cert`` and presents ``certificate``
    (certificate, key) when given. Raises when the broker refuses it."""
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(ca_cert)
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    if certificate:
        domain.set_credentials(certificate[0], certificate[1], None)
    kwargs = {"user": user, "password": password} if user else {}
    return BlockingConnection(url, timeout=timeout, ssl_domain=domain, allowed_mechs=mechanism, **kwargs)
