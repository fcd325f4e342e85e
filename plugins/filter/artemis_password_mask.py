# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter that masks a password the way Artemis's ``artemis mask`` does, for passwords a broker must read back
(broker.xml's cluster-password, a broker connection's password)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

try:
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, modes
    try:
        from cryptography.hazmat.decrepit.ciphers.algorithms import Blowfish
    except ImportError:  # cryptography < 43
        from cryptography.hazmat.primitives.ciphers.algorithms import Blowfish
except ImportError as exc:
    _IMPORT_ERROR: ImportError | None = exc
else:
    _IMPORT_ERROR = None

# Artemis's DefaultSensitiveStringCodec (two-way mode) with its built-in key: Blowfish/ECB/PKCS5, the cipher text
# written as Java's BigInteger(bytes).toString(16). The key is public, so this keeps the password out of sight,
# not secret: broker.xml stays readable by root and the broker's group only.
_DEFAULT_KEY = b"clusterpassword"


def artemis_password_mask(password):
    """Return ``ENC(masked)`` for ``password``; the same password always gives the same text."""
    if not isinstance(password, str) or not password:
        raise AnsibleFilterError("artemis_password_mask: the password is missing or empty")
    if _IMPORT_ERROR is not None:
        raise AnsibleFilterError("artemis_password_mask needs the Python package cryptography on the controller: "
                                 f"{_IMPORT_ERROR}")
    padder = padding.PKCS7(64).padder()
    data = padder.update(password.encode("utf-8")) + padder.finalize()
    encryptor = Cipher(Blowfish(_DEFAULT_KEY), modes.ECB()).encryptor()
    number = int.from_bytes(encryptor.update(data) + encryptor.finalize(), "big", signed=True)
    return "ENC(%s%x)" % ("-" if number < 0 else "", abs(number))


class FilterModule:
    def filters(self):
        return {"artemis_password_mask": artemis_password_mask}
