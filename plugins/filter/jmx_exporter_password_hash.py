# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter that hashes a password the way the Prometheus JMX exporter's HTTP basic authentication verifies it."""

from __future__ import annotations

import hashlib

from ansible.errors import AnsibleFilterError

# The exporter's PBKDF2WithHmacSHA256: the salt is the text of its `salt` setting (UTF-8), keyLength is in bytes, the
# hash is hex digits.
ITERATIONS = 600000
KEY_LENGTH = 32  # bytes, as the exporter's keyLength


def jmx_exporter_password_hash(password, salt, iterations=ITERATIONS, key_length=KEY_LENGTH):
    """Return the hex PBKDF2-HMAC-SHA256 of ``password`` with the text ``salt``, as the exporter's
    ``passwordHash``."""
    if not isinstance(password, str) or not password:
        raise AnsibleFilterError("jmx_exporter_password_hash: the password is missing or empty")
    if not isinstance(salt, str) or not salt:
        raise AnsibleFilterError("jmx_exporter_password_hash: the salt is missing or empty")
    digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt.encode("utf-8"), int(iterations),
                                 int(key_length))
    return digest.hex()


class FilterModule:
    def filters(self):
        return {"jmx_exporter_password_hash": jmx_exporter_password_hash}
