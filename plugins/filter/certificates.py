# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters on certificates in PEM text: the digests of their public keys, and a pattern matching exactly their subjects."""

from __future__ import annotations

import hashlib

from ansible.errors import AnsibleFilterError

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
except ImportError:  # pragma: no cover - community.crypto needs it on the controller too
    x509 = None


def _certificates(pem_text, filter_name):
    if x509 is None:
        raise AnsibleFilterError("%s needs the Python package cryptography on the controller" % filter_name)
    try:
        return x509.load_pem_x509_certificates(pem_text.encode() if isinstance(pem_text, str) else pem_text)
    except ValueError as exc:
        raise AnsibleFilterError("%s: no PEM certificate could be read: %s" % (filter_name, exc))


def certificate_key_digests(pem_text):
    """Hex SHA-256 of the DER SubjectPublicKeyInfo of each certificate in ``pem_text`` (a bundle gives several), so a
    certificate is recognised by its key whatever its encoding, line endings or neighbours in the file."""
    return [hashlib.sha256(certificate.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).hexdigest()
        for certificate in _certificates(pem_text, "certificate_key_digests")]


# How Java names the attribute types in a certificate subject (X500Name's default keywords); a subject with another
# type is refused rather than guessed.
_JAVA_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
    "1.2.840.113549.1.9.1": "EMAILADDRESS", "2.5.4.5": "SERIALNUMBER", "2.5.4.12": "T", "2.5.4.42": "GIVENNAME",
    "2.5.4.4": "SURNAME", "2.5.4.43": "INITIALS", "2.5.4.44": "GENERATION", "2.5.4.46": "DNQ",
}
# Characters after which Java quotes a value (RFC 1779), escaping '"' and '\\' inside the quotes.
_JAVA_SPECIAL = set(',=\n+<>#;\\"')


def _java_value(value):
    if any(not " " <= char <= "~" for char in value):
        raise ValueError("a value with characters other than printable ASCII: %r" % value)
    if (any(char in _JAVA_SPECIAL for char in value) or value != value.strip() or "  " in value):
        return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')
    return value


def java_subject(certificate):
    """The certificate's subject as Artemis's certificate login module reads it (X509Certificate.getSubjectDN()
    .getName(): RFC 1779, the most specific name first, ", " between names). Raises ValueError for a subject whose
    form this does not know for certain."""
    names = []
    for rdn in reversed(list(certificate.subject.rdns)):
        parts = []
        for attribute in rdn:
            keyword = _JAVA_KEYWORDS.get(attribute.oid.dotted_string)
            if keyword is None or not isinstance(attribute.value, str):
                raise ValueError("an attribute of type %s" % attribute.oid.dotted_string)
            parts.append("%s=%s" % (keyword, _java_value(attribute.value)))
        names.append(" + ".join(parts))
    return ", ".join(names)


def _java_literal(text):
    """``text`` quoted for a Java regular expression (Pattern.quote: a ``\\E`` inside ends and restarts the quote)."""
    return "\\Q" + text.replace("\\E", "\\E\\\\E\\Q") + "\\E"


def certificate_subject_pattern(pem_texts):
    """A Java regular expression that matches, in full, exactly the subjects of the certificates in ``pem_texts`` (a
    list of PEM texts) as Artemis's certificate login module reads them, and nothing else."""
    subjects = []
    for pem_text in pem_texts:
        for certificate in _certificates(pem_text, "certificate_subject_pattern"):
            try:
                subjects.append(java_subject(certificate))
            except ValueError as exc:
                raise AnsibleFilterError("certificate_subject_pattern: the subject %s has %s, whose form Artemis's "
                                         "login reads is not known here; give the pattern yourself"
                                         % (certificate.subject.rfc4514_string(), exc))
    if not subjects:
        raise AnsibleFilterError("certificate_subject_pattern: no certificate given")
    return "(?:%s)" % "|".join(_java_literal(subject) for subject in sorted(set(subjects)))


class FilterModule:
    def filters(self):
        return {"certificate_key_digests": certificate_key_digests,
                "certificate_subject_pattern": certificate_subject_pattern}
