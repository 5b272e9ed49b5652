"""A job on a real Spark standalone master and worker (started from the pyspark
installation, loopback only): the same code as on local[*], only --master differs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from roost.pipeline.amqp import Client
from roost.pipeline.generate import generate
from tests.spark.traffic_events import acked, published, write_events
from tests.support import RoostProcess, free_port

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "spark daemon exited"
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing listening on {port}")


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
    }
    port, worker_port = free_port(), free_port()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        master = subprocess.Popen(
            [
                str(SPARK_CLASS),
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(master)
        _wait_port(port, master)
        worker = subprocess.Popen(
            [
                str(SPARK_CLASS),
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--port",
                str(worker_port),
                "--webui-port",
                str(free_port()),
                "--cores",
                "1",
                "--memory",
                "1g",
                f"spark://127.0.0.1:{port}",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(worker)
        _wait_port(worker_port, worker)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.timeout(300)  # the job's six steps on one executor core, plus JVM starts
def test_traffic_job_on_standalone_cluster(
    standalone: str, broker: RoostProcess, tmp_path: Path
) -> None:
    batches = [
        [published(1_700_000_000_000.0 + 10 * i, f"k{i % 3}", {"q": i + 1}),
         acked(1_700_000_000_000.0 + 10 * i + 4, "q", i + 1)]
        for i in range(150)
    ]
    write_events(broker.url, "cluster.events", batches)
    out = tmp_path / "report"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "roost",
            "pipeline",
            "traffic",
            "--master",
            standalone,
            "--url",
            broker.url,
            "--input",
            "cluster.events",
            "--output",
            str(out),
        ],
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "traffic: 300 events, 150 messages published" in done.stderr
    assert "[traffic] step 6/6: writing the report" in done.stderr
    assert "150" in (out / "report.html").read_text()
    assert (out / "charts" / "rates.png").read_bytes()[:4] == b"\x89PNG"


SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"


@pytest.mark.timeout(400)
def test_spark_submit_runs_the_job_file_on_the_cluster(
    standalone: str, broker: RoostProcess, tmp_path: Path
) -> None:
    """``spark-submit --master spark://…`` on the shipped job file: the job must run on
    the cluster (an executor on the worker), not fall back to local[*]."""
    generate(broker.url, "submit.in", 200, invalid_every=20)  # 10 invalid orders
    with Client(broker.url) as client:
        client.declare_stream("submit.bad")
        client.declare_stream("submit.totals")
    job_file = subprocess.run(
        [sys.executable, "-m", "roost", "pipeline", "job-file"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    done = subprocess.run(
        [
            str(SPARK_SUBMIT),
            "--master",
            standalone,
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            "spark.driver.bindAddress=127.0.0.1",
            "--conf",
            "spark.executor.memory=512m",
            "--conf",  # the jobs' own default is 4: spark-submit's setting must win
            "spark.sql.shuffle.partitions=3",
            job_file,
            "etl",
            "--url",
            broker.url,
            "--input",
            "submit.in",
            "--dead-letter",
            "submit.bad",
            "--results",
            "submit.totals",
            "--output",
            str(tmp_path / "totals"),
            "--checkpoint",
            str(tmp_path / "ckpt"),
            "--once",
        ],
        env={
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # PythonRunner merges the job's stderr into spark-submit's stdout
    assert "etl done" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]
    assert f"[etl] Spark {pyspark.__version__}, master {standalone}, 3 shuffle partitions" in (
        done.stdout
    ), done.stdout[-2000:]
    # what the aggregation really ran with: Spark records it in the query's offset log
    logged = [p.read_text() for p in (tmp_path / "ckpt").glob("**/offsets/0")]
    assert logged and all('"spark.sql.shuffle.partitions":"3"' in text for text in logged)
    # the worker ran an executor for it: the app has a directory in the worker's dir
    apps = list((tmp_path / "work").glob("app-*"))
    assert apps, "no application ran on the standalone worker"
    with Client(broker.url) as client:
        info = client.stream_info("submit.bad")
        assert info["x-stream-next-offset"] == 10
