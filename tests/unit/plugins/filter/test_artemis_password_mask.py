"""Masking a password as Artemis's `artemis mask` does: the expected texts were written by Artemis 2.56.0's own
command (bin/artemis mask PASSWORD), so a broker decodes what the role templates."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.filter.artemis_password_mask import artemis_password_mask


@pytest.mark.parametrize("password, masked", [
    ("S3cret!", "ENC(-5fb66ced39001384)"),  # a negative BigInteger: Java writes a minus sign
    ("x5", "ENC(603d6eaeb35a1ed7)"),
    ("a-much-longer-cluster-password-0123456789",
     "ENC(-2ac6f528666973287481a64b599faaff6c0e30ba50c55d7e264fade95db535c6b490feb5459b0439b904974b736eaec3)"),
])
def test_the_same_text_as_artemis_mask(password, masked):
    assert artemis_password_mask(password) == masked


@pytest.mark.parametrize("password", ["", None, 42])
def test_a_missing_password_is_refused(password):
    with pytest.raises(AnsibleFilterError, match="missing or empty"):
        artemis_password_mask(password)
