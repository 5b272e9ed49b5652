"""A real Roost server and real ``celery worker`` subprocesses for the Celery tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.celery.app import app
from tests.support import RoostProcess

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """``celery -A tests.celery.app worker`` (solo pool: one task at a time)."""

    def __init__(self, server: RoostProcess, scratch: Path, name: str, queues: str) -> None:
        self.name = f"{name}@roost-tests"
        env = {
            **os.environ,
            "ROOST_TEST_BROKER": server.url,
            "ROOST_TEST_SCRATCH": str(scratch),
        }
        self.log = scratch / f"{name}.log"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "tests.celery.app", "worker",
                 "--pool", "solo", "-Q", queues, "-n", self.name, "--without-gossip",
                 "--without-mingle", "--loglevel", "INFO"],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            )

    def wait_ready(self, timeout: float = 60.0) -> Worker:
        """Until the worker answers a ping over the broker (its control queue is up)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited:\n{self.log.read_text()}")
            if app.control.ping(destination=[self.name], timeout=0.5):
                return self
        raise TimeoutError(f"worker {self.name} never answered:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("celery-scratch")


# RabbitMQ's consumer timeout is 30 minutes; a short one lets a test outlive it. Every
# other task here is acknowledged well within it (an eta of 2 s is the longest hold).
CONSUMER_TIMEOUT_MS = 3000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    server = RoostProcess(
        tmp_path_factory.mktemp("celery-roost"),
        "--consumer-timeout-ms",
        str(CONSUMER_TIMEOUT_MS),
    ).start()
    app.conf.broker_url = server.url
    yield server
    app.pool.force_close_all()
    server.kill()
    assert "Traceback" not in server.log, server.log


WorkerFactory = Callable[..., Worker]


@pytest.fixture(scope="module")
def workers(broker: RoostProcess, scratch: Path) -> Iterator[WorkerFactory]:
    """Starts workers on demand; every one still running is stopped at the end."""
    started: list[Worker] = []

    def start(name: str, queues: str, *, ready: bool = True) -> Worker:
        """``ready``: wait until it answers a ping (a solo worker busy with a task
        cannot answer: then the test waits for what the task does instead)."""
        worker = Worker(broker, scratch, name, queues)
        started.append(worker)
        return worker.wait_ready() if ready else worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture(scope="module")
def worker(workers: WorkerFactory) -> Worker:
    """The module's worker on the default queue."""
    return workers("main", "celery")
