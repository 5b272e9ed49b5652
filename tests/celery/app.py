"""The Celery app the tests' workers run (``celery -A tests.celery.app worker``).

Broker URL and a scratch directory come from the environment, so one module serves the
test process (which sends tasks) and the worker subprocesses (which run them). Tasks
leave marks in the scratch directory where a test must see what a worker did.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from celery import Celery
from kombu import Queue

app = Celery(
    "roost_tests",
    broker=os.environ.get("ROOST_TEST_BROKER", "amqp://guest:guest@127.0.0.1:5672//"),
    backend="rpc://",
)
app.conf.update(
    # each queue with its own routing key, so that a task sent to one lands only there
    task_queues=[
        Queue("celery", routing_key="celery"),
        Queue("prio", routing_key="prio", queue_arguments={"x-max-priority": 10}),
        Queue("crash", routing_key="crash"),
        Queue("long", routing_key="long"),
        # docs/celery.md's recipe: every delivery to this queue's workers has its own ack
        # deadline, which exempts it from the consumer timeout (eta/countdown tasks held
        # by the worker until due, long tasks)
        Queue("eta", routing_key="eta", consumer_arguments={"x-ack-timeout": 60}),
    ],
    task_default_queue="celery",
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    result_expires=300,
    task_acks_late=True,
    worker_hijack_root_logger=False,
)


def _scratch() -> Path:
    return Path(os.environ["ROOST_TEST_SCRATCH"])


def _mark(name: str, text: str = "") -> None:
    with open(_scratch() / name, "a") as fh:
        fh.write(text + "\n")


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task(bind=True, max_retries=3)
def flaky(self: Any, key: str) -> int:
    """Fails on its first run, then succeeds: returns how many runs it took."""
    _mark(f"flaky-{key}", str(time.time()))
    runs = len((_scratch() / f"flaky-{key}").read_text().splitlines())
    if runs < 2:
        raise self.retry(countdown=1)
    return runs


@app.task
def stamp() -> float:
    """When it ran (for eta)."""
    return time.time()


@app.task(bind=True)
def hold(self: Any, key: str) -> bool:
    """Marks that it started (with its redelivered flag), then waits for a release file:
    the worker running it can be killed mid-task."""
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    _mark(f"hold-{key}", "redelivered" if redelivered else "first")
    release = _scratch() / f"release-{key}"
    deadline = time.monotonic() + 60
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return redelivered


@app.task
def record(key: str, label: str) -> None:
    _mark(f"order-{key}", label)


@app.task
def sleep_for(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@app.task(bind=True)
def counted(self: Any, key: str, seconds: float = 0.0) -> float:
    """Marks each run (first or redelivered) and when it started, then sleeps."""
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    _mark(f"runs-{key}", f"{'redelivered' if redelivered else 'first'} {time.time()}")
    time.sleep(seconds)
    return time.time()
