# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that mask a password the way Artemis's ``artemis mask`` does, for passwords a broker must read back
(broker.xml's cluster-password, a broker connection's password), and read back a password given masked."""

from __future__ import annotations

import re

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
_MASKED = re.compile(r"^ENC\((-?[0-9a-fA-F]+)\)$")
_BLOCK = 8


def _require_cryptography(name):
    if _IMPORT_ERROR is not None:
        raise AnsibleFilterError(f"{name} needs the Python package cryptography on the controller: {_IMPORT_ERROR}")


def artemis_password_mask(password):
    """Return ``ENC(masked)`` for ``password``; the same password always gives the same text."""
    if not isinstance(password, str) or not password:
        raise AnsibleFilterError("artemis_password_mask: the password is missing or empty")
    _require_cryptography("artemis_password_mask")
    padder = padding.PKCS7(64).padder()
    data = padder.update(password.encode("utf-8")) + padder.finalize()
    encryptor = Cipher(Blowfish(_DEFAULT_KEY), modes.ECB()).encryptor()
    number = int.from_bytes(encryptor.update(data) + encryptor.finalize(), "big", signed=True)
    return "ENC(%s%x)" % ("-" if number < 0 else "", abs(number))


def artemis_password_unmask(value, name="a password"):
    """The password of ``ENC(...)`` as ``artemis mask`` writes it; any other text is a password as it is. An error
    names ``name`` (whose password it is), never the value."""
    if not isinstance(value, str):
        return value
    masked = _MASKED.match(value.strip())
    if masked is None:
        return value
    _require_cryptography("artemis_password_unmask")
    number = int(masked.group(1), 16)
    # Java's BigInteger(bytes): the cipher text in two's complement, so widened back to whole cipher blocks.
    length = max(_BLOCK, -(-((number.bit_length() + 8) // 8) // _BLOCK) * _BLOCK)
    try:
        cipher_text = number.to_bytes(length, "big", signed=True)
        decryptor = Cipher(Blowfish(_DEFAULT_KEY), modes.ECB()).decryptor()
        padded = decryptor.update(cipher_text) + decryptor.finalize()
        unpadder = padding.PKCS7(64).unpadder()
        password = (unpadder.update(padded) + unpadder.finalize()).decode("utf-8")
    except (OverflowError, ValueError):
        password = ""
    if not password:
        raise AnsibleFilterError(f"artemis_password_unmask: {name} is given as ENC(...), but not as `artemis mask` (its "
                                 "default codec) writes it")
    return password


class FilterModule:
    def filters(self):
        return {"artemis_password_mask": artemis_password_mask, "artemis_password_unmask": artemis_password_unmask}
