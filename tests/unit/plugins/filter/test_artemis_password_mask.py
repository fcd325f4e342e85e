"""Masking a password as Artemis's `artemis mask` does, and reading one given masked: the expected texts were written
by Artemis 2.56.0's own command (bin/artemis mask PASSWORD), so a broker decodes what the role templates and the role
reads what a user masked with Artemis."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.filter.artemis_password_mask import (
    artemis_password_mask, artemis_password_unmask)

WRITTEN_BY_ARTEMIS = [
    ("S3cret!", "ENC(-5fb66ced39001384)"),  # a negative BigInteger: Java writes a minus sign
    ("x5", "ENC(603d6eaeb35a1ed7)"),
    ("a-much-longer-cluster-password-0123456789",
     "ENC(-2ac6f528666973287481a64b599faaff6c0e30ba50c55d7e264fade95db535c6b490feb5459b0439b904974b736eaec3)"),
]


@pytest.mark.parametrize("password, masked", WRITTEN_BY_ARTEMIS)
def test_the_same_text_as_artemis_mask(password, masked):
    assert artemis_password_mask(password) == masked


@pytest.mark.parametrize("password, masked", WRITTEN_BY_ARTEMIS)
def test_a_password_artemis_masked_is_read_back(password, masked):
    assert artemis_password_unmask(masked) == password


@pytest.mark.parametrize("password", ["S3cret!", "ENC(", "ENC(1024:AB:CD)", "enc-like ENC(12) inside"])
def test_any_other_text_is_the_password_itself(password):
    assert artemis_password_unmask(password) == password


def test_every_masked_length_and_sign_comes_back():
    """Cipher texts whose first byte Java's BigInteger drops or signs (positive, negative, one to six blocks)."""
    passwords = [chr(ord("a") + i % 26) * length for i, length in enumerate(range(1, 48))]
    masked = [artemis_password_mask(password) for password in passwords]
    assert {"-" in text for text in masked} == {True, False}
    assert [artemis_password_unmask(text) for text in masked] == passwords


def test_a_masked_text_artemis_did_not_write_is_refused_without_showing_it():
    with pytest.raises(AnsibleFilterError, match="the password of app is given as ENC.*not as `artemis mask`") as refused:
        artemis_password_unmask("ENC(1234abcd)", "the password of app")
    assert "1234abcd" not in str(refused.value)


@pytest.mark.parametrize("password", ["", None, 42])
def test_a_missing_password_is_refused(password):
    with pytest.raises(AnsibleFilterError, match="missing or empty"):
        artemis_password_mask(password)
