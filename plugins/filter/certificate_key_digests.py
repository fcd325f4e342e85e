# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: the SHA-256 digest of the public key of every certificate in a PEM text."""

from __future__ import annotations

import hashlib

from ansible.errors import AnsibleFilterError

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
except ImportError:  # pragma: no cover - community.crypto needs it on the controller too
    x509 = None


def certificate_key_digests(pem_text):
    """Hex SHA-256 of the DER SubjectPublicKeyInfo of each certificate in ``pem_text`` (a bundle gives several), so a
    certificate is recognised by its key whatever its encoding, line endings or neighbours in the file."""
    if x509 is None:
        raise AnsibleFilterError("certificate_key_digests needs the Python package cryptography on the controller")
    try:
        certificates = x509.load_pem_x509_certificates(pem_text.encode() if isinstance(pem_text, str) else pem_text)
    except ValueError as exc:
        raise AnsibleFilterError("certificate_key_digests: no PEM certificate could be read: %s" % exc)
    return [hashlib.sha256(certificate.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).hexdigest()
        for certificate in certificates]


class FilterModule:
    def filters(self):
        return {"certificate_key_digests": certificate_key_digests}
