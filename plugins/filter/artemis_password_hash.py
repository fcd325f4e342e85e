# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that hash a password the way Artemis's default codec stores it in artemis-users.properties, and read the
hashes a users file holds."""

from __future__ import annotations

import hashlib
import hmac
import os
import re

from ansible.errors import AnsibleFilterError

# Artemis's DefaultSensitiveStringCodec (one-way mode): PBKDF2WithHmacSHA1 with a 64-byte key and a 32-byte salt; it
# verifies with the iterations, salt and key length stored in the hash, so every hash may have its own.
_KEY_LENGTH = 64
_SALT_LENGTH = 32
_HASH = re.compile(r"^ENC\((\d+):([0-9A-Fa-f]+):([0-9A-Fa-f]+)\)$")


def _matches(password, stored, iterations):
    found = _HASH.match(stored or "")
    if not found or int(found.group(1)) != iterations:
        return False
    digest = hashlib.pbkdf2_hmac("sha1", password.encode("utf-8"), bytes.fromhex(found.group(2)), iterations,
                                 len(found.group(3)) // 2)
    return hmac.compare_digest(digest.hex().upper(), found.group(3).upper())


def artemis_password_hash(password, existing="", iterations=1024):
    """``ENC(iterations:salt:hash)`` for ``password``: ``existing`` (the hash in use) when it is this password's with
    these iterations, so a password that did not change keeps its line; else a new hash with a random salt."""
    if not isinstance(password, str) or not password:
        raise AnsibleFilterError("artemis_password_hash: the password is missing or empty")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1024:
        raise AnsibleFilterError("artemis_password_hash: iterations must be a whole number of at least 1024, got %r"
                                 % (iterations,))
    if _matches(password, existing, iterations):
        return existing
    salt = os.urandom(_SALT_LENGTH)
    digest = hashlib.pbkdf2_hmac("sha1", password.encode("utf-8"), salt, iterations, _KEY_LENGTH)
    return "ENC(%d:%s:%s)" % (iterations, salt.hex().upper(), digest.hex().upper())


def artemis_password_hashes(users_file):
    """{user: hash} of an artemis-users.properties text (lines ``user = ENC(...)``; others are left out)."""
    hashes = {}
    for line in (users_file or "").splitlines():
        name, separator, value = line.partition("=")
        if separator and not name.lstrip().startswith("#") and _HASH.match(value.strip()):
            hashes[name.strip()] = value.strip()
    return hashes


class FilterModule:
    def filters(self):
        return {"artemis_password_hash": artemis_password_hash, "artemis_password_hashes": artemis_password_hashes}
