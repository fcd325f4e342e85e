"""Spark in local mode for the measurement job's unit tests (one session for all of them)."""

import os

import pytest

from continuity_rpo.session import spark_session

# The tests run the job on a few hundred rows, where compiling generated code, broadcasting the small side of a join
# and a concurrent collector cost more than they save (about a third of each run here); Spark evaluates the same
# plans without them. In the environment, so that the job started as a command (python -m continuity_rpo.job) gets
# them too. Production keeps Spark's defaults (on a million rows these settings were no faster: make bench-rpo).
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", " ".join([
    "--conf spark.sql.codegen.factoryMode=NO_CODEGEN", "--conf spark.sql.autoBroadcastJoinThreshold=-1",
    "--driver-java-options -XX:+UseSerialGC", "pyspark-shell"]))


@pytest.fixture(scope="session")
def spark():
    session = spark_session("local[2]")
    yield session
    session.stop()
