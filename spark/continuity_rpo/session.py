"""The Spark session of the job: local mode, unless spark-submit (which sets SPARK_ENV_LOADED) chose a master."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def spark_session(master: str | None = None) -> SparkSession:
    builder = (SparkSession.builder.appName("continuity-artemis-rpo").config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false")  # progress bars would fill the job's log
               # PySpark 4 records the Python call site of every DataFrame and Column call in the JVM, for error
               # messages: several Py4J round trips per call, which made most of a run on an estate's telemetry.
               .config("spark.python.sql.dataFrameDebugging.enabled", "false"))
    if master or not os.environ.get("SPARK_ENV_LOADED"):
        master = master or "local[*]"
        builder = builder.master(master)
    if master and master.startswith("local"):
        # Python workers must run the driver's own interpreter (the venv), not the first python3 on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # A local run measures an estate's telemetry: thousands of rows, where Spark's per-query overheads (adaptive
        # re-planning, code generation, shuffle partitions) cost more than they save (about 25 % of a run).
        builder = (builder.config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
                   .config("spark.sql.adaptive.enabled", "false").config("spark.sql.codegen.wholeStage", "false"))
    return builder.getOrCreate()
