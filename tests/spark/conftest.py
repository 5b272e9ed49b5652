"""One SparkSession for every Spark test: local[2], loopback only, UI off, fast start."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import RoostProcess, prerequisite

if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    prerequisite("no Java runtime for Spark")

JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    # Python workers must run this interpreter (the one with roost installed)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from roost.pipeline import RoostDataSource

    session = (
        SparkSession.builder.master("local[2]")
        .appName("roost-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", JVM_FLAGS)
        .config("spark.executor.extraJavaOptions", JVM_FLAGS)
        .getOrCreate()
    )
    session.dataSource.register(RoostDataSource)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    server = RoostProcess(tmp_path_factory.mktemp("roost-spark")).start()
    yield server
    server.stop()
    assert "Traceback" not in server.log, server.log
