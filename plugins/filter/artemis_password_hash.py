# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter that hashes a password the way Artemis's default codec stores it in artemis-users.properties."""

from __future__ import annotations

import hashlib

from ansible.errors import AnsibleFilterError

# Artemis's DefaultSensitiveStringCodec (one-way mode): PBKDF2WithHmacSHA1, 1024 iterations, 64-byte key.
_ITERATIONS = 1024
_KEY_LENGTH = 64


def artemis_password_hash(password, salt_seed):
    """Return ``ENC(iterations:salt:hash)`` for ``password``.

    The salt is derived from ``salt_seed`` (for example host and user name) rather than drawn at random, so that
    the same password always renders the same line and a re-run of the role changes nothing.
    """
    if not isinstance(password, str) or not password:
        raise AnsibleFilterError("artemis_password_hash: the password is missing or empty")
    salt = hashlib.sha256(str(salt_seed).encode("utf-8")).digest()
    digest = hashlib.pbkdf2_hmac("sha1", password.encode("utf-8"), salt, _ITERATIONS, _KEY_LENGTH)
    return "ENC(%d:%s:%s)" % (_ITERATIONS, salt.hex().upper(), digest.hex().upper())


class FilterModule:
    def filters(self):
        return {"artemis_password_hash": artemis_password_hash}
