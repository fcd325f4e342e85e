# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter that turns a PEM private key and certificate chain into a PKCS#12 key store (base64)."""

from __future__ import annotations

import base64

from ansible.errors import AnsibleFilterError

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
except ImportError:  # pragma: no cover - reported when the filter is used
    x509 = None


def pkcs12_keystore(pem, password, alias):
    """Return, in base64, a PKCS#12 key store that holds the private key of ``pem`` and its certificate chain (the
    first certificate is the key's) under ``alias``, encrypted with ``password``.

    The bytes differ on every call (random salts): callers decide when a key store is due, not by comparing them.
    """
    if x509 is None:
        raise AnsibleFilterError("pkcs12_keystore needs the Python package cryptography on the controller")
    if not isinstance(password, str) or not password:
        raise AnsibleFilterError("pkcs12_keystore: the key store password is missing or empty")
    data = str(pem).encode("utf-8")
    try:
        key = serialization.load_pem_private_key(data, password=None)
        chain = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise AnsibleFilterError("pkcs12_keystore: the PEM text does not hold an unencrypted private key and a "
                                 "certificate: %s" % exc)
    store = pkcs12.serialize_key_and_certificates(
        str(alias).encode("utf-8"), key, chain[0], chain[1:] or None,
        serialization.BestAvailableEncryption(password.encode("utf-8")))
    return base64.b64encode(store).decode("ascii")


class FilterModule:
    def filters(self):
        return {"pkcs12_keystore": pkcs12_keystore}
