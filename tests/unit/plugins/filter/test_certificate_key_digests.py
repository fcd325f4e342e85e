"""The public-key digests by which the estate recognises a CA whose key was published, in whatever file it comes."""

import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.filter.certificate_key_digests import certificate_key_digests
from support import tls

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
COMPROMISED = os.path.join(REPO, "tests", "support", "pki", "compromised-ca-0.1.0.pem")


def _compromised_keys():
    with open(os.path.join(REPO, "roles", "replication", "vars", "main.yml")) as handle:
        return yaml.safe_load(handle)["_replication_compromised_ca_keys"]


def test_the_ca_of_version_0_1_0_is_recognised_alone_in_a_bundle_and_with_other_line_endings(tmp_path):
    leaked = open(COMPROMISED).read()
    other, _key = tls.rogue_ca(tmp_path)
    bundle = open(other).read() + leaked
    for text in (leaked, leaked.replace("\n", "\r\n"), bundle, "\n\n" + bundle.replace("\n", "\r\n")):
        assert set(certificate_key_digests(text)) & set(_compromised_keys()), text[:80]
    assert len(certificate_key_digests(bundle)) == 2
    assert not set(certificate_key_digests(open(other).read())) & set(_compromised_keys())


def test_text_without_a_certificate_is_refused():
    with pytest.raises(AnsibleFilterError, match="no PEM certificate"):
        certificate_key_digests("not a certificate")
