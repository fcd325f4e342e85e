"""Spark in local mode for the measurement job's unit tests (one session for all of them)."""

import pytest

from continuity_rpo.session import spark_session


@pytest.fixture(scope="session")
def spark():
    session = spark_session("local[2]")
    yield session
    session.stop()
