"""Spark in local mode for the measurement job's unit tests (one session for all of them)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "spark"))

from continuity_rpo.session import spark_session  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    session = spark_session("local[2]")
    yield session
    session.stop()
